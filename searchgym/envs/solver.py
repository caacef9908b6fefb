"""``KGSolver-v0``: one Solver rollout on one task (SSP/Search-R1 multi-turn search).

Observation: at reset the Solver prompt; after each step the text the env inserted
(``<information>…</information>`` or a corrective message; ``""`` once the rollout ended).
Action: the policy's next turn (free text). Terminates on an ``<answer>``; truncates after
``max_turns`` turns. Reward: 0 until the end, then the outcome c ∈ {0, 1} (exact match against
any gold alias by default; pass ``judge=LLMJudge(generator)`` for SSP's LLM judge).
"""

from __future__ import annotations

import logging
from typing import Any, Optional, Sequence

from ..core.rewards import RewardEvent
from ..core.types import Task
from ..scoring.outcomes import reward_event, score_solver
from .base import resolve_tasks
from .episode import Rollout
from .group import KGSolverGroupEnv
from .single import SingleRolloutEnv
from .spaces import text_space

logger = logging.getLogger(__name__)

__all__ = ["KGSolverEnv"]


class KGSolverEnv(SingleRolloutEnv):
    """One Solver episode per reset.

    ``tasks``: a :class:`~searchgym.tasks.sources.TaskSource`, a JSONL path of QA pairs, a list of
    :class:`Task`, or ``None`` (template questions over ``pool``; default: the world's cached
    heuristic pool in curriculum order; ``pool_hops``: training-side subgraphs of those path lengths instead,
    as for ``KGSelfPlay-v0``). Tasks are drawn uniformly with the episode's seeded RNG;
    ``reset(options={"task": task})`` plays a given task and ``options={"index": i}`` task ``i``.
    See :class:`~searchgym.envs.base.TextEnvBase` for the other arguments.
    """

    def __init__(
        self,
        world=None,
        tasks: Any = None,
        *,
        pool: Any = None,
        pool_hops: Optional[Sequence[int]] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(world, **kwargs)
        self.tasks = resolve_tasks(self.world, tasks, pool, hops=pool_hops)
        self.observation_space = text_space()
        self.action_space = text_space()

    # ------------------------------------------------------------------ group helpers
    def clone(self) -> "KGSolverEnv":
        """A new env sharing this one's world, tasks, retriever, KG tool and judge (e.g. for
        ``gymnasium.vector.SyncVectorEnv([env.clone for _ in range(n)])``). Export is not shared."""
        return KGSolverEnv(self.world, self.tasks, **self.shared_kwargs())

    def make_group(self, group_size: int = 5) -> KGSolverGroupEnv:
        """A :class:`~searchgym.envs.group.KGSolverGroupEnv` of ``group_size`` rollouts per task,
        sharing this env's resources (GRPO groups)."""
        return KGSolverGroupEnv(self.world, self.tasks, group_size=group_size, **self.shared_kwargs())

    # ------------------------------------------------------------------ episode hooks
    def _new_rollout(self, task: Task) -> Rollout:
        return self.start_solver_rollout(task)

    def _finish(self, traj) -> list[RewardEvent]:
        score_solver(traj, self.judge)
        return [reward_event("solver", 0, traj.reward, traj.reward_components, traj)]
