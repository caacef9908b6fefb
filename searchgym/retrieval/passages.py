"""Passage-level retrieval: split each document into short passages that keep their article's title.

Search-R1 and FlashRAG retrieve 100-word passages of Wikipedia, each with its article's title, not
whole articles. Short passages keep observations small (what a small model can read, and what
CPU training can afford) while the title keeps pronoun-only sentences findable ("He was educated
at …" under the title "Hourem Trisova"). :func:`split_passages` does the splitting;
:func:`passage_retriever` indexes the passages with any in-process backend, through the retriever
factory's per-world cache.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..errors import InvalidArgumentError
from .base import Retriever

__all__ = ["split_passages", "passage_retriever"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def split_passages(
    doc_ids: Sequence[str], titles: Sequence[str], texts: Sequence[str], *, sentences: int = 2
) -> tuple[list[str], list[str], list[str]]:
    """``(ids, titles, texts)`` of passages of ``sentences`` consecutive sentences per document.

    Passage ``j`` of document ``d`` has id ``"d#j"`` and ``d``'s title; a document with no sentence
    boundary is one passage.
    """
    if sentences < 1:
        raise InvalidArgumentError(f"sentences must be >= 1, got {sentences}")
    ids, out_titles, out_texts = [], [], []
    for doc_id, title, text in zip(doc_ids, titles, texts):
        parts = [p for p in _SENTENCE_END.split(text.strip()) if p]
        for j in range(0, max(len(parts), 1), sentences):
            ids.append(f"{doc_id}#{j // sentences}")
            out_titles.append(title)
            out_texts.append(" ".join(parts[j : j + sentences]))
    return ids, out_titles, out_texts


def passage_retriever(world, *, sentences: int = 2, backend: str = "bm25", **kwargs) -> Retriever:
    """A retriever over ``world``'s documents split into passages of ``sentences`` sentences, built
    once per world and settings (:func:`~searchgym.retrieval.factory.make_retriever`'s cache).

    ``backend``: ``"bm25"`` (default), ``"rank-bm25"`` or ``"dense"``; ``kwargs`` go to its
    constructor. Titles are indexed with each passage.
    """
    from .factory import make_retriever

    if backend not in ("bm25", "rank-bm25", "dense"):
        raise InvalidArgumentError(f"unknown passage retrieval backend {backend!r}; choose bm25, rank-bm25 or dense")
    return make_retriever(world, backend, passage_sentences=sentences, **kwargs)
