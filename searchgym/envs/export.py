"""Trajectory export: one finished game per JSONL line, and reading it back.

A line is ``{"format", "game", "proposer", "validation", "solvers", "rewards", "replay"}``: the Proposer's
trajectory (``null`` for solver-only envs), the validation result (:meth:`ValidationResult.to_dict`), every
Solver trajectory (:meth:`Trajectory.to_dict`), the reward events (:meth:`RewardEvent.to_dict`: without the
live trajectory; a Solver event's ``slot`` points into ``solvers``) and where the Solvers' question came from
(a :data:`~searchgym.core.info.ReplaySource`, ``null`` without a Proposer). :func:`read_trajectories` restores
:class:`GameRecord` s; it also reads the lines of earlier versions (no ``format``; ``replay`` ``false`` /
``true`` / ``"dummy"``).

:class:`GameRecorder` builds the line from the ``info`` of a game's steps, so whatever writes games -- the
:class:`~searchgym.wrappers.recording.RecordGames` wrapper, or an env made with ``export_path=`` that is not
wrapped -- writes exactly the events its caller sees in ``info["rewards"]``.

Whatever the agent wrote is exported without raising: a lone surrogate (``"\\ud800"``, which UTF-8
cannot encode) is written as the JSON escape ``\\ud800`` and reads back as the same string (a
high and a low surrogate side by side read back as the one character they encode); a
non-finite float is written as ``NaN``/``Infinity`` (Python's JSON dialect) and objects JSON does
not know as their ``str()``.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

from ..core.artefacts import check_output
from ..core.info import KIND_GROUP, KIND_SELFPLAY, KIND_SINGLE, REPLAY_SOURCES, ReplaySource, info_kind
from ..core.jsonl import bad_line, iter_lines, json_of_line, open_append
from ..core.output_lock import OutputLock
from ..core.path_errors import not_there
from ..core.rewards import RewardEvent
from ..core.types import Trajectory
from ..core.validation import ValidationResult
from ..errors import InvalidArgumentError, MissingFileError

__all__ = [
    "EXPORT_FORMAT",
    "TrajectoryWriter",
    "GameRecord",
    "GameRecorder",
    "game_fields",
    "read_trajectories",
    "iter_trajectories",
    "json_line",
]

#: the version of the line layout this module writes (lines without ``format`` are version 1)
EXPORT_FORMAT = 2


@dataclass
class GameRecord:
    """One exported game; ``rewards`` carry their trajectory (the Proposer's, or ``solvers[slot]``)."""

    game: int
    proposer: Optional[Trajectory]
    validation: Optional[ValidationResult]
    solvers: list[Trajectory]
    rewards: list[RewardEvent]
    replay: Optional[ReplaySource] = None
    extra: dict = field(default_factory=dict)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _event_data(ev: Union[RewardEvent, Mapping[str, Any]]) -> dict:
    if isinstance(ev, RewardEvent):
        return dict(ev.to_dict())
    return {k: v for k, v in ev.items() if k != "trajectory"}


def _validation_data(validation: Union[ValidationResult, Mapping[str, Any], None]) -> Optional[dict]:
    if validation is None:
        return None
    return validation.to_dict() if isinstance(validation, ValidationResult) else dict(validation)


def json_line(record: Any) -> str:
    """``record`` as one line of JSON that UTF-8 can always encode.

    Non-ASCII text stays readable (``ensure_ascii=False``); only surrogate code points, which can
    occur solely inside JSON strings, become ``\\uXXXX`` escapes, so ``json.loads`` gives back
    exactly the original string.
    """
    line = json.dumps(record, ensure_ascii=False, default=str)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


class TrajectoryWriter:
    """Appends games to a JSONL file (created with its parent directory; ``mode="w"`` truncates).

    Each line is flushed when written, so a crashed run keeps every finished game; a torn last line left
    by an earlier crash (a kill, a full disk) is cut before the first append, so the next game never
    lands on it. The file must be new or a trajectory export (not a pool, eval records, ...), and is
    locked until :meth:`close`: another process writing it fails at once naming this one (copies of this
    writer in this process, e.g. a pickled env, share the lock).
    """

    def __init__(self, path: Union[str, Path], *, mode: str = "a") -> None:
        if mode not in ("a", "w"):
            raise InvalidArgumentError(f"mode must be 'a' (append) or 'w' (truncate), got {mode!r}")
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgumentError(f"export_path must be a file path (or a TrajectoryWriter), got {path!r:.80}")
        self.path = Path(path)
        check_output(self.path, "trajectory export")
        self._output_lock = OutputLock(self.path, what="export file", shared_in_process=True).acquire()
        self._f = open_append(self.path) if mode == "a" else self.path.open("w", encoding="utf-8")
        self._lock = threading.Lock()
        self.count = 0

    def write_game(
        self,
        *,
        game: int,
        proposer: Optional[Trajectory],
        validation: Union[ValidationResult, Mapping[str, Any], None],
        solvers: Sequence[Trajectory],
        rewards: Sequence[Union[RewardEvent, Mapping[str, Any]]],
        replay: Optional[ReplaySource] = None,
    ) -> None:
        """Write one game as one line."""
        rec = {
            "format": EXPORT_FORMAT,
            "game": int(game),
            "proposer": proposer.to_dict() if proposer is not None else None,
            "validation": _validation_data(validation),
            "solvers": [t.to_dict() for t in solvers],
            "rewards": [_event_data(ev) for ev in rewards],
            "replay": replay,
        }
        line = json_line(rec)
        with self._lock:
            if self._f.closed:
                raise InvalidArgumentError(f"trajectory writer for {self.path} is closed")
            self._f.write(line + "\n")
            self._f.flush()
            self.count += 1

    def __getstate__(self) -> dict:
        """Pickle the path and count; the restored writer reopens the file to append."""
        return {"path": self.path, "count": self.count}

    def __setstate__(self, state: dict) -> None:
        self.path, self.count = state["path"], state["count"]
        self._output_lock = OutputLock(self.path, what="export file", shared_in_process=True).acquire()
        self._f = open_append(self.path)
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict) -> "TrajectoryWriter":
        """A deep-copied env writes to the same writer (its lock keeps lines whole)."""
        return self

    def close(self) -> None:
        """Close the file and release its lock; idempotent."""
        with self._lock:
            if not self._f.closed:
                self._f.close()
            self._output_lock.release()

    def __enter__(self) -> "TrajectoryWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def game_fields(info: Mapping[str, Any], events: Sequence[RewardEvent]) -> dict[str, Any]:
    """The :meth:`TrajectoryWriter.write_game` arguments of a game that ended with ``info`` (its last step's
    ``info``), whose steps reported ``events`` in ``info["rewards"]``. Raises for an ``info`` without
    trajectories (``KGNavigate-v0``)."""
    kind = info_kind(info)
    fields_: dict[str, Any] = {"game": info.get("game", 0), "rewards": list(events), "replay": None}
    if kind == KIND_SINGLE:
        traj = info["trajectory"]
        if traj.role == "proposer":
            return {**fields_, "proposer": traj, "validation": info.get("validation"), "solvers": []}
        return {**fields_, "proposer": None, "validation": None, "solvers": [traj]}
    if kind == KIND_GROUP:
        return {**fields_, "proposer": None, "validation": None, "solvers": list(info["trajectories"])}
    if kind == KIND_SELFPLAY:
        return {
            **fields_,
            "proposer": info["proposer"],
            "validation": info.get("validation"),
            "solvers": list(info["trajectories"]),
            "replay": info.get("replay"),
        }
    raise InvalidArgumentError(f"an env whose info is of kind {kind!r} has no trajectories to export")


