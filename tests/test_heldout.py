"""The held-out answer split and the built-in benchmark: fixed, sized, and disjoint from default training."""

from collections import Counter

import pytest

from searchgym.envs.resources import default_pool
from searchgym.tasks.heldout import (
    BENCHMARK_SIZES,
    HELDOUT_FRACTION,
    builtin_benchmark,
    hop_tasks,
    is_heldout_answer,
    is_heldout_name,
    training_subgraphs,
)
from searchgym.world.synthetic import default_world


@pytest.fixture(scope="module")
def world():
    return default_world()


@pytest.fixture(scope="module")
def bench(world):
    return builtin_benchmark(world)


def _names(sg):
    return {n.lower() for n in sg.answer_node.names}


def test_split_is_a_fixed_hash_of_the_normalised_name():
    assert is_heldout_name("Dask District") == is_heldout_name("  dask   DISTRICT ")
    names = [f"Entity {i}" for i in range(4000)]
    share = sum(map(is_heldout_name, names)) / len(names)
    assert abs(share - HELDOUT_FRACTION) < 0.03


def test_is_heldout_answer_reads_titles_and_literals(world):
    eid = world.entity_ids[0]
    assert is_heldout_answer(world, eid) == is_heldout_name(world.title(eid))
    assert is_heldout_answer(world, "lit:date:1794") == is_heldout_name("1794")


def test_benchmark_is_versioned_sized_and_deterministic(world, bench):
    assert Counter(t.metadata["hops"] for t in bench) == Counter(BENCHMARK_SIZES["v1"])
    again = builtin_benchmark(world)
    assert [(t.id, t.question, t.answers) for t in again] == [(t.id, t.question, t.answers) for t in bench]
    assert len({t.question.lower() for t in bench}) == len(bench)
    assert all(t.id.startswith(f"bench-v1-h{t.metadata['hops']}:") for t in bench)
    assert {t.metadata["family"] for t in bench} <= {"person", "location", "organisation", "date", "number", "other"}
    assert all(is_heldout_name(t.answers[0]) for t in bench)
    assert [t.metadata["hops"] for t in builtin_benchmark(world, hops=[2])] == [2] * BENCHMARK_SIZES["v1"][2]
    with pytest.raises(ValueError, match="unknown benchmark version"):
        builtin_benchmark(world, version="v0")
    with pytest.raises(ValueError, match="not \\[9\\]"):
        builtin_benchmark(world, hops=[9])


def test_benchmark_answers_never_answer_a_default_training_task(world, bench):
    held = {t.answers[0].lower() for t in bench}
    # the envs' default pool: what KGSolver/KGSelfPlay, the trainer and the demo draw from by default
    pool = default_pool(world)
    assert pool and not any(_names(sg) & held for sg in pool)
    # the cold start's k-hop training tasks
    for hops in (1, 2, 3):
        tasks = hop_tasks(world, hops, 200, seed=hops)
        assert len(tasks) == 200 and all(t.metadata["hops"] == hops for t in tasks)
        assert not any({a.lower() for a in t.answers} & held for t in tasks)
    assert not any(_names(sg) & held for sg in training_subgraphs(world, 300, seed=7))


def test_a_world_without_training_answers_still_gets_a_default_pool(tiny_world):
    # the tiny fixture world's only answer is held out: the pool falls back rather than vanishing
    assert default_pool(tiny_world)


def test_a_world_without_training_answers_is_not_over_generated(tiny_world, monkeypatch):
    """A build with no answer on the asked side ends the search: doubling 5 times more would extract 32x as many
    subgraphs for nothing (15 s a pool on the tiny world, paid by every env made from it)."""
    import searchgym.construction as construction

    calls = []
    build = construction.build_pool

    def counted(world, n, **kw):
        calls.append(n)
        return build(world, n, **kw)

    monkeypatch.setattr(construction, "build_pool", counted)
    assert training_subgraphs(tiny_world, 100, seed=0) == []
    assert len(calls) == 1
    assert len(training_subgraphs(tiny_world, 100, seed=0, split="any")) == 100  # the fallback still fills
