"""The extra-search discount: hand cases, its bounds, the wrapper on its own and stacked over WCR."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.evaluation.game_text import reward_text
from searchgym.wrappers import (
    ExtraSearchDiscount,
    WaypointCoverageReward,
    extra_search_discount,
)
from tests.support.wrapper_fakes import EventEnv, make_task, make_traj


def test_hand_cases():
    assert extra_search_discount(1.0, searches=1, hops=1) == 0.0  # as many searches as hops: untouched
    assert extra_search_discount(1.0, searches=0, hops=2) == 0.0  # fewer: no bonus (DynaSearcher's β would pay one)
    assert extra_search_discount(1.0, searches=2, hops=1) == pytest.approx(-0.05)  # 0.5 · (1 − 0.9)
    assert extra_search_discount(1.0, searches=3, hops=1) == pytest.approx(-0.095)  # 0.5 · (1 − 0.81)
    assert extra_search_discount(0.2, searches=2, hops=1) == pytest.approx(-0.01)  # scales with the reward
    assert extra_search_discount(0.0, searches=5, hops=1) == 0.0  # a wrong or invalid rollout is untouched
    assert extra_search_discount(-0.3, searches=5, hops=1) == 0.0  # a negative reward is not made less negative


@settings(max_examples=200, deadline=None)
@given(
    st.floats(-2, 2, allow_nan=False),
    st.integers(0, 12),
    st.integers(1, 6),
    st.floats(0, 1),
    st.floats(0.01, 0.99),
)
def test_bounds(reward, searches, hops, alpha, gamma):
    term = extra_search_discount(reward, searches, hops, alpha, gamma)
    assert term <= 0.0
    assert reward + term >= (1 - alpha) * reward - 1e-12 if reward > 0 else term == 0.0
    if searches <= hops:
        assert term == 0.0


def _group():
    task = make_task("d1", answers=["Ostrel"], waypoints=["Ostrel"], hops=1)
    once = make_traj(task, ["a", "b"], ["i1", ""], answer="Ostrel", correct=True)
    twice = make_traj(task, ["a", "b", "c"], ["i1", "i2", ""], answer="Ostrel", correct=True)
    wrong = make_traj(task, ["a", "b", "c"], ["i1", "i2", ""], answer="Tarsk", correct=False)
    return [once, twice, wrong]


def test_wrapper_discounts_the_rollout_that_searched_past_the_hops():
    env = ExtraSearchDiscount(EventEnv(_group()))
    env.reset()
    _, reward, _, _, info = env.step("a")
    assert [ev["reward"] for ev in info["rewards"]] == pytest.approx([1.0, 0.95, 0.0])
    solver = info["reward_components"]["solver"]
    assert solver["extra_searches"] == [0, 1, 1]
    assert solver["search_discount"] == pytest.approx([0.0, -0.05, 0.0])
    assert reward == pytest.approx(1.95)
    text = reward_text(info["rewards"][1])
    assert text.startswith("0.95 = ") and "extra-search discount -0.05" in text and "1 search(es) beyond" in text


def test_stacked_outside_wcr_it_discounts_the_shaped_reward():
    env = ExtraSearchDiscount(WaypointCoverageReward(EventEnv(_group()), alpha=0.3))
    env.reset()
    _, _, _, _, info = env.step("a")
    solver = info["reward_components"]["solver"]
    assert "wcr_bonus" in solver and "search_discount" in solver
    assert info["rewards"][1]["reward"] == pytest.approx(0.95)


# bad input and registration: tests/test_wrappers_short_search_discount.py, for both search-count discounts
