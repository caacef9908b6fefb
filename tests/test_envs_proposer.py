"""KGProposer-v0: prompts per mode, filters, RAG verification (offline reader), failing closed."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import pytest

import searchgym  # noqa: F401
from searchgym.agents.scripted import LeakyProposer, RandomAgent, ScriptedProposer
from searchgym.envs.proposer import KGProposerEnv
from searchgym.evaluation.game_text import rejection_text
from searchgym.scoring.judge import ExactMatchJudge
from searchgym.scoring.rag_verifier import RAGVerifier, ReaderError
from searchgym.tasks.sources import JsonlTaskSource, SubgraphTaskSource
from tests.support.env_helpers import AcceptAll, RecordingVerifier, play, tiny_subgraph


def _env(world, **kw):
    return KGProposerEnv(world, SubgraphTaskSource([tiny_subgraph()], world), **kw)


def test_kg_mode_shows_the_subgraph_and_vanilla_only_the_answer(tiny_world):
    obs, info = _env(tiny_world).reset(seed=0)
    assert "(Alice Varn) -[place of birth]-> (Tarsk)" in obs and "Answer: Ostrel" in obs
    obs, _ = _env(tiny_world, mode="vanilla").reset(seed=0)
    assert "Ostrel" in obs and "Alice Varn" not in obs and "Target path" not in obs
    with pytest.raises(ValueError, match="mode"):
        _env(tiny_world, mode="other")


def test_scripted_proposer_passes_filters_and_the_extractive_verifier(tiny_world):
    env = _env(tiny_world)
    steps, _ = play(env, ScriptedProposer(), seed=0)
    obs, r, term, trunc, info = steps[-1]
    v = info["validation"]
    assert term and v["valid"], v
    assert r == 1.0 and info["rewards"][0]["role"] == "proposer" and info["rewards"][0]["components"]["valid"] == 1.0
    assert v["stage"] == "verifier" and v["prediction"] == "Ostrel"
    q = info["trajectory"].question
    assert "Ostrel" not in q and len(q.split()) >= 10


def test_leaky_proposer_is_rejected_for_answer_leak(tiny_world):
    env = _env(tiny_world)
    steps, _ = play(env, LeakyProposer(), seed=0)
    *_, r, term, trunc, info = steps[-1]
    assert r == 0.0 and info["validation"]["valid"] is False and info["validation"]["reason"] == "answer_leak"
    assert info["validation"]["stage"] == "filters" and info["rewards"][0]["components"] == {
        "valid": 0.0,
        "outcome": 0.0,
    }


def test_leaky_proposer_is_rejected_on_the_default_world():
    env = gym.make("KGProposer-v0")
    for seed in range(3):
        steps, _ = play(env, LeakyProposer(), seed=seed)
        assert steps[-1][4]["validation"]["reason"] == "answer_leak"


def test_question_without_searches_is_rejected(tiny_world):
    env = _env(tiny_world, verifier=AcceptAll())
    env.reset(seed=0)
    *_, r, term, trunc, info = env.step(
        "<question>What is the capital of the country where Alice Varn was born, in the end?</question>"
    )
    assert term and r == 0.0 and info["validation"]["reason"] == "no_information"


def test_no_question_within_max_turns_is_invalid(tiny_world):
    env = _env(tiny_world, max_turns=2)
    env.reset(seed=0)
    env.step("<search>Tarsk</search>")
    *_, r, term, trunc, info = env.step("<search>Merovia</search>")
    assert trunc and not term and r == 0.0 and info["validation"]["reason"] == "no_question"


def test_verifier_errors_fail_closed(tiny_world):
    class Broken:
        def answer(self, question, materials):
            raise ReaderError("model server down")

    env = _env(tiny_world, verifier=RAGVerifier(Broken(), ExactMatchJudge()))
    steps, _ = play(env, ScriptedProposer(), seed=0)
    v = steps[-1][4]["validation"]
    assert (
        v["valid"] is False and v["reason"] == "verifier_error" and "server down" in v["error"] and steps[-1][1] == 0.0
    )


def test_noise_comes_from_a_bounded_window_of_recent_proposer_rollouts(tiny_world):
    rec = RecordingVerifier()
    env = _env(tiny_world, verifier=rec, noise_window=2)
    for seed in range(4):
        play(env, ScriptedProposer(), seed=seed)
    assert rec.calls[0]["noise_pool"] == []  # nothing to draw noise from in the first episode
    assert rec.calls[1]["noise_pool"] == rec.calls[0]["materials"]
    assert len(env.validation.recent) == 2
    own = rec.calls[0]["materials"]
    assert all(m.startswith("Doc ") for m in own) and len(own) == len(set(own))  # one retrieved document each
    assert env.validation.counts == {"valid": 4}


def test_vanilla_mode_works_with_qa_tasks(tmp_path, tiny_world):
    p = tmp_path / "t.jsonl"
    p.write_text('{"question": "unused", "answer": "Ostrel"}\n')
    env = KGProposerEnv(tiny_world, JsonlTaskSource(p), mode="vanilla")
    obs, info = env.reset(seed=0)
    assert "Ostrel" in obs
    with pytest.raises(ValueError, match="subgraph"):
        KGProposerEnv(tiny_world, JsonlTaskSource(p)).reset(seed=0)


def test_random_text_never_crashes_the_proposer(tiny_world):
    env = _env(tiny_world, max_turns=5)
    agent = RandomAgent(3)
    for seed in range(5):
        steps, _ = play(env, agent, seed=seed)
        assert steps[-1][4]["validation"] is not None and steps[-1][1] in (0.0, 1.0)


def test_proposer_clone_and_state_dict(tiny_world):
    env = _env(tiny_world, verifier=AcceptAll(), noise_window=3)
    play(env, ScriptedProposer(), seed=0)
    twin = env.clone()
    assert twin.validation.verifier is env.validation.verifier and twin.validation.recent.maxlen == 3
    assert len(twin.validation.recent) == 0
    twin.load_state_dict(env.state_dict())
    assert list(twin.validation.recent) == list(env.validation.recent) and twin.games_finished == 1


def _two_searches_then_a_question(env):
    env.reset(seed=0)
    env.step("<think>First hop.</think><search>Alice Varn place of birth</search>")
    env.step("<think>Second hop.</think><search>Tarsk located in</search>")
    return env.step("<question>What is the capital of the country in which the chemist Alice Varn was born?</question>")


def test_a_question_written_short_of_its_hops_is_rejected_when_the_filter_asks(tiny_world):
    """The tiny subgraph has 3 hops ("Required searches: 3"): two searches pass SSP's filters, not the strict one."""
    *_, r, term, _, info = _two_searches_then_a_question(_env(tiny_world, verifier=AcceptAll()))
    assert term and r == 1.0 and info["validation"]["valid"]
    strict = _env(tiny_world, verifier=AcceptAll(), filter_config={"searches_at_least_required": True})
    *_, r, term, _, info = _two_searches_then_a_question(strict)
    assert term and r == 0.0 and info["validation"]["reason"] == "too_few_searches"
    assert rejection_text(info["validation"]).startswith("the Proposer searched 2 time(s), fewer than the 3 its prompt")
    assert strict.clone().validation.filter_config.searches_at_least_required
    with pytest.raises(ValueError, match=r"unknown filter_config field\(s\) \['min_searchs'\]; valid keys: forbid_"):
        _env(tiny_world, filter_config={"min_searchs": 3})
    with pytest.raises(TypeError, match="filter_config must be a FilterConfig or a mapping"):
        _env(tiny_world, filter_config=3)


def test_a_one_hop_question_after_one_search_is_kept_when_min_searches_is_capped(tiny_world):
    """A 1-hop subgraph's prompt asks for one search; SSP's code filters want two (min_searches)."""
    full = tiny_subgraph()
    one_hop = dataclasses.replace(
        full,
        id="tiny-1hop",
        seed="E3",
        path=["E3", "E4"],
        relations=["capital"],
        relation_ids=["capital"],
        nodes={k: full.nodes[k] for k in ("E3", "E4")},
        distractors=[],
    )

    def one_search(**kw):
        env = KGProposerEnv(tiny_world, SubgraphTaskSource([one_hop], tiny_world), verifier=AcceptAll(), **kw)
        obs, _ = env.reset(seed=0)
        assert "Required searches: 1" in obs
        env.step("<think>One hop.</think><search>Merovia capital</search>")
        *_, r, term, _, info = env.step(
            "<question>Which city serves as the seat of government of the Merovia?</question>"
        )
        return r, term, info["validation"]

    r, term, validation = one_search()
    assert term and r == 0.0 and validation["reason"] == "too_few_searches"
    r, term, validation = one_search(filter_config={"min_searches_at_most_required": True})
    assert term and r == 1.0 and validation["valid"]
