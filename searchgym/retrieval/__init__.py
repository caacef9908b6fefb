"""Retrieval over a world's corpus and knowledge graph.

Backends: :class:`BM25Retriever` (bm25s), :class:`RankBM25Retriever` (rank-bm25 baseline),
:class:`DenseRetriever` (FAISS, needs the ``dense`` extra), :class:`RemoteRetriever` (a Search-R1
protocol server, e.g. :class:`RetrievalServer`); :class:`KGLookup` is the DynaSearcher KG tool.
Heavy libraries (bm25s, faiss, sentence-transformers) load only when a backend is built.
"""

from .base import DEFAULT_TOP_K, LAYOUTS, Hit, Retriever, format_hits
from .bm25 import BM25Retriever, RankBM25Retriever
from .client import RemoteRetriever, RetrievalError
from .dense import DenseRetriever, Encoder, MiniLMEncoder
from .factory import BACKENDS, load_index, make_retriever, passage_retriever
from .kg import KGLookup, format_triples
from .server import RetrievalServer
from .storage import IndexFormatError

__all__ = [
    "DEFAULT_TOP_K",
    "LAYOUTS",
    "Hit",
    "Retriever",
    "format_hits",
    "BM25Retriever",
    "RankBM25Retriever",
    "DenseRetriever",
    "Encoder",
    "MiniLMEncoder",
    "RemoteRetriever",
    "RetrievalError",
    "RetrievalServer",
    "KGLookup",
    "format_triples",
    "BACKENDS",
    "make_retriever",
    "passage_retriever",
    "load_index",
    "IndexFormatError",
]
