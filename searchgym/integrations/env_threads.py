"""Env work off the event loop: the adapters' env resets and steps run in a thread pool.

An env step retrieves (BM25, or an HTTP round trip to a ``searchgym serve``), judges and tokenises;
run on the event loop it stalls every other rollout of the process (verl runs hundreds of agent
loops on one loop per worker), so N rollouts waiting on a slow retriever take N retrieval times
instead of one. :func:`env_runner` returns an ``async (fn, *args)`` that runs ``fn`` in a
process-wide pool of ``threads`` threads, its own (verl tokenises in the loop's default executor,
which env work would otherwise queue behind), optionally holding a lock (env copies that share
mutable state, :func:`searchgym.integrations.environments.state_lock`).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Optional

from ..errors import InvalidArgumentError

__all__ = ["DEFAULT_ENV_THREADS", "EnvRunner", "env_runner"]

#: Threads of the pool env work runs in (per process), unless a loop asks for another size.
DEFAULT_ENV_THREADS = 64

#: ``async (fn, *args) -> fn(*args)``, run off the event loop.
EnvRunner = Callable[..., Awaitable[Any]]

_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(threads: int) -> ThreadPoolExecutor:
    with _POOLS_LOCK:
        pool = _POOLS.get(threads)
        if pool is None:
            pool = _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="searchgym-env")
        return pool


def env_runner(threads: int = DEFAULT_ENV_THREADS, lock: Optional[threading.Lock] = None) -> EnvRunner:
    """An ``async (fn, *args)`` running ``fn(*args)`` in this process's pool of ``threads`` env threads
    (shared by every runner of that size), holding ``lock`` while it runs when one is given."""
    if int(threads) < 1:
        raise InvalidArgumentError(f"env_threads must be >= 1, got {threads}")
    pool = _pool(int(threads))

    def call(fn: Callable[..., Any], args: tuple) -> Any:
        if lock is None:
            return fn(*args)
        with lock:
            return fn(*args)

    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(pool, call, fn, args)

    return run
