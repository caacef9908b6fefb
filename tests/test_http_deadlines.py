"""Issue 17: every HTTP client of the package ends a request at its total deadline, even against a
server that trickles one byte every 0.5 s (a per-read timeout never fires there)."""

from __future__ import annotations

import time

import pytest

from searchgym.construction import LLMSelector, SelectionContext, SelectorError
from searchgym.construction.selectors import Candidate
from searchgym.core.http_deadline import DeadlineExceeded, exchange, open_connection
from searchgym.core.llm import GenerationError
from searchgym.llm.openai_client import OpenAICompatibleGenerator
from searchgym.retrieval.client import RemoteRetriever, RetrievalError
from searchgym.scoring.judge import LLMJudge
from searchgym.scoring.rag_verifier import LLMReader, ReaderError
from tests.support.trickle_server import TrickleServer

DEADLINE = 1.0
# generous: without a total deadline each call below would block for minutes (1,000,000 bytes x 0.5 s)
BOUND = 8.0


@pytest.fixture(params=["status", "body"])
def trickle(request):
    with TrickleServer(stage=request.param, interval=0.5) as server:
        yield server


def generator(url: str) -> OpenAICompatibleGenerator:
    return OpenAICompatibleGenerator(url, "m", timeout=DEADLINE, max_retries=0)


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


def test_exchange_raises_at_the_deadline(trickle):
    conn = open_connection(trickle.url, DEADLINE)
    (_, elapsed) = timed(lambda: pytest.raises(DeadlineExceeded, exchange, conn, "GET", "/", None, {}, DEADLINE))
    assert DEADLINE <= elapsed < BOUND
    assert conn.sock is None  # closed, never reused half-read


def test_openai_compatible_generator(trickle):
    gen = generator(trickle.url)
    t0 = time.monotonic()
    with pytest.raises(GenerationError, match="timed out"):
        gen.generate(["hello"])
    assert time.monotonic() - t0 < BOUND
    gen.close()


def test_retries_share_the_bound():
    with TrickleServer(stage="body") as server:
        gen = OpenAICompatibleGenerator(server.url, "m", timeout=DEADLINE, max_retries=2, backoff=0.01)
        t0 = time.monotonic()
        with pytest.raises(GenerationError, match="timed out"):
            gen.generate([[{"role": "user", "content": "hi"}]])
        assert time.monotonic() - t0 < 3 * DEADLINE + BOUND
        assert server.connections == 3
        gen.close()


def test_remote_retriever(trickle):
    r = RemoteRetriever(trickle.url, timeout=DEADLINE, retries=0)
    (exc, elapsed) = timed(lambda: pytest.raises(RetrievalError, r.batch_search, ["q"], 3))
    assert "timed out" in str(exc.value) and elapsed < BOUND


def test_llm_judge_fails_closed_in_time(trickle):
    judge = LLMJudge(generator(trickle.url))
    verdict, elapsed = timed(lambda: judge.judge("Who?", "Alice", ["Bob"]))
    assert verdict.correct is False and "timed out" in verdict.error and elapsed < BOUND


def test_llm_reader(trickle):
    reader = LLMReader(generator(trickle.url))
    (exc, elapsed) = timed(lambda: pytest.raises(ReaderError, reader.answer, "Who?", ["doc"]))
    assert "timed out" in str(exc.value) and elapsed < BOUND


def test_llm_selector_reports_an_outage(trickle):
    sel = LLMSelector(generator(trickle.url))
    ctx = SelectionContext([], "X", [Candidate("r", "rel", "t", "T")], 0, 3, 7, "s")
    (exc, elapsed) = timed(lambda: pytest.raises(SelectorError, sel.select, ctx))
    assert exc.value.kind == "timeout" and exc.value.outage and elapsed < BOUND


def test_defaults_fit_rl():
    gen = OpenAICompatibleGenerator("http://127.0.0.1:9")
    assert gen.timeout * (gen.max_retries + 1) <= 60
    r = RemoteRetriever("http://127.0.0.1:9")
    assert r.timeout * (r.retries + 1) <= 30
    with pytest.raises(ValueError, match="timeout"):
        OpenAICompatibleGenerator("http://127.0.0.1:9", timeout=0)
    with pytest.raises(ValueError, match="http"):
        OpenAICompatibleGenerator("ftp://x")
