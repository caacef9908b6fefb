"""WCR: coverage matching, Eq. 6 on hand cases from the paper, properties, and the wrapper on events."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.wrappers import (
    MissingTaskDataError,
    RewardShapingWrapper,
    WaypointCoverageReward,
    WaypointMatcher,
    get_matcher,
    normalised_coverages,
    waypoint_coverage,
    wcr_group_rewards,
    wcr_rewards,
)
from searchgym.wrappers.waypoint_coverage_reward import NATIVE_AVAILABLE
from tests.support.wrapper_fakes import EventEnv, chain_subgraph, make_task, make_traj

# The paper's case E.3.1: waypoints of the construction path; the fourth is not named in the paper.
PAPER_WAYPOINTS = ["William Dunbar", "Dunbar and Hunter Expedition", "George Hunter", "Ouachita River"]
PAPER_THINK = (
    "The expedition was led by William Dunbar together with George Hunter; it is known as the "
    "Dunbar and Hunter Expedition of 1804. So the answer should be Natchez."
)


# ------------------------------------------------------------------ matching
def test_paper_case_three_of_four_waypoints_gives_075():
    g, matched = waypoint_coverage(PAPER_THINK, PAPER_WAYPOINTS)
    assert g == 0.75
    assert matched == ["William Dunbar", "Dunbar and Hunter Expedition", "George Hunter"]


def test_matching_is_exact_substring_case_sensitive_by_default():
    assert waypoint_coverage("we met william dunbar", ["William Dunbar"])[0] == 0.0
    assert waypoint_coverage("we met william dunbar", ["William Dunbar"], case_insensitive=True)[0] == 1.0
    # substring, not word match (the paper's definition)
    assert waypoint_coverage("Bernese Alps", ["Bern"])[0] == 1.0


def test_alias_matching_is_opt_in():
    assert waypoint_coverage("the USA is large", ["United States"])[0] == 0.0
    assert waypoint_coverage("the USA is large", ["United States"], aliases=[["USA"]])[0] == 1.0
    with pytest.raises(ValueError, match="one list per waypoint"):
        waypoint_coverage("x", ["A", "B"], aliases=[["a"]])


def test_duplicate_titles_are_separate_waypoints():
    assert waypoint_coverage("Springfield", ["Springfield", "Springfield", "Ohio"])[0] == pytest.approx(2 / 3)


def test_bad_waypoints_raise_clear_errors():
    with pytest.raises(ValueError, match="no waypoints"):
        waypoint_coverage("text", [])
    with pytest.raises(ValueError, match="empty"):
        waypoint_coverage("text", ["A", "  "])
    with pytest.raises(TypeError, match="sequence of titles"):
        WaypointMatcher("Bern")
    with pytest.raises(ValueError, match="unknown strategy"):
        WaypointMatcher(["A"], strategy="regex")


def test_matcher_is_cached_per_waypoint_set():
    a = get_matcher(["Zurich", "Bern"])
    assert get_matcher(["Zurich", "Bern"]) is a
    assert get_matcher(["Zurich", "Bern"], case_insensitive=True) is not a


@settings(max_examples=150, deadline=None)
@given(
    waypoints=st.lists(st.text(alphabet="abAB é", min_size=1, max_size=4).filter(str.strip), min_size=1, max_size=40),
    text=st.text(alphabet="abAB éx", max_size=200),
    ci=st.booleans(),
)
def test_every_strategy_agrees_with_in(waypoints, text, ci):
    ref = [(w.lower() in text.lower()) if ci else (w in text) for w in waypoints]
    strategies = ["auto", "scan", "automaton"] + (["native"] if NATIVE_AVAILABLE else [])
    for strategy in strategies:
        assert WaypointMatcher(waypoints, case_insensitive=ci, strategy=strategy).match(text) == ref, strategy


# --------------------------------------------------------------- Eq. 6 math
def test_paper_case_reward_is_03_in_group_whose_best_is_075():
    # incorrect, valid, g = 0.75 = g_max -> g~ = 1 -> R = 0.3
    rewards = wcr_rewards([False, False, True], [True, True, True], [0.75, 0.25, 0.5])
    assert rewards[0] == pytest.approx(0.3)
    assert rewards[1] == pytest.approx(0.3 * 0.25 / 0.75)
    assert rewards[2] == 1.0


def test_all_zero_coverage_group_gives_binary_rewards():
    assert wcr_rewards([True, False, False], [True, True, True], [0.0, 0.0, 0.0]) == [1.0, 0.0, 0.0]


def test_invalid_rollout_gets_no_partial_credit_and_correct_gets_exactly_one():
    assert wcr_rewards([False, True], [False, True], [1.0, 1.0]) == [0.0, 1.0]


def test_lone_rollout_normalisation_options():
    assert wcr_rewards([False], [True], [0.5], lone="raw") == [pytest.approx(0.15)]
    assert wcr_rewards([False], [True], [0.5], lone="group") == [pytest.approx(0.3)]
    assert wcr_rewards([False], [True], [0.5], lone="binary") == [0.0]
    with pytest.raises(ValueError, match="lone-rollout normalisation"):
        normalised_coverages([0.5], "softmax")


def test_wcr_rewards_rejects_bad_input():
    with pytest.raises(ValueError, match="lengths differ"):
        wcr_rewards([True], [True, False], [0.1])
    with pytest.raises(ValueError, match="empty group"):
        wcr_rewards([], [], [])
    with pytest.raises(ValueError, match="outside"):
        wcr_rewards([False], [True], [1.5])
    with pytest.raises(ValueError, match="alpha"):
        wcr_rewards([False], [True], [0.5], alpha=2.0)


group = st.lists(
    st.tuples(st.booleans(), st.booleans(), st.sampled_from([0.0, 0.2, 0.25, 1 / 3, 0.5, 0.75, 1.0])),
    min_size=1,
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(rows=group, alpha=st.floats(0.0, 1.0), data=st.data())
def test_wcr_properties(rows, alpha, data):
    correct, valid, cov = map(list, zip(*rows))
    rewards = wcr_rewards(correct, valid, cov, alpha)
    for r, c, z in zip(rewards, correct, valid):
        assert 0.0 <= r <= 1.0
        if c:
            assert r == 1.0
        else:
            assert r <= alpha + 1e-12
            if not z:
                assert r == 0.0
    if any(correct):
        assert min(r for r, c in zip(rewards, correct) if c) >= max(rewards)
    perm = data.draw(st.permutations(range(len(rows))))
    permuted = wcr_rewards([correct[i] for i in perm], [valid[i] for i in perm], [cov[i] for i in perm], alpha)
    assert permuted == [rewards[i] for i in perm]


# ------------------------------------------------------------------ wrapper
def _paper_group():
    task = make_task("q1", waypoints=PAPER_WAYPOINTS, answers=["Natchez Trace"])
    trajs = [
        make_traj(task, [PAPER_THINK], answer="Natchez", correct=False),  # g = 0.75
        make_traj(task, ["I think of George Hunter."], answer="x", correct=False),  # g = 0.25
        make_traj(task, ["Natchez Trace"], answer="Natchez Trace", correct=True),  # g = 0
        make_traj(task, ["William Dunbar"], answer=None, correct=False, valid=False),  # invalid
        make_traj(task, ["nothing useful"], answer="y", correct=False),  # g = 0
    ]
    return task, trajs


def test_wrapper_on_group_events_matches_eq6_and_logs_components():
    _, trajs = _paper_group()
    env = WaypointCoverageReward(EventEnv(trajs))
    env.reset(seed=0)
    _, reward, _, _, info = env.step("a")
    rs = [ev["reward"] for ev in info["rewards"]]
    assert rs == pytest.approx([0.3, 0.1, 1.0, 0.0, 0.0])
    assert reward == pytest.approx(sum(rs))
    comps = info["reward_components"]["solver"]
    assert comps["wcr_coverage"] == pytest.approx([0.75, 0.25, 0.0, 0.25, 0.0])
    assert comps["wcr_normalised_coverage"][:2] == pytest.approx([1.0, 1 / 3])
    assert comps["wcr_bonus"] == pytest.approx([0.3, 0.1, 0.0, 0.0, 0.0])
    assert comps["correct"] == [0, 0, 1, 0, 0]
    assert trajs[0].reward == pytest.approx(0.3) and trajs[0].reward_components["wcr_bonus"] == pytest.approx(0.3)


def test_wrapper_leaves_proposer_event_on_binary_correctness():
    task, trajs = _paper_group()
    proposer = make_traj(task, ["plan"], role="proposer", question="q?")
    env = WaypointCoverageReward(EventEnv(trajs, proposer=proposer))
    env.reset()
    _, reward, _, _, info = env.step("a")
    prop = [ev for ev in info["rewards"] if ev["role"] == "proposer"][0]
    assert prop["reward"] == pytest.approx(1 - 1 / 5)
    assert "wcr_bonus" not in prop["components"]
    assert info["reward_components"]["proposer"] == {"valid": 1}
    assert reward == pytest.approx(0.3 + 0.1 + 1.0 + 0.8)


def test_wrapper_is_invariant_to_rollout_order():
    _, trajs = _paper_group()
    env = WaypointCoverageReward(EventEnv(trajs[::-1]))
    env.reset()
    _, _, _, _, info = env.step("a")
    assert [ev["reward"] for ev in info["rewards"]] == pytest.approx([0.3, 0.1, 1.0, 0.0, 0.0][::-1])


def test_wrapper_lone_rollout_single_role_env():
    task = make_task("q1", waypoints=PAPER_WAYPOINTS)
    t = make_traj(task, ["William Dunbar and George Hunter"], correct=False)
    env = WaypointCoverageReward(EventEnv([t], single=True), lone_normalisation="raw")
    env.reset()
    _, reward, _, _, info = env.step("a")
    assert reward == pytest.approx(0.3 * 0.5)
    assert info["reward_components"]["wcr_coverage"] == 0.5
    env = WaypointCoverageReward(EventEnv([t], single=True), lone_normalisation="group")
    env.reset()
    assert env.step("a")[1] == pytest.approx(0.3)


def test_wrapper_alias_matching_uses_subgraph_aliases():
    sg = chain_subgraph(["United States", "Texas", "Austin"], aliases={"United States": ["USA"]})
    task = make_task("q2", subgraph=sg, answers=["Austin"])
    t = make_traj(task, ["In the USA, the state is Texas"], correct=False)
    plain = WaypointCoverageReward(EventEnv([t], single=True))
    plain.reset()
    assert plain.step("a")[4]["reward_components"]["wcr_coverage"] == 0.5
    aliased = WaypointCoverageReward(EventEnv([t], single=True), match_aliases=True)
    aliased.reset()
    assert aliased.step("a")[4]["reward_components"]["wcr_coverage"] == 1.0


def test_task_without_waypoints_fails_at_reset():
    task = make_task("bare", waypoints=[])
    env = WaypointCoverageReward(EventEnv([make_traj(task, ["t"])]))
    with pytest.raises(MissingTaskDataError, match="no waypoints"):
        env.reset()
    aliased = WaypointCoverageReward(EventEnv([make_traj(make_task("w", waypoints=["A"]), ["t"])]), match_aliases=True)
    with pytest.raises(MissingTaskDataError, match="subgraph"):
        aliased.reset()


def test_wrapper_rejects_bad_options():
    with pytest.raises(ValueError, match="alpha"):
        WaypointCoverageReward(EventEnv([]), alpha=-0.1)
    with pytest.raises(ValueError, match="lone_normalisation"):
        WaypointCoverageReward(EventEnv([]), lone_normalisation="mean")


def _stop_short_group():
    """A 2-hop question (seed Texas -> capital Austin -> mayor Kirk Watson): two rollouts stopped on the path
    (answered the bridge, by title and by alias; answered the seed), one searched on and was wrong, one right."""
    sg = chain_subgraph(["Texas", "Austin", "Kirk Watson"], aliases={"Austin": ["Austin, Texas"]})
    task = make_task("q3", subgraph=sg, answers=["Kirk Watson"])
    return [
        make_traj(task, ["Texas has capital Austin."], answer="Austin", correct=False),
        make_traj(task, ["Texas has capital Austin."], answer="austin, texas", correct=False),
        make_traj(task, ["Texas and Austin"], answer="The Texas", correct=False),
        make_traj(task, ["Texas has capital Austin; its mayor?"], answer="Steve Adler", correct=False),
        make_traj(task, ["Texas, Austin"], answer="Kirk Watson", correct=True),
    ]


def test_waypoint_answers_lose_their_credit_only_when_switched_off():
    trajs = _stop_short_group()
    paper = wcr_group_rewards(trajs)
    assert [s["reward"] for s in paper] == pytest.approx([0.3, 0.3, 0.3, 0.3, 1.0])
    assert all("wcr_answered_waypoint" not in s for s in paper)
    off = wcr_group_rewards(trajs, waypoint_answer_credit=False)
    assert [s["reward"] for s in off] == pytest.approx([0.0, 0.0, 0.0, 0.3, 1.0])
    assert [s["wcr_answered_waypoint"] for s in off] == [1, 1, 1, 0, 0]
    assert [s["wcr_coverage"] for s in off] == [s["wcr_coverage"] for s in paper]  # coverage itself unchanged


def test_wrapper_switch_withholds_waypoint_answer_credit_and_logs_it():
    trajs = _stop_short_group()
    env = WaypointCoverageReward(EventEnv(trajs), waypoint_answer_credit=False)
    env.reset()
    info = env.step("a")[4]
    assert [ev["reward"] for ev in info["rewards"]] == pytest.approx([0.0, 0.0, 0.0, 0.3, 1.0])
    assert info["reward_components"]["solver"]["wcr_answered_waypoint"] == [1, 1, 1, 0, 0]
    assert env._saved_kwargs["waypoint_answer_credit"] is False  # recorded: gym.make(env.spec) rebuilds it
    with pytest.raises(TypeError, match="waypoint_answer_credit"):
        WaypointCoverageReward(EventEnv([]), waypoint_answer_credit="no")
    with pytest.raises(ValueError, match="answered_waypoint has 1 flags for 2"):
        wcr_rewards([False, False], [True, True], [0.5, 1.0], answered_waypoint=[True])


def test_group_of_lone_rollouts_scored_offline():
    _, trajs = _paper_group()
    scores = wcr_group_rewards(trajs)
    assert [s["reward"] for s in scores] == pytest.approx([0.3, 0.1, 1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="one question"):
        wcr_group_rewards([trajs[0], make_traj(make_task("other", waypoints=["A"]))])


class _Penalty(RewardShapingWrapper):
    name = "penalty"

    def shape_solver_group(self, events, info):
        for ev in events:
            self.set_reward(ev, ev["reward"] - 0.05, format_penalty=-0.05)


def test_stacking_order_outer_applies_last_and_forwards_attributes():
    _, trajs = _paper_group()
    env = _Penalty(WaypointCoverageReward(EventEnv(trajs)))
    env.reset()
    _, reward, _, _, info = env.step("a")
    assert [ev["reward"] for ev in info["rewards"]] == pytest.approx([0.25, 0.05, 0.95, -0.05, -0.05])
    assert reward == pytest.approx(sum(ev["reward"] for ev in info["rewards"]))
    comps = info["reward_components"]["solver"]
    assert comps["format_penalty"] == [-0.05] * 5 and comps["wcr_bonus"][0] == pytest.approx(0.3)
    assert env.get_wrapper_attr("alpha") == 0.3
    assert env.unwrapped.resets == 1
    assert not math.isnan(reward)
