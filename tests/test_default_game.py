"""The default game works: scripted agents on default ``KGSelfPlay-v0`` get verified questions, the
offline verifier still rejects what its materials do not support, and printed games say why."""

from __future__ import annotations

import random

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the ids)
from searchgym.agents.scripted import ScriptedSelfPlayAgent
from searchgym.construction.question_templates import path_question, read_path_question, relation_key
from searchgym.envs.resources import default_pool, resolve_world
from searchgym.evaluation.game_text import game_lines, rejection_text, reward_text
from searchgym.evaluation.games import play_games
from searchgym.retrieval.base import Hit, format_hits
from searchgym.scoring.judge import ExactMatchJudge
from searchgym.scoring.rag_verifier import ExtractiveReader, RAGVerifier
from searchgym.world import WorldBuilder
from searchgym.wrappers import DynaSearcherReward, WaypointCoverageReward
from tests.support.env_helpers import tiny_subgraph

GAMES = 20


def _play(env, agent, seed):
    obs, info = env.reset(seed=seed)
    done, events = False, []
    while not done:
        obs, _, term, trunc, info = env.step(agent.act(obs, info))
        events += info["rewards"]
        done = term or trunc
    return events, info


@pytest.fixture(scope="module")
def default_games():
    env = gym.make("KGSelfPlay-v0")
    agent = ScriptedSelfPlayAgent()
    games = [_play(env, agent, seed) for seed in range(GAMES)]
    env.close()
    return games


def test_scripted_agents_get_most_default_questions_verified(default_games):
    verdicts = [info["validation"] for _, info in default_games]
    verified = sum(v["valid"] for v in verdicts)
    assert verified >= 0.8 * GAMES, [v["reason"] for v in verdicts]
    for events, info in default_games:  # a verified question is what the Solvers played, rewarded 1 - accuracy
        if info["validation"]["valid"]:
            assert info["replay"] == "proposed" and info["task"].question == info["proposer"].question
            (prop,) = [e for e in events if e["role"] == "proposer"]
            solver = [e["reward"] for e in events if e["role"] == "solver"]
            assert prop["reward"] == pytest.approx(1 - sum(solver) / len(solver))


def test_every_default_question_reads_back_into_its_path():
    world = resolve_world(None)
    names = {n for e in world.entities() for n in (e.title, *e.aliases)}
    for sg in default_pool(world):
        hops = [(relation_key(r), f) for r, f in zip(sg.relations, sg.forward)]
        readings = read_path_question(path_question(sg), names.__contains__)
        assert any(
            seed == sg.nodes[sg.path[0]].title
            and len(hs) == len(hops)
            and all(key in keys and f == fwd for (keys, f), (key, fwd) in zip(hs, hops))
            for seed, hs in readings
        ), path_question(sg)
    assert read_path_question("Who wrote the capital of Merovia, and why?", lambda t: True) == []


def test_a_question_reads_the_same_whichever_article_it_uses():
    # a model wrote "the award received by ..." where the template says "an award received by ...":
    # the same chain (the reader's ambiguity check, not the article, decides when several nodes answer)
    names = {"Mirror of Luvven"}.__contains__
    template = "What is an award received by the head of state of the country of origin of Mirror of Luvven?"
    chain = read_path_question(template, names)
    assert chain and chain[0][0] == "Mirror of Luvven" and len(chain[0][1]) == 3
    for article in ("the", "a"):
        assert read_path_question(template.replace("an award", f"{article} award"), names) == chain
    assert read_path_question("Who is a father of Mirror of Luvven?", names) == read_path_question(
        "Who is the father of Mirror of Luvven?", names
    )
    assert read_path_question("What is thean award received by Mirror of Luvven?", names) == []


def _docs(world, titles):
    docs = {d.title: d for d in world.documents()}
    return [format_hits([Hit(docs[t].id, t, docs[t].text, 1.0)]) for t in titles]


def test_the_verifier_rejects_a_chain_its_materials_do_not_state(tiny_world):
    question = path_question(tiny_subgraph())  # Alice Varn -born in-> Tarsk -located in-> Merovia -capital-> Ostrel
    reader = ExtractiveReader(tiny_world)
    verifier = RAGVerifier(reader, ExactMatchJudge(), n_noise=2)
    full = _docs(tiny_world, ["Alice Varn", "Tarsk", "Merovia"])
    noise = _docs(tiny_world, ["Dura Labs", "Bob Varn", "Weather"])
    assert verifier.verify(question, ["Ostrel"], full, noise, random.Random(0)).valid
    # without the document stating "Tarsk is located in Merovia" nothing links the seed to the answer
    missing = _docs(tiny_world, ["Alice Varn", "Merovia", "Ostrel"])
    assert reader.answer(question, missing) == ""
    res = verifier.verify(question, ["Ostrel"], missing, noise, random.Random(0))
    assert not res.valid and res.reason == "verifier_incorrect"
    # only noise: rejected; and the chain's answer is never taken for another gold
    assert not verifier.verify(question, ["Ostrel"], noise, [], random.Random(0)).valid
    assert not verifier.verify(question, ["Merovia"], full, noise, random.Random(0)).valid


