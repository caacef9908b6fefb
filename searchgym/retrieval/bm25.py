"""BM25 retrieval: :class:`BM25Retriever` (bm25s index, sparse batched scoring) and the
:class:`RankBM25Retriever` baseline (``rank_bm25.BM25Okapi``), both with the same analysis.

How :class:`BM25Retriever` is fast: bm25s precomputes every (term, document) BM25 contribution
into a sparse term × document matrix at index time (the "eager" scoring of the bm25s paper).
A batch of queries becomes a sparse query × term count matrix, and one sparse matrix product
gives every query's scores over just the documents that share a term with it; top-k is then a
partial sort of those candidates. A single query (and each query of a batch of at most
``_SMALL_BATCH``) skips scipy altogether: its terms' posting lists are read straight from the
matrix arrays and added, term by term in ascending term id, into a per-thread float32 accumulator
over the documents (allocated once, reset on the touched entries only). That adds the same
contributions in the same order as the sparse product, so scores -- and therefore top-k and its
tie order (higher score first, then lower document row) -- are identical. Beyond that accumulator
nothing is allocated per document of the corpus at query time, so latency follows the query's posting-list lengths,
not the corpus size. The
scores are exactly bm25s's (same matrix; repeated query terms count repeatedly, as in bm25s).

Only documents that share at least one term with the query are returned: an empty, stopword-only
or out-of-vocabulary query gives ``[]`` and ``k`` larger than the corpus gives every match.
Ties are broken by document order, so results are deterministic.
"""

from __future__ import annotations

import logging
import numbers
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import numpy as np

from ..core.arg_checks import check_count
from ..core.renamed import renamed_kwargs
from ..errors import InvalidArgumentError
from .analyzer import Analyzer
from .base import DEFAULT_TOP_K, Hit
from .bm25_checks import bm25_array_problems
from .bm25s_import import import_bm25s
from .corpus import CorpusRetriever, check_queries, top_k_rows
from .storage import IndexFormatError, index_error, read_docs, read_manifest, verify_files

logger = logging.getLogger(__name__)

__all__ = ["BM25Retriever", "RankBM25Retriever", "BM25_METHODS"]

# BM25 variants whose matrix holds the whole score (bm25l / bm25+ add a per-query constant to
# every document, which would defeat sparse scoring and return non-matching documents).
BM25_METHODS = ("lucene", "robertson", "atire")
# The files bm25s writes into an index's bm25s/ directory (checksummed in the manifest).
_BM25S_FILES = tuple(
    f"bm25s/{name}"
    for name in (
        "data.csc.index.npy",
        "indices.csc.index.npy",
        "indptr.csc.index.npy",
        "vocab.index.json",
        "params.index.json",
    )
)
# Upper bound on candidate (query, document) pairs scored in one sparse product (~64 MiB).
_MAX_PAIRS_PER_CHUNK = 8_000_000
# Batches up to this size score query by query on the posting arrays (no sparse constructors).
_SMALL_BATCH = 8


def _check_params(k1: float, b: float) -> None:
    """Refuse BM25 parameters outside their range; NaN (which passes every ``x < 0`` test and would be saved into
    the manifest as invalid JSON) and infinity included."""
    numbers_given = all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in (k1, b))
    if not (numbers_given and 0 <= k1 < float("inf") and 0 <= b <= 1):
        raise InvalidArgumentError(
            f"need a finite k1 >= 0 and 0 <= b <= 1, got k1={k1!r}, b={b!r}; give --k1/--b in range"
        )


def _dependency_bars(progress: bool) -> bool:
    """Whether bm25s may draw its own ``tqdm`` bars: with ``progress`` and INFO logging on (``searchgym -v``) only.
    searchgym's own progress line (the analysis pass) already covers indexing; bm25s's bars would otherwise
    reach stderr on every ``searchgym index build``."""
    return progress and logger.isEnabledFor(logging.INFO)


def _bm25s():
    """Import bm25s without letting it start JAX on a GPU (see :mod:`.bm25s_import`)."""
    return import_bm25s()


