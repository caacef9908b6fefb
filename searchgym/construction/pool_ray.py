"""Pool building fanned out over Ray (``build_pool(..., ray=RayConfig(...))``, ``subgraphs build --ray``).

Seed indices are cut into chunks of consecutive indices; each Ray actor holds the world, selector
and extraction config once and walks a chunk per call, every index with its own RNG derived from
``(seed, index)`` exactly as the local path does. A chunk comes back as the walks' codes in one
integer array (:mod:`searchgym.construction.walk_codec`), not as pickled subgraphs: the driver shares
the machine's cores with the workers, so its work per subgraph is kept to decoding the codes and
building the subgraph record. Chunks are committed in order through the same run (the build's
commit log, :class:`~searchgym.construction.pool._PoolRun`) as a local build, so the pool (and the JSONL file,
and its resume) is identical to a local run with the same seed, for any number of workers; a worker
killed mid-chunk is restarted by Ray and the chunk re-run (:func:`searchgym.core.ray_support.ordered_map`).
"""

from __future__ import annotations

import gc
import logging
from contextlib import contextmanager

from ..core.ray_support import RayConfig, ordered_map
from .pool_extraction import SeedSampler, make_outcome, make_walker
from .walk_codec import decode_walks, encode_walks

logger = logging.getLogger(__name__)

__all__ = ["run_pool_on_ray", "DEFAULT_CHUNK"]

#: Seed indices per actor call: large enough to amortise a call (~1 ms) over ~0.3 ms extractions.
DEFAULT_CHUNK = 1000


@contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector while a chunk's subgraphs are built in the driver.

    Every record built survives (it joins the pool), so collections during the build would only
    re-scan them; with the collector running, that re-scanning cost the driver as much as building
    the records. The collector resumes (if it was on) right after, and catches up in one pass.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class PoolActor:
    """A Ray actor walking chunks of seed indices (built once per worker)."""

    def __init__(self, world, selector, config, eligible, seed: int) -> None:
        self.walk = make_walker(world, selector, config, SeedSampler(eligible, seed), seed)

    def run(self, chunk: tuple[int, int, tuple]):
        """Encoded walks (:func:`~searchgym.construction.walk_codec.encode_walks`) of seed indices
        ``start .. stop-1`` not in ``skip`` (done by a resumed run)."""
        start, stop, skip = chunk
        walk, done = self.walk, frozenset(skip)
        return encode_walks((i, *walk(i)) for i in range(start, stop) if i not in done)


def run_pool_on_ray(
    ray_config: RayConfig, world, selector, config, eligible, seed: int, fingerprint: str, run, max_attempts: int
) -> None:
    """Commit seed indices ``0, 1, ...`` into ``run`` from Ray workers until it is finished.

    ``run`` is the build's commit log (``is_done(i)``, ``finished()``, ``commit(outcome)``), the same one a
    local build commits into."""
    size = ray_config.chunk or DEFAULT_CHUNK
    outcome = make_outcome(world, config, seed, fingerprint)
    entity_ids = world.entity_ids

    def chunks():
        for start in range(0, max_attempts, size):
            stop = min(start + size, max_attempts)
            skip = tuple(i for i in range(start, stop) if run.is_done(i))
            if len(skip) < stop - start:
                yield start, stop, skip

    def commit(_chunk, payload) -> None:
        with _collector_paused():
            for i, sid, result in decode_walks(payload, entity_ids):
                if run.finished():
                    return
                run.commit(outcome(i, sid, result))

    ordered_map(ray_config, PoolActor, (world, selector, config, eligible, seed), chunks(), commit, run.finished)