class GameRecorder:
    """Collects a game's reward events from the ``info`` of each step and writes the game when it ends.

    Call :meth:`start` after ``reset`` and :meth:`observe` after every ``step``; the events written are those
    the observed ``info`` dicts held, so a recorder outside the reward wrappers exports the shaped events.
    """

    def __init__(self, writer: TrajectoryWriter) -> None:
        self.writer = writer
        self._events: list[RewardEvent] = []

    def start(self) -> None:
        """A new game begins: forget the events of an unfinished one."""
        self._events = []

    def observe(self, info: Mapping[str, Any], done: bool) -> None:
        """Take this step's events; when ``done`` (terminated or truncated), write the game."""
        self._events.extend(RewardEvent.coerce(ev) for ev in info.get("rewards") or [])
        if done:
            events, self._events = self._events, []
            self.writer.write_game(**game_fields(info, events))


def _replay_source(value: Any, has_proposer: bool) -> Optional[ReplaySource]:
    """An export line's ``replay`` as a :data:`ReplaySource` (version 1 wrote ``false``/``true``/``"dummy"``)."""
    if value is True:
        return "replayed"
    if value is None:
        return None
    if value is False:
        return "proposed" if has_proposer else None
    if value in REPLAY_SOURCES:
        return value
    raise InvalidArgumentError(f"replay is {value!r}; expected one of {', '.join(REPLAY_SOURCES)} or null")


