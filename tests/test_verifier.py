"""RAG verification: noise sampling, the offline extractive reader, the LLM reader over HTTP, failing closed."""

from __future__ import annotations

import random

import pytest

from searchgym.core.types import Task, Trajectory, Turn
from searchgym.envs.protocol import format_information
from searchgym.llm.openai_client import OpenAICompatibleGenerator
from searchgym.retrieval.base import Hit, format_hits
from searchgym.scoring.judge import ExactMatchJudge, LLMJudge
from searchgym.scoring.rag_verifier import (
    ExtractiveReader,
    LLMReader,
    RAGVerifier,
    Reader,
    ReaderError,
    extract_final_answer,
    materials_from_trajectory,
)
from tests.support.openai_server import OpenAIStubServer

CAPITAL_Q = "What is the capital of the country in which the birthplace of Alice Varn is located?"


def _materials(world, *groups):
    docs = {d.title: d for d in world.documents()}
    return [format_hits([Hit(docs[t].id, t, docs[t].text, 1.0) for t in g]) for g in groups]


@pytest.fixture(scope="module")
def reader(tiny_world):
    return ExtractiveReader(tiny_world)


@pytest.fixture(scope="module")
def own(tiny_world):
    return _materials(tiny_world, ["Alice Varn", "Tarsk"], ["Merovia", "Ostrel", "Weather"])


@pytest.fixture(scope="module")
def noise(tiny_world):
    return _materials(tiny_world, ["Dura Labs"], ["Bob Varn"], ["Weather"], ["Dura Labs", "Bob Varn"])


@pytest.mark.parametrize(
    "question,answer",
    [
        (CAPITAL_Q, "Ostrel"),
        ("What is the capital of the country in which Tarsk is located?", "Ostrel"),
        ("What country is Tarsk located in?", "Merovia"),
        ("In what year was the country where the birthplace of A. Varn is located founded?", "1204"),
        ("Who was born in the capital of the country where Tarsk is located?", "Bob Varn"),
        ("Which company has its headquarters in the city where Alice Varn was born?", "Dura Labs"),
        ("What is the favourite colour of the weather?", ""),
    ],
)
def test_extractive_reader_answers_multi_hop(reader, own, noise, question, answer):
    assert reader.answer(question, own + noise) == answer


def test_extractive_reader_never_answers_an_entity_named_in_the_question(reader, own):
    assert reader.answer("Where is Ostrel?", own) != "Ostrel"


def test_extractive_reader_without_anchors_reads_the_best_sentence(reader, tiny_world):
    mats = _materials(tiny_world, ["Dura Labs", "Bob Varn", "Weather"])
    # the question names no entity: no chain to follow, the sentence sharing its words answers (typed: where)
    assert reader.answer("Where is the company headquartered?", mats) == "Tarsk"
    assert reader.answer("What falls often in the northern hills?", mats) == ""  # that sentence names nothing


def test_extractive_reader_is_deterministic_and_order_robust(reader, own, noise):
    mats = own + noise
    first = reader.answer(CAPITAL_Q, mats)
    for seed in range(5):
        shuffled = list(mats)
        random.Random(seed).shuffle(shuffled)
        assert reader.answer(CAPITAL_Q, shuffled) == first
    assert reader.answer(CAPITAL_Q, []) == ""
    assert isinstance(reader, Reader)


def test_verify_valid_and_invalid(reader, own, noise):
    ver = RAGVerifier(reader, ExactMatchJudge(), n_noise=2)
    res = ver.verify(CAPITAL_Q, ["Ostrel"], own, noise, random.Random(0))
    assert res.valid and res.reason is None and res.prediction == "Ostrel"
    assert len(res.materials_used) == 4 and set(own) <= set(res.materials_used)
    bad = ver.verify(CAPITAL_Q, ["Tarsk"], own, noise, random.Random(0))
    assert not bad.valid and bad.reason == "verifier_incorrect"
    assert ver.stats == {"verified": 2, "valid": 1, "invalid": 1}


def test_noise_sampling_is_deterministic_and_excludes_own(reader, own, noise):
    ver = RAGVerifier(reader, ExactMatchJudge())
    pool = noise + [own[0]]  # own material in the pool must not be drawn again
    a = ver.select_materials(own, pool, random.Random(7))
    b = ver.select_materials(own, pool, random.Random(7))
    assert a == b and len(a) == len(own) + 4 and sorted(a) == sorted(own + noise)
    orders = {tuple(ver.select_materials(own, pool, random.Random(s))) for s in range(10)}
    assert len(orders) > 1  # the shuffle really depends on the rng
    assert ver.select_materials(own, pool, 3) == ver.select_materials(own, pool, random.Random(3))
    with pytest.raises(TypeError, match="rng"):
        ver.select_materials(own, pool, "seed")
    assert RAGVerifier(reader, ExactMatchJudge(), n_noise=0).select_materials(own, pool, 0) in (
        [own[0], own[1]],
        [own[1], own[0]],
    )


class _FailingReader:
    def answer(self, question, materials):
        raise ReaderError("model down")


def test_reader_error_fails_closed_and_is_counted(own):
    ver = RAGVerifier(_FailingReader(), ExactMatchJudge())
    res = ver.verify(CAPITAL_Q, ["Ostrel"], own, [], 0)
    assert not res.valid and res.reason == "verifier_error" and "model down" in res.error
    assert ver.stats["errors"] == 1


def test_judge_error_fails_closed(own):
    class _Reader:
        def answer(self, q, m):
            return "Ostrel city"

    class _DeadGen:
        def generate(self, prompts, config=None):
            raise RuntimeError("judge backend crashed")

    ver = RAGVerifier(_Reader(), LLMJudge(_DeadGen()))
    res = ver.verify(CAPITAL_Q, ["Ostrel"], own, [], 0)
    assert res.reason == "verifier_error" and "judge" in res.error and res.prediction == "Ostrel city"


