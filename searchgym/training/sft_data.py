"""Read supervised fine-tuning data: trajectory JSONL in either of searchgym's two line shapes.

Each line is detected on its own:

* a **trajectory line** -- :meth:`Trajectory.to_dict` (keys ``role``, ``task``, ``prompt``, ``segments``,
  ...), optionally with extra top-level keys (``demo`` metadata, ``game``, ``event_reward``, ...). This is
  what the demonstration generator and ``play_games(export_path=...)`` write. Its reward is
  ``event_reward`` when present, else the trajectory's own ``reward``;
* an **env export line** (:mod:`searchgym.envs.export`: ``{"game", "proposer", "validation", "solvers",
  "rewards", ...}``) -- every trajectory in it, each with the reward of its own reward event.

Trajectories are then filtered by role and by ``min_reward``. A malformed line is reported as
``file:line: problem`` and either skipped and counted (``on_error="skip"``: one warning for them all) or raised
(``"stop"``).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Iterable, Optional, Sequence

from ..core.arg_checks import check_choice
from ..core.jsonl import iter_lines, loads_json
from ..core.path_errors import not_there
from ..core.types import Trajectory
from ..errors import InvalidArgumentError, MissingFileError, SearchGymError

logger = logging.getLogger(__name__)

ON_ERROR = ("skip", "stop")
_TRAJECTORY_KEYS = frozenset(f.name for f in fields(Trajectory))
_MAX_REPORTED = 20  # malformed lines quoted in the summary (all are counted)


class DataError(SearchGymError, ValueError):
    """A malformed data line under ``on_error="stop"``; the message names ``file:line``."""


@dataclass
class Demonstration:
    """One trajectory to train on, its reward (None if the line carries none) and where it came from."""

    trajectory: Trajectory
    reward: Optional[float]
    source: str


@dataclass
class DataReport:
    """What loading found: lines read, examples kept, malformed lines, trajectories filtered out by reason."""

    files: list = field(default_factory=list)
    lines: int = 0
    kept: int = 0
    malformed: int = 0
    errors: list = field(default_factory=list)
    filtered: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        """One line for logs and the CLI."""
        parts = [f"{self.kept} trajectories from {self.lines} lines of {len(self.files)} file(s)"]
        if self.malformed:
            parts.append(f"{self.malformed} malformed line(s) skipped (first: {self.errors[0]})")
        if self.filtered:
            parts.append("filtered out: " + ", ".join(f"{n} {why}" for why, n in sorted(self.filtered.items())))
        return "; ".join(parts)

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {
            "files": list(self.files),
            "lines": self.lines,
            "kept": self.kept,
            "malformed": self.malformed,
            "errors": list(self.errors),
            "filtered": dict(self.filtered),
        }


def _trajectory_from_line(rec: dict) -> Demonstration:
    traj = Trajectory.from_dict({k: v for k, v in rec.items() if k in _TRAJECTORY_KEYS})
    reward = rec.get("event_reward", rec.get("reward"))
    return Demonstration(traj, float(reward) if reward is not None else None, "")


def _export_line(rec: dict) -> list[Demonstration]:
    events = [e for e in rec.get("rewards") or [] if isinstance(e, dict)]
    out = []
    if rec.get("proposer"):
        ev = next((e for e in events if e.get("role") == "proposer"), None)
        traj = Trajectory.from_dict(rec["proposer"])
        out.append(Demonstration(traj, float(ev["reward"]) if ev else traj.reward, ""))
    for slot, t in enumerate(rec.get("solvers") or []):
        ev = next((e for e in events if e.get("role") == "solver" and e.get("slot", slot) == slot), None)
        traj = Trajectory.from_dict(t)
        out.append(Demonstration(traj, float(ev["reward"]) if ev else traj.reward, ""))
    return out


def parse_line(line: str) -> list[Demonstration]:
    """The trajectories of one JSONL line (either shape); ValueError saying what is wrong with it."""
    try:
        rec = loads_json(line)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(rec, dict):
        raise InvalidArgumentError(f"a line must be a JSON object, got {type(rec).__name__}")
    try:
        if "segments" in rec and "role" in rec:
            demos = [_trajectory_from_line(rec)]
        elif "solvers" in rec or "proposer" in rec:
            demos = _export_line(rec)
        else:
            raise InvalidArgumentError(
                "neither a trajectory (keys role, task, prompt, segments) nor an env export line "
                "(keys game, proposer, solvers, rewards)"
            )
    except (KeyError, TypeError) as exc:
        raise InvalidArgumentError(f"incomplete record ({type(exc).__name__}: {exc})") from None
    for d in demos:
        bad = sorted({s.source for s in d.trajectory.segments} - {"prompt", "agent", "env"})
        if bad:
            raise InvalidArgumentError(f"segment source(s) {bad}: each segment must be prompt, agent or env")
    return demos


def _keep(demo: Demonstration, roles: Optional[Sequence[str]], min_reward: Optional[float]) -> Optional[str]:
    """None to keep ``demo``, else the reason it is filtered out."""
    if roles is not None and demo.trajectory.role not in roles:
        return f"role {demo.trajectory.role}"
    if not any(s.source == "agent" and s.text for s in demo.trajectory.segments):
        return "without agent text"
    if min_reward is not None:
        if demo.reward is None:
            return "without a reward"
        if demo.reward < min_reward:
            return f"reward < {min_reward:g}"
    return None


def load_demonstrations(
    paths: str | Path | Iterable[str | Path],
    *,
    roles: Optional[Sequence[str]] = None,
    min_reward: Optional[float] = None,
    on_error: str = "skip",
) -> tuple[list[Demonstration], DataReport]:
    """Read every trajectory of ``paths`` that passes the filters; returns ``(demonstrations, report)``.

    ``roles``: keep only these roles (None = all). ``min_reward``: keep only trajectories whose reward is
    at least this. ``on_error``: ``"skip"`` malformed lines (logged with file:line, counted in the
    report) or ``"stop"`` at the first one (:class:`DataError`).
    """
    check_choice("on_error", on_error, ON_ERROR)
    if isinstance(paths, (str, Path)):
        paths = [paths]
    report = DataReport()
    out: list[Demonstration] = []
    for path in map(Path, paths):
        if not path.is_file():
            raise MissingFileError(f"data file {path} {not_there(path)}; give demonstration or trajectory JSONL files")
        report.files.append(str(path))
        for n, raw, _complete in iter_lines(path):
            report.lines += 1
            where = f"{path}:{n}"
            try:
                demos = parse_line(_text_of(raw))
            except ValueError as exc:
                if on_error == "stop":
                    raise DataError(f"{where}: {exc}; fix or delete that line, or pass --on-error skip") from None
                report.malformed += 1
                if len(report.errors) < _MAX_REPORTED:
                    report.errors.append(f"{where}: {exc}")
                continue
            for d in demos:
                d.source = where
                why = _keep(d, roles, min_reward)
                if why is None:
                    out.append(d)
                else:
                    report.filtered[why] += 1
    report.kept = len(out)
    if report.malformed and out:  # once, not per line; with nothing kept the caller's error says it
        logger.warning("%s", report.summary())
    return out, report


def _text_of(raw: bytes) -> str:
    """A data line as text; a line that is not UTF-8 is a malformed line like any other (skipped or refused)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"not valid JSON ({exc})") from None
