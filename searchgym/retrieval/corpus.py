"""Common ground of the in-process retrievers: the document table, argument checks and hit building."""

from __future__ import annotations

from typing import Sequence

from ..errors import InvalidArgumentError, InvalidTypeError
from .base import DEFAULT_TOP_K, Hit, Retriever
from .storage import begin_save, hash_files, write_docs, write_manifest

__all__ = ["CorpusRetriever", "check_queries", "top_k_rows"]


def check_queries(queries: Sequence[str], k: int) -> list[str]:
    """Validate a batch call's arguments; returns the queries as a list.

    A bare string is rejected (it would be searched character by character), as are non-string
    queries and ``k < 1``.
    """
    if isinstance(queries, (str, bytes)):
        raise InvalidTypeError(
            "batch_search takes a list of queries, not one string; use search(query) for a single query"
        )
    qs = list(queries)
    for i, q in enumerate(qs):
        if not isinstance(q, str):
            raise InvalidTypeError(f"query {i} is {type(q).__name__}, expected str")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidArgumentError(f"k must be a positive integer, got {k!r}")
    return qs


class CorpusRetriever(Retriever):
    """A retriever over an in-memory document table ``(doc_ids, titles, texts)``.

    ``index_titles``: index ``"title\\ntext"`` rather than the body alone, so a query naming an
    entity finds its article even when the body never repeats the name.
    """

    backend = "corpus"

    def __init__(
        self, doc_ids: Sequence[str], titles: Sequence[str], texts: Sequence[str], *, index_titles: bool = True
    ) -> None:
        if not (len(doc_ids) == len(titles) == len(texts)):
            raise InvalidArgumentError(
                f"doc_ids, titles and texts must have the same length (got {len(doc_ids)}, {len(titles)}, {len(texts)})"
            )
        if len(doc_ids) == 0:
            raise InvalidArgumentError("cannot index an empty corpus: pass at least one document")
        self.doc_ids = list(doc_ids)
        self.titles = list(titles)
        self.texts = list(texts)
        self.index_titles = bool(index_titles)

    @classmethod
    def from_world(cls, world, *, index_titles: bool = True, **kwargs):
        """Index every document of a :class:`~searchgym.world.World` (title + text by default)."""
        return cls(world.doc_ids, world.doc_titles, world.doc_texts, index_titles=index_titles, **kwargs)

    @property
    def num_docs(self) -> int:
        """Number of indexed documents."""
        return len(self.doc_ids)

    def indexed_texts(self):
        """The strings actually indexed, in document order (a generator: large corpora stay lazy)."""
        if self.index_titles:
            return (f"{t}\n{x}" for t, x in zip(self.titles, self.texts))
        return iter(self.texts)

    def hit(self, row: int, score: float) -> Hit:
        """The :class:`Hit` for document row ``row``."""
        return Hit(self.doc_ids[row], self.titles[row], self.texts[row], float(score))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_docs={self.num_docs})"

    def params(self) -> dict:
        """The settings recorded in a saved index's manifest."""
        raise NotImplementedError

    def save(self, path) -> None:
        """Write the index to directory ``path``: documents, backend files (:meth:`_save_files`), then
        the manifest last, so an interrupted save never loads (see :mod:`~searchgym.retrieval.storage`)."""
        d = begin_save(path)
        sha = write_docs(d, self.doc_ids, self.titles, self.texts)
        files = self._save_files(d) or ()
        write_manifest(d, self.backend, self.num_docs, sha, self.params(), hash_files(d, files))

    def _save_files(self, d) -> Sequence[str] | None:
        """Write the backend's own files into directory ``d`` (none by default); returns the paths
        (relative to ``d``) whose checksums the manifest should record."""
        return None

    def search(self, query: str, k: int = DEFAULT_TOP_K) -> list[Hit]:
        """Top-``k`` hits for one query, best first."""
        if not isinstance(query, str):
            raise InvalidTypeError(f"query is {type(query).__name__}, expected str")
        return self.batch_search([query], k)[0]


def top_k_rows(rows, scores, k: int):
    """The ``k`` best ``(rows, scores)`` pairs, best first; ties broken by lower row (document order).

    Works on numpy arrays of candidate rows and their scores; selection is ``O(n)`` via
    :func:`numpy.partition`, then only the survivors (plus ties at the cut) are sorted.
    """
    import numpy as np

    n = len(scores)
    if n > k:
        kth = np.partition(scores, n - k)[n - k]
        keep = scores >= kth
        rows, scores = rows[keep], scores[keep]
    order = np.lexsort((rows, -scores))[:k]
    return rows[order], scores[order]
