"""Ordering a subgraph pool for training, and a resumable cursor over it.

The paper trains on the pool sorted by descending node count so the Proposer meets context-rich
subgraphs first (kg-paths-wcr §4, App. D.5); :func:`order_pool` implements that (``curriculum``),
a seeded shuffle and the file order; :func:`interleave_by_hops` mixes pools of several hop counts so that every
stretch of games has their proportions. :class:`SubgraphPool` is what the environments draw tasks
from: an ordered pool with a position that survives checkpoints (``state_dict``), epochs that
wrap around, and a deterministic hold-out split for validation.
"""

from __future__ import annotations

import hashlib
import logging
import random
from typing import Iterator, Mapping, Sequence, TypeVar

from ..core.subgraph import Subgraph
from ..errors import InvalidArgumentError

logger = logging.getLogger(__name__)

__all__ = ["ORDERS", "order_pool", "interleave_by_hops", "SubgraphPool"]

ORDERS = ("curriculum", "shuffle", "none")


def order_pool(subgraphs: Sequence[Subgraph], order: str = "curriculum", seed: int = 0) -> list[Subgraph]:
    """Return the subgraphs in training order (a new list; the input is untouched).

    ``curriculum``: descending node count, ties broken by id (stable across runs);
    ``shuffle``: a permutation drawn from ``seed``; ``none``: input order.
    """
    if order == "curriculum":
        return sorted(subgraphs, key=lambda s: (-s.node_count, s.id))
    if order == "shuffle":
        out = list(subgraphs)
        random.Random(seed).shuffle(out)
        return out
    if order == "none":
        return list(subgraphs)
    raise InvalidArgumentError(f"unknown pool order {order!r}; choose one of {', '.join(ORDERS)}")


T = TypeVar("T")


def interleave_by_hops(groups: Mapping[int, Sequence[T]]) -> list[T]:
    """Merge hop-count groups into one play order in which every stretch of games has the groups' proportions
    (80 two-hop + 48 three-hop subgraphs, 8 games a step: 3 three-hop games in every step). Item ``i`` of a group
    of ``n`` sits at fraction ``(i + 0.5) / n``; ties go to the smaller hop count; each group keeps its order.

    Why not one hop count after the other: played in blocks (all 2-hop games, then all 3-hop), ten self-play steps
    of 2-hop games taught the KG Proposer to nest two steps and stop, and the held-out 3-hop targets it wrote at
    the cold start (15 of 32) fell to 2 and 3 of 32 in both KG arms of ``benchmarks/bench_selfplay.py``.
    Interleaved, 17, 10, 3 and 1 of 32 (four runs): mixing keeps both lengths in every update but does not by
    itself stop the drift to 2-hop questions (docs/selfplay_runs.md)."""
    keyed = [((i + 0.5) / len(items), h, i, item) for h, items in groups.items() for i, item in enumerate(items)]
    return [item for *_, item in sorted(keyed, key=lambda k: k[:3])]


