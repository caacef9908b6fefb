"""Pool building fanned out over Ray (``build_pool(..., ray=RayConfig(...))``, ``subgraphs build --ray``).

Seed indices are cut into chunks of consecutive indices; each Ray actor holds the world, selector
and extraction config once and extracts a chunk per call, every index with its own RNG derived from
``(seed, index)`` exactly as the local path does. Chunks are committed in order through the same
:class:`~searchgym.construction.pool._PoolRun` as a local build, so the pool (and the JSONL file,
and its resume) is identical to a local run with the same seed, for any number of workers; a worker
killed mid-chunk is restarted by Ray and the chunk re-run (:func:`searchgym.ray_support.ordered_map`).
"""

from __future__ import annotations

import logging

from ..ray_support import RayConfig, ordered_map

logger = logging.getLogger(__name__)

__all__ = ["run_pool_on_ray", "DEFAULT_CHUNK"]

#: Seed indices per actor call: large enough to amortise a call (~1 ms) over ~1 ms extractions.
DEFAULT_CHUNK = 1000


class PoolActor:
    """A Ray actor extracting chunks of seed indices (built once per worker)."""

    def __init__(self, world, selector, config, eligible, seed: int, fingerprint: str) -> None:
        from .pool import SeedSampler, make_extractor

        self.work = make_extractor(world, selector, config, SeedSampler(eligible, seed), seed, fingerprint)

    def run(self, chunk: tuple[int, int, tuple]) -> list:
        """Outcomes of seed indices ``start .. stop-1`` not in ``skip`` (done by a resumed run)."""
        start, stop, skip = chunk
        return [self.work(i) for i in range(start, stop) if i not in skip]


def run_pool_on_ray(
    ray_config: RayConfig, world, selector, config, eligible, seed: int, fingerprint: str, run, max_attempts: int
) -> None:
    """Commit seed indices ``0, 1, ...`` into ``run`` from Ray workers until it is finished."""
    size = ray_config.chunk or DEFAULT_CHUNK

    def chunks():
        for start in range(0, max_attempts, size):
            stop = min(start + size, max_attempts)
            skip = tuple(i for i in range(start, stop) if run.is_done(i))
            if len(skip) < stop - start:
                yield start, stop, skip

    def commit(_chunk, outcomes) -> None:
        for o in outcomes:
            if run.finished():
                return
            run.commit(o)

    ordered_map(
        ray_config, PoolActor, (world, selector, config, eligible, seed, fingerprint), chunks(), commit, run.finished
    )
