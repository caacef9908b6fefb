"""Old spellings of renamed keyword arguments, config keys and CLI flags keep working, with a warning.

The glossary (docs/glossary.md) fixes one word per meaning: ``threads``, ``workers``, ``concurrency``,
``output_dir``, ``out``. A name that changed to follow it still works under its old spelling for a while, and
each use raises a :class:`RenamedWarning` (a :class:`DeprecationWarning`) naming the new spelling:

* a keyword argument of a public function: :func:`renamed_kwargs`;
* a config key (YAML file, ``--set``, a checkpoint's saved config): ``ConfigIO.RENAMED_KEYS``, read by
  :func:`rename_keys`;
* a CLI flag: :func:`add_renamed_flag`, an argparse alias hidden from ``--help``.

(A moved *module or name* does not keep working: :mod:`searchgym.core.moved` raises an error naming its home.)
"""

from __future__ import annotations

import argparse
import functools
import warnings
from typing import Any, Callable, Mapping, TypeVar

from ..errors import InvalidArgumentError, InvalidTypeError, SearchGymError

__all__ = ["RenamedWarning", "add_renamed_flag", "rename_keys", "renamed_kwargs", "warn_renamed"]

_F = TypeVar("_F", bound=Callable[..., Any])


class RenamedWarning(SearchGymError, DeprecationWarning):
    """An old spelling was used; the message names the new one. The CLI shows these (Python hides
    :class:`DeprecationWarning` outside ``__main__`` by default)."""


def warn_renamed(old: str, new: str, where: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` (in ``where``: a function, a config, a command) is now spelled ``new``."""
    warnings.warn(f"{where}: {old} is deprecated, use {new} (docs/glossary.md)", RenamedWarning, stacklevel=stacklevel)


def renamed_kwargs(**old_to_new: str) -> Callable[[_F], _F]:
    """Decorator: a call with an old keyword (``old=new`` pairs) warns and passes the value as the new keyword.

    Giving both spellings is an error, so a value is never silently dropped.
    """

    def decorate(func: _F) -> _F:
        where = func.__qualname__

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise InvalidTypeError(f"{where}() got both {old}= and {new}=; {old} is the old name of {new}")
                    warn_renamed(f"{old}=", f"{new}=", where)
                    kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def rename_keys(values: Mapping[str, Any], renamed: Mapping[str, str], where: str) -> dict[str, Any]:
    """``values`` with every old key of ``renamed`` (old -> new) replaced by its new key, warning for each.

    A mapping with both spellings is an error (which one was meant is unclear)."""
    out = dict(values)
    for old, new in renamed.items():
        if old in out:
            if new in out:
                raise InvalidArgumentError(f"{where}: both {old} and {new} are set; {old} is the old name, keep {new}")
            warn_renamed(f"key {old}", new, where, stacklevel=4)
            out[new] = out.pop(old)
    return out


class _RenamedFlagAction(argparse.Action):
    """Stores like the new flag's ``store`` action, after warning that the old flag was used."""

    def __init__(self, option_strings, dest, *, new_flag: str, **kwargs) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new_flag = new_flag

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        warn_renamed(str(option_string), self.new_flag, parser.prog, stacklevel=2)
        setattr(namespace, self.dest, values)


def add_renamed_flag(parser: Any, old: str, new: str, **kwargs: Any) -> argparse.Action:
    """Add ``old`` as a hidden alias of the already added flag ``new``: same destination and type, a warning
    naming ``new`` when used. ``kwargs`` (e.g. ``type=int``) must match the new flag's.

    ``parser`` is a parser or an argument group. For a required flag, add both to a required mutually exclusive
    group (``parser.add_mutually_exclusive_group(required=True)``): either spelling then satisfies it."""
    dest = next(a.dest for a in parser._actions if new in a.option_strings)
    return parser.add_argument(
        old,
        dest=dest,
        action=_RenamedFlagAction,
        new_flag=new,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
        **kwargs,
    )
