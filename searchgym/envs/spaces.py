"""Gymnasium spaces for free text: any Unicode string, sampled from a printable set.

Gymnasium's :class:`~gymnasium.spaces.Text` stores its charset as a Python set, a list and a dict,
so a literal "every Unicode character" charset (1.1 M code points) would cost hundreds of MB per
space. :class:`UnicodeText` is a ``Text`` whose membership test accepts *every* character (what an
LLM emits and what documents contain), while :meth:`sample` draws from a compact printable set
that includes the protocol's tag characters, so random actions exercise the parser.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["TEXT_MAX_LENGTH", "SAMPLE_MAX_LENGTH", "SAMPLE_CHARSET", "UnicodeText", "text_space"]

TEXT_MAX_LENGTH = 1 << 20  # 1,048,576 characters: larger than any text the envs emit or keep
SAMPLE_MAX_LENGTH = 256  # default upper bound on the length of a random sample
SAMPLE_CHARSET = string.printable + "äéñøßçЖжあ中文€—…“”"  # ASCII (incl. < > / { } " \n) + a little Unicode


class UnicodeText(spaces.Text):
    """A :class:`gymnasium.spaces.Text` over the full Unicode character set.

    ``contains`` accepts any ``str`` whose length lies in ``[min_length, max_length]``.
    ``sample()`` without a mask draws a length in ``[min_length, min(max_length, 256)]`` (a
    megabyte of random characters per sample would only slow tests down) and characters from
    :data:`SAMPLE_CHARSET`; pass ``mask=(length, None)`` for another length.
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
