"""Tasks: where questions come from. Task sources for the envs (subgraphs, JSONL, lists), the built-in
benchmark with its train / held-out answer split and held-out wordings, and the QA sets an evaluation loads.

Importing is light; the names load on first access.
"""

from ..core.moved import lazy_getattr

_LAZY = {
    "TaskSource": "sources",
    "SubgraphTaskSource": "sources",
    "JsonlTaskSource": "sources",
    "ListTaskSource": "sources",
    "TaskFormatError": "sources",
    "task_from_subgraph": "sources",
    "hop_tasks": "heldout",
    "TaskSet": "tasksets",
    "DatasetFormatError": "tasksets",
    "load_tasksets": "tasksets",
    "load_flashrag_jsonl": "tasksets",
    "load_searchr1_parquet": "tasksets",
}

__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = list(_LAZY)
