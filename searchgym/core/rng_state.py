"""RNG states as plain JSON data (issue 17: checkpoints without pickle), and seeds stable across processes.

``random.Random.getstate()`` is a tuple ``(version, (625 ints), gauss_next)``; JSON turns tuples
into lists, and ``setstate`` needs the tuples back. NumPy ``Generator`` states are dicts of ints
and strings already (``bit_generator.state``). Lowest floor: imports nothing from searchgym.
"""

from __future__ import annotations

import random
import zlib
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["random_state_from_data", "numpy_generator_from_state", "stable_seed"]


def stable_seed(*parts: object) -> int:
    """A 32-bit seed from parts, the same in every process (unlike ``hash`` of a string): for seeding one
    item of a set (a task, a subgraph) by what it is rather than by when it comes up."""
    return zlib.crc32(":".join(map(str, parts)).encode())


def random_state_from_data(data: Any) -> tuple:
    """A ``random.Random.setstate`` argument from ``getstate()`` output that went through JSON.

    Raises ValueError naming the problem when ``data`` is not such a state.
    """
    if not isinstance(data, (list, tuple)) or len(data) != 3 or not isinstance(data[1], (list, tuple)):
        raise InvalidArgumentError(f"not a random.Random state (expected [version, [ints], gauss]): {str(data)[:80]}")
    version, internal, gauss = data
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in internal):
        raise InvalidArgumentError("a random.Random state must hold integers only")
    state = (int(version), tuple(internal), gauss)
    random.Random().setstate(state)  # validates length and version before the caller uses it
    return state


def numpy_generator_from_state(state: dict) -> np.random.Generator:
    """A NumPy ``Generator`` restored from its ``bit_generator.state`` dict (no pickle)."""
    if not isinstance(state, dict) or not isinstance(state.get("bit_generator"), str):
        raise InvalidArgumentError(f"not a numpy bit generator state: {str(state)[:80]}")
    cls = getattr(np.random, state["bit_generator"], None)
    if not (isinstance(cls, type) and issubclass(cls, np.random.BitGenerator)):
        raise InvalidArgumentError(f"unknown numpy bit generator {state['bit_generator']!r}")
    gen = np.random.Generator(cls())
    gen.bit_generator.state = state
    return gen
