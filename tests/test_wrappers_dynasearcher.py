"""DynaSearcher multi-reward: Eq. 1-6 on hand cases, bounds, the wrapper and its failure paths."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.wrappers import (
    DynaSearcherReward,
    MissingTaskDataError,
    accuracy_reward,
    answer_score,
    dynasearcher_reward,
    recall_reward,
    retrieval_penalty,
)
from tests.support.wrapper_fakes import EventEnv, make_task, make_traj


def test_answer_score_switches_between_cover_em_and_f1():
    # short prediction (< 3x gold words): cover-EM
    assert answer_score("in Ostrel", ["Ostrel"]) == 1.0
    assert answer_score("Ostrelia", ["Ostrel"]) == 0.0
    # long prediction (>= 3x gold words): token F1 (p = 1/4, r = 1 -> 0.4)
    assert answer_score("the city of Ostrel indeed", ["Ostrel"]) == pytest.approx(0.4)
    assert answer_score("", ["Ostrel"]) == 0.0
    # max over aliases
    assert answer_score("Republic of Merovia", ["Merovia", "Republic of Merovia"]) == 1.0


def test_accuracy_reward_floor_and_format_gate():
    assert accuracy_reward("wrong", ["Ostrel"], True) == 0.1
    assert accuracy_reward("Ostrel", ["Ostrel"], False) == 0.0
    assert accuracy_reward("Ostrel", ["Ostrel"], True) == 1.0


def test_recall_and_penalty():
    assert recall_reward(["Tarsk", "merovia ", "Weather"], ["Tarsk", "Merovia", "Ostrel", "Tarsk"]) == pytest.approx(
        2 / 3
    )
    with pytest.raises(ValueError, match="gold"):
        recall_reward(["x"], [])
    assert retrieval_penalty(3, 3) == 0.0
    assert retrieval_penalty(5, 3) == pytest.approx(1 - 0.81)
    assert retrieval_penalty(1, 3) == -0.2  # 1 - 0.9^-2 = -0.2345... floored at beta
    assert retrieval_penalty(2, 3) == pytest.approx(1 - 1 / 0.9)  # -0.111: a slight bonus
    with pytest.raises(ValueError, match="gamma"):
        retrieval_penalty(1, 1, gamma=1.5)


def test_full_reward_hand_case():
    terms = dynasearcher_reward(
        "Ostrel",
        ["Ostrel"],
        format_ok=True,
        retrieved_titles=["Tarsk", "Merovia"],
        gold_titles=["Alice Varn", "Tarsk", "Merovia", "Ostrel"],
        retrievals=5,
        hops=3,
    )
    # r_acc 1; recall 0.5; penalty 0.19; gain 0.5 * 0.31 = 0.155
    assert terms["reward"] == pytest.approx(1.155)
    assert terms["dyna_gain"] == pytest.approx(0.155)


@settings(max_examples=150, deadline=None)
@given(correct=st.booleans(), fmt=st.booleans(), got=st.integers(0, 4), t=st.integers(0, 30), i=st.integers(1, 7))
def test_reward_bounds(correct, fmt, got, t, i):
    gold = ["A", "B", "C", "D"]
    r = dynasearcher_reward(
        "Ostrel" if correct else "Paris",
        ["Ostrel"],
        format_ok=fmt,
        retrieved_titles=gold[:got],
        gold_titles=gold,
        retrievals=t,
        hops=i,
    )["reward"]
    assert -0.5 <= r <= 1.0 + 0.5 * 1.2 + 1e-12


def _group():
    task = make_task("d1", answers=["Ostrel"], gold_titles=["Tarsk", "Merovia", "Ostrel"], hops=3)
    good = make_traj(
        task,
        ["a", "b", "c"],
        ["i1", "i2", "i3"],
        answer="Ostrel",
        correct=True,
        titles=[["Tarsk"], ["Merovia"], ["Ostrel"]],
    )
    bad = make_traj(task, ["a"], ["i1"], answer=None, correct=False, valid=False, titles=[["Weather"]])
    return [good, bad]


def test_wrapper_replaces_solver_rewards():
    env = DynaSearcherReward(EventEnv(_group()))
    env.reset()
    _, reward, _, _, info = env.step("a")
    # good: 1 + 0.5 (1 - 0) ; bad: 0 + 0.5 (0 - max(-0.2, 1 - 0.9^-2)) = 0.1
    assert [ev["reward"] for ev in info["rewards"]] == pytest.approx([1.5, 0.1])
    assert info["reward_components"]["solver"]["dyna_recall"] == [1.0, 0.0]
    assert reward == pytest.approx(1.6)


def test_wrapper_requires_gold_titles_and_hops():
    no_titles = make_task("d2", answers=["Ostrel"], hops=3)
    with pytest.raises(MissingTaskDataError, match="gold_titles"):
        DynaSearcherReward(EventEnv([make_traj(no_titles, ["a"])])).reset()
    no_hops = make_task("d3", answers=["Ostrel"], gold_titles=["Tarsk"])
    with pytest.raises(MissingTaskDataError, match="hop count"):
        DynaSearcherReward(EventEnv([make_traj(no_hops, ["a"])])).reset()
    with pytest.raises(ValueError, match="gamma"):
        DynaSearcherReward(EventEnv([]), gamma=0.0)
