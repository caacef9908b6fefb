"""Building self-play tasks from a world: subgraph extraction, filters, curriculum.

Light to import: matplotlib/networkx are imported only by the plotting functions.
"""

from ..core.subgraph import Branch, Subgraph, SubgraphEdge, SubgraphNode
from .curriculum import ORDERS, SubgraphPool, interleave_by_hops, order_pool
from .extract import (
    DEFAULT_RELATION_BLOCKLIST,
    REJECTION_REASONS,
    ExtractionConfig,
    Rejected,
    SelectorUnavailable,
    eligible_seeds,
    extract_subgraph,
)
from .plot import plot_subgraph
from .pool import PoolFormatError, PoolResult, build_pool, load_pool, rejections_path
from .selectors import (
    Candidate,
    HeuristicSelector,
    LLMSelector,
    LLMSelectorConfig,
    SelectionContext,
    Selector,
    SelectorError,
    parse_selector_reply,
)
from .stats import format_stats, plot_stats, pool_stats

__all__ = [
    "Branch",
    "Subgraph",
    "SubgraphEdge",
    "SubgraphNode",
    "ExtractionConfig",
    "Rejected",
    "REJECTION_REASONS",
    "SelectorUnavailable",
    "DEFAULT_RELATION_BLOCKLIST",
    "extract_subgraph",
    "eligible_seeds",
    "Candidate",
    "SelectionContext",
    "Selector",
    "SelectorError",
    "HeuristicSelector",
    "LLMSelector",
    "LLMSelectorConfig",
    "parse_selector_reply",
    "PoolResult",
    "PoolFormatError",
    "build_pool",
    "load_pool",
    "rejections_path",
    "ORDERS",
    "order_pool",
    "interleave_by_hops",
    "SubgraphPool",
    "pool_stats",
    "format_stats",
    "plot_stats",
    "plot_subgraph",
]
