"""Scoring services the envs call: the answer judge, SSP's rule filters for proposed questions, the RAG
verifier and its offline extractive reader, and the outcome rewards built from them.

Importing is light; the names load on first access.
"""

from ..core.moved import lazy_getattr

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

__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = list(_LAZY)
