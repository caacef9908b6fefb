"""Passage-level retrieval: split each document into short passages that keep their article's title.

Search-R1 and FlashRAG retrieve 100-word passages of Wikipedia, each with its article's title, not
whole articles. Short passages keep observations small (what a small model can read, and what
CPU training can afford) while the title keeps pronoun-only sentences findable ("He was educated
at …" under the title "Hourem Trisova"). :func:`split_passages` does the splitting (text only: this
module sits below the retrievers); :func:`searchgym.retrieval.factory.passage_retriever` indexes the
passages with any in-process backend, through the retriever factory's per-world cache.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..core.arg_checks import check_count
from ..core.moved import moved_getattr

__all__ = ["split_passages"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def split_passages(
    doc_ids: Sequence[str], titles: Sequence[str], texts: Sequence[str], *, sentences: int = 2
) -> tuple[list[str], list[str], list[str]]:
    """``(ids, titles, texts)`` of passages of ``sentences`` consecutive sentences per document.

    Passage ``j`` of document ``d`` has id ``"d#j"`` and ``d``'s title; a document with no sentence
    boundary is one passage.
    """
    sentences = check_count("sentences", sentences, hint="sentences per passage")
    ids, out_titles, out_texts = [], [], []
    for doc_id, title, text in zip(doc_ids, titles, texts):
        parts = [p for p in _SENTENCE_END.split(text.strip()) if p]
        for j in range(0, max(len(parts), 1), sentences):
            ids.append(f"{doc_id}#{j // sentences}")
            out_titles.append(title)
            out_texts.append(" ".join(parts[j : j + sentences]))
    return ids, out_titles, out_texts


__getattr__ = moved_getattr(__name__)  # passage_retriever moved to searchgym.retrieval.factory