def test_the_chain_follows_the_namesake_the_world_relates():
    b = WorldBuilder("namesakes")
    b.add_relation("hq", "headquarters location")
    b.add_relation("loc", "located in the administrative territorial entity")
    b.add_entity("C", "Sporting Krurn", type="organisation")
    b.add_entity("K1", "Krurn", description="town", type="location")
    b.add_entity("K2", "Krurn", description="town", type="location")
    b.add_entity("R1", "Saiba Highlands", type="location")
    b.add_entity("R2", "Laev Region", type="location")
    b.add_triple("C", "hq", "K2")
    b.add_triple("K1", "loc", "R1")
    b.add_triple("K2", "loc", "R2")
    b.add_document("d0", "Sporting Krurn", "Sporting Krurn is a club. The club is based in Krurn.", entity="C")
    b.add_document("d1", "Krurn", "Krurn is a town. Krurn lies in Saiba Highlands.", entity="K1")
    b.add_document("d2", "Krurn", "Krurn is a town. The town lies in Laev Region.", entity="K2")
    world = b.build()
    mats = [format_hits([Hit(d.id, d.title, d.text, 1.0) for d in world.documents()])]
    question = "What place is the region in which the city where Sporting Krurn has its headquarters is located?"
    assert ExtractiveReader(world).answer(question, mats) == "Laev Region"


def test_printed_games_say_why_a_question_was_rejected_and_what_each_reward_is(default_games):
    rejected = [(e, i) for e, i in default_games if not i["validation"]["valid"]]
    verified = [(e, i) for e, i in default_games if i["validation"]["valid"]]
    assert rejected and verified
    events, info = rejected[0]
    lines = game_lines(0, events, info)
    assert lines[0].startswith("game 0: question rejected: the RAG verifier") and "[verifier_incorrect]" in lines[0]
    assert any("the Solvers played" in line for line in lines)
    assert "proposer reward 0.00 for a rejected question" in "\n".join(lines)
    events, info = verified[0]
    text = "\n".join(game_lines(1, events, info))
    assert text.startswith("game 1: question verified") and "= 1 − solver accuracy" in text
    assert "reward 1.00 = outcome 1.00" in text or "reward 0.00 = outcome 0.00" in text
    answers = [getattr(e["trajectory"], "answer", None) for e in events if e.get("role") == "solver"]
    assert f"solver answers: 0 {answers[0]!r}" in text  # what each Solver answered, beside its reward
    assert rejection_text(info["validation"]) == ""
    # play_games' summaries carry the same words
    summaries = play_games(gym.make("KGSelfPlay-v0"), ScriptedSelfPlayAgent(), 2, seed=4)
    assert summaries[0]["rejection"].endswith("[verifier_incorrect]") and summaries[1]["rejection"] == ""
    assert summaries[1]["lines"][0] == "game 1: question verified"
    # filter reasons in words
    assert rejection_text({"valid": False, "reason": "too_few_words", "details": {"words": 4}}) == (
        "the question has 4 words, fewer than the rule filter's minimum (default 10) [too_few_words]"
    )


@pytest.mark.parametrize("wrapper", [WaypointCoverageReward, DynaSearcherReward])
def test_shaped_rewards_print_as_the_sum_of_their_terms(wrapper):
    env = wrapper(gym.make("KGSelfPlay-v0"))
    events, _ = _play(env, ScriptedSelfPlayAgent(), seed=2)
    for ev in (e for e in events if e["role"] == "solver"):
        text = reward_text(ev)
        total, terms = text.split(";")[0].split(" = ")
        parts = [float(p.rsplit(" ", 1)[1]) for p in terms.split(" + ")]
        assert float(total) == pytest.approx(sum(parts), abs=0.02) and "other terms" not in text
        assert ("WCR bonus" in text) == (wrapper is WaypointCoverageReward)
        assert ("DynaSearcher gain" in text) == (wrapper is DynaSearcherReward)


def test_wcr_text_says_when_an_answer_at_a_waypoint_earns_no_bonus():
    """With ``waypoint_answer_credit=False`` the printed Solver reward names the rule it was scored by and whether
    this answer was a waypoint; with Eq. 6 as written it does not mention waypoint answers."""
    base = {"role": "solver", "reward": 0.0, "components": {"outcome": 0.0, "wcr_bonus": 0.0, "wcr_coverage": 1.0}}
    plain = reward_text(base)
    assert "α·g̃ for a wrong answer, 0 for a right one or no answer" in plain and "waypoint (" not in plain
    at_waypoint = {**base, "components": {**base["components"], "wcr_answered_waypoint": 1}}
    text = reward_text(at_waypoint)
    assert "not a waypoint, 0 for a right one, no answer or a waypoint (this answer is a waypoint;" in text
    elsewhere = {
        "role": "solver",
        "reward": 0.3,
        "components": {**at_waypoint["components"], "wcr_answered_waypoint": 0},
    }
    assert "(this answer is not a waypoint;" in reward_text(elsewhere)
