"""Scoring services the envs call: the answer judge, SSP's rule filters for proposed questions, the RAG
verifier and its offline extractive reader, and the outcome rewards built from them.

Importing is light; the names load on first access.
"""

from importlib import import_module

from ..core.moved import moved_getattr

_LAZY = {
    "ExactMatchJudge": "judge",
    "LLMJudge": "judge",
    "FilterConfig": "question_filters",
    "check_question": "question_filters",
    "RAGVerifier": "rag_verifier",
    "LLMReader": "rag_verifier",
    "ExtractiveReader": "extractive_reader",
    "score_solver": "outcomes",
    "validate_question": "outcomes",
    "reward_event": "outcomes",
}
_moved = moved_getattr(__name__)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    return _moved(name)


__all__ = list(_LAZY)
