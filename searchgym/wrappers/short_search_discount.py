"""A discount on a Solver's reward for searching fewer times than the question has hops (docs/rewards.md).

::

    p  = max(0, 1 − γ^(i − t))        the extra-search discount's charge, read the other way round
    R' = R − α · p · max(R, 0)        α = 0.5, γ = 0.9

t = searches the rollout made, i = the task's gold hop count. A rollout that searched at least as many times as
the question has hops keeps its reward; one search short keeps 95 % of it, two short 90.5 %, never less than 1 − α.

Why: on the CPU self-play benchmark the Solvers drifted from about 2.0 to 1.65 searches a game over 32 steps
(every seed of the stacked-adapter runs) and held-out 2-hop questions were lost in every seed
(docs/selfplay_runs.md). Under the binary reward and WCR a right answer guessed after one search on a 2-hop
question earns what a right answer found hop by hop does, so nothing held the Solver to the path. Under a
group-normalised advantage the discount decides a group whose rollouts are all right (the hop-by-hop ones rank
above the short ones) and barely moves a group that right and wrong answers already split. Like
:class:`~searchgym.wrappers.ExtraSearchDiscount` it is multiplicative on the positive part, so a rollout with
reward 0 is untouched and no valid rollout falls below an invalid one. Measured on that benchmark (each seed
against its run without; docs/rewards.md has the figures): it held the Solvers' searches in one stacked-adapter seed
of two and in three of the four anchor-0.5 filter seeds run with it (a held-out 2-hop question lost in one of the
four, against three of four without), trimmed or removed their held-out losses, and did not stop the Proposer's own
drift to short searches; in three of those four seeds the Proposer gained less than without it (the mean +6.5 points
against +10.2), in none more. A searchgym addition, not a paper's reward: stack it
outermost (``wcr,short_search_discount``; with the other charge, ``wcr,search_discount,short_search_discount``);
proposer events are untouched.
"""

from __future__ import annotations

from .extra_search_discount import ExtraSearchDiscount, extra_search_discount


def short_search_discount(reward: float, searches: int, hops: int, alpha: float = 0.5, gamma: float = 0.9) -> float:
    """The term added to ``reward`` (≤ 0): ``−α · max(0, 1 − γ^(hops − searches)) · max(reward, 0)``."""
    return extra_search_discount(reward, hops, searches, alpha, gamma)


class ShortSearchDiscount(ExtraSearchDiscount):
    """Discounts each Solver event's reward by ``α·max(0, 1 − γ^(i − t))`` of its positive part.

    Components written per solver event: ``missing_searches`` (``max(0, i − t)``) and ``short_search_discount``
    (the term added, ≤ 0). Tasks without a hop count raise :class:`~searchgym.wrappers.MissingTaskDataError` at reset.
    """

    name = "short_search_discount"
    count_key = "missing_searches"
    term_key = "short_search_discount"

    @staticmethod
    def counted(searches: int, hops: int) -> tuple[int, int]:
        """The hops are charged against the searches made: ``(i, t)``."""
        return hops, searches
