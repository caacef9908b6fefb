"""The one check of a command's numeric arguments: every bad value named in one line, before any work starts.

argparse only knows that ``--seed -1`` is an int and ``--temperature nan`` a float; numpy, gymnasium or a
server then fail with a traceback minutes later (or, for NaN, which passes every ``x < 0`` test, never). Each
command calls :func:`refuse_bad_numbers` first with the least value each of its counts takes; every float it
names must also be finite.
"""

from __future__ import annotations

import argparse
import math
from typing import Mapping, Optional

from ..errors import InvalidArgumentError

__all__ = ["refuse_bad_numbers", "MAX_THREADS"]

#: the most ``--threads`` any command takes (torch's ``set_num_threads`` overflows on a huge one, with a
#: traceback after the model has loaded); applied wherever a command's arguments have ``threads``
MAX_THREADS = 1024


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def refuse_bad_numbers(
    args: argparse.Namespace,
    least: Mapping[str, float],
    *,
    most: Optional[Mapping[str, float]] = None,
) -> None:
    """Raise :class:`~searchgym.errors.InvalidArgumentError` naming every argument of ``args`` below its least
    value in ``least``, above its most in ``most`` (``threads`` at most :data:`MAX_THREADS` unless ``most``
    says otherwise), or not a finite number (NaN, inf). An argument left at ``None`` (not given, no default) is
    not checked."""
    most = {"threads": MAX_THREADS, **(most or {})}
    bad = []
    for name in dict.fromkeys([*least, *most]):
        value = getattr(args, name, None)
        if value is None:
            continue
        if not math.isfinite(value):
            bad.append(f"{_flag(name)} {value} (a finite number)")
        elif name in least and value < least[name]:
            bad.append(f"{_flag(name)} {value} (at least {least[name]})")
        elif name in most and value > most[name]:
            bad.append(f"{_flag(name)} {value} (at most {most[name]})")
    if bad:
        raise InvalidArgumentError(f"{', '.join(bad)}: give a value in range")
