"""Import bm25s without letting it start JAX (and grab most of a GPU's memory).

bm25s's ``selection`` module imports ``jax.lax`` whenever JAX is installed and runs ``jax.lax.top_k``
at import time. That initialises JAX's default backend, and on a GPU JAX preallocates 75 % of the
device's memory by default: importing BM25 cost 59.5 GiB of an 80 GB H100, and the trainer then ran
out of memory. searchgym never uses that code path (:class:`~searchgym.retrieval.bm25.BM25Retriever`
scores with scipy and selects top-k with numpy), so :func:`import_bm25s` imports bm25s with ``jax``
hidden: bm25s then takes its numpy path, exactly as on a machine without JAX.

JAX itself is left alone: nothing here imports or configures it, no environment variable is set, and
a program that uses JAX imports it (before or after searchgym) with its own settings as usual. If
bm25s was imported by someone else before searchgym, JAX may already be initialised; a warning says so.
"""

from __future__ import annotations

import logging
import sys
import threading

logger = logging.getLogger(__name__)

__all__ = ["import_bm25s"]

# Module names hidden while bm25s imports; ``None`` in sys.modules makes ``import jax.lax`` raise ImportError.
_HIDDEN = ("jax", "jax.lax")
_lock = threading.Lock()


def import_bm25s():
    """Return the ``bm25s`` module, importing it (once) with JAX hidden so it never initialises a GPU.

    Also undoes bm25s's import-time ``setLevel(DEBUG)`` on its logger, so it follows the app's level.
    """
    with _lock:
        module = sys.modules.get("bm25s")
        if module is None:
            module = _import_without_jax()
        else:
            _warn_if_jax_started(module)
        lg = logging.getLogger("bm25s")
        if lg.level == logging.DEBUG:
            lg.setLevel(logging.NOTSET)
    return module


def _import_without_jax():
    saved = {name: sys.modules[name] for name in _HIDDEN if name in sys.modules}
    for name in _HIDDEN:
        sys.modules[name] = None  # type: ignore[assignment]  # None blocks the import (typeshed omits it)
    try:
        import bm25s
    finally:
        for name in _HIDDEN:
            if name in saved:
                sys.modules[name] = saved[name]
            else:
                sys.modules.pop(name, None)
    return bm25s


_warned = False


def _warn_if_jax_started(module) -> None:
    global _warned
    selection = getattr(module, "selection", None)
    if not _warned and getattr(selection, "JAX_IS_AVAILABLE", False):
        _warned = True
        logger.warning(
            "bm25s was imported before searchgym and initialised JAX, which by default preallocates 75%% of a "
            "GPU's memory; import searchgym's retrieval first, or set XLA_PYTHON_CLIENT_PREALLOCATE=false "
            "(or JAX_PLATFORMS=cpu) before starting Python"
        )