def test_materials_from_trajectory():
    traj = Trajectory(role="proposer", task=Task(id="t", question="", answers=["a"]), prompt="p")
    traj.turns = [
        Turn(0, "x", information=format_information("Doc 1 A")),
        Turn(1, "y", information="\nMy previous action is invalid.\n"),
        Turn(2, "z", information=format_information("Doc 1 B")),
    ]
    assert materials_from_trajectory(traj) == ["Doc 1 A", "Doc 1 B"]


@pytest.mark.parametrize(
    "reply,answer",
    [
        ("The capital of Merovia is Ostrel.\nAnswer: Ostrel", "Ostrel"),
        ("Answer: Tarsk. Hmm. answer: **Ostrel**.\nExplanation...", "Ostrel"),
        ("<think>Answer: no</think> Answer: Ostrel", "Ostrel"),
    ],
)
def test_extract_final_answer(reply, answer):
    assert extract_final_answer(reply) == answer


@pytest.mark.parametrize("reply", ["Ostrel", "Answer:   ", ""])
def test_extract_final_answer_unparseable(reply):
    with pytest.raises(ReaderError, match="unparseable"):
        extract_final_answer(reply)


def test_llm_reader_through_real_server(own, noise):
    def reply(messages, body):
        prompt = messages[0]["content"]
        return "Ostrel is the capital.\nAnswer: Ostrel" if "Materials:" in prompt and "[1]" in prompt else "???"

    with OpenAIStubServer(reply) as srv:
        gen = OpenAICompatibleGenerator(srv.url, timeout=5, max_retries=0)
        ver = RAGVerifier(LLMReader(gen), ExactMatchJudge())
        res = ver.verify(CAPITAL_Q, ["Ostrel"], own, noise, random.Random(1))
        body = srv.requests[0]
        assert res.valid and res.prediction == "Ostrel"
        assert body["temperature"] == 0.0 and CAPITAL_Q in body["messages"][0]["content"]
        assert "[6]" in body["messages"][0]["content"]  # 2 own + 4 noise materials, numbered
        srv.reply = lambda m, b: "I don't know."
        res = ver.verify(CAPITAL_Q, ["Ostrel"], own, noise, random.Random(1))
        assert res.reason == "verifier_error" and "unparseable" in res.error
        gen.close()


def test_llm_reader_http_failure_fails_closed(own):
    with OpenAIStubServer(lambda m, b: "Answer: Ostrel", fail_every=1) as srv:
        gen = OpenAICompatibleGenerator(srv.url, timeout=5, max_retries=0)
        ver = RAGVerifier(LLMReader(gen), ExactMatchJudge())
        res = ver.verify(CAPITAL_Q, ["Ostrel"], own, [], 0)
        gen.close()
    assert res.reason == "verifier_error" and "HTTP 500" in res.error and ver.stats["errors"] == 1


def test_verifier_arguments_checked(reader):
    with pytest.raises(ValueError, match="n_noise"):
        RAGVerifier(reader, ExactMatchJudge(), n_noise=-1)
    with pytest.raises(TypeError, match="answer"):
        RAGVerifier(object(), ExactMatchJudge())


def _paraphrase_world():
    from searchgym.world import Literal, WorldBuilder

    b = WorldBuilder("para")
    b.add_relation("capital", "capital")
    b.add_relation("pop", "population")
    b.add_relation("loc", "located in")
    b.add_entity("R", "Upper Miath", aliases=["Miath"], description="region", type="location")
    b.add_entity("C", "Hynargard", description="town", type="location")
    b.add_entity("N", "Naskdal", description="town", type="location")
    b.add_entity("W", "The Works", aliases=["the", "Works"], description="company", type="organisation")
    b.add_entity("K", "Raeskania", description="country", type="location")
    b.add_triple("R", "loc", "K")
    b.add_triple("R", "capital", "C")
    b.add_triple("N", "loc", "R")
    b.add_triple("C", "pop", Literal("8539", "quantity"))
    b.add_triple("N", "pop", Literal("7802", "quantity"))
    b.add_document(
        "d1",
        "Upper Miath",
        "Upper Miath is a region. The region is governed from Hynargard. "
        "Places in Upper Miath include Naskdal and Hynargard. Administratively, it belongs to Raeskania.",
        entity="R",
    )
    b.add_document(
        "d2", "Hynargard", "Hynargard is a town. As of the last census, the city had 8,539 inhabitants.", entity="C"
    )
    b.add_document(
        "d3", "Naskdal", "Naskdal is a town. It had 7,802 inhabitants. Naskdal lies in Upper Miath.", entity="N"
    )
    return b.build()


def test_extractive_reader_reads_paraphrases_through_kg_labels():
    world = _paraphrase_world()
    reader = ExtractiveReader(world)
    docs = list(world.documents())
    mats = [format_hits([Hit(d.id, d.title, d.text, 1.0) for d in docs])]
    q = "What is the population of the capital of Upper Miath?"
    assert reader.answer(q, mats) == "8,539"  # "governed from" states *capital*; "8,539" is the literal 8539
    assert ExactMatchJudge().judge(q, reader.answer(q, mats), ["8539"]).correct
    # a relation asked twice is followed twice
    assert reader.answer("Where is the region in which Naskdal is located located?", mats) == "Raeskania"
    # an alias made of stop words ("the") and lowercase mentions never link
    assert reader.answer("Which company is the one mentioned?", mats) == ""
