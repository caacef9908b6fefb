"""``KGSolverGroup-v0``: G Solver rollouts of the same task stepped together (a GRPO group).

Observation: ``Dict{"role": Discrete(2) (always 1 = solver here), "active": MultiBinary(G),
"texts": Tuple(Text × G)}`` — at reset every slot holds the prompt; after a step each active
slot holds the text inserted for it (``""`` for finished slots). Action: ``Tuple(Text × G)``;
texts of inactive slots are ignored. All searches of a step go to the retriever in one batch.
All G reward events (c_i ∈ {0, 1}) arrive together on the step the last rollout finishes, so a
trainer can normalise within the group.

:class:`SolverGroup` is the G-rollout phase itself; ``KGSelfPlay-v0`` reuses it.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
from gymnasium import spaces

from ..core.arg_checks import check_count
from ..core.info import KIND_GROUP, GroupInfo
from ..core.rewards import RewardEvent
from ..core.types import Task, Trajectory
from ..errors import InvalidArgumentError, InvalidTypeError, SearchGymRuntimeError
from ..scoring.outcomes import reward_event, score_solver
from .base import TextEnvBase, pick_task, resolve_tasks
from .episode import Rollout, advance
from .spaces import text_space

__all__ = [
    "KGSolverGroupEnv",
    "SolverGroup",
    "MAX_GROUP_SIZE",
    "check_group_size",
    "group_observation_space",
    "group_action_space",
    "check_group_action",
]

ROLE_PROPOSER, ROLE_SOLVER = 0, 1
#: the most Solver slots a group or self-play env takes: each slot is a rollout and an observation-space entry
#: built at construction, so ``group_size=10**30`` would hang there; GRPO recipes use 5 to 64
MAX_GROUP_SIZE = 4096


def check_group_size(group_size: Any) -> int:
    """``group_size`` if it is an int in ``[1, MAX_GROUP_SIZE]``; else one line naming it (the group and self-play
    envs check it before building anything)."""
    return check_count("group_size", group_size, most=MAX_GROUP_SIZE, hint="Solver rollouts per task")


def group_observation_space(group_size: int) -> spaces.Dict:
    """The multi-slot observation space of the group and self-play envs."""
    return spaces.Dict(
        {
            "role": spaces.Discrete(2),
            "active": spaces.MultiBinary(group_size),
            "texts": spaces.Tuple([text_space() for _ in range(group_size)]),
        }
    )


def group_action_space(group_size: int) -> spaces.Tuple:
    """The multi-slot action space: one text per slot."""
    return spaces.Tuple([text_space() for _ in range(group_size)])


def group_obs(role: int, active: Sequence[bool], texts: Sequence[str]) -> dict:
    """A fresh observation dict (new arrays every call, as gymnasium requires)."""
    return {
        "role": int(role),
        "active": np.array([1 if a else 0 for a in active], dtype=np.int8),
        "texts": tuple(texts),
    }


def check_group_action(action: Any, group_size: int) -> list:
    """The action as a list of G texts; raises a clear error for a wrong container or length."""
    if isinstance(action, (str, bytes)):
        raise InvalidTypeError(
            f"this env takes one text per slot: a tuple of {group_size} strings (inactive slots are ignored), "
            f"not a single string"
        )
    try:
        texts = list(action)
    except TypeError:
        raise InvalidTypeError(f"action must be a tuple of {group_size} strings, got {type(action).__name__}") from None
    if len(texts) != group_size:
        raise InvalidArgumentError(
            f"action has {len(texts)} texts; this env has {group_size} slots (give one text per slot, '' for "
            f"inactive ones)"
        )
    return texts


class SolverGroup:
    """G Solver rollouts on one task, advanced together and scored together."""

    def __init__(self, env: TextEnvBase, task: Task, group_size: int) -> None:
        self.env = env
        self.task = task
        self.rollouts: list[Rollout] = [env.start_solver_rollout(task) for _ in range(group_size)]

    @property
    def trajectories(self) -> list[Trajectory]:
        """The G live trajectories, by slot."""
        return [r.trajectory for r in self.rollouts]

    @property
    def active(self) -> list[bool]:
        """Which slots still act."""
        return [not r.done for r in self.rollouts]

    @property
    def done(self) -> bool:
        """Whether every rollout has finished."""
        return all(r.done for r in self.rollouts)

    @property
    def all_truncated(self) -> bool:
        """Whether every rollout ran out of turns without answering."""
        return all(r.trajectory.truncated and not r.trajectory.terminated for r in self.rollouts)

    def end_flags(self) -> tuple[bool, bool]:
        """Gymnasium's ``(terminated, truncated)`` for the step that finishes the group: truncated
        when every rollout ran out of turns (the time limit ended the episode), terminated when at
        least one Solver answered; ``(False, False)`` while a rollout still acts."""
        if not self.done:
            return False, False
        truncated = self.all_truncated
        return not truncated, truncated

    def prompts(self) -> list[str]:
        """The prompt of every slot."""
        return [r.trajectory.prompt for r in self.rollouts]

    def step(self, texts: Sequence[Any]) -> list[str]:
        """Advance every active rollout by one turn (one batched retrieval); returns inserted texts."""
        return advance(self.rollouts, [t if not r.done else "" for t, r in zip(texts, self.rollouts)], self.env.engine)

    def score(self) -> list[RewardEvent]:
        """Judge every rollout (call once, when :attr:`done`); returns the G solver events."""
        events = []
        for slot, r in enumerate(self.rollouts):
            score_solver(r.trajectory, self.env.judge)
            events.append(
                reward_event("solver", slot, r.trajectory.reward, r.trajectory.reward_components, r.trajectory)
            )
        return events

    def components(self) -> dict:
        """``{name: [per slot]}`` of the solver reward components (``None`` for unscored slots)."""
        names = sorted({k for t in self.trajectories for k in t.reward_components} | {"outcome"})
        return {
            n: [t.reward_components.get(n) if t.reward_components else None for t in self.trajectories] for n in names
        }


class KGSolverGroupEnv(TextEnvBase):
    """``group_size`` (default 5) Solver rollouts of one task per episode.

    ``tasks`` / ``pool``: as for :class:`~searchgym.envs.solver.KGSolverEnv` (``reset(options={"task": task})``
    or ``{"index": i}`` pick the task); the other arguments as :class:`~searchgym.envs.base.TextEnvBase`.
    """

    def __init__(self, world=None, tasks: Any = None, *, pool: Any = None, group_size: int = 5, **kwargs: Any) -> None:
        group_size = check_group_size(group_size)
        super().__init__(world, **kwargs)
        self.tasks = resolve_tasks(self.world, tasks, pool)
        self.group_size = group_size
        self.observation_space = group_observation_space(group_size)
        self.action_space = group_action_space(group_size)
        self.group: Optional[SolverGroup] = None

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Start G rollouts on a drawn (or given) task; every slot's text is the prompt."""
        self._reseed(seed)
        group = self.group = SolverGroup(self, pick_task(self.tasks, options, self._rng), self.group_size)
        self._game = self.games_finished
        info = self._group_info(group, ["" for _ in range(self.group_size)], [])
        return group_obs(ROLE_SOLVER, group.active, group.prompts()), self._record(info, reset=True)

    def step(self, action: Any):
        """One turn for every active slot; all G rewards arrive when the last rollout ends."""
        group = self.group
        if group is None:
            raise SearchGymRuntimeError("call reset() before step()")
        if group.done:
            raise SearchGymRuntimeError("the episode has ended; call reset() to start a new one")
        inserted = group.step(check_group_action(action, self.group_size))
        events: list[RewardEvent] = group.score() if group.done else []
        terminated, truncated = group.end_flags()
        info = self._record(self._group_info(group, inserted, events), done=group.done)
        if group.done:
            self.games_finished += 1
        reward = float(sum(ev.reward for ev in events))
        return group_obs(ROLE_SOLVER, group.active, inserted), reward, terminated, truncated, info

    def _group_info(self, g: SolverGroup, inserted: Sequence[str], events: list[RewardEvent]) -> GroupInfo:
        return {
            "kind": KIND_GROUP,
            "trajectories": g.trajectories,
            "task": g.task,
            "turn": [r.last_turn for r in g.rollouts],
            "inserted": list(inserted),
            "rewards": events,
            "role": "solver",
            "reward_components": {"solver": g.components(), "proposer": {}},
            "game": self._game,
        }

    def _render_trajectories(self):
        return self.group.trajectories if self.group is not None else []

    def clone(self) -> "KGSolverGroupEnv":
        """A new group env sharing this one's world, tasks, retriever, KG tool, judge and export file."""
        return KGSolverGroupEnv(self.world, self.tasks, group_size=self.group_size, **self.shared_kwargs())
