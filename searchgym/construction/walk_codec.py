"""Pool walks as one flat integer array, so a chunk crosses a process boundary cheaply.

A Ray pool worker (:mod:`searchgym.construction.pool_ray`) walks a chunk of seed indices and hands
the driver back :class:`~searchgym.construction.extract.Walk` codes instead of pickled
:class:`~searchgym.core.subgraph.Subgraph` objects: one ``int64`` array (sent by Ray without
pickling its contents) plus the rare rejections and outages beside it. Unpickling a chunk of
subgraph objects cost the driver about as much as a third of the extraction itself; decoding the
array is a fraction of that, and the driver builds each subgraph from its own copy of the world
exactly as the local path does, so the pool is the same.

Layout, per walked seed index in order: ``i, K``, then for a walk (``K >= 0`` hops) the ``K + 1``
path codes, ``K`` relation rows, ``K`` forward flags, the branch count and per branch
``diverge_at, L`` with ``L`` node codes and ``L`` relation rows, then the stop reason (index into
:data:`~searchgym.construction.extract.STOP_REASONS`), selector calls, selector failures, planned
distractors and planned hops (``-1``: none). ``K = -1`` marks a rejection or outage: the next entry
of the side list, ``(seed id, exception)``.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from .extract import STOP_REASONS, Walk

__all__ = ["encode_walks", "decode_walks"]

_STOP_CODE = {reason: code for code, reason in enumerate(STOP_REASONS)}


def encode_walks(items) -> tuple[np.ndarray, list]:
    """``(array, side list)`` of ``(i, seed id, Walk | exception)`` items (in seed index order)."""
    flat: list[int] = []
    side: list = []
    add, extend = flat.append, flat.extend
    for i, sid, result in items:
        add(i)
        if not isinstance(result, Walk):
            add(-1)
            side.append((sid, result))
            continue
        add(len(result.rel_rows))
        extend(result.path)
        extend(result.rel_rows)
        extend(result.forward)
        add(len(result.branches))
        for k, nodes, rels in result.branches:
            add(k)
            add(len(nodes))
            extend(nodes)
            extend(rels)
        planned = result.hops_planned
        extend(
            (
                _STOP_CODE[result.stop],
                result.selector_calls,
                result.selector_failures,
                result.distractors_planned,
                -1 if planned is None else planned,
            )
        )
    return np.array(flat, dtype=np.int64), side


def decode_walks(payload: tuple[np.ndarray, list], entity_ids: Sequence[str]) -> Iterator[tuple]:
    """The ``(i, seed id, Walk | exception)`` items of :func:`encode_walks`, in order."""
    array, side = payload
    v = array.tolist()
    side_items = iter(side)
    p, end = 0, len(v)
    while p < end:
        i, k = v[p], v[p + 1]
        p += 2
        if k < 0:
            sid, exc = next(side_items)
            yield i, sid, exc
            continue
        path = v[p : p + k + 1]
        p += k + 1
        rel_rows = v[p : p + k]
        p += k
        forward = [bool(f) for f in v[p : p + k]]
        p += k
        branches = []
        count = v[p]
        p += 1
        for _ in range(count):
            at, n = v[p], v[p + 1]
            p += 2
            branches.append((at, v[p : p + n], v[p + n : p + 2 * n]))
            p += 2 * n
        stop, calls, failures, planned_d, planned_h = v[p : p + 5]
        p += 5
        walk = Walk(
            path,
            rel_rows,
            forward,
            branches,
            STOP_REASONS[stop],
            calls,
            failures,
            planned_d,
            None if planned_h < 0 else planned_h,
        )
        yield i, entity_ids[path[0]], walk
