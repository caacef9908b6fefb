"""Fan CPU-bound work out over a Ray cluster, with results handed back in order (the ``ray`` extra).

:func:`ordered_map` runs ``actor.run(chunk)`` for a stream of chunks on ``workers`` Ray actors
(each built once with the heavy shared inputs: world, index, selector, agent), keeps at most two
chunks in flight per actor and hands the results to ``on_result`` strictly in chunk order, so the
caller commits exactly what a sequential run would. An actor whose process dies is restarted and
its chunk re-run, up to :data:`MAX_RESTARTS` times (every searchgym chunk is a pure function of its
inputs), so nothing is lost or committed twice; a chunk that keeps killing its worker fails the run
with Ray's error instead of looping. An exception raised by the work itself is not retried.
``should_stop()`` ends dispatching early; results of chunks past that point are discarded.

``RayConfig.address``: ``None`` starts a private local instance with ``workers`` CPUs;
``"auto"`` joins the cluster this machine belongs to; ``"ray://host:10001"`` a remote one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from ..errors import InvalidArgumentError, SearchGymRuntimeError

logger = logging.getLogger(__name__)

#: Restarts of a dead actor (and retries of its chunk) before the run fails.
MAX_RESTARTS = 3

__all__ = [
    "MAX_RESTARTS",
    "RayConfig",
    "require_ray",
    "init_ray",
    "ordered_map",
    "add_ray_args",
    "ray_config_from_args",
]


@dataclass(frozen=True)
class RayConfig:
    """Where and how wide to fan out: ``address`` (see module doc), ``workers`` actors, ``chunk``
    items per actor call (``0``: the caller's default)."""

    address: Optional[str] = None
    workers: int = 2
    chunk: int = 0

    def __post_init__(self) -> None:
        if self.workers < 1 or self.chunk < 0:
            raise InvalidArgumentError(
                f"Ray needs workers >= 1 and chunk >= 0, got workers={self.workers}, chunk={self.chunk}"
            )
        if self.address is not None and not str(self.address).strip():
            raise InvalidArgumentError("empty Ray address; use 'auto', 'local', ray://HOST:PORT or HOST:PORT")


def require_ray():
    """The ``ray`` module, or a RuntimeError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise SearchGymRuntimeError("--ray needs Ray: pip install 'searchgym[ray]'") from None
    return ray


def init_ray(config: RayConfig):
    """Connect to (or start) Ray once per process; returns the module."""
    ray = require_ray()
    if not ray.is_initialized():
        local = config.address in (None, "local")
        kwargs = dict(num_cpus=config.workers, include_dashboard=False) if local else {}
        ray.init(
            address=None if local else config.address,
            log_to_driver=False,
            logging_level=logging.WARNING,
            configure_logging=False,
            **kwargs,
        )
        logger.info("Ray %s: %s", "local instance" if local else config.address, ray.cluster_resources())
    return ray


def ordered_map(
    config: RayConfig,
    actor_cls: type,
    actor_args: tuple,
    chunks: Iterable[Any],
    on_result: Callable[[Any, Any], None],
    should_stop: Callable[[], bool] = lambda: False,
) -> int:
    """Run ``actor_cls(*actor_args).run(chunk)`` for each chunk on ``config.workers`` actors and call
    ``on_result(chunk, result)`` in chunk order; returns the number of chunks committed."""
    ray = init_ray(config)
    remote_cls = ray.remote(num_cpus=1, max_restarts=MAX_RESTARTS, max_task_retries=MAX_RESTARTS)(actor_cls)
    shared = [ray.put(a) for a in actor_args]  # one copy in the object store for every actor
    actors = [remote_cls.remote(*shared) for _ in range(config.workers)]
    source = iter(chunks)
    inflight: dict = {}  # ObjectRef -> (sequence number, chunk, actor index)
    load = [0] * len(actors)
    buffered: dict[int, tuple] = {}
    next_seq = commit_seq = 0
    exhausted = False
    try:
        while True:
            while not exhausted and not should_stop() and min(load) < 2:
                chunk = next(source, None)
                if chunk is None:
                    exhausted = True
                    break
                a = load.index(min(load))
                inflight[actors[a].run.remote(chunk)] = (next_seq, chunk, a)
                load[a] += 1
                next_seq += 1
            if not inflight:
                break
            ready, _ = ray.wait(list(inflight), num_returns=1)
            for ref in ready:
                seq, chunk, a = inflight.pop(ref)
                load[a] -= 1
                buffered[seq] = (chunk, ray.get(ref))
            while commit_seq in buffered and not should_stop():
                chunk, result = buffered.pop(commit_seq)
                on_result(chunk, result)
                commit_seq += 1
            if should_stop():
                break
    finally:
        for ref in inflight:
            ray.cancel(ref, force=False)
        for actor in actors:
            ray.kill(actor, no_restart=True)
    return commit_seq


def add_ray_args(parser) -> None:
    """``--ray [ADDRESS]``, ``--ray-workers N`` and ``--ray-chunk N`` on a sub-command."""
    parser.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="fan out over Ray: no value starts a local instance; 'auto' or ray://HOST:PORT joins a cluster",
    )
    parser.add_argument("--ray-workers", type=int, default=2, help="Ray actors (default 2)")
    parser.add_argument("--ray-chunk", type=int, default=0, help="items per actor call (default: per command)")


def ray_config_from_args(args) -> Optional[RayConfig]:
    """The :class:`RayConfig` of ``--ray`` (``None`` without it)."""
    if getattr(args, "ray", None) is None:
        return None
    return RayConfig(address=None if args.ray == "local" else args.ray, workers=args.ray_workers, chunk=args.ray_chunk)
