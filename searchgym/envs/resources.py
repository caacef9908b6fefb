"""What the envs are built from, resolved from user arguments, with per-process caches.

``gym.make("KGSelfPlay-v0")`` with no arguments must work offline and fast, so the default world
(:func:`searchgym.world.synthetic.default_world`), its heuristic subgraph pool and its BM25 index
are built once per process per world and shared by every env (they are read-only).
Heavy modules are imported inside the functions so ``import searchgym`` stays light.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from ..core.arg_checks import check_counts
from ..core.subgraph import Subgraph
from ..errors import InvalidArgumentError, InvalidTypeError
from ..retrieval.base import Retriever
from ..world import World
from ..world.shared import share

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_POOL_SIZE",
    "DEFAULT_POOL_SEED",
    "resolve_world",
    "resolve_pool",
    "resolve_retriever",
    "resolve_kg",
    "resolve_judge",
    "default_pool",
    "default_retriever",
    "default_reader",
]

DEFAULT_POOL_SIZE = 128  # subgraphs in the default heuristic pool
DEFAULT_POOL_SEED = 0  # the default pool is the same in every process

_lock = threading.RLock()
_pools: "weakref.WeakKeyDictionary[World, list[Subgraph]]" = weakref.WeakKeyDictionary()
_kg: "weakref.WeakKeyDictionary[World, Any]" = weakref.WeakKeyDictionary()
_readers: "weakref.WeakKeyDictionary[World, Any]" = weakref.WeakKeyDictionary()


def resolve_world(world: Union[World, str, Path, None]) -> World:
    """A :class:`World` as is, a saved world directory loaded, or ``None`` → the default world."""
    if isinstance(world, World):
        return world
    if world is None:
        from ..world.synthetic import default_world

        return default_world()
    if isinstance(world, (str, os.PathLike)):
        from ..world import load_world

        return load_world(world)
    raise InvalidTypeError(
        f"world must be a World, a saved-world path or None (default world), got {type(world).__name__}"
    )


def _per_world(cache: "weakref.WeakKeyDictionary[World, Any]", world: World, build: Callable[[], Any]) -> Any:
    """``cache[world]``, built with ``build()`` on first use (under the module lock)."""
    with _lock:
        value = cache.get(world)
        if value is None:
            value = build()
            cache[world] = value
        return value


def default_pool(world: World) -> list[Subgraph]:
    """The heuristic subgraph pool of ``world`` (``DEFAULT_POOL_SIZE`` subgraphs, seed 0, curriculum
    order), built once per process and world. Its answers are all on the training side of
    :mod:`searchgym.tasks.heldout`, so the built-in benchmark stays held out from default training."""

    def build() -> list[Subgraph]:
        from ..construction import order_pool
        from ..tasks.heldout import training_subgraphs

        subgraphs = training_subgraphs(world, DEFAULT_POOL_SIZE, seed=DEFAULT_POOL_SEED)
        if not subgraphs:  # a toy world whose every answer is held out: there is nothing to hold out from
            logger.warning(
                "world %r has no training-side answers; its default pool is not held out from builtin_benchmark(world)",
                world.name,
            )
            subgraphs = training_subgraphs(world, DEFAULT_POOL_SIZE, seed=DEFAULT_POOL_SEED, split="any")
        pool = order_pool(subgraphs, "curriculum", DEFAULT_POOL_SEED)
        if not pool:
            raise InvalidArgumentError(
                f"no training-side subgraph could be extracted from world {world.name!r}; "
                "pass pool=... or use a world with paths of 3+ hops"
            )
        logger.info("built default pool of %d subgraphs for world %r", len(pool), world.name)
        return pool

    return _per_world(_pools, world, build)


_hop_pools: "weakref.WeakKeyDictionary[World, dict]" = weakref.WeakKeyDictionary()


def hop_curriculum_pool(world: World, hops: Sequence[int]) -> list[Subgraph]:
    """Training-side subgraphs whose target paths have the given hop counts, ``DEFAULT_POOL_SIZE // len(hops)``
    of each (each in curriculum order), interleaved so that every step plays all of them
    (:func:`~searchgym.construction.curriculum.interleave_by_hops`): the hop-count curriculum of a recipe's small
    sizes, which play paths a cold-started small model can already reach (kg-paths-wcr orders its subgraphs easy
    to hard) instead of the default pool's 3-7 hops. Built once per process, world and hops."""
    from ..construction import interleave_by_hops, order_pool
    from ..tasks.heldout import training_subgraphs

    key = check_counts("pool_hops", hops, example="[1, 2]")
    if not key:
        raise InvalidArgumentError("pool_hops must be hop counts >= 1 like [1, 2], got none")
    per_world = _per_world(_hop_pools, world, dict)
    with _lock:
        if key not in per_world:
            n = max(1, DEFAULT_POOL_SIZE // len(key))
            per_world[key] = interleave_by_hops(
                {
                    h: order_pool(training_subgraphs(world, n, seed=DEFAULT_POOL_SEED, hops=h), "curriculum", 0)
                    for h in key
                }
            )
        if not per_world[key]:  # a hop count longer than any path of the world: no game could be played
            raise InvalidArgumentError(
                f"world {world.name!r} has no training-side subgraph of {', '.join(map(str, key))} hops; "
                "give pool_hops it has (or pool_hops=None for the default pool)"
            )
        return list(per_world[key])


def resolve_pool(
    world: World,
    pool: Union[Sequence[Subgraph], str, Path, None],
    order: str = "curriculum",
    seed: int = 0,
    hops: Optional[Sequence[int]] = None,
) -> list[Subgraph]:
    """A subgraph list: given, loaded from a JSONL pool file, or the cached default pool (``hops``: the
    :func:`hop_curriculum_pool` of those hop counts instead; a given ``pool`` is more specific and wins, said in
    the log, so a recipe size's hop counts never override the pool a user or benchmark passes).

    ``order`` re-orders a given/loaded pool (``"curriculum"``, ``"shuffle"`` or ``"given"`` to keep it).
    """
    if hops is not None and pool is not None:
        logger.info("a subgraph pool was given: it is played as it is, pool_hops=%s is not used", list(hops))
    elif hops is not None:
        subgraphs = hop_curriculum_pool(world, hops)
        return subgraphs if order in ("curriculum", "given") else _order(subgraphs, order, seed)
    if pool is None:
        subgraphs = default_pool(world)
        return list(subgraphs) if order in ("curriculum", "given") else _order(subgraphs, order, seed)
    if isinstance(pool, (str, Path)):
        from ..construction import load_pool

        pool = load_pool(pool)
    subgraphs = list(pool)
    if not subgraphs:
        raise InvalidArgumentError(
            "the subgraph pool is empty; build one with `searchgym subgraphs build` or pass pool=None"
        )
    bad = [type(s).__name__ for s in subgraphs if not isinstance(s, Subgraph)]
    if bad:
        raise InvalidTypeError(f"pool must hold Subgraph records, found {bad[0]}")
    return subgraphs if order == "given" else _order(subgraphs, order, seed)


def _order(subgraphs: Sequence[Subgraph], order: str, seed: int) -> list[Subgraph]:
    if order not in ("curriculum", "shuffle"):
        raise InvalidArgumentError(f"order must be 'curriculum', 'shuffle' or 'given', got {order!r}")
    from ..construction import order_pool

    return list(order_pool(list(subgraphs), order, seed))


def default_retriever(world: World) -> Retriever:
    """BM25 over the world's documents, built once per process and world (the retrieval
    factory's cached ``make_retriever(world, "bm25")``)."""
    from ..retrieval import make_retriever

    return make_retriever(world, "bm25")


def resolve_retriever(world: World, retriever: Union[Retriever, str, None]) -> Retriever:
    """A :class:`Retriever` as is; an ``http(s)://`` URL → ``RemoteRetriever`` (comma-separated
    URLs → ``ReplicatedRetriever``); a backend name
    (``"bm25"``, ``"dense"``, ...) → ``make_retriever(world, name)``; ``"bm25:passages=2"`` → that
    backend over the documents split into 2-sentence passages (a plain value a config file can hold);
    ``None`` → cached BM25."""
    if isinstance(retriever, Retriever):
        return retriever
    if retriever is None or retriever == "bm25":
        return default_retriever(world)
    if isinstance(retriever, str):
        if retriever.startswith(("http://", "https://")):
            if "," in retriever:  # several replicas: spread the load, fail over
                from ..retrieval.replicas import ReplicatedRetriever

                return ReplicatedRetriever(retriever)
            from ..retrieval.client import RemoteRetriever

            return RemoteRetriever(retriever)
        from ..retrieval import make_retriever

        backend, _, option = retriever.partition(":")
        if option:
            key, _, value = option.partition("=")
            if key.strip() != "passages" or not value.strip().isdigit() or int(value) < 1:
                raise InvalidArgumentError(
                    f"retriever={retriever!r}: the only option is passages=N (N >= 1 sentences), e.g. 'bm25:passages=2'"
                )
            return make_retriever(world, backend.strip(), passage_sentences=int(value))
        return make_retriever(world, retriever)
    raise InvalidTypeError(
        f"retriever must be a Retriever, a URL, a backend name or None, got {type(retriever).__name__}"
    )


def resolve_kg(world: World, kg: Any) -> Any:
    """The KG tool: ``True`` → cached ``KGLookup(world)``; ``False``/``None`` → none; an object with
    ``lookup(entities, relations, query)`` as is."""
    if kg is None or kg is False:
        return None
    if kg is True:
        from ..retrieval.kg import KGLookup

        return _per_world(_kg, world, lambda: share(KGLookup(world), shared_kg, world))
    if not callable(getattr(kg, "lookup", None)):
        raise InvalidTypeError("kg_tool must be True/False or an object with lookup(entities, relations, query)")
    return kg


def resolve_judge(judge: Any) -> Any:
    """The answer judge: ``None`` → ``ExactMatchJudge()``; anything with ``judge(question, prediction,
    golds) -> Verdict`` as is (e.g. ``LLMJudge(generator)``)."""
    from ..scoring.judge import ExactMatchJudge

    if judge is None:
        return ExactMatchJudge()
    if not callable(getattr(judge, "judge", None)):
        raise InvalidTypeError(
            "judge must have judge(question, prediction, golds) -> Verdict (see searchgym.scoring.judge)"
        )
    return judge


def default_reader(world: World) -> Any:
    """The offline ``ExtractiveReader(world)`` of RAG verification, built once per process and world
    (its name index is the expensive part; the reader is read-only once built)."""
    from ..scoring.rag_verifier import ExtractiveReader

    return _per_world(_readers, world, lambda: share(ExtractiveReader(world), default_reader, world))


def shared_kg(world: World) -> Any:
    """The cached ``KGLookup(world)`` (what a shared KG tool unpickles as)."""
    return resolve_kg(world, True)


def deepcopy_sharing(obj: Any, memo: dict, shared: Sequence[Any]) -> Any:
    """``copy.deepcopy`` of ``obj``'s attributes, except the read-only ``shared`` resources (world,
    index, KG tool, judge, ...), which the copy references instead of copying."""
    import copy

    for res in shared:
        if res is not None:
            memo[id(res)] = res
    new = obj.__class__.__new__(obj.__class__)
    memo[id(obj)] = new
    for name, value in obj.__dict__.items():
        setattr(new, name, copy.deepcopy(value, memo))
    return new
