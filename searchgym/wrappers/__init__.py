"""Reward-shaping wrappers and the pure reward functions behind them.

``from searchgym.wrappers import WaypointCoverageReward`` — see docs/wrappers.md. Wrappers stack:
``Outer(Inner(env))`` applies Inner first; reward-replacing wrappers (DynaSearcher, EVE) go innermost and
:class:`RecordGames` (the export) outermost.
"""

from ..core.moved import moved_getattr
from .base import MissingTaskDataError, RewardShapingWrapper, event_trajectory, solver_groups
from .diagnostics import compute_diagnostics, information_utilisation, plot_diagnostics, search_turns
from .dynasearcher_reward import (
    DynaSearcherReward,
    accuracy_reward,
    answer_score,
    dynasearcher_reward,
    recall_reward,
    retrieval_penalty,
    trajectory_dynasearcher_reward,
)
from .evidence_verifier_reward import (
    EvidenceVerifierReward,
    brevity_bonus,
    difficulty_reward,
    eve_proposer_reward,
    eve_solver_reward,
    evidence_is_verbatim,
    evidence_verifier_score,
    format_score,
    solver_evidence_text,
)
from .extra_search_discount import ExtraSearchDiscount, extra_search_discount
from .graph_distance_reward import (
    EntityLinker,
    GDCRTracker,
    GraphDistanceReward,
    answer_distances,
    contribution,
    gdcr_step_rewards,
)
from .recording import RecordGames
from .registry import available_rewards, get_reward, wrap_rewards
from .short_search_discount import ShortSearchDiscount, short_search_discount
from .waypoint_coverage_reward import (
    WaypointCoverageReward,
    WaypointMatcher,
    get_matcher,
    normalised_coverages,
    trajectory_coverage,
    waypoint_coverage,
    wcr_group_rewards,
    wcr_group_terms,
    wcr_rewards,
)

__all__ = [
    "available_rewards",
    "get_reward",
    "wrap_rewards",
    "RecordGames",
    "MissingTaskDataError",
    "RewardShapingWrapper",
    "event_trajectory",
    "solver_groups",
    "compute_diagnostics",
    "information_utilisation",
    "plot_diagnostics",
    "search_turns",
    "DynaSearcherReward",
    "accuracy_reward",
    "answer_score",
    "dynasearcher_reward",
    "recall_reward",
    "retrieval_penalty",
    "trajectory_dynasearcher_reward",
    "ExtraSearchDiscount",
    "extra_search_discount",
    "ShortSearchDiscount",
    "short_search_discount",
    "EvidenceVerifierReward",
    "brevity_bonus",
    "difficulty_reward",
    "eve_proposer_reward",
    "eve_solver_reward",
    "evidence_is_verbatim",
    "evidence_verifier_score",
    "format_score",
    "solver_evidence_text",
    "EntityLinker",
    "GDCRTracker",
    "GraphDistanceReward",
    "answer_distances",
    "contribution",
    "gdcr_step_rewards",
    "WaypointCoverageReward",
    "WaypointMatcher",
    "get_matcher",
    "normalised_coverages",
    "trajectory_coverage",
    "waypoint_coverage",
    "wcr_group_rewards",
    "wcr_group_terms",
    "wcr_rewards",
]

__getattr__ = moved_getattr(__name__)
