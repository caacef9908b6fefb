"""Structural checks of a loaded bm25s index, run before its arrays are handed to scipy.

The score matrix is wrapped in ``scipy.sparse.csr_matrix(..., copy=False)`` without scipy's own
checks (they would copy the arrays), so an out-of-range ``indices`` entry would make the sparse
product read outside the arrays and kill the process (SIGSEGV). :func:`bm25_array_problems` lists
every way the arrays can disagree with each other and with the manifest: shapes, dtypes, ``indptr``
monotonicity and bounds, document ids in range, finite scores, and a vocabulary that maps onto the
matrix rows one to one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["bm25_array_problems"]


def _vector(scores: dict, name: str, kinds: str, problems: list[str]) -> np.ndarray | None:
    """``scores[name]`` if it is a 1-d array of a dtype kind in ``kinds``; else note the problem."""
    a = scores.get(name)
    if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype.kind not in kinds:
        what = f"{a.ndim}-d {a.dtype}" if isinstance(a, np.ndarray) else type(a).__name__
        problems.append(
            f"bm25s array {name!r} must be a 1-d {'float' if kinds == 'f' else 'integer'} array, got {what}"
        )
        return None
    return a


def _vocab_problems(vocab: Any, n_terms: int) -> list[str]:
    if not isinstance(vocab, dict):
        return [f"bm25s vocabulary is a {type(vocab).__name__}, not a term -> row mapping"]
    ids = list(vocab.values())
    if not all(isinstance(t, str) for t in vocab) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in ids
    ):
        return ["bm25s vocabulary must map terms (strings) to integer rows"]
    if len(ids) != n_terms or (ids and (min(ids) < 0 or max(ids) >= n_terms or len(set(ids)) != n_terms)):
        return [f"bm25s vocabulary does not map one to one onto the {n_terms} matrix rows"]
    return []


def bm25_array_problems(scores: dict, vocab: Any, manifest: dict) -> list[str]:
    """Every inconsistency of the bm25s arrays ``scores`` (``data``, ``indices``, ``indptr``,
    ``num_docs``) and vocabulary with each other and with the index ``manifest``; ``[]`` if sound."""
    problems: list[str] = []
    params = manifest.get("params", {})
    num_docs = manifest["num_docs"]
    if scores.get("num_docs") != num_docs:
        problems.append(f"bm25s index covers {scores.get('num_docs')} documents, manifest says {num_docs}")
    data = _vector(scores, "data", "f", problems)
    indices = _vector(scores, "indices", "iu", problems)
    indptr = _vector(scores, "indptr", "iu", problems)
    if data is None or indices is None or indptr is None:
        return problems
    if len(indptr) == 0:
        return problems + ["bm25s array 'indptr' is empty"]
    n_terms = len(indptr) - 1
    if n_terms != params.get("vocab_size"):
        problems.append(f"vocabulary size mismatch ({n_terms} matrix rows, manifest says {params.get('vocab_size')})")
    problems += _vocab_problems(vocab, n_terms)
    nnz = len(data)
    if not (nnz == len(indices) == params.get("nnz")):
        problems.append(
            f"score arrays have inconsistent lengths (data {nnz}, indices {len(indices)}, "
            f"manifest nnz {params.get('nnz')})"
        )
    if int(indptr[0]) != 0 or int(indptr[-1]) != nnz or bool((np.diff(indptr) < 0).any()):
        problems.append(f"bm25s array 'indptr' must rise from 0 to {nnz} without decreasing")
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= num_docs):
        problems.append(f"bm25s array 'indices' holds document ids outside [0, {num_docs})")
    if not bool(np.isfinite(data).all()):
        problems.append("bm25s array 'data' holds NaN or infinite scores")
    return problems
