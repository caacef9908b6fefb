"""EVE: verbatim check, V = p+ - p- (callable and a real OpenAI-protocol server), Eq. 16 / 19, wrapper."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.llm.openai_client import OpenAICompatibleGenerator
from searchgym.wrappers import (
    EvidenceVerifierReward,
    MissingTaskDataError,
    brevity_bonus,
    difficulty_reward,
    eve_proposer_reward,
    eve_solver_reward,
    evidence_is_verbatim,
    evidence_verifier_score,
    format_score,
    solver_evidence_text,
)
from tests.support.openai_server import OpenAIStubServer
from tests.support.wrapper_fakes import EventEnv, make_task, make_traj

INFO1 = 'Doc 1 (Title: "Merovia") Merovia is a country founded in 1204. Its capital is Ostrel.'
INFO2 = 'Doc 1 (Title: "Ostrel") Ostrel is the capital of Merovia.\nThe painter Bob Varn was born here.'
SPAN = "Its capital is Ostrel."
QUESTION = "What is the capital of the country founded in 1204 where Tarsk lies?"


def oracle(question, evidence):
    """Answers right only when it sees the evidence."""
    return "Ostrel" if evidence and "Ostrel" in evidence else "Paris"


# ------------------------------------------------------------------ pieces
def test_verbatim_check():
    assert evidence_is_verbatim(SPAN, [INFO1])
    assert evidence_is_verbatim("Ostrel is the capital of Merovia. The painter", [INFO2])  # newline ~ space
    assert not evidence_is_verbatim("Its capital is Ostrel city.", [INFO1])
    assert not evidence_is_verbatim("   ", [INFO1])
    assert not evidence_is_verbatim(None, [INFO1])
    assert not evidence_is_verbatim(SPAN, [])


def test_brevity_and_difficulty():
    assert brevity_bonus("") == 1.0
    assert brevity_bonus(" ".join(["w"] * 128)) == 0.5
    assert brevity_bonus(" ".join(["w"] * 300)) == 0.0
    assert brevity_bonus("abcd", count_tokens=len, max_tokens=8) == 0.5
    assert [difficulty_reward(k, 5) for k in range(6)] == [0.0, 1.0, 0.75, 0.5, 0.25, 0.0]
    assert difficulty_reward(1, 1) == 0.0
    with pytest.raises(ValueError):
        difficulty_reward(6, 5)
    with pytest.raises(ValueError, match="L_max"):
        brevity_bonus("x", max_tokens=0)


def test_verifier_score_with_a_callable():
    v, p_plus, p_minus = evidence_verifier_score(oracle, QUESTION, SPAN, ["Ostrel"], m=5)
    assert (v, p_plus, p_minus) == (1.0, 1.0, 0.0)
    v, *_ = evidence_verifier_score(lambda q, e: "Ostrel", QUESTION, SPAN, ["Ostrel"], m=3)
    assert v == 0.0  # the evidence adds nothing when the model knows it anyway
    with pytest.raises(ValueError, match="m"):
        evidence_verifier_score(oracle, QUESTION, SPAN, ["Ostrel"], m=0)


def test_verifier_score_with_a_text_generator_over_http():
    calls = []

    def reply(prompt, body):
        calls.append(prompt)
        text = prompt if isinstance(prompt, str) else prompt[-1]["content"]
        # with evidence: right 4 times out of 5 (every 5th evidence prompt is wrong)
        if "Evidence:" in text:
            n = sum("Evidence:" in (p if isinstance(p, str) else p[-1]["content"]) for p in calls)
            return "Paris" if n % 5 == 0 else " Ostrel\nbecause ..."
        return "Ostrel" if len(calls) % 5 == 0 else "London"

    with OpenAIStubServer(reply) as server:
        gen = OpenAICompatibleGenerator(server.url, "stub", concurrency=1)
        v, p_plus, p_minus = evidence_verifier_score(gen, QUESTION, SPAN, ["Ostrel"], m=5, seed=3)
    assert len(calls) == 10
    assert p_plus == pytest.approx(0.8)
    assert 0.0 <= p_minus <= 0.2
    assert v == pytest.approx(p_plus - p_minus)


def proposer_traj(evidence=SPAN, actions=None, answer="Ostrel", hops=3, valid=True):
    task = make_task("p1", answers=["Ostrel"], hops=hops)
    return make_traj(
        task,
        ["plan", "found it"],
        [INFO1, INFO2],
        role="proposer",
        question=QUESTION,
        evidence=evidence,
        answer=answer,
        actions=actions,
        valid=valid,
    )


def test_format_score_hand_cases():
    assert format_score(proposer_traj(), hops=3) == 1.0  # think 1, tool min(3/3,1), answer in context
    t = proposer_traj(actions=["<think>plan</think>", "<search>x</search>"], answer="Lyon")
    assert format_score(t, hops=4) == pytest.approx(0.25 * (1 + 0.5 + 0.75 + 0.0))
    assert format_score(proposer_traj(answer="yes"), hops=1) == 1.0
    t = proposer_traj()
    t.question = ""
    assert format_score(t, hops=3) == 0.0


def test_proposer_and_solver_reward_formulas():
    terms = eve_proposer_reward(format_score=1.0, k=2, n=5, verifier=0.6, evidence=" ".join(["w"] * 64))
    assert terms["reward"] == pytest.approx(0.5 + 0.75 + 0.3 + 0.075)
    assert terms["eve_brevity"] == 0.75
    with pytest.raises(ValueError):
        eve_proposer_reward(format_score=1.5, k=0, n=5, verifier=0.0, evidence="")
    s = eve_solver_reward("Ostrel", ["Ostrel"], "capital is Ostrel", SPAN)
    # F1 of "capital is ostrel" vs "its capital is ostrel": p = 1, r = 3/4 -> 6/7
    assert s["reward"] == pytest.approx(1 + 0.3 * 6 / 7)
    assert eve_solver_reward("Paris", ["Ostrel"], None, SPAN)["reward"] == 0.0


@settings(max_examples=100, deadline=None)
@given(fmt=st.floats(0, 1), k=st.integers(0, 8), n=st.integers(1, 8), v=st.floats(-1, 1), length=st.integers(0, 400))
def test_proposer_reward_bounds(fmt, k, n, v, length):
    k = min(k, n)
    r = eve_proposer_reward(format_score=fmt, k=k, n=n, verifier=v, evidence=" ".join(["w"] * length))["reward"]
    assert -0.5 - 1e-12 <= r <= 0.5 + 1 + 0.5 + 0.1 + 1e-12


def test_solver_evidence_source():
    task = make_task("s", answers=["Ostrel"], evidence=SPAN)
    t = make_traj(task, ["I read: its capital is Ostrel"], evidence="capital is Ostrel")
    assert solver_evidence_text(t, "tag") == "capital is Ostrel"
    assert solver_evidence_text(t, "think") == "I read: its capital is Ostrel"
    t.evidence = None
    assert solver_evidence_text(t, "tag") is None
    with pytest.raises(ValueError, match="evidence source"):
        solver_evidence_text(t, "answer")


# ------------------------------------------------------------------ wrapper
def _solvers(n_correct=2, n=5, evidence=SPAN):
    task = make_task("q-from-p1", answers=["Ostrel"], evidence=evidence, hops=3)
    return [
        make_traj(
            task,
            ["t"],
            answer="Ostrel" if i < n_correct else "Paris",
            correct=i < n_correct,
            evidence="capital is Ostrel" if i == 0 else None,
        )
        for i in range(n)
    ]


def test_wrapper_rewrites_proposer_and_solver_events():
    env = EvidenceVerifierReward(EventEnv(_solvers(), proposer=proposer_traj()), oracle, m=5)
    env.reset(seed=0)
    _, reward, _, _, info = env.step("a")
    prop = [ev for ev in info["rewards"] if ev["role"] == "proposer"][0]
    b = 1 - 4 / 256
    assert prop["reward"] == pytest.approx(0.5 * 1.0 + 0.75 + 0.5 * 1.0 + 0.1 * b)
    assert prop["components"]["eve_valid"] == 1 and prop["components"]["eve_p_plus"] == 1.0
    solver_rewards = [ev["reward"] for ev in info["rewards"] if ev["role"] == "solver"]
    assert solver_rewards == pytest.approx([1 + 0.3 * 6 / 7, 1.0, 0.0, 0.0, 0.0])
    assert info["reward_components"]["solver"]["eve_em"] == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert reward == pytest.approx(sum(ev["reward"] for ev in info["rewards"]))


@pytest.mark.parametrize(
    "evidence,reason", [("", "empty evidence span"), ("Its capital is Lyon.", "evidence not verbatim")]
)
def test_wrapper_invalid_evidence_gets_half_format(evidence, reason):
    env = EvidenceVerifierReward(EventEnv(_solvers(), proposer=proposer_traj(evidence=evidence)), oracle)
    env.reset()
    prop = [ev for ev in env.step("a")[4]["rewards"] if ev["role"] == "proposer"][0]
    assert prop["reward"] == 0.5 * 1.0 and prop["components"]["eve_valid"] == 0  # ½ F_fmt, F_fmt = 1
    assert prop["components"]["eve_reason"] == reason


def test_wrapper_keeps_env_rejected_question_at_zero_on_request():
    env = EvidenceVerifierReward(
        EventEnv(_solvers(), proposer=proposer_traj(valid=False)), oracle, invalid_reward="zero"
    )
    env.reset()
    prop = [ev for ev in env.step("a")[4]["rewards"] if ev["role"] == "proposer"][0]
    assert prop["reward"] == 0.0 and prop["components"]["eve_valid"] == 0


def test_wrapper_missing_data_errors():
    with pytest.raises(MissingTaskDataError, match="hop count"):
        EvidenceVerifierReward(EventEnv(_solvers(), proposer=proposer_traj(hops=None)), oracle).reset()
    env = EvidenceVerifierReward(EventEnv(_solvers(evidence=None)), oracle)
    env.reset()
    with pytest.raises(MissingTaskDataError, match="evidence span"):
        env.step("a")
    with pytest.raises(TypeError, match="answerer"):
        EvidenceVerifierReward(EventEnv([]), "not a model")
