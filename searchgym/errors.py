"""searchgym's exception hierarchy: one base, :class:`SearchGymError`, for every error the package raises on purpose.

Every error searchgym raises for bad input or an unusable setup derives from :class:`SearchGymError`,
so a caller (and the ``searchgym`` command line, which prints these as one-line messages and exits 2)
can tell them from bugs. Each also keeps the built-in type it always had (``ValueError``,
``FileNotFoundError``, ...), so ``except ValueError`` written against earlier versions still catches
it. Named subclasses elsewhere (``WorldError``, ``CheckpointMismatchError``, ``RetrievalError``, ...)
derive from these.

This module imports nothing from searchgym: it is the bottom floor every layer may use.
"""

from __future__ import annotations

__all__ = [
    "SearchGymError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "MissingFileError",
    "NotFoundError",
    "SearchGymRuntimeError",
]


class SearchGymError(Exception):
    """Base of every error searchgym raises on purpose (bad input, a missing file, an unusable setup)."""


class InvalidArgumentError(SearchGymError, ValueError):
    """A value that cannot be used: a config field, an argument, a data record. The message names the fix."""


class InvalidTypeError(SearchGymError, TypeError):
    """An argument of the wrong kind (a str where a list is needed, an object without the needed method)."""


class MissingFileError(SearchGymError, FileNotFoundError):
    """A file or folder searchgym was pointed at does not exist; the message says how to make it."""


class NotFoundError(SearchGymError, KeyError):
    """An id or name that is not there (an entity, a subgraph id, a registered name)."""

    def __str__(self) -> str:  # KeyError quotes its message; these are sentences
        return str(self.args[0]) if self.args else ""


class SearchGymRuntimeError(SearchGymError, RuntimeError):
    """A run that cannot go on: a missing optional dependency, a server that cannot start, an env used out of order."""
