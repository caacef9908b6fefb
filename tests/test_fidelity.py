"""Paper-fidelity cases (issue 16): each pins a place where the package once differed from the papers."""

from __future__ import annotations

import math

import pytest

from searchgym.core.advantages import grpo_advantages, sapo_group_advantages
from searchgym.core.prompts import JUDGE_CRITERIA, render_judge
from searchgym.core.types import THINK_SEPARATOR, Task
from searchgym.envs.episode import Rollout, SearchEngine, advance
from searchgym.retrieval.bm25 import BM25Retriever
from searchgym.scoring.judge import LLMJudge
from searchgym.training.losses import group_advantages, proposer_advantages
from searchgym.wrappers import EvidenceVerifierReward, WaypointMatcher, format_score, trajectory_coverage
from searchgym.wrappers.graph_distance_reward import gdcr_step_rewards
from tests.support.wrapper_fakes import EventEnv, chain_subgraph, make_task, make_traj

DOCS = [
    ("d1", "Alice Varn", "Alice Varn is a painter born in Tarsk."),
    ("d2", "Tarsk", "Tarsk is a city located in Merovia."),
    ("d3", "Merovia", "Merovia is a country whose capital is Ostrel."),
]


def _engine() -> SearchEngine:
    ids, titles, texts = zip(*DOCS)
    return SearchEngine(BM25Retriever(list(ids), list(titles), list(texts)), top_k=1)


def start_solver_rollout(actions: list[str]) -> Rollout:
    sg = chain_subgraph(["Alice Varn", "Tarsk", "Merovia"])
    task = Task(id="q", question="In which country was Alice Varn born?", answers=["Merovia"], subgraph=sg)
    rollout = Rollout("solver", task, "Answer the question: In which country was Alice Varn born?\n")
    engine = _engine()
    for action in actions:
        advance([rollout], [action], engine)
    return rollout


# ------------------------------------------------------------------ SAPO: steps keyed by turn
def test_segments_record_their_turn_even_after_an_empty_turn():
    r = start_solver_rollout(["", "<search> Alice Varn </search>", "<answer> Merovia </answer>"])
    traj = r.trajectory
    assert len(traj.turns) == 3 and len(gdcr_step_rewards(traj)) == 3  # GDCR: one step per Turn
    agent = [s.turn for s in traj.segments if s.source == "agent"]
    assert agent == [1, 2]  # the empty first turn wrote no agent text


def test_sapo_advantages_land_on_their_turn_after_an_empty_turn():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from searchgym.llm.sequences import collate, encode_trajectory
    from tests.support.tiny_lm import build_tokenizer

    tok = build_tokenizer()
    traj = start_solver_rollout(["", "<search> Alice Varn </search>", "<answer> Merovia </answer>"]).trajectory
    enc = encode_trajectory(tok, traj)
    assert sorted({s for s in enc.step_index if s >= 0}) == [1, 2]
    _, _, mask, adv = collate([enc], tok.pad_token_id, [[10.0, 20.0, 30.0]])
    agent_adv = adv[0][mask[0] == 1].tolist()
    n_search = len(tok("<search> Alice Varn </search>", add_special_tokens=False)["input_ids"])
    assert agent_adv[:n_search] == [20.0] * n_search
    assert set(agent_adv[n_search:]) == {30.0}


# ------------------------------------------------------------------ Proposer baseline over verified questions
def test_proposer_baseline_is_taken_over_verified_questions():
    rewards, valid = [1.0, 0.6, 0.0, 0.0], [True, True, False, False]
    assert proposer_advantages(rewards, valid) == pytest.approx([0.2, -0.2, 0.0, 0.0])
    # the former behaviour, kept as an explicit option: every proposer event in the baseline
    assert proposer_advantages(rewards, valid, baseline="all") == pytest.approx(
        [0.6, 0.2, -0.4, -0.4]
    )  # invalid: -mean
    assert proposer_advantages([0.0, 0.0], [False, False]) == [0.0, 0.0]
    with pytest.raises(ValueError, match="baseline"):
        proposer_advantages(rewards, valid, baseline="mean")


