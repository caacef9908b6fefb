"""Pool walks as one integer array (what a Ray pool worker sends back): the round trip gives the
same walks, rejections and outages back, and the subgraphs built from them equal extract_subgraph's."""

from __future__ import annotations

import pickle
import random

import pytest

from searchgym.construction import ExtractionConfig, HeuristicSelector, Rejected, SelectorUnavailable
from searchgym.construction.extract import Walk, extract_subgraph, extraction_index, subgraph_from_walk
from searchgym.construction.pool_extraction import SeedSampler, make_walker
from searchgym.construction.selectors import SelectorError
from searchgym.construction.walk_codec import decode_walks, encode_walks
from tests.support.construction_world import build_random_world


@pytest.fixture(scope="module")
def world():
    return build_random_world(600, seed=11)


class FirstCandidate:
    """Plans no length (``hops_planned`` None): always the first candidate."""

    def select(self, context):
        return 1


class DownOnSomeSeeds(HeuristicSelector):
    """The endpoint looks down for seeds whose id ends in 7 (an outage, not a rejection)."""

    def select(self, context):
        if context.seed_id.endswith("7"):
            raise SelectorError("connection refused", "unreachable")
        return super().select(context)


CASES = {
    "heuristic": (HeuristicSelector(3), ExtractionConfig()),
    "inverse edges, literals": (HeuristicSelector(4), ExtractionConfig(allow_inverse_edges=True, min_hops=2)),
    "no plan, many rejections": (FirstCandidate(), ExtractionConfig(min_hops=4, num_distractors=(0, 3))),
    "outages": (DownOnSomeSeeds(5), ExtractionConfig(max_retries=0)),
}


def walked(world, selector, config, n=400, seed=7):
    walk = make_walker(world, selector, config, SeedSampler(extraction_index(world, config).eligible_seeds, seed), seed)
    return [(i, *walk(i)) for i in range(n)]


def same(a, b) -> bool:
    """Items equal; exceptions by type and pickled state (they do not compare by value)."""
    if isinstance(a[2], Exception):
        return a[:2] == b[:2] and type(a[2]) is type(b[2]) and a[2].__reduce__() == b[2].__reduce__()
    return a == b


@pytest.mark.parametrize("case", list(CASES))
def test_round_trip_gives_every_walk_rejection_and_outage_back(world, case):
    selector, config = CASES[case]
    items = walked(world, selector, config)
    kinds = {type(r) for _i, _s, r in items}
    assert Walk in kinds
    if case == "no plan, many rejections":
        assert Rejected in kinds and any(r.hops_planned is None for _i, _s, r in items if isinstance(r, Walk))
    if case == "outages":
        assert SelectorUnavailable in kinds
    if case == "inverse edges, literals":
        walks = [r for _i, _s, r in items if isinstance(r, Walk)]
        assert any(not all(w.forward) for w in walks) and any(c < 0 for w in walks for c in w.path)
    payload = pickle.loads(pickle.dumps(encode_walks(items)))  # as it crosses the process boundary
    back = list(decode_walks(payload, world.entity_ids))
    assert len(back) == len(items) and all(same(a, b) for a, b in zip(items, back))


def test_subgraphs_built_from_decoded_walks_equal_extract_subgraph(world):
    selector, config = CASES["inverse edges, literals"]
    items = walked(world, selector, config, n=150)
    back = decode_walks(encode_walks(items), world.entity_ids)
    for i, sid, walk in back:
        if not isinstance(walk, Walk):
            continue
        direct = extract_subgraph(world, sid, selector, config, random.Random(f"searchgym-pool:7:{i}"), subgraph_id="x")
        assert subgraph_from_walk(world, sid, walk, config, subgraph_id="x").to_dict() == direct.to_dict()


def test_an_empty_chunk_decodes_to_nothing(world):
    assert list(decode_walks(encode_walks([]), world.entity_ids)) == []