class BM25Retriever(CorpusRetriever):
    """Okapi BM25 over a corpus, indexed with bm25s.

    ``k1``/``b``: the usual BM25 parameters; ``method``: bm25s scoring variant (one of
    :data:`BM25_METHODS`, default ``"lucene"``). ``stopwords``/``stemmer``: see
    :class:`~searchgym.retrieval.analyzer.Analyzer`. ``threads`` (``n_threads`` before): threads that
    score chunks of a large batch in parallel (scipy's sparse product releases the GIL); ``0``/``1`` = inline.
    ``progress``: a progress line while the corpus is analysed (and bm25s's own bars when INFO logging is on).
    """

    backend = "bm25"

    @renamed_kwargs(n_threads="threads")
    def __init__(
        self,
        doc_ids: Sequence[str],
        titles: Sequence[str],
        texts: Sequence[str],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        index_titles: bool = True,
        stopwords: str | Sequence[str] | None = "en",
        stemmer: str | None = "english",
        threads: int = 0,
        progress: bool = False,
    ) -> None:
        super().__init__(doc_ids, titles, texts, index_titles=index_titles)
        if method not in BM25_METHODS:
            raise InvalidArgumentError(f"unsupported BM25 method {method!r}; choose one of {BM25_METHODS}")
        _check_params(k1, b)
        bm25s = _bm25s()

        analyzer = Analyzer(stopwords=stopwords, stemmer=stemmer)
        ids, vocab = analyzer.corpus_ids(self.indexed_texts(), total=self.num_docs, progress=progress)
        if not vocab:
            raise InvalidArgumentError("the corpus has no indexable words (every document is empty or stopwords only)")
        model = bm25s.BM25(k1=k1, b=b, method=method, backend="numpy", csc_backend="scipy")
        model.index((ids, vocab), create_empty_token=False, show_progress=_dependency_bars(progress))
        del ids
        self._attach(model, analyzer, threads)

    # ----------------------------------------------------------------- set-up
    def _attach(self, model, analyzer: Analyzer, threads: int) -> None:
        import scipy.sparse as sp

        threads = check_count("threads", threads, least=0, hint="0: one per core")
        self._model = model
        self._analyzer = analyzer
        self._vocab: dict[str, int] = model.vocab_dict
        self.threads = int(threads)
        s = model.scores
        indptr = np.asarray(s["indptr"])
        # posting-list length of every term, for sizing chunks (computed once, not per batch)
        self._term_lengths = np.diff(indptr)
        # bm25s stores a (docs x terms) CSC matrix; the same arrays read as CSR are terms x docs.
        self._matrix = sp.csr_matrix(
            (s["data"], s["indices"], s["indptr"]), shape=(len(indptr) - 1, int(s["num_docs"])), copy=False
        )
        self.k1, self.b, self.method = model.k1, model.b, model.method

    @property
    def vocab_size(self) -> int:
        """Number of distinct (stemmed) terms in the index."""
        return len(self._vocab)

    def params(self) -> dict:
        """The settings recorded in a saved index's manifest."""
        return {
            "k1": self.k1,
            "b": self.b,
            "method": self.method,
            "index_titles": self.index_titles,
            "analyzer": self._analyzer.config(),
            "vocab_size": self.vocab_size,
            "nnz": int(self._matrix.nnz),
        }

    # ----------------------------------------------------------------- search
    def query_terms(self, query: str) -> list[int]:
        """Vocabulary ids of the query's terms (unknown terms dropped, repeats kept)."""
        vocab = self._vocab
        return [vocab[t] for t in self._analyzer.terms(query) if t in vocab]

    def _score_one(self, terms: list[int], k: int) -> list[Hit]:
        """Top-``k`` of one query from its posting lists alone (see the module docstring)."""
        if not terms:
            return []
        m = self._matrix
        ptr, data, indices = m.indptr, m.data, m.indices
        counts = Counter(terms)
        uniq = sorted(counts)  # ascending term id, the sparse product's order
        if len(uniq) == 1:
            t = uniq[0]
            rows, scores = indices[ptr[t] : ptr[t + 1]], data[ptr[t] : ptr[t + 1]]
            if counts[t] != 1:
                scores = scores * data.dtype.type(counts[t])
        else:
            acc = self._scratch()
            postings = []
            for t in uniq:  # term by term: left-to-right float32 sums per document
                rows_t = indices[ptr[t] : ptr[t + 1]].astype(np.intp)  # index once, not once per fancy op
                vals = data[ptr[t] : ptr[t + 1]]
                acc[rows_t] += vals if counts[t] == 1 else vals * data.dtype.type(counts[t])
                postings.append(rows_t)
            rows = np.concatenate(postings)  # a document appears once per query term it holds
            scores = acc[rows]
            acc[rows] = 0
            # Keep the entries scoring at least the (k * terms)-th best: every document of the top k
            # (and every document tied with the k-th) survives, as each has at most `terms` entries.
            want = k * len(uniq)
            if len(rows) > want:
                cut = np.partition(scores, len(rows) - want)[len(rows) - want]
                sel = scores >= cut
                rows, scores = rows[sel], scores[sel]
            if len(rows) <= 64:  # few survivors: de-duplicate and order them in Python
                best = sorted({(-v, r) for r, v in zip(rows.tolist(), scores.tolist()) if v != 0})[:k]
                return [self.hit(r, -v) for v, r in best]
            rows, first = np.unique(rows, return_index=True)
            scores = scores[first]
            keep = scores != 0  # the sparse product drops zero sums; so does this path
            if not keep.all():
                rows, scores = rows[keep], scores[keep]
        if len(rows) == 0:
            return []
        rows, scores = top_k_rows(rows, scores, k)
        return [self.hit(int(i), float(v)) for i, v in zip(rows, scores)]

    def _scratch(self):
        """This thread's per-document score accumulator (all zero between queries)."""
        local = self.__dict__.setdefault("_local", threading.local())
        if getattr(local, "acc", None) is None:
            local.acc = np.zeros(self._matrix.shape[1], dtype=self._matrix.data.dtype)
        return local.acc

    def _score_chunk(self, term_lists: list[list[int]], k: int) -> list[list[Hit]]:
        import scipy.sparse as sp

        ptr = np.zeros(len(term_lists) + 1, dtype=np.int64)
        np.cumsum([len(t) for t in term_lists], out=ptr[1:])
        cols = np.fromiter((c for t in term_lists for c in t), dtype=np.int64, count=int(ptr[-1]))
        q = sp.csr_matrix(
            (np.ones(len(cols), dtype=self._matrix.dtype), cols, ptr), shape=(len(term_lists), self._matrix.shape[0])
        )
        q.sum_duplicates()  # a repeated term counts twice, as in bm25s
        s = (q @ self._matrix).tocsr()
        out: list[list[Hit]] = []
        for r in range(len(term_lists)):
            lo, hi = s.indptr[r], s.indptr[r + 1]
            if lo == hi:
                out.append([])
                continue
            rows, scores = top_k_rows(s.indices[lo:hi], s.data[lo:hi], k)
            out.append([self.hit(int(i), float(v)) for i, v in zip(rows, scores)])
        return out

    def _chunks(self, term_lists: list[list[int]]) -> list[tuple[int, int]]:
        """Split a batch so no sparse product holds more than ~_MAX_PAIRS_PER_CHUNK candidates and
        each of the ``threads`` threads gets a share."""
        lengths = self._term_lengths
        per_thread = -(-len(term_lists) // max(1, self.threads))
        spans, start, pairs = [], 0, 0
        for i, terms in enumerate(term_lists):
            cost = int(lengths[terms].sum()) if terms else 0
            if i > start and (pairs + cost > _MAX_PAIRS_PER_CHUNK or i - start >= per_thread):
                spans.append((start, i))
                start, pairs = i, 0
            pairs += cost
        spans.append((start, len(term_lists)))
        return spans

    def batch_search(self, queries: Sequence[str], k: int = DEFAULT_TOP_K) -> list[list[Hit]]:
        """Top-``k`` hits for every query, scored together in sparse matrix products."""
        qs = check_queries(queries, k)
        if not qs:
            return []
        term_lists = [self.query_terms(q) for q in qs]
        if len(term_lists) <= _SMALL_BATCH:
            return [self._score_one(terms, k) for terms in term_lists]
        spans = self._chunks(term_lists)
        if self.threads > 1 and len(spans) > 1:
            with ThreadPoolExecutor(max_workers=self.threads) as pool:
                parts = list(pool.map(lambda sp_: self._score_chunk(term_lists[sp_[0] : sp_[1]], k), spans))
        else:
            parts = [self._score_chunk(term_lists[a:b], k) for a, b in spans]
        return [hits for part in parts for hits in part]

    # ------------------------------------------------------------ persistence
    def _save_files(self, d) -> list[str]:
        """The bm25s arrays, in ``bm25s/`` beside the documents (see :meth:`save`); their checksums
        go into the manifest."""
        self._model.save(str(d / "bm25s"), show_progress=False)
        return list(_BM25S_FILES)

    @classmethod
    @renamed_kwargs(n_threads="threads")
    def load(cls, path, *, mmap: bool = False, threads: int = 0) -> "BM25Retriever":
        """Load an index written by :meth:`save`; ``mmap`` maps the score arrays instead of reading them.

        Raises :class:`~searchgym.retrieval.storage.IndexFormatError` naming the problem (and
        the rebuild command) if the directory is missing, partial, corrupt or of another backend:
        the bm25s files must match the manifest's checksums, and the arrays are checked for
        shape, range and finiteness (:func:`~searchgym.retrieval.bm25_checks.bm25_array_problems`)
        before any search can touch them.
        """
        bm25s = _bm25s()

        d = Path(path)
        manifest = read_manifest(d, cls.backend)
        params = manifest["params"]
        ids, titles, texts = read_docs(d, manifest)
        verify_files(d, manifest, _BM25S_FILES)
        try:
            model = bm25s.BM25.load(str(d / "bm25s"), mmap=mmap, show_progress=False)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError) as exc:
            raise index_error(d, f"bm25s arrays are unreadable ({exc})") from None
        problems = bm25_array_problems(model.scores, model.vocab_dict, manifest)
        if model.method != params.get("method", model.method) or model.method not in BM25_METHODS:
            problems.append(f"bm25s method {model.method!r} does not match the manifest's {params.get('method')!r}")
        if problems:
            raise index_error(d, "; ".join(problems))
        try:
            analyzer = Analyzer.from_config(params["analyzer"])
        except (KeyError, ValueError) as exc:
            raise index_error(d, f"bad analyzer settings ({exc})") from None
        obj = cls.__new__(cls)
        CorpusRetriever.__init__(obj, ids, titles, texts, index_titles=params.get("index_titles", True))
        obj._attach(model, analyzer, threads)
        return obj


