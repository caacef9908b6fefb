"""The retriever interface every backend implements, and the Search-R1 observation format."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Sequence

from ..errors import InvalidArgumentError

DEFAULT_TOP_K = 3  # SSP and the WCR paper retrieve the top 3 documents


@dataclass(frozen=True)
class Hit:
    """One retrieved document with its score (higher is better)."""

    doc_id: str
    title: str
    text: str
    score: float


class Retriever(ABC):
    """Top-k document search over a corpus.

    Subclasses implement :meth:`batch_search`; :meth:`search` is the single-query convenience.
    Retrievers are safe to call from several threads once built.
    """

    @abstractmethod
    def batch_search(self, queries: Sequence[str], k: int = DEFAULT_TOP_K) -> list[list[Hit]]:
        """Top-``k`` hits for each query, best first."""

    def search(self, query: str, k: int = DEFAULT_TOP_K) -> list[Hit]:
        """Top-``k`` hits for one query, best first."""
        return self.batch_search([query], k)[0]

    def close(self) -> None:
        """Release resources (connections, memory maps); idempotent."""


LAYOUTS = ("searchgym", "search-r1")  # observation layouts: ours, and Search-R1's byte for byte


def check_layout(layout: str) -> str:
    """``layout`` if it is one of :data:`LAYOUTS`, else a ValueError listing them."""
    if layout not in LAYOUTS:
        raise InvalidArgumentError(f"unknown observation layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    return layout


def format_hits(hits: Sequence[Hit], *, max_chars: int | None = None, layout: str = "searchgym") -> str:
    """Observation text of a search, one document per line.

    ``layout="searchgym"`` (SSP): ``Doc {i} (Title: "{title}") {text}`` with the text's whitespace
    collapsed. ``layout="search-r1"``: exactly Search-R1's ``_passages2string`` over wiki-18
    contents (``Doc {i}(Title: "{title}") {text}``, text as stored). ``max_chars`` caps each
    document's text (an ellipsis marks the cut) so one long article cannot flood the context.
    """
    check_layout(layout)
    lines = []
    for i, h in enumerate(hits, 1):
        text = " ".join(h.text.split()) if layout == "searchgym" else h.text
        if max_chars is not None and len(text) > max_chars:
            text = text[: max(0, max_chars - 3)].rstrip() + "..."
        lines.append(
            f'Doc {i} (Title: "{h.title}") {text}' if layout == "searchgym" else f'Doc {i}(Title: "{h.title}") {text}'
        )
    return "\n".join(lines)
