"""A hop-count curriculum for the self-play pool: ``KGSelfPlay-v0(pool_hops=[2, 3])`` plays training-side
subgraphs of 2 and 3 hops mixed in every step, and the recipes' small sizes use it (their cold-started model
reaches 2-3 hops, the default pool's paths run 3-7)."""

from __future__ import annotations

import gymnasium as gym
import pytest

from searchgym.construction import interleave_by_hops
from searchgym.envs.resources import hop_curriculum_pool, resolve_pool
from searchgym.errors import InvalidArgumentError
from searchgym.tasks.heldout import is_heldout_answer
from searchgym.training.recipes import recipe_config
from searchgym.world.synthetic import default_world


def test_interleaving_gives_every_step_the_pools_hop_proportions():
    """80 two-hop + 48 three-hop subgraphs at 8 games a step: 3 three-hop games in each of the 16 steps; each group
    keeps its own order, nothing is lost or repeated (blocks taught the Proposer to stop after two hops)."""
    order = interleave_by_hops({2: [(2, i) for i in range(80)], 3: [(3, i) for i in range(48)]})
    assert sorted(order) == sorted([(2, i) for i in range(80)] + [(3, i) for i in range(48)])
    assert [sum(h == 3 for h, _ in order[k : k + 8]) for k in range(0, 128, 8)] == [3] * 16
    assert [i for h, i in order if h == 2] == list(range(80))
    assert interleave_by_hops({3: ["b"], 2: ["a"]}) == ["a", "b"]  # ties: the smaller hop count first


def test_the_pool_plays_the_given_hop_counts_mixed_on_the_training_side():
    world = default_world()
    pool = hop_curriculum_pool(world, [2, 3])
    hops = [len(s.path) - 1 for s in pool]
    assert set(hops) == {2, 3} and hops.count(2) == hops.count(3)
    assert all(set(hops[k : k + 4]) == {2, 3} for k in range(0, len(hops), 4))  # every 4 games play both
    assert not any(is_heldout_answer(world, s.path[-1]) for s in pool)
    env = gym.make("KGSelfPlay-v0", pool_hops=[2, 3])
    assert [len(s.path) - 1 for s in env.unwrapped.pool] == hops
    given = pool[:3]  # a given pool is more specific: played as it is
    assert resolve_pool(world, given, "given", hops=[2, 3]) == given
    with pytest.raises(InvalidArgumentError, match="pool_hops"):
        hop_curriculum_pool(world, [0])


@pytest.mark.parametrize("size", ["cpu", "gpu"])
def test_the_small_recipe_sizes_play_two_then_three_hops(size):
    assert recipe_config("kg-wcr", size).env_kwargs["pool_hops"] == [2, 3]
    assert "pool_hops" not in recipe_config("kg-wcr", "paper").env_kwargs  # the paper's own pool


@pytest.mark.parametrize("env_id", ["KGSolver-v0", "KGProposer-v0"])
def test_the_single_role_envs_take_the_same_hop_counts(env_id):
    """``pool_hops`` on a single-role env draws its targets from the same training-side pool (how a rejection-
    sampling round of the cold start samples the Proposer on 2- and 3-hop targets without touching held-out ones)."""
    world = default_world()
    env = gym.make(env_id, world=world, pool_hops=[2, 3])
    targets = [t.subgraph for t in env.unwrapped.tasks]
    assert [s.id for s in targets] == [s.id for s in hop_curriculum_pool(world, [2, 3])]
    assert not any(is_heldout_answer(world, s.path[-1]) for s in targets)
