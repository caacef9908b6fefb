"""Torch's global random draws, made from a run's seed without seeding the caller's generator.

Libraries draw from torch's global RNG where they take no generator: PEFT initialises a LoRA adapter's ``A``
matrices with it, and dropout samples its masks from it. A trainer that let those draws come from whatever state
the process happened to be in would train differently on every run of the same seed (the self-play trainer did,
until 2026-12-03: its LoRA adapter started from a different ``A`` each run, so the first update already differed).
:func:`seeded_torch` runs a block with the global RNG seeded and puts the previous state back afterwards.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

__all__ = ["seeded_torch"]


@contextmanager
def seeded_torch(seed: int, device=None) -> Iterator[None]:
    """Run the block with torch's global RNG seeded by ``seed``: the CPU's, and ``device``'s own when it is a CUDA
    device (no other GPU is touched or initialised). The states from before are restored on exit, so the caller's
    own draws do not move."""
    import torch

    seed %= 2**63
    dev = torch.device(device) if device is not None else torch.device("cpu")
    cuda = [dev.index if dev.index is not None else torch.cuda.current_device()] if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.random.default_generator.manual_seed(seed)
        for index in cuda:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed)
        yield
