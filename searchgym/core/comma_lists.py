"""The one reader of a comma-separated command-line list (``--reward dynasearcher,wcr``, ``--metrics em,f1``,
``--tasks builtin,nq=nq.jsonl``): items stripped, and neither an empty list nor an empty item between two commas
let through (both once dropped silently, so ``wcr,,gdcr`` read as ``wcr,gdcr`` and ``--metrics ""`` as none)."""

from __future__ import annotations

from typing import Sequence

from ..errors import InvalidArgumentError

__all__ = ["comma_items"]


def comma_items(value: str | Sequence[str], *, none: str, gap: str) -> list[str]:
    """The stripped items of ``value`` (a comma-separated string, or a list of names); raises
    :class:`~searchgym.errors.InvalidArgumentError` with the message ``none`` when there is no item at all, and
    with ``gap`` when an item is empty (two commas in a row, a leading or trailing comma), and with ``none`` after
    what ``value`` is when it is neither a string nor a list of strings."""
    if not isinstance(value, str) and not (
        isinstance(value, Sequence) and not isinstance(value, bytes) and all(isinstance(v, str) for v in value)
    ):  # None, a number, a list of numbers: a one-line refusal, not a TypeError from .strip()
        raise InvalidArgumentError(f"{value!r:.80} is not a comma-separated string or a list of strings; {none}")
    items = [item.strip() for item in (value.split(",") if isinstance(value, str) else value)]
    if not any(items):
        raise InvalidArgumentError(none)
    if not all(items):
        raise InvalidArgumentError(gap)
    return items
