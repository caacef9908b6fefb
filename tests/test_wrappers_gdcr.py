"""GDCR (graph distances, entity linking, cite-then-retrieve steps), SAPO advantages, the wrapper."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.core.advantages import grpo_advantages, sapo_group_advantages, sapo_step_advantages, step_advantages
from searchgym.core.subgraph import Branch
from searchgym.wrappers import (
    EntityLinker,
    GraphDistanceReward,
    MissingTaskDataError,
    answer_distances,
    contribution,
    gdcr_step_rewards,
)
from tests.support.wrapper_fakes import EventEnv, TurnEnv, chain_subgraph, make_task, make_traj


def inception_graph():
    """gdcr-sapo Fig. 1(b): Inception -director-> Christopher Nolan -born in-> London (answer),
    plus the distractor Inception -genre-> Science Fiction."""
    return chain_subgraph(
        ["Inception", "Christopher Nolan", "London"],
        aliases={"Christopher Nolan": ["Nolan"]},
        distractors=[Branch(diverge_at=0, nodes=["x0"], relations=["genre"], relation_ids=["genre"])],
        extra_nodes=["Science Fiction"],
    )


def inception_trajectory(task):
    return make_traj(
        task,
        thinks=[
            "Who directed Inception? Let me search.",
            "It was directed by Christopher Nolan. Where was Nolan born?",
            "Nolan was born in London, so the answer is London.",
        ],
        infos=[
            "Inception is a 2010 science fiction film directed by Christopher Nolan.",
            "Christopher Nolan was born in London.",
            "",
        ],
        answer="London",
        correct=True,
    )


# ----------------------------------------------------------------- distances
def test_paper_example_distances_and_contributions():
    sg = inception_graph()
    d = answer_distances(sg)
    assert d == {"n2": 0, "n1": 1, "n0": 2, "x0": 3}
    assert [contribution(d[n]) for n in ("n2", "n1", "n0", "x0")] == [1.0, 0.5, 0.25, 0.125]
    assert contribution(None) == 0.0
    assert contribution(2, k=4) == 1 / 16


def test_distances_are_undirected():
    # the path walks its second edge against the KG direction; a distractor hangs off n1 and
    # points *into* it, so only undirected BFS reaches it
    sg = chain_subgraph(
        ["A", "B", "C", "D"],
        forward=[True, False, True],
        distractors=[Branch(diverge_at=1, nodes=["x0", "x1"], relations=["r", "s"], relation_ids=["r", "s"])],
        extra_nodes=["E", "F"],
    )
    assert answer_distances(sg) == {"n3": 0, "n2": 1, "n1": 2, "n0": 3, "x0": 3, "x1": 4}


def test_unreachable_nodes_are_absent_and_contribute_zero():
    sg = chain_subgraph(["A", "B"], extra_nodes=["Island"])
    assert "x0" not in answer_distances(sg)
    task = make_task("t", subgraph=sg, answers=["B"])
    assert gdcr_step_rewards(make_traj(task, ["x"], ["Island is here"])) == [0.0]


def test_contribution_rejects_bad_arguments():
    with pytest.raises(ValueError, match="decay factor"):
        contribution(1, k=0)
    with pytest.raises(ValueError, match="negative"):
        contribution(-1)


# ------------------------------------------------------------------- linking
def test_entity_linking_is_case_insensitive_word_bounded_with_aliases():
    linker = EntityLinker(inception_graph())
    assert linker.link("SCIENCE FICTION and nolan") == {"x0", "n1"}
    assert linker.link("Londoners love Inceptions") == set()
    assert linker.link("(London)") == {"n2"}
    assert linker.link("") == set()


# -------------------------------------------------------------------- steps
def test_paper_example_step_rewards_cite_then_retrieve():
    sg = inception_graph()
    task = make_task("inc", subgraph=sg, answers=["London"])
    steps = gdcr_step_rewards(inception_trajectory(task))
    # t1: cite nothing (O empty); retrieve Inception .25 + Science Fiction .125 + Nolan .5
    # t2: cite Nolan .5 (in O); retrieve London 1.0
    # t3: cite London 1.0 (Nolan already cited); nothing retrieved
    assert steps == pytest.approx([0.875, 1.5, 1.0])


def test_cited_before_observed_earns_nothing_until_observed():
    sg = inception_graph()
    task = make_task("inc", subgraph=sg, answers=["London"])
    t = make_traj(
        task, thinks=["Maybe London?", "London again", "London once more"], infos=["", "London is a city", ""]
    )
    # t1: London not in O -> 0; t2: cite first (still not in O) -> 0, then retrieve London 1.0;
    # t3: cite London -> 1.0
    assert gdcr_step_rewards(t) == [0.0, 1.0, 1.0]


def test_task_without_subgraph_raises():
    with pytest.raises(MissingTaskDataError, match="no subgraph"):
        gdcr_step_rewards(make_traj(make_task("bare", waypoints=["A"]), ["x"]))


# --------------------------------------------------------------------- SAPO
def test_sapo_numbers_on_the_paper_example():
    # steps [0.875, 1.5, 1.0]: mean 1.125, population std 0.2700309
    a_g = step_advantages([0.875, 1.5, 1.0])
    assert a_g == pytest.approx([-0.9258201, 1.0, -0.4629100], abs=1e-5)  # 1.3887 clipped to 1
    assert sapo_step_advantages(1.0, [0.875, 1.5, 1.0]) == pytest.approx([0.5370899, 1.5, 0.7685450], abs=1e-5)
    assert sapo_step_advantages(-1.0, [0.875, 1.5, 1.0]) == pytest.approx([-1.4629100, -0.5, -1.2314550], abs=1e-5)


def test_grpo_and_group_helper():
    assert grpo_advantages([1, 0, 0, 1]) == pytest.approx([1, -1, -1, 1], abs=1e-5)
    assert grpo_advantages([0.5, 0.5]) == [0.0, 0.0]
    out = sapo_group_advantages([1, 0], [[0.0, 1.0], []])
    assert out[0] == pytest.approx([1 - 0.5, 1 + 0.5], abs=1e-5)
    assert out[1] == []
    with pytest.raises(ValueError, match="one each per rollout"):
        sapo_group_advantages([1, 0], [[1.0]])
    with pytest.raises(ValueError, match="NaN"):
        grpo_advantages([1.0, math.nan])
    with pytest.raises(ValueError, match="lam"):
        sapo_step_advantages(1.0, [1.0], lam=-1)


@settings(max_examples=150, deadline=None)
@given(
    a_o=st.floats(-5, 5, allow_subnormal=False),  # a subnormal A_o underflows to a signed zero
    steps=st.lists(st.floats(0, 10), max_size=12),
    lam=st.floats(0, 1),
)
def test_sapo_advantages_stay_within_lambda_band_of_outcome(a_o, steps, lam):
    out = sapo_step_advantages(a_o, steps, lam)
    assert len(out) == len(steps)
    for a in out:
        assert abs(a - a_o) <= lam * abs(a_o) + 1e-9
        if a_o != 0:
            assert math.copysign(1, a) == math.copysign(1, a_o) or lam >= 1


# ------------------------------------------------------------------- wrapper
def test_wrapper_reports_per_step_values_and_final_sequence():
    sg = inception_graph()
    task = make_task("inc", subgraph=sg, answers=["London"])
    env = GraphDistanceReward(TurnEnv(inception_trajectory(task)))
    env.reset(seed=0)
    seen = []
    done = False
    while not done:
        _, reward, term, trunc, info = env.step("a")
        seen.append(info["gdcr_step"])
        done = term or trunc
    assert seen == pytest.approx([0.875, 1.5, 1.0])
    assert reward == 1.0  # weight 0: the outcome reward is unchanged
    assert info["reward_components"]["gdcr_steps"] == pytest.approx([0.875, 1.5, 1.0])
    assert info["reward_components"]["gdcr_total"] == pytest.approx(3.375)


def test_wrapper_weight_adds_total_and_group_info_is_per_slot():
    sg = inception_graph()
    task = make_task("inc", subgraph=sg, answers=["London"])
    trajs = [inception_trajectory(task), make_traj(task, ["nothing"], ["no entities here"], correct=False)]
    env = GraphDistanceReward(EventEnv(trajs), weight=0.1)
    env.reset()
    _, reward, _, _, info = env.step("a")
    assert info["gdcr_step"] == pytest.approx([1.0, 0.0])  # newest step of each slot
    assert [ev["reward"] for ev in info["rewards"]] == pytest.approx([1.3375, 0.0])
    assert info["reward_components"]["solver"]["gdcr_total"] == pytest.approx([3.375, 0.0])
    assert reward == pytest.approx(1.3375)


def test_wrapper_fails_at_reset_without_subgraph():
    env = GraphDistanceReward(EventEnv([make_traj(make_task("bare", waypoints=["A"]), ["x"])]))
    with pytest.raises(MissingTaskDataError, match="no subgraph"):
        env.reset()
