"""Gymnasium spaces for free text: any Unicode string, sampled from a printable set.

Gymnasium's :class:`~gymnasium.spaces.Text` stores its charset as a Python set, a list and a dict,
so a literal "every Unicode character" charset (1.1 M code points) would cost hundreds of MB per
space. :class:`UnicodeText` is a ``Text`` whose membership test accepts *every* character (what an
LLM emits and what documents contain), while :meth:`sample` draws from a compact printable set
that includes the protocol's tag characters, so random actions exercise the parser.

Gymnasium's ``Text`` helpers index characters in the charset, which a full-Unicode space has not got
(``flatten`` raised ``KeyError`` on ``"Zürich"``), and its shared-memory observations of a ``Text`` are
read once when ``AsyncVectorEnv`` starts (every later observation came back as the empty buffer,
``"000…"``). This module registers ``UnicodeText`` versions of both with gymnasium's single-dispatch
functions: texts are stored as Unicode code points, so any string round-trips (lone surrogates
included), and ``AsyncVectorEnv``'s default ``shared_memory=True`` returns exactly what
``SyncVectorEnv`` returns.
"""

from __future__ import annotations

import multiprocessing
import string
import sys
from collections.abc import Sequence
from typing import Any, Iterator

import numpy as np
from gymnasium import spaces
from gymnasium.spaces.utils import flatten, flatten_space, unflatten
from gymnasium.vector.utils.shared_memory import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "TEXT_MAX_LENGTH",
    "SAMPLE_MAX_LENGTH",
    "SAMPLE_CHARSET",
    "CODE_POINT_PAD",
    "UnicodeText",
    "SharedTexts",
    "text_space",
    "text_to_code_points",
    "code_points_to_text",
]

TEXT_MAX_LENGTH = 1 << 20  # 1,048,576 characters: larger than any text the envs emit or keep
SAMPLE_MAX_LENGTH = 256  # default upper bound on the length of a random sample
SAMPLE_CHARSET = string.printable + "äéñøßçЖжあ中文€—…“”"  # ASCII (incl. < > / { } " \n) + a little Unicode
CODE_POINT_PAD = sys.maxunicode + 1  # 0x110000: one past the last code point, pads a flattened text


class UnicodeText(spaces.Text):
    """A :class:`gymnasium.spaces.Text` over the full Unicode character set.

    ``contains`` accepts any ``str`` whose length lies in ``[min_length, max_length]``.
    ``sample()`` without a mask draws a length in ``[min_length, min(max_length, 256)]`` (a
    megabyte of random characters per sample would only slow tests down) and characters from
    :data:`SAMPLE_CHARSET`; pass ``mask=(length, None)`` for another length. ``flatten`` gives the
    text's code points padded with :data:`CODE_POINT_PAD` (``flatten_space``: an ``int32`` ``Box``
    over ``[0, CODE_POINT_PAD]``); ``AsyncVectorEnv`` shares it through memory as code points too.
    """

    def __init__(
        self, max_length: int = TEXT_MAX_LENGTH, *, min_length: int = 0, seed: int | np.random.Generator | None = None
    ) -> None:
        super().__init__(max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        """Any string of an allowed length (every Unicode character is allowed)."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random printable string (length ≤ 256 unless ``mask`` fixes it)."""
        if mask is None and probability is None:
            hi = min(self.max_length, max(self.min_length, SAMPLE_MAX_LENGTH))
            length = int(self.np_random.integers(self.min_length, hi + 1))
            return super().sample(mask=(length, None))
        return super().sample(mask=mask, probability=probability)

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length}, charset=<all Unicode>)"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, UnicodeText) and (self.min_length, self.max_length) == (
            other.min_length,
            other.max_length,
        )

    __hash__ = None  # type: ignore[assignment]  # unhashable on purpose: spaces are mutable (they carry an RNG)


def text_space(seed: int | None = None) -> UnicodeText:
    """The text space every searchgym env uses for observations and actions."""
    return UnicodeText(TEXT_MAX_LENGTH, min_length=0, seed=seed)


# ---------------------------------------------------------------------- code points


