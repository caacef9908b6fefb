"""The one check of a constructor's or factory's plain arguments: a count, a number, a flag, a choice.

The command line refuses bad numbers before any work starts (``searchgym/commands/number_checks.py``); these
are the same checks for the Python API, so ``gym.make("KGSolver-v0", max_turns=float("nan"))`` or
``WaypointCoverageReward(env, alpha="0.3")`` is refused when it is built, in one line naming the argument,
instead of being accepted (NaN passes every ``x < 1`` test, ``True`` is an int, ``2.5`` slips past ``< 1``)
and failing, or quietly misbehaving, several ``step()`` calls later. Each check returns the value, so a
constructor reads ``self.max_turns = check_count("max_turns", max_turns)``.

Every refusal is an :class:`~searchgym.errors.InvalidArgumentError` (a ``ValueError``), also for a value of
the wrong type: ``gymnasium.make`` rewrites a ``TypeError`` raised by an env's constructor into a message
that carries every keyword argument, the world included. A range message keeps the form the constructors
used before (``max_turns must be >= 1, got 0``); a value of the wrong kind says what kind is wanted
(``max_turns must be an int >= 1, got nan``).

This module imports only :mod:`searchgym.errors`: every floor may use it.
"""

from __future__ import annotations

import difflib
import math
import numbers
import sys
from typing import Any, Iterable, Optional, Sequence, TypeVar

from ..errors import InvalidArgumentError

__all__ = ["MAX_INDEX", "check_count", "check_counts", "check_number", "check_flag", "check_choice", "closest"]

#: the largest size Python can index (a ``deque(maxlen=...)`` or a list longer than this cannot exist)
MAX_INDEX = sys.maxsize

T = TypeVar("T")


def _hint(hint: str) -> str:
    return f" ({hint})" if hint else ""


def _is_int(value: Any) -> bool:
    """An integer that is not a bool (``True`` is an int in Python, but never a count anyone means)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_count(
    name: str,
    value: Any,
    *,
    least: Optional[int] = 1,
    most: Optional[int] = None,
    optional: bool = False,
    hint: str = "",
) -> Any:
    """Return ``value`` (as a plain ``int``) if it is an int in ``[least, most]`` (``None`` bounds: unbounded),
    or ``None`` when ``optional`` and it is ``None``; else raise :class:`InvalidArgumentError` naming ``name``.

    A bool, a float (``2.5``, NaN, inf), a string (``"3"``) or ``None`` (unless ``optional``) is refused: a count
    of turns, documents or rollouts is a whole number, and each of those values used to pass a ``value < 1``
    test and fail (or loop) only later. ``hint`` is added in brackets, e.g. the paper's value.
    """
    if value is None and optional:
        return None
    if not _is_int(value):
        bounds = f" >= {least}" if least is not None else ""
        none = " or None" if optional else ""
        raise InvalidArgumentError(f"{name} must be an int{bounds}{none}, got {value!r}{_hint(hint)}")
    if least is not None and value < least:
        raise InvalidArgumentError(f"{name} must be >= {least}, got {value!r}{_hint(hint)}")
    if most is not None and value > most:
        raise InvalidArgumentError(f"{name} must be at most {most}, got {value!r}{_hint(hint)}")
    return int(value)


def check_counts(name: str, values: Any, *, least: Optional[int] = 1, example: str = "[1, 2]") -> tuple[int, ...]:
    """Return ``values`` as a tuple of ints, each at least ``least``; refuse a string (``"2"`` would be read
    character by character), a lone number, or any item :func:`check_count` refuses, naming ``name`` and showing
    ``example`` of the list wanted."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidArgumentError(f"{name} must be a list of ints like {example}, got {values!r}")
    items = list(values)
    if not all(_is_int(v) for v in items):
        raise InvalidArgumentError(f"{name} must be a list of ints like {example}, got {items!r}")
    if least is not None and any(v < least for v in items):
        raise InvalidArgumentError(f"{name} must hold ints >= {least}, got {items!r}")
    return tuple(int(v) for v in items)


def check_number(
    name: str,
    value: Any,
    *,
    least: Optional[float] = None,
    most: Optional[float] = None,
    above: Optional[float] = None,
    below: Optional[float] = None,
    optional: bool = False,
    hint: str = "",
) -> Any:
    """Return ``value`` if it is a finite real number within the bounds given (``least``/``most`` inclusive,
    ``above``/``below`` exclusive), or ``None`` when ``optional`` and it is ``None``; else raise
    :class:`InvalidArgumentError` naming ``name`` and the range.

    NaN and infinity are refused (NaN passes every comparison test and turns rewards into NaN), as are a bool, a
    string (``"0.3"``) and ``None`` (unless ``optional``). An int is returned as it is, so a default ``2`` stays
    ``2``.
    """
    if value is None and optional:
        return None
    parts = [
        f">= {least}" if least is not None else "",
        f"> {above}" if above is not None else "",
        f"<= {most}" if most is not None else "",
        f"< {below}" if below is not None else "",
    ]
    wanted = " and ".join(p for p in parts if p)
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not number or not math.isfinite(value):
        rng = f" {wanted}" if wanted else ""
        raise InvalidArgumentError(f"{name} must be a finite number{rng}, got {value!r}{_hint(hint)}")
    if (
        (least is not None and value < least)
        or (above is not None and value <= above)
        or (most is not None and value > most)
        or (below is not None and value >= below)
    ):
        raise InvalidArgumentError(f"{name} must be {wanted}, got {value!r}{_hint(hint)}")
    return value


def check_flag(name: str, value: Any) -> bool:
    """Return ``value`` if it is ``True`` or ``False``; refuse anything else (the string ``"false"`` is truthy, so
    ``flag="false"`` would silently turn the option on)."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be True or False, got {value!r}")
    return value


def closest(value: Any, choices: Iterable[str]) -> Optional[str]:
    """The choice closest to ``value`` (case-insensitively, as :func:`difflib.get_close_matches` judges), if any
    is close enough to be a likely typo; ``None`` otherwise."""
    by_lower = {str(c).lower(): str(c) for c in choices}
    found = difflib.get_close_matches(str(value).lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[found[0]] if found else None


def check_choice(name: str, value: T, choices: Sequence[Any]) -> T:
    """Return ``value`` if it is one of ``choices``; else raise :class:`InvalidArgumentError` listing them and
    suggesting the closest one (``lone_normalisation='Raw'``: did you mean raw?)."""
    if any(type(value) is type(c) and value == c for c in choices):  # 1 is not True, nor "1" 1
        return value
    near = closest(value, [c for c in choices if isinstance(c, str)]) if isinstance(value, str) else None
    hint = f"; did you mean {near}?" if near else ""
    listed = ", ".join(str(c) for c in choices)
    raise InvalidArgumentError(f"{name} must be one of {listed}, got {value!r}{hint}")