def test_trainer_uses_the_verified_baseline_by_default():
    pytest.importorskip("torch")
    from searchgym.training.selfplay_config import TrainConfig
    from searchgym.training.selfplay_trainer import Sample, SelfPlayTrainer

    task = make_task("p")
    samples = [
        Sample("proposer", make_traj(task, role="proposer"), r, {"valid": int(v)}, None)
        for r, v in zip([1.0, 0.6, 0.0, 0.0], [1, 1, 0, 0])
    ]

    class Bare:  # advantages() reads only the config
        pass

    for baseline, expect in (("verified", [0.2, -0.2, 0.0, 0.0]), ("all", [0.6, 0.2, -0.4, -0.4])):
        bare = Bare()
        bare.config = TrainConfig(proposer_baseline=baseline)
        tables = SelfPlayTrainer.advantages(bare, samples)
        assert [t[0] for t in tables] == pytest.approx(expect)
    with pytest.raises(ValueError, match="proposer_baseline"):
        TrainConfig(proposer_baseline="batch")


# ------------------------------------------------------------------ WCR: no match across turn boundaries
def test_wcr_title_never_spans_two_turns():
    task = make_task("w", waypoints=["Newport", "Tarsk"])
    traj = make_traj(task, ["look for New", "port authority near Tarsk"])
    g, matched = trajectory_coverage(traj)
    assert matched == ["Tarsk"] and g == 0.5
    assert THINK_SEPARATOR in traj.think_text
    whole = make_traj(task, ["look for Newport", "then Tarsk"])
    assert trajectory_coverage(whole)[1] == ["Newport", "Tarsk"]


def test_wcr_title_never_spans_two_think_blocks_of_one_turn():
    r = start_solver_rollout(["<think>look for New</think><search> Alice </search><think>port</think>"])
    assert "Newport" not in r.trajectory.think_text


def test_waypoint_names_may_not_contain_the_separator():
    with pytest.raises(ValueError, match="separator"):
        WaypointMatcher([f"New{THINK_SEPARATOR}port"])


# ------------------------------------------------------------------ LLM judge: SSP's five criteria by default
def test_ssp_judge_prompt_has_the_five_criteria_and_is_the_default():
    ssp = render_judge("Q?", "Paris, France", "Paris")
    strict = render_judge("Q?", "Paris, France", "Paris", criteria="strict")
    assert ssp == render_judge("Q?", "Paris, France", "Paris", criteria="ssp")
    assert all(f"{i}." in ssp for i in range(1, 6)) and "6." not in ssp
    assert "includes the correct answer" in ssp and "numerical" in ssp
    assert "hedges" in strict and "includes the correct answer" not in strict
    assert set(JUDGE_CRITERIA) == {"ssp", "strict"}
    with pytest.raises(ValueError, match="criteria"):
        render_judge("Q?", "a", "b", criteria="lenient")


def test_llm_judge_sends_the_chosen_criteria():
    seen = []

    class Recorder:
        def generate(self, prompts, config):
            seen.extend(p[0]["content"] for p in prompts)
            return ["Correct"] * len(prompts)

    LLMJudge(Recorder()).judge("Q?", "Paris, France", ["Paris"])
    LLMJudge(Recorder(), criteria="strict").judge("Q?", "Paris, France", ["Paris"])
    assert "includes the correct answer" in seen[0] and "hedges" in seen[1]
    with pytest.raises(ValueError, match="criteria"):
        LLMJudge(Recorder(), criteria="loose")


# ------------------------------------------------------------------ EVE: invalid proposer gets ½ F_fmt
INFO1 = 'Doc 1 (Title: "Merovia") Merovia is a country founded in 1204. Its capital is Ostrel.'
INFO2 = 'Doc 1 (Title: "Ostrel") Ostrel is the capital of Merovia.'


def _eve_proposer(valid: bool, question: str, evidence: str = "Its capital is Ostrel."):
    task = make_task("p1", answers=["Ostrel"], hops=4)
    return make_traj(
        task,
        ["plan", "found it"],
        [INFO1, INFO2],
        role="proposer",
        question=question,
        evidence=evidence,
        answer="Ostrel",
        valid=valid,
        actions=["<think>plan</think><search>Merovia</search>", "<search>Ostrel</search>"],
    )


def _eve_solvers():
    task = make_task("s", answers=["Ostrel"], evidence="Its capital is Ostrel.", hops=4)
    return [make_traj(task, ["t"], answer="Ostrel", correct=i < 2) for i in range(5)]