def text_to_code_points(space: UnicodeText, text: str) -> np.ndarray:
    """``text``'s code points (``int32``; lone surrogates kept); a text longer than the space refused."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"a UnicodeText value must be a str, got {type(text).__name__}")
    if len(text) > space.max_length:
        raise InvalidArgumentError(
            f"a text of {len(text)} characters does not fit {space!r} (max_length {space.max_length})"
        )
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.int32)


def code_points_to_text(points: np.ndarray) -> str:
    """The string of ``points`` (code points; the inverse of :func:`text_to_code_points`)."""
    return np.asarray(points, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


# mypy's singledispatch check reads the fallback's Space[T] as unrelated to UnicodeText (a Space[str])
@flatten.register(UnicodeText)
def _flatten_unicode_text(space: UnicodeText, x: str) -> np.ndarray:  # type: ignore[misc]
    out = np.full(space.max_length, CODE_POINT_PAD, dtype=np.int32)
    points = text_to_code_points(space, x)
    out[: len(points)] = points
    return out


@unflatten.register(UnicodeText)
def _unflatten_unicode_text(space: UnicodeText, x: np.ndarray) -> str:  # type: ignore[misc]  # as above
    x = np.asarray(x)
    return code_points_to_text(x[x < CODE_POINT_PAD])


@flatten_space.register(UnicodeText)
def _flatten_space_unicode_text(space: UnicodeText) -> spaces.Box:
    return spaces.Box(low=0, high=CODE_POINT_PAD, shape=(space.max_length,), dtype=np.int32)


# ---------------------------------------------------------------------- AsyncVectorEnv shared memory


class SharedTexts(Sequence):
    """The texts of ``n`` envs in one shared ``int32`` buffer, read when indexed (a live view).

    Row *i* holds env *i*'s text: its length, then its code points. ``AsyncVectorEnv`` builds its
    observation object once, from ``read_from_shared_memory``, and its workers overwrite the buffer
    every step, so a snapshot (what gymnasium's ``Text`` returns) would stay the empty buffer forever.
    With ``copy=True`` (gymnasium's default) the vector env deep-copies the view, which gives a plain
    ``tuple`` of ``str``; with ``copy=False`` it hands out the view itself, which changes with each
    step like gymnasium's shared ``Box`` arrays. ``copy``, ``pickle`` and ``==`` work on the texts.
    """

    def __init__(self, buffer: Any, n: int, max_length: int) -> None:
        self._buffer, self._n, self._width = buffer, int(n), int(max_length) + 1

    def _row(self, i: int) -> np.ndarray:
        data = np.frombuffer(self._buffer.get_obj(), dtype=np.int32)
        return data[i * self._width : (i + 1) * self._width]

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(self._n)))
        i = int(i)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"env index {i} out of range for {self._n} envs")
        row = self._row(i)
        return code_points_to_text(row[1 : 1 + int(row[0])])

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(self._n))

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, (tuple, SharedTexts)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # its contents change

    def __copy__(self) -> tuple[str, ...]:
        return tuple(self)

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __reduce__(self) -> tuple:
        return (tuple, (tuple(self),))

    def __repr__(self) -> str:
        return f"SharedTexts{tuple(self)!r}"


@create_shared_memory.register(UnicodeText)
def _create_unicode_text_shared_memory(space: UnicodeText, n: int = 1, ctx: Any = multiprocessing) -> Any:
    return ctx.Array(np.dtype(np.int32).char, n * (space.max_length + 1))


@read_from_shared_memory.register(UnicodeText)
def _read_unicode_text_from_shared_memory(space: UnicodeText, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(shared_memory, n, space.max_length)


@write_to_shared_memory.register(UnicodeText)
def _write_unicode_text_to_shared_memory(space: UnicodeText, index: int, values: str, shared_memory: Any) -> None:
    points = text_to_code_points(space, values)
    width = space.max_length + 1
    row = np.frombuffer(shared_memory.get_obj(), dtype=np.int32)[index * width : (index + 1) * width]
    row[1 : 1 + len(points)] = points
    row[0] = len(points)
