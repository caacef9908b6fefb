"""Answer judging: SQuAD metrics and the strict, fail-closed LLM judge over a real loopback server."""

from __future__ import annotations

import socket

import pytest

from searchgym.core.llm import GenerationConfig, GenerationError, TextGenerator
from searchgym.llm.openai_client import OpenAICompatibleGenerator
from searchgym.scoring.judge import (
    CoverEMJudge,
    ExactMatchJudge,
    F1Judge,
    LLMJudge,
    Verdict,
    cover_exact_match,
    exact_match,
    normalize_answer,
    parse_verdict,
    token_f1,
)
from tests.support.openai_server import OpenAIStubServer


@pytest.mark.parametrize(
    "raw,norm",
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  an  apple, a pear ", "apple pear"),
        ("Theatre", "theatre"),  # 'the' only dropped as a whole word
        ("U.S.A.", "usa"),
        ("", ""),
        (None, ""),
    ],
)
def test_normalize_answer(raw, norm):
    assert normalize_answer(raw) == norm


def test_exact_match_against_aliases():
    assert exact_match("the Republic of Merovia.", ["Merovia", "Republic of Merovia"])
    assert exact_match("OSTREL", "Ostrel")
    assert not exact_match("Ostrel city", ["Ostrel"])
    assert not exact_match("", ["a"]) and not exact_match(None, ["Ostrel"])


def test_token_f1_max_over_golds():
    assert token_f1("Ostrel city", ["Ostrel"]) == pytest.approx(2 / 3)
    assert token_f1("Ostrel", ["Tarsk", "Ostrel"]) == 1.0
    assert token_f1("Tarsk", ["Ostrel"]) == 0.0
    assert token_f1(None, ["Ostrel"]) == 0.0


def test_cover_exact_match_whole_tokens():
    assert cover_exact_match("It is Ostrel, in Merovia", ["Ostrel"], whole_words=True)
    assert not cover_exact_match("Ostrelian", ["Ostrel"], whole_words=True)
    assert cover_exact_match("Ostrelian", ["Ostrel"])  # Search-R1 / FlashRAG: plain substring
    assert not cover_exact_match("", ["Ostrel"])


def test_rule_judges_and_stats():
    em, f1, cem = ExactMatchJudge(), F1Judge(0.5), CoverEMJudge()
    assert em.judge("q", "Ostrel", ["Ostrel"]) == Verdict(True, "em", 1.0)
    assert not em.judge("q", "Ostrel city", ["Ostrel"]).correct
    assert f1.judge("q", "Ostrel city", ["Ostrel"]).correct
    assert cem.judge("q", "the city of Ostrel", ["Ostrel"]).correct
    v = em.judge("q", None, ["Ostrel"])
    assert v.method == "empty" and not v.correct
    assert em.stats["calls"] == 3 and em.stats["correct"] == 1
    assert em.judge("q", "x", []).error == "no gold answer given"
    with pytest.raises(ValueError, match="threshold"):
        F1Judge(0)


@pytest.mark.parametrize(
    "reply,expected",
    [
        ("Correct", True),
        ("correct.", True),
        ("**Correct**", True),
        ("  CORRECT\n", True),
        ("Correct. The model answer matches.", True),
        ("<think>hmm, wrong?</think>Correct", True),
        ("Wrong", False),
        ("Incorrect", False),
        ("wrong.", False),
        ("The answer is not correct", False),
        ("Incorrect, it is correct", False),
        ("Correct? No, wrong", None),
        ("banana", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_verdict_strict(reply, expected):
    assert parse_verdict(reply) is expected


@pytest.fixture(scope="module")
def scripted():
    """One loopback OpenAI-compatible server for the module; tests set ``state["reply"]``."""
    state = {"reply": "Correct"}
    with OpenAIStubServer(lambda messages, body: state["reply"]) as srv:
        gen = OpenAICompatibleGenerator(srv.url, timeout=5, max_retries=0)
        yield state, srv, gen
        gen.close()


@pytest.mark.parametrize(
    "reply,correct,error",
    [
        ("Correct", True, False),
        ("correct.", True, False),
        ("Wrong", False, False),
        ("Incorrect", False, False),
        ("The answer is not correct", False, False),
        ("I cannot decide", False, True),
    ],
)
def test_llm_judge_through_real_server(scripted, reply, correct, error):
    state, srv, gen = scripted
    state["reply"] = reply
    srv.requests.clear()
    judge = LLMJudge(gen)
    v = judge.judge("What is the capital of Merovia?", "the city Ostrel", ["Ostrel"])
    assert v.correct is correct and v.method == "llm"
    assert (v.error is not None) is error
    assert judge.stats["errors"] == int(error) and judge.stats["llm_calls"] == 1
    sent = srv.requests[0]["messages"][0]["content"]
    assert "Ostrel" in sent and "the city Ostrel" in sent and srv.requests[0]["temperature"] == 0.0


def test_llm_judge_exact_match_skips_the_model(scripted):
    state, srv, gen = scripted
    state["reply"] = "Wrong"
    srv.requests.clear()
    v = LLMJudge(gen).judge("q", "Ostrel", ["Ostrel"])
    assert v == Verdict(True, "em", 1.0) and srv.requests == []
    assert not LLMJudge(gen).judge("q", "", ["Ostrel"]).correct and srv.requests == []


def test_llm_judge_http_500_fails_closed():
    with OpenAIStubServer(lambda m, b: "Correct", fail_every=1) as srv:
        gen = OpenAICompatibleGenerator(srv.url, timeout=5, max_retries=0)
        judge = LLMJudge(gen)
        v = judge.judge("q", "Ostrel city", ["Ostrel"])
        gen.close()
    assert not v.correct and "HTTP 500" in v.error and judge.stats["errors"] == 1


def test_llm_judge_down_server_fails_closed():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    gen = OpenAICompatibleGenerator(f"http://127.0.0.1:{port}", timeout=2, max_retries=0)
    judge = LLMJudge(gen)
    v = judge.judge("q", "Ostrel city", ["Ostrel"])
    gen.close()
    assert not v.correct and "cannot reach" in v.error


def test_llm_judge_batch_and_each_reference():
    seen = []

    def reply(messages, body):
        text = messages[0]["content"]
        seen.append(text)
        return "Correct" if "Reference Answer: Republic of Merovia" in text else "Wrong"

    with OpenAIStubServer(reply) as srv:
        gen = OpenAICompatibleGenerator(srv.url, timeout=5, max_retries=0)
        canon = LLMJudge(gen)
        each = LLMJudge(gen, references="each")
        items = [
            ("q1", "Merovia republic", ["Merovia", "Republic of Merovia"]),
            ("q2", "Merovia", ["Merovia"]),
            ("q3", None, ["x"]),
        ]
        assert [v.correct for v in canon.judge_batch(items)] == [False, True, False]
        assert [v.correct for v in each.judge_batch(items)] == [True, True, False]
        gen.close()
    assert each.stats["llm_calls"] == 2 and canon.stats["llm_calls"] == 1


class _Broken(TextGenerator):
    def __init__(self, out):
        self.out = out

    def generate(self, prompts, config=None):
        if isinstance(self.out, Exception):
            raise self.out
        return self.out


def test_llm_judge_bad_generator_outputs_fail_closed():
    assert LLMJudge(_Broken(GenerationError("boom"))).judge("q", "x", ["b"]).error.endswith("boom")
    assert not LLMJudge(_Broken([])).judge("q", "x", ["b"]).correct
    with pytest.raises(ValueError):
        LLMJudge(_Broken([]), references="all")
    assert isinstance(LLMJudge(_Broken([])).config, GenerationConfig)
