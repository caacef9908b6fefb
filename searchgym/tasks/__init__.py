"""Tasks: where questions come from. Task sources for the envs (subgraphs, JSONL, lists), the built-in
benchmark with its train / held-out answer split and held-out wordings, and the QA sets an evaluation loads.

Importing is light; the names load on first access.
"""

from importlib import import_module

from ..core.moved import moved_getattr

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
_moved = moved_getattr(__name__)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    return _moved(name)


__all__ = list(_LAZY)