def _proposer_event(env):
    env.reset()
    return [ev for ev in env.step("a")[4]["rewards"] if ev["role"] == "proposer"][0]


def oracle(question, evidence):
    return "Ostrel" if evidence else "Paris"


def test_eve_invalid_question_gets_half_the_format_score():
    leak = _eve_proposer(False, "Which city, Ostrel, is the capital of the country founded in 1204?")
    f_fmt = format_score(leak, hops=4)
    assert f_fmt == pytest.approx(0.25 * (1 + 0.5 + 0.75 + 1.0))  # 0.8125
    ev = _proposer_event(EvidenceVerifierReward(EventEnv(_eve_solvers(), proposer=leak), oracle))
    assert ev["reward"] == pytest.approx(0.5 * f_fmt) and ev["components"]["eve_valid"] == 0
    assert ev["components"]["eve_format"] == pytest.approx(f_fmt)
    # a span that is not verbatim is invalid too, and also earns ½ F_fmt
    bad_span = _eve_proposer(True, "What is the capital of the country founded in 1204?", evidence="made up")
    ev = _proposer_event(EvidenceVerifierReward(EventEnv(_eve_solvers(), proposer=bad_span), oracle))
    assert ev["reward"] == pytest.approx(0.5 * format_score(bad_span, hops=4))
    # the former behaviour, as an option
    zero = _proposer_event(
        EvidenceVerifierReward(EventEnv(_eve_solvers(), proposer=leak), oracle, invalid_reward="zero")
    )
    assert zero["reward"] == 0.0
    with pytest.raises(ValueError, match="invalid_reward"):
        EvidenceVerifierReward(EventEnv(_eve_solvers(), proposer=leak), oracle, invalid_reward="negative")


# ------------------------------------------------------------------ GRPO std: ddof is a choice
def test_grpo_std_ddof_option():
    rewards = [1.0, 0.0, 0.0, 1.0, 1.0]
    pop = group_advantages(rewards, ["g"] * 5)
    sample = group_advantages(rewards, ["g"] * 5, ddof=1)
    assert pop[0] / sample[0] == pytest.approx(math.sqrt(5 / 4), rel=1e-5)  # ×1.118 at G = 5
    assert grpo_advantages(rewards) == pytest.approx(pop)
    assert grpo_advantages(rewards, ddof=1) == pytest.approx(sample)
    assert sapo_group_advantages(rewards, [[1.0]] * 5, ddof=1)[0] == pytest.approx([sample[0]])
    assert group_advantages([1.0], ["g"], ddof=1) == [0.0]  # a group of one has no spread
    with pytest.raises(ValueError, match="ddof"):
        group_advantages(rewards, ["g"] * 5, ddof=2)


# ------------------------------------------------------------------ pools: the distractor and hop plan
@pytest.fixture(scope="module")
def pool_500():
    from searchgym.construction import build_pool
    from searchgym.world.synthetic import default_world

    return build_pool(default_world(), 500, seed=0).subgraphs


def test_pool_places_the_planned_distractors(pool_500):
    from searchgym.construction.stats import plan_stats

    assert min(len(sg.distractors) for sg in pool_500) >= 1  # docs/construction.md: 1-3 branches
    plan = plan_stats(pool_500)["distractors"]
    assert plan["count"] == 500 and plan["short"] <= 0.05 * 500
    assert abs(plan["planned"]["mean"] - plan["realised"]["mean"]) < 0.05


def test_pool_meets_the_planned_path_lengths(pool_500):
    from searchgym.construction.stats import format_stats, plan_stats, pool_stats

    plan = plan_stats(pool_500)["path_length"]
    assert plan["count"] == 500 and plan["short"] <= 0.08 * 500
    assert abs(plan["planned"]["mean"] - plan["realised"]["mean"]) < 0.15  # was 4.98 planned vs 4.53
    hist = plan["realised"]["histogram"]
    assert all(0.14 <= hist[h] / 500 <= 0.27 for h in range(3, 8))  # ~uniform 3-7, as the paper's Fig. 5a
    assert "planned vs realised path length" in format_stats(pool_stats(pool_500))


