"""Kept so ``searchgym.envs.types`` imports keep working: the task and trajectory types live on the bottom
floor, :mod:`searchgym.core.types`, because wrappers, agents and evaluation share them with the envs."""

from ..core.types import THINK_SEPARATOR, Role, SearchCall, Segment, SegmentSource, Task, Trajectory, Turn

__all__ = ["Role", "SegmentSource", "THINK_SEPARATOR", "Task", "SearchCall", "Turn", "Segment", "Trajectory"]
