"""The short-search discount: hand cases, its bounds, the wrapper on its own and stacked with the extra-search
discount over WCR, bad input, the printed reward."""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.evaluation.game_text import reward_text
from searchgym.wrappers import (
    ExtraSearchDiscount,
    MissingTaskDataError,
    ShortSearchDiscount,
    WaypointCoverageReward,
    extra_search_discount,
    short_search_discount,
    wrap_rewards,
)
from tests.support.wrapper_fakes import EventEnv, make_task, make_traj


def _group():
    task = make_task("d2", answers=["Ostrel"], waypoints=["Varn", "Kell"], hops=2)
    once = make_traj(task, ["a", "b"], ["i1", ""], answer="Ostrel", correct=True)
    twice = make_traj(task, ["a", "b", "c"], ["i1", "i2", ""], answer="Ostrel", correct=True)
    thrice = make_traj(task, ["a", "b", "c", "d"], ["i1", "i2", "i3", ""], answer="Ostrel", correct=True)
    none = make_traj(task, ["a"], [""], answer="Ostrel", correct=True)
    wrong = make_traj(task, ["a", "b"], ["i1", ""], answer="Tarsk", correct=False)
    return [once, twice, thrice, none, wrong]


def _step(env):
    env.reset()
    return env.step("a")


def test_a_right_answer_after_fewer_searches_than_hops_keeps_less_of_its_reward():
    _, reward, _, _, info = _step(ShortSearchDiscount(EventEnv(_group())))
    # one search short: 1 − 0.5·(1 − 0.9); two short: 1 − 0.5·(1 − 0.81); at or past the hops: untouched
    assert [ev["reward"] for ev in info["rewards"]] == pytest.approx([0.95, 1.0, 1.0, 0.905, 0.0])
    solver = info["reward_components"]["solver"]
    assert solver["missing_searches"] == [1, 0, 0, 2, 1]
    assert solver["short_search_discount"] == pytest.approx([-0.05, 0.0, 0.0, -0.095, 0.0])  # wrong: untouched
    assert reward == pytest.approx(0.95 + 1 + 1 + 0.905)
    text = reward_text(info["rewards"][0])
    assert text.startswith("0.95 = ") and "short-search discount -0.05" in text and "1 search(es) short" in text


@pytest.mark.parametrize(
    "reward,searches,hops,term",
    [
        (1.0, 2, 2, 0.0),  # as many searches as hops: untouched
        (1.0, 3, 1, 0.0),  # more: not this charge (search_discount's)
        (1.0, 1, 2, -0.05),  # 0.5 · (1 − 0.9)
        (1.0, 0, 3, -0.1355),  # 0.5 · (1 − 0.729)
        (0.2, 1, 2, -0.01),  # scales with the reward
        (0.0, 0, 3, 0.0),  # a wrong or invalid rollout is untouched
        (-0.3, 0, 3, 0.0),  # a negative reward is not made less negative
    ],
)
def test_hand_cases(reward, searches, hops, term):
    assert short_search_discount(reward, searches=searches, hops=hops) == pytest.approx(term)


@settings(max_examples=200, deadline=None)
@given(st.floats(-2, 2, allow_nan=False), st.integers(0, 12), st.integers(1, 6), st.floats(0, 1), st.floats(0.01, 0.99))
def test_it_is_the_extra_search_charge_with_searches_and_hops_swapped(reward, searches, hops, alpha, gamma):
    """So the extra-search discount's bounds (≤ 0, never below 1 − α of a positive reward) hold for it too."""
    assert short_search_discount(reward, searches, hops, alpha, gamma) == extra_search_discount(
        reward, hops, searches, alpha, gamma
    )
    if searches >= hops:
        assert short_search_discount(reward, searches, hops, alpha, gamma) == 0.0


def test_both_charges_over_wcr_hold_the_searches_to_the_hops():
    env = ShortSearchDiscount(ExtraSearchDiscount(WaypointCoverageReward(EventEnv(_group()), alpha=0.3)))
    _, _, _, _, info = _step(env)
    solver = info["reward_components"]["solver"]
    assert {"wcr_bonus", "search_discount", "short_search_discount"} <= set(solver)
    # only the rollout that searched exactly the hops keeps all of a right answer's 1
    assert [ev["reward"] for ev in info["rewards"][:4]] == pytest.approx([0.95, 1.0, 0.95, 0.905])


BOTH = pytest.mark.parametrize("wrapper", [ExtraSearchDiscount, ShortSearchDiscount], ids=lambda w: w.name)


@BOTH
def test_bad_input_names_the_problem(wrapper):
    """Both search-count discounts (the extra-search one's file has its own wrapper cases)."""
    no_hops = make_task("d3", answers=["Ostrel"])
    with pytest.raises(MissingTaskDataError, match=f"hop count for the {wrapper.name} reward"):
        wrapper(EventEnv([make_traj(no_hops, ["a"])])).reset()
    for gamma in (0.0, 1.0):
        with pytest.raises(ValueError, match="gamma"):
            wrapper(EventEnv([]), gamma=gamma)
    for alpha in (1.5, -0.1):
        with pytest.raises(ValueError, match="alpha"):
            wrapper(EventEnv([]), alpha=alpha)


@BOTH
def test_registered_and_rebuilt_by_gym_make(wrapper):
    env = wrap_rewards(gym.make("KGSolverGroup-v0", max_turns=3), f"wcr,{wrapper.name}")
    assert isinstance(env, wrapper) and isinstance(env.env, WaypointCoverageReward)
    again = gym.make(env.spec)
    assert isinstance(again, wrapper) and again._saved_kwargs == env._saved_kwargs
    assert env.get_wrapper_attr("alpha") == 0.3  # WCR's α, not shadowed by the discount's
