"""Trajectory export: one finished game per JSONL line, and reading it back.

A line is ``{"game", "proposer", "validation", "solvers", "rewards", "replay"}``: the Proposer's
trajectory (``null`` for solver-only envs), the validation result, every Solver trajectory
(:meth:`Trajectory.to_dict`) and the reward events (without the live trajectory objects; their
``slot`` points into ``solvers``). :func:`read_trajectories` restores :class:`GameRecord` s.

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
from typing import Any, Iterator, Optional, Sequence, Union

from ..core.artefacts import check_output
from ..core.jsonl import open_append
from ..core.output_lock import OutputLock
from ..core.types import Trajectory
from ..errors import InvalidArgumentError, MissingFileError

__all__ = ["TrajectoryWriter", "GameRecord", "read_trajectories", "iter_trajectories", "json_line"]


@dataclass
class GameRecord:
    """One exported game."""

    game: int
    proposer: Optional[Trajectory]
    validation: Optional[dict]
    solvers: list[Trajectory]
    rewards: list[dict]
    replay: Any = False
    extra: dict = field(default_factory=dict)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _event_dict(ev: dict) -> dict:
    return {k: v for k, v in ev.items() if k != "trajectory"}


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
        validation: Optional[dict],
        solvers: Sequence[Trajectory],
        rewards: Sequence[dict],
        replay: Any = False,
    ) -> None:
        """Write one game as one line."""
        rec = {
            "game": int(game),
            "proposer": proposer.to_dict() if proposer is not None else None,
            "validation": validation,
            "solvers": [t.to_dict() for t in solvers],
            "rewards": [_event_dict(ev) for ev in rewards],
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


def iter_trajectories(path: Union[str, os.PathLike]) -> Iterator[GameRecord]:
    """Stream the games of an export file; raises ValueError naming the line of a bad record."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"trajectory file {path} does not exist")
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                yield GameRecord(
                    game=int(rec["game"]),
                    proposer=Trajectory.from_dict(rec["proposer"]) if rec.get("proposer") else None,
                    validation=rec.get("validation"),
                    solvers=[Trajectory.from_dict(t) for t in rec.get("solvers", [])],
                    rewards=list(rec.get("rewards", [])),
                    replay=rec.get("replay", False),
                )
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise InvalidArgumentError(f"{path}:{n}: not a searchgym game record ({exc})") from None


def read_trajectories(path: Union[str, os.PathLike]) -> list[GameRecord]:
    """Every game of an export file (see :func:`iter_trajectories`)."""
    return list(iter_trajectories(path))