def test_plan_retries_zero_keeps_the_first_path():
    from searchgym.construction import ExtractionConfig, build_pool
    from searchgym.world.synthetic import default_world

    first = build_pool(default_world(), 200, seed=0, config=ExtractionConfig(plan_retries=0)).subgraphs
    assert all(sg.metadata["hops_planned"] is not None for sg in first)
    with pytest.raises(ValueError, match="plan_retries"):
        ExtractionConfig(plan_retries=-1)


# ---------------------------------------------------------------- issue 31
def test_eve_answer_that_ends_an_information_block_is_found():
    task = make_task("p", answers=["Ostrel"], hops=1)
    info = '\n<information>Doc 1 (Title: "Merovia") The capital of Merovia is Ostrel</information>\n'
    t = make_traj(task, ["plan"], [info], role="proposer", question="What is the capital of Merovia?", answer="Ostrel")
    # F_ans = 1: the answer is the last word before </information> (it fused with the tag before)
    assert format_score(t, hops=1) == 1.0


def test_the_first_question_of_a_turn_is_read_as_ssp_does():
    from searchgym.envs.protocol import parse_action

    act = parse_action("<question> Which city is the capital? </question> <question> Another one? </question>")
    assert act.question == "Which city is the capital?"


def test_more_than_ten_answers_is_invalid_by_default_and_a_quarter_under_ssp():
    from searchgym.scoring.judge import ExactMatchJudge
    from searchgym.scoring.outcomes import score_solver

    spray = " ".join(f"<answer> {a} </answer>" for a in ["x"] * 10 + ["Merovia"])
    task = Task(id="q", question="In which country was Alice Varn born?", answers=["Merovia"])
    outcomes = {}
    for mode in ("invalid", "ssp"):
        rollout = Rollout("solver", task, "Answer.\n", too_many_answers=mode)
        advance([rollout], [spray], _engine())
        outcomes[mode] = score_solver(rollout.trajectory, ExactMatchJudge())
    assert outcomes == {"invalid": 0.0, "ssp": 0.25}
    with pytest.raises(ValueError, match="too_many_answers"):
        Rollout("solver", task, "p", too_many_answers="half")


def test_every_env_clone_of_a_trainer_batch_exports_its_games(tmp_path, tiny_world):

    import gymnasium as gym

    import searchgym  # noqa: F401
    from searchgym.agents.scripted import PathFollowingSolver

    path = tmp_path / "games.jsonl"
    first = gym.make("KGSolverGroup-v0", world=tiny_world, group_size=2, max_turns=2, export_path=str(path))
    clone = first.unwrapped.clone()
    agent = PathFollowingSolver(tiny_world)
    for env in (first, clone):
        obs, info = env.reset(seed=0)
        done = False
        while not done:
            obs, _, term, trunc, info = env.step(agent.act(obs, info))
            done = term or trunc
    first.close()
    assert len(path.read_text().splitlines()) == 2  # one game from the env, one from its clone


def test_target_baseline_centres_each_question_on_its_own_subgraph():
    rewards, valid = [0.5, 0.0, 0.0, 0.0, 1.0, 0.5], [True, False, False, False, True, True]
    adv = proposer_advantages(rewards, valid, baseline="target", targets=["x", "x", "y", "y", "z", "w"])
    assert adv == pytest.approx([0.25, -0.25, 0.0, 0.0, 0.0, 0.0])  # a target played once, or all tied: 0
    with pytest.raises(ValueError, match="target key"):
        proposer_advantages(rewards, valid, baseline="target")


def test_target_or_all_baseline_falls_back_to_the_step_mean_where_a_subgraph_has_no_contrast():
    rewards, valid = [0.5, 0.0, 0.0, 0.0, 1.0, 0.5], [True, False, False, False, True, True]
    adv = proposer_advantages(rewards, valid, baseline="target_or_all", targets=["x", "x", "y", "y", "z", "w"])
    step = sum(rewards) / 6  # 1/3: y's two failed questions are pushed down, z and w measured against the step
    assert adv == pytest.approx([0.25, -0.25, -step, -step, 1.0 - step, 0.5 - step])
    with pytest.raises(ValueError, match="target key"):
        proposer_advantages(rewards, valid, baseline="target_or_all", targets=["x"])