def _record(rec: Mapping[str, Any]) -> GameRecord:
    """A :class:`GameRecord` from one parsed export line (either format)."""
    proposer = Trajectory.from_dict(rec["proposer"]) if rec.get("proposer") else None
    solvers = [Trajectory.from_dict(t) for t in rec.get("solvers", [])]
    events = []
    for data in rec.get("rewards", []):
        slot = int(data.get("slot", 0))
        traj = proposer if data.get("role") == "proposer" else (solvers[slot] if 0 <= slot < len(solvers) else None)
        events.append(RewardEvent.from_dict(data, traj))
    validation = rec.get("validation")
    return GameRecord(
        game=int(rec["game"]),
        proposer=proposer,
        validation=ValidationResult.from_dict(validation) if validation is not None else None,
        solvers=solvers,
        rewards=events,
        replay=_replay_source(rec.get("replay"), proposer is not None),
    )


def _not_a_game(rec: Any) -> Optional[str]:
    """Why the parsed line ``rec`` cannot be an exported game (``None`` when it may be one): not an object, a
    single trajectory (a ``searchgym demos`` or ``sft`` data line), or an object without ``game``."""
    if not isinstance(rec, dict):
        return f"is a JSON {type(rec).__name__}, not an exported game (a JSON object)"
    if "segments" in rec and "role" in rec:
        return "is one trajectory (a `searchgym demos` file?), not an exported game"
    if "game" not in rec:
        return "has no 'game' field, so it is not an exported game"
    return None


def iter_trajectories(path: Union[str, os.PathLike]) -> Iterator[GameRecord]:
    """Stream the games of an export file; raises :class:`InvalidArgumentError` naming the line of a bad record
    (not UTF-8 JSON, torn by an interrupted write, not a game, or a game with fields of the wrong kind) and
    the fix, since a reader of exports must never stop with a traceback."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"trajectory file {path} {not_there(path)}")
    fix = "fix or delete that line, or pass a file written by `searchgym play --export`"
    for n, raw, complete in iter_lines(path):
        try:
            rec = json_of_line(raw)
        except ValueError as exc:
            raise InvalidArgumentError(bad_line(path, n, exc, complete)) from None
        problem = _not_a_game(rec)
        if problem is not None:
            raise InvalidArgumentError(f"{path}: line {n} {problem}; {fix}")
        try:
            game = _record(rec)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            why = f"no {exc} field" if isinstance(exc, KeyError) else str(exc)
            raise InvalidArgumentError(
                f"{path}: line {n} is not a valid searchgym game record ({why}); {fix}"
            ) from None
        yield game


def read_trajectories(path: Union[str, os.PathLike]) -> list[GameRecord]:
    """Every game of an export file (see :func:`iter_trajectories`)."""
    return list(iter_trajectories(path))
