"""Build or load a retriever by backend name: what envs and the CLI call."""

from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidArgumentError
from ..world.shared import share
from .base import Retriever
from .passages import split_passages

if TYPE_CHECKING:
    from .corpus import CorpusRetriever

__all__ = ["BACKENDS", "make_retriever", "build_retriever", "retriever_class", "load_index", "passage_retriever"]

BACKENDS = ("bm25", "rank-bm25", "dense", "remote")

_cache: "weakref.WeakKeyDictionary[object, dict]" = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


def retriever_class(backend: str) -> type[CorpusRetriever]:
    """The in-process retriever class of ``backend`` (``bm25``, ``rank-bm25`` or ``dense``)."""
    if backend == "bm25":
        from .bm25 import BM25Retriever

        return BM25Retriever
    if backend == "rank-bm25":
        from .bm25 import RankBM25Retriever

        return RankBM25Retriever
    if backend == "dense":
        from .dense import DenseRetriever

        return DenseRetriever
    raise InvalidArgumentError(f"unknown retrieval backend {backend!r}; choose one of {BACKENDS}")


def build_retriever(world, backend: str = "bm25", **kwargs) -> CorpusRetriever:
    """A new in-process index of ``world``'s corpus with ``backend`` (``bm25``, ``rank-bm25`` or ``dense``),
    never cached; ``passage_sentences=n`` indexes passages of ``n`` sentences, other keyword arguments
    go to the retriever's constructor. :func:`make_retriever` is the cached, remote-aware entry point."""
    sentences = kwargs.pop("passage_sentences", None)
    cls = retriever_class(backend)
    if sentences is None:
        return cls.from_world(world, **kwargs)
    return cls(*split_passages(world.doc_ids, world.doc_titles, world.doc_texts, sentences=sentences), **kwargs)


def make_retriever(world=None, backend: str = "bm25", *, cache: bool = True, **kwargs) -> Retriever:
    """A retriever over ``world``'s corpus with the named backend.

    ``backend``: ``"bm25"`` (default), ``"rank-bm25"``, ``"dense"`` (keyword arguments go to the
    retriever's constructor; ``passage_sentences=n`` indexes the documents split into passages of
    ``n`` sentences, see :mod:`searchgym.retrieval.passages`), or ``"remote"`` (``url=`` required, ``world``
    ignored; arguments go
    to :class:`~searchgym.retrieval.client.RemoteRetriever`). With ``cache`` (default) in-process
    indexes are shared per world object and settings, so many envs over one world index it once.
    """
    if backend == "remote":
        from .client import RemoteRetriever

        if "url" not in kwargs:
            raise InvalidArgumentError(
                "backend 'remote' needs url=, e.g. make_retriever(backend='remote', url='http://127.0.0.1:8000')"
            )
        return RemoteRetriever(**kwargs)
    if backend not in BACKENDS:
        raise InvalidArgumentError(f"unknown retrieval backend {backend!r}; choose one of {BACKENDS}")
    if world is None:
        raise InvalidArgumentError(f"backend {backend!r} needs a world to index")
    if not cache or any(not isinstance(v, (str, int, float, bool, type(None))) for v in kwargs.values()):
        return build_retriever(world, backend, **kwargs)  # e.g. a custom encoder object: not cached
    key = (backend, tuple(sorted(kwargs.items())))
    with _cache_lock:
        per_world = _cache.setdefault(world, {})
        if key not in per_world:  # pickles as this call: the cached index, not a copy
            per_world[key] = share(build_retriever(world, backend, **kwargs), _cached_retriever, world, backend, key[1])
        return per_world[key]


def passage_retriever(world, *, sentences: int = 2, backend: str = "bm25", **kwargs) -> Retriever:
    """A retriever over ``world``'s documents split into passages of ``sentences`` sentences
    (:func:`~searchgym.retrieval.passages.split_passages`), built once per world and settings
    (:func:`make_retriever`'s cache).

    ``backend``: ``"bm25"`` (default), ``"rank-bm25"`` or ``"dense"``; ``kwargs`` go to its
    constructor. Titles are indexed with each passage.
    """
    if backend not in ("bm25", "rank-bm25", "dense"):
        raise InvalidArgumentError(f"unknown passage retrieval backend {backend!r}; choose bm25, rank-bm25 or dense")
    return make_retriever(world, backend, passage_sentences=sentences, **kwargs)


def _cached_retriever(world, backend: str, settings: tuple) -> Retriever:
    """``make_retriever(world, backend, **settings)`` from the cache (what a shared index unpickles as)."""
    return make_retriever(world, backend, **dict(settings))


def load_index(path, **kwargs) -> CorpusRetriever:
    """Load a saved index directory of any backend (read from its manifest)."""
    from .storage import IndexFormatError

    mf = Path(path) / "manifest.json"
    backend = None
    if mf.is_file():
        import json

        try:
            backend = json.loads(mf.read_text(encoding="utf-8")).get("backend")
        except (OSError, ValueError, AttributeError):
            backend = None  # BM25Retriever.load below reports the exact problem
    if backend == "dense":
        from .dense import DenseRetriever

        return DenseRetriever.load(path, **kwargs)
    if backend == "rank-bm25":
        from .bm25 import RankBM25Retriever

        return RankBM25Retriever.load(path, **kwargs)
    if backend not in (None, "bm25"):
        raise IndexFormatError(f"index directory {str(path)!r} has unknown backend {backend!r}")
    from .bm25 import BM25Retriever

    return BM25Retriever.load(path, **kwargs)