class RankBM25Retriever(CorpusRetriever):
    """Baseline: ``rank_bm25.BM25Okapi`` (pure Python scoring) with the same analysis as
    :class:`BM25Retriever`, so both rank comparably. Slow on large corpora; kept for comparison
    and the benchmark. Returns only documents sharing a term with the query, like BM25Retriever.
    """

    backend = "rank-bm25"

    def __init__(
        self,
        doc_ids: Sequence[str],
        titles: Sequence[str],
        texts: Sequence[str],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        index_titles: bool = True,
        stopwords: str | Sequence[str] | None = "en",
        stemmer: str | None = "english",
        progress: bool = False,
    ) -> None:
        super().__init__(doc_ids, titles, texts, index_titles=index_titles)
        _check_params(k1, b)
        from rank_bm25 import BM25Okapi

        self._analyzer = Analyzer(stopwords=stopwords, stemmer=stemmer)
        self.k1, self.b = k1, b
        ids, vocab = self._analyzer.corpus_ids(self.indexed_texts(), total=self.num_docs, progress=progress)
        if not vocab:
            raise InvalidArgumentError("the corpus has no indexable words (every document is empty or stopwords only)")
        terms = list(vocab)
        # rank_bm25 divides by zero on an empty document: give empty ones a placeholder token
        # that no query can produce (the analyzer never emits whitespace).
        self._bm25 = BM25Okapi([[terms[i] for i in doc] or [" "] for doc in ids], k1=k1, b=b)
        # Which documents contain each term: Okapi's IDF is 0 for a term in half the documents,
        # so "score > 0" would not tell matching documents apart.
        postings: list[list[int]] = [[] for _ in terms]
        for row, doc in enumerate(ids):
            for t in set(doc):
                postings[t].append(row)
        self._vocab = vocab
        self._postings = [np.asarray(p, dtype=np.int64) for p in postings]

    def params(self) -> dict:
        """The settings recorded in a saved index's manifest."""
        return {"k1": self.k1, "b": self.b, "index_titles": self.index_titles, "analyzer": self._analyzer.config()}

    @classmethod
    def load(cls, path) -> "RankBM25Retriever":
        """Rebuild a retriever saved with :meth:`save` (raises IndexFormatError on a bad directory)."""
        d = Path(path)
        manifest = read_manifest(d, cls.backend)
        p = manifest["params"]
        ids, titles, texts = read_docs(d, manifest)
        cfg = p.get("analyzer", {})
        try:
            return cls(
                ids,
                titles,
                texts,
                k1=p["k1"],
                b=p["b"],
                index_titles=p.get("index_titles", True),
                stopwords=cfg["stopwords"],
                stemmer=cfg["stemmer"],
            )
        except KeyError as exc:
            raise IndexFormatError(
                f"index directory {str(d)!r}: manifest.json lacks setting {exc}; "
                f"rebuild it with RankBM25Retriever(...).save({str(d)!r})"
            ) from None

    def batch_search(self, queries: Sequence[str], k: int = DEFAULT_TOP_K) -> list[list[Hit]]:
        """Top-``k`` hits per query (one full pass over the corpus per query)."""
        qs = check_queries(queries, k)
        out: list[list[Hit]] = []
        for q in qs:
            terms = [t for t in self._analyzer.terms(q) if t in self._vocab]
            if not terms:
                out.append([])
                continue
            scores = np.asarray(self._bm25.get_scores(terms))
            rows = np.unique(np.concatenate([self._postings[self._vocab[t]] for t in terms]))
            rows, vals = top_k_rows(rows, scores[rows], k)
            out.append([self.hit(int(i), float(v)) for i, v in zip(rows, vals)])
        return out
