"""Common episode skeleton of the one-rollout envs (``KGSolver-v0``, ``KGProposer-v0``).

Both play one :class:`~searchgym.envs.episode.Rollout` per reset; they differ only in the
rollout they start and in how a finished rollout is scored. Subclasses implement
:meth:`SingleRolloutEnv._new_rollout` and :meth:`SingleRolloutEnv._finish`.
"""

from __future__ import annotations

from typing import Any, Optional

from ..core.info import KIND_SINGLE, SingleInfo
from ..core.rewards import RewardEvent
from ..core.types import Task, Trajectory
from ..errors import SearchGymRuntimeError
from ..tasks.sources import TaskSource
from .base import TextEnvBase, pick_task
from .episode import Rollout, advance

__all__ = ["SingleRolloutEnv"]


class SingleRolloutEnv(TextEnvBase):
    """A text env whose episode is one rollout: task picking, step bookkeeping and ``info``."""

    tasks: TaskSource  # set by the subclass constructor
    rollout: Optional[Rollout] = None
    _game: int = 0

    def _new_rollout(self, task: Task) -> Rollout:
        """The rollout this env plays on ``task``."""
        raise NotImplementedError

    def _finish(self, traj: Trajectory) -> list[RewardEvent]:
        """Score a finished rollout and return its reward events."""
        raise NotImplementedError

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Start a rollout on a drawn (or given) task; the observation is its prompt."""
        self._reseed(seed)
        self.rollout = self._new_rollout(pick_task(self.tasks, options, self._rng))
        self._game = self.games_finished
        return self.rollout.trajectory.prompt, self._record(self._info(self.rollout, "", []), reset=True)

    def step(self, action: Any):
        """Apply one agent turn; the finished rollout is scored on the step it ends."""
        rollout = self.rollout
        if rollout is None:
            raise SearchGymRuntimeError("call reset() before step()")
        if rollout.done:
            raise SearchGymRuntimeError("the episode has ended; call reset() to start a new one")
        (inserted,) = advance([rollout], [action], self.engine)
        traj = rollout.trajectory
        events: list[RewardEvent] = []
        if rollout.done:
            events = self._finish(traj)
        info = self._info(rollout, inserted, events)
        terminated, truncated = bool(traj.terminated), bool(traj.truncated and not traj.terminated)
        self._record(info, done=rollout.done)
        if rollout.done:
            self.games_finished += 1
        return inserted, float(sum(ev.reward for ev in events)), terminated, truncated, info

    def _info(self, rollout: Rollout, inserted: str, events: list[RewardEvent]) -> SingleInfo:
        """This step's ``info`` (an env adds its own keys by overriding this)."""
        return self._single_info(rollout, inserted, events)

    def _single_info(self, rollout: Rollout, inserted: str, events: list[RewardEvent]) -> SingleInfo:
        traj = rollout.trajectory
        return {
            "kind": KIND_SINGLE,
            "trajectory": traj,
            "task": traj.task,
            "turn": rollout.last_turn,
            "inserted": inserted,
            "rewards": events,
            "reward_components": dict(traj.reward_components),
            "game": self._game,
        }

    def _render_trajectories(self) -> list[Trajectory]:
        return [self.rollout.trajectory] if self.rollout is not None else []
