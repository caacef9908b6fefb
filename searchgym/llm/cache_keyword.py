"""The keyword a model's ``forward`` takes its KV cache under.

transformers 5.2x renamed the decoders' ``past_key_values`` argument to ``cache`` and warns on every call
that still passes the old name (removed in 5.40); the versions this package supports (``>=4.45``, verl's
pin ``<5.11``, whatever a GPU image ships) take only ``past_key_values``. :func:`cache_kwargs` reads the
name from the model class's own ``forward`` signature once per class, so every decoding and scoring call
passes the name that model expects, with no warning and no break when the old name goes.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["cache_keyword", "cache_kwargs"]

NEW_NAME = "cache"
OLD_NAME = "past_key_values"
_by_class: dict[type, str] = {}


def _base(model: Any) -> Any:
    """The transformers model under a PEFT wrapper (whose ``forward`` only forwards ``**kwargs``)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def cache_keyword(model: Any) -> str:
    """``"cache"`` when ``model``'s ``forward`` (PEFT wrappers unwrapped) names that parameter, else
    ``"past_key_values"``; decided once per model class."""
    cls = type(_base(model))
    name = _by_class.get(cls)
    if name is None:
        forward = getattr(cls, "forward", None) or getattr(cls, "__call__")
        try:
            named = NEW_NAME in inspect.signature(forward).parameters
        except (TypeError, ValueError):  # a builtin or C-level callable: keep the long-standing name
            named = False
        name = _by_class[cls] = NEW_NAME if named else OLD_NAME
    return name


def cache_kwargs(model: Any, cache: Any) -> dict[str, Any]:
    """``{keyword: cache}`` for a call of ``model``, with the keyword :func:`cache_keyword` picks."""
    return {cache_keyword(model): cache}