def _ids_digest(subgraphs: Sequence[Subgraph]) -> str:
    h = hashlib.sha1()
    for s in sorted(sg.id for sg in subgraphs):
        h.update(s.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


class SubgraphPool:
    """An ordered pool of subgraphs with a saveable position.

    :meth:`next` returns subgraphs in order and wraps around at the end of an epoch; with
    ``order="shuffle"`` every epoch gets its own permutation drawn from ``(seed, epoch)``.
    :meth:`state_dict` / :meth:`load_state_dict` save and restore the position (checked against
    the pool's content so a checkpoint cannot silently resume over a different pool).
    """

    def __init__(self, subgraphs: Sequence[Subgraph], order: str = "curriculum", seed: int = 0) -> None:
        if not subgraphs:
            raise InvalidArgumentError(
                "a SubgraphPool needs at least one subgraph; build a pool with `searchgym subgraphs build`"
            )
        ids = [s.id for s in subgraphs]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise InvalidArgumentError(f"duplicate subgraph id {dup!r} in pool")
        self._items = list(subgraphs)
        self.order = order
        self.seed = int(seed)
        self._digest = _ids_digest(self._items)
        self._epoch = 0
        self._position = 0
        self._ordered = self._order_for(0)  # order_pool rejects an unknown order

    @classmethod
    def from_file(cls, path, order: str = "curriculum", seed: int = 0) -> "SubgraphPool":
        """Load a pool JSONL file (see :func:`~searchgym.construction.pool.load_pool`)."""
        from .pool import load_pool

        return cls(load_pool(path), order=order, seed=seed)

    def _order_for(self, epoch: int) -> list[Subgraph]:
        # epoch 0 uses ``seed`` itself so order_pool(items, "shuffle", seed) matches the first pass
        return order_pool(self._items, self.order, self.seed if epoch == 0 else self.seed * 1_000_003 + epoch)

    # ------------------------------------------------------------ access
    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: int) -> Subgraph:
        """The ``i``-th subgraph of the current epoch's order."""
        return self._ordered[i]

    def __iter__(self) -> Iterator[Subgraph]:
        """One pass over the current epoch's order (does not move the position)."""
        return iter(list(self._ordered))

    @property
    def subgraphs(self) -> list[Subgraph]:
        """The current epoch's order (a copy)."""
        return list(self._ordered)

    @property
    def position(self) -> int:
        """Index of the subgraph :meth:`next` returns."""
        return self._position

    @property
    def epoch(self) -> int:
        """Completed passes over the pool."""
        return self._epoch

    def next(self) -> Subgraph:
        """The next subgraph in order; wraps to a new epoch after the last one."""
        if self._position >= len(self._ordered):
            self._epoch += 1
            self._position = 0
            self._ordered = self._order_for(self._epoch)
        sg = self._ordered[self._position]
        self._position += 1
        return sg

    def take(self, k: int) -> list[Subgraph]:
        """The next ``k`` subgraphs (wrapping as needed)."""
        return [self.next() for _ in range(k)]

    # --------------------------------------------------------- checkpoint
    def state_dict(self) -> dict:
        """JSON-serialisable position: epoch, index, order, seed and a digest of the pool ids."""
        return {
            "epoch": self._epoch,
            "position": self._position,
            "order": self.order,
            "seed": self.seed,
            "size": len(self._items),
            "digest": self._digest,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a position saved by :meth:`state_dict`; raises ValueError if the pool differs."""
        try:
            epoch, position = int(state["epoch"]), int(state["position"])
            order, seed, digest = state["order"], int(state["seed"]), state["digest"]
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"not a SubgraphPool state dict ({exc!r}); expected keys epoch, position, order, seed, digest"
            ) from None
        if digest != self._digest or order != self.order or seed != self.seed:
            raise InvalidArgumentError(
                f"state dict is for a different pool (order={order!r}, seed={seed}, digest={digest}) than this one "
                f"(order={self.order!r}, seed={self.seed}, digest={self._digest}); load the same pool file and order"
            )
        if not 0 <= position <= len(self._items) or epoch < 0:
            raise InvalidArgumentError(
                f"state dict position {position} / epoch {epoch} is out of range for {len(self)} subgraphs"
            )
        self._epoch, self._position = epoch, position
        self._ordered = self._order_for(epoch)

    # -------------------------------------------------------------- split
    def split(self, holdout_fraction: float, seed: int = 0) -> tuple["SubgraphPool", "SubgraphPool"]:
        """Deterministic (train, holdout) pools; the holdout has ``round(fraction * len)`` subgraphs
        (at least one when the fraction is positive), drawn by a seeded shuffle of the ids."""
        if not 0.0 < holdout_fraction < 1.0:
            raise InvalidArgumentError(f"holdout_fraction must be in (0, 1), got {holdout_fraction}")
        if len(self._items) < 2:
            raise InvalidArgumentError("cannot split a pool of fewer than 2 subgraphs")
        ids = sorted(s.id for s in self._items)
        random.Random(seed).shuffle(ids)
        k = min(len(ids) - 1, max(1, round(holdout_fraction * len(ids))))
        held = set(ids[:k])
        train = [s for s in self._items if s.id not in held]
        holdout = [s for s in self._items if s.id in held]
        return SubgraphPool(train, self.order, self.seed), SubgraphPool(holdout, self.order, self.seed)
