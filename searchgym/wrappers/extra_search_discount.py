"""A discount on a Solver's reward for searches beyond the question's hop count (docs/rewards.md).

::

    p  = max(0, 1 − γ^(t − i))        DynaSearcher's retrieval penalty (Eq. 5) with its floor β at 0
    R' = R − α · p · max(R, 0)        α = 0.5, γ = 0.9

t = searches the rollout made, i = the task's gold hop count. A rollout that searched no more than the
question's hops keeps its reward; one extra search keeps 95 % of it, two 90.5 %, never less than 1 − α.

Why: on the CPU self-play benchmark the Solvers learned to search twice on 1-hop questions, and the held-out
1-hop loss followed that habit run by run (docs/selfplay_runs.md). A right answer found after a second,
needless search earns what one search does under the binary reward and WCR, so nothing taught the Solver to
stop. DynaSearcher's full reward (``dynasearcher``) charges extra searches too, but its floor β = −0.2 pays a
*bonus* for searching less than the hops, which on the same benchmark taught the Solver to answer 2-hop
questions after one search; this wrapper keeps only the charge. It is multiplicative on the positive part, so a
rollout with reward 0 (invalid, or wrong under the binary reward) is untouched and no valid rollout falls below an
invalid one; over WCR a wrong answer's coverage bonus is discounted like a right answer's 1. A searchgym
addition, not a paper's reward: stack it outermost (``wcr,search_discount``); proposer events are untouched.
"""

from __future__ import annotations

from typing import Optional

import gymnasium as gym

from ..core.arg_checks import check_number
from ..core.types import Task
from ..errors import InvalidArgumentError
from .base import Event, RewardShapingWrapper, event_trajectory
from .dynasearcher_reward import require_hops, retrieval_penalty


def extra_search_discount(reward: float, searches: int, hops: int, alpha: float = 0.5, gamma: float = 0.9) -> float:
    """The term added to ``reward`` (≤ 0): ``−α · max(0, 1 − γ^(searches − hops)) · max(reward, 0)``."""
    penalty = retrieval_penalty(searches, hops, gamma, beta=0.0)
    return -alpha * penalty * reward if penalty > 0 and reward > 0 else 0.0


class ExtraSearchDiscount(RewardShapingWrapper):
    """Discounts each Solver event's reward by ``α·max(0, 1 − γ^(t − i))`` of its positive part.

    Components written per solver event: ``extra_searches`` (``max(0, t − i)``) and ``search_discount`` (the term
    added, ≤ 0). Tasks without a hop count raise :class:`~searchgym.wrappers.MissingTaskDataError` at reset.
    """

    name = "search_discount"
    #: the component keys this discount writes: the searches it counts, and the term it adds
    count_key = "extra_searches"
    term_key = "search_discount"

    def __init__(self, env, alpha: float = 0.5, gamma: float = 0.9):
        gym.utils.RecordConstructorArgs.__init__(self, alpha=alpha, gamma=gamma)  # gym.make(env.spec) rebuilds it
        super().__init__(env)
        check_number("alpha", alpha, hint="default 0.5, DynaSearcher's α")
        check_number("gamma", gamma, hint="paper: 0.9")
        if not 0.0 <= alpha <= 1.0:
            raise InvalidArgumentError(f"alpha must lie in [0, 1] (default 0.5, DynaSearcher's α); got {alpha}")
        retrieval_penalty(0, 0, gamma)  # one-line error for a gamma outside (0, 1)
        # kept in one dict, not as ``alpha`` / ``gamma`` attributes: get_wrapper_attr("alpha") on a stack
        # ``wcr,search_discount`` should still find WCR's α
        self.params = {"alpha": alpha, "gamma": gamma}

    def check_task(self, task: Optional[Task]) -> None:
        """The task needs a hop count."""
        if task is not None:
            require_hops(task, f"the {self.name} reward")

    @staticmethod
    def counted(searches: int, hops: int) -> tuple[int, int]:
        """``(t, i)`` as the discount reads them: searches made, then the hops they are charged against."""
        return searches, hops

    def shape_solver_group(self, events: list[Event], info: dict) -> None:
        """Discount every rollout on its own (no group term)."""
        for ev in events:
            traj = event_trajectory(ev)
            made, allowed = self.counted(int(traj.num_searches), require_hops(traj.task, f"the {self.name} reward"))
            term = extra_search_discount(ev.reward, made, allowed, **self.params)
            self.set_reward(ev, ev.reward + term, **{self.count_key: max(0, made - allowed), self.term_key: term})
