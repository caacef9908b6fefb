"""Extraction of one seed index of a pool: which entity it starts from, the walk, the outcome.

A pool's seed index ``i`` is a pure function of ``(seed, i)``: :class:`SeedSampler` maps it to an
entity (a seeded permutation of the eligible entities per pass), :func:`make_walker` walks from there
with an RNG of its own derived from ``(seed, i)`` (stages 1 and 2 of extraction, as codes: what a Ray
worker runs and sends back), and :func:`make_outcome` turns the walk into a :class:`SeedOutcome`: the
subgraph with its pool metadata, its rejection, or a selector outage. :func:`make_extractor` is both
in one call (the local path). Every function here is thread-safe, so workers and threads share them;
the build loop, resume and files are :mod:`searchgym.construction.pool`'s, the Ray fan-out
:mod:`searchgym.construction.pool_ray`'s.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from ..core.subgraph import Subgraph
from .extract import ExtractionConfig, Rejected, SelectorUnavailable, build_subgraph, extraction_index, walk_subgraph

__all__ = ["SeedSampler", "SeedOutcome", "make_walker", "make_outcome", "make_extractor"]


class SeedSampler:
    """Seed index → entity index, a pure function of (seed, index)."""

    def __init__(self, eligible: np.ndarray, seed: int) -> None:
        self.eligible = eligible
        self.seed = seed
        self._perms: dict[int, np.ndarray] = {}

    def __call__(self, i: int) -> int:
        m = len(self.eligible)
        epoch, pos = divmod(i, m)
        perm = self._perms.get(epoch)
        if perm is None:
            perm = self._perms[epoch] = np.random.default_rng([self.seed, epoch]).permutation(m)
        return int(self.eligible[perm[pos]])


@dataclass
class SeedOutcome:
    """What one seed index produced: a subgraph, a rejection, or an endpoint outage (not journaled)."""

    index: int
    seed_id: str
    subgraph: Subgraph | None = None
    rejection: Rejected | None = None
    outage: SelectorUnavailable | None = None


def make_walker(world, selector, config: ExtractionConfig, sampler: SeedSampler, seed: int):
    """``walk(i) -> (seed id, Walk | Rejected | SelectorUnavailable)``: stage 1 and 2 of seed index
    ``i`` with its own RNG, as codes (thread-safe; what a Ray worker runs and sends back)."""
    entity_ids = world.entity_ids

    def walk(i: int):
        sid = entity_ids[sampler(i)]
        rng = random.Random(f"searchgym-pool:{seed}:{i}")
        try:
            return sid, walk_subgraph(world, sid, selector, config, rng)
        except (Rejected, SelectorUnavailable) as exc:
            return sid, exc

    return walk


def make_outcome(world, config: ExtractionConfig, seed: int, fingerprint: str):
    """``outcome(i, seed id, walk result) -> SeedOutcome``: the subgraph (with its pool metadata) of a
    walk of :func:`make_walker`, or its rejection or outage."""

    idx = extraction_index(world, config)

    def outcome(i: int, sid: str, result) -> SeedOutcome:
        if isinstance(result, Rejected):
            return SeedOutcome(i, sid, rejection=result)
        if isinstance(result, SelectorUnavailable):
            return SeedOutcome(i, sid, outage=result)
        extra = {"seed_index": i, "pool_seed": seed, "pool_fingerprint": fingerprint}
        return SeedOutcome(i, sid, subgraph=build_subgraph(idx, sid, result, f"sg{i:06d}", extra))

    return outcome


def make_extractor(world, selector, config: ExtractionConfig, sampler: SeedSampler, seed: int, fingerprint: str):
    """``work(i) -> SeedOutcome``: extraction of seed index ``i`` with its own RNG (thread-safe)."""
    walk = make_walker(world, selector, config, sampler, seed)
    outcome = make_outcome(world, config, seed, fingerprint)

    def work(i: int) -> SeedOutcome:
        return outcome(i, *walk(i))

    return work
