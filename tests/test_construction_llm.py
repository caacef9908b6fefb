"""The LLM selector over a real OpenAI-compatible HTTP server on loopback, and its strict parser."""

from __future__ import annotations

import json
import re
import socket
import threading
import time

import pytest

from searchgym.construction import (
    ExtractionConfig,
    LLMSelector,
    SelectionContext,
    SelectorError,
    build_pool,
    parse_selector_reply,
    rejections_path,
)
from searchgym.construction.selectors import Candidate
from searchgym.core.llm import GenerationError, TextGenerator
from searchgym.llm.openai_client import OpenAICompatibleGenerator
from tests.support.construction_world import build_random_world
from tests.support.openai_server import OpenAIStubServer
from tests.support.trickle_server import TrickleServer


@pytest.fixture(scope="module")
def world():
    return build_random_world(300, seed=5)


def lines_of(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def prompt_of(messages) -> str:
    assert isinstance(messages, list) and messages[-1]["role"] == "user"
    return messages[-1]["content"]


def numbered(prompt: str) -> list[str]:
    """The numbered candidate lines of a selector prompt."""
    block = prompt.split("Candidate edges:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\d+\. (.*)$", block, flags=re.M)


def path_len(prompt: str) -> int:
    block = prompt.split("Path so far:\n", 1)[1].split("\n\nCurrent node:", 1)[0]
    return 0 if block.startswith("(empty") else len(block.splitlines())


def smart_reply(messages, body):
    """A deterministic 'model': stop after 4 hops, else the first candidate that is not a date/number."""
    p = prompt_of(messages)
    if path_len(p) >= 4:
        return ' {"answer": 0}\n'
    cands = numbered(p)
    pick = next((i for i, c in enumerate(cands, 1) if not re.search(r"-> \d+$", c)), 1)
    return f'```json\n{{"answer": {pick}}}\n```'


def llm(url, **kw):
    return LLMSelector(
        OpenAICompatibleGenerator(
            url, "stub", timeout=kw.pop("timeout", 5.0), max_retries=0, concurrency=kw.pop("concurrency", 8)
        ),
        **kw,
    )


@pytest.mark.parametrize(
    "text,n,expected",
    [
        ('{"answer": 2}', 3, 2),
        ('  {"answer": 0}\n', 3, 0),
        ('```json\n{"answer": 3}\n```', 3, 3),
        ('```\n{"answer": 1}\n```', 1, 1),
    ],
)
def test_parse_accepts_strict_json(text, n, expected):
    assert parse_selector_reply(text, n) == expected


@pytest.mark.parametrize(
    "text,kind",
    [
        ("2", "unparseable"),
        ("I choose 2", "unparseable"),
        ('{"answer": 2} because', "unparseable"),
        ('{"answer": "2"}', "unparseable"),
        ('{"answer": true}', "unparseable"),
        ('{"answer": 2.0}', "unparseable"),
        ('{"answer": 2, "why": "x"}', "unparseable"),
        ("[2]", "unparseable"),
        ("", "unparseable"),
        ('{"answer": 4}', "out_of_range"),
        ('{"answer": -1}', "out_of_range"),
    ],
)
def test_parse_rejects_everything_else(text, kind):
    with pytest.raises(SelectorError) as ei:
        parse_selector_reply(text, 3)
    assert ei.value.kind == kind


def test_round_trip_through_a_real_server(world):
    with OpenAIStubServer(smart_reply) as server:
        sel = llm(server.url)
        res = build_pool(world, 8, selector=sel, concurrency=3, progress=False, config=ExtractionConfig(max_hops=7))
    assert res.accepted == 8
    # every accepted path stopped where the 'model' said so, and never chose a literal
    for sg in res.subgraphs:
        assert sg.hops == 4 and sg.metadata["stop"] == "selector"
        assert not sg.answer_node.is_literal
    # (speculative extractions past the 8th may still be talking to the server, so compare bounds)
    used = sum(sg.metadata["selector_calls"] for sg in res.subgraphs)
    assert sel.stats()["failures"] == {} and used <= sel.stats()["ok"] <= len(server.requests)
    body = server.requests[0]
    assert body["model"] == "stub" and isinstance(body["seed"], int)
    p = prompt_of(body["messages"])
    assert "Reply with JSON only" in p and numbered(p)
    assert res.selector_stats["ok"] >= used


def test_pool_with_llm_selector_is_deterministic_across_workers(world):
    with OpenAIStubServer(smart_reply) as server:
        a = build_pool(world, 6, selector=llm(server.url), concurrency=1, progress=False)
        first_prompts = [prompt_of(r["messages"]) for r in server.requests[:4]]
        b = build_pool(world, 6, selector=llm(server.url), concurrency=4, progress=False)
    assert [s.to_dict() for s in a.subgraphs] == [s.to_dict() for s in b.subgraphs]
    # with one worker the first requests are seed index 0's steps: the path follows the server's picks
    sg = a.subgraphs[0]
    assert sg.metadata["seed_index"] == 0
    for step, prompt in enumerate(first_prompts):
        pick = int(re.search(r'"answer": (\d+)', smart_reply([{"role": "user", "content": prompt}], {})).group(1))
        title = sg.nodes[sg.path[step + 1]].title
        assert numbered(prompt)[pick - 1] == f"{sg.relations[step]} -> {title}"


def test_garbage_replies_are_counted_rejections(world):
    with OpenAIStubServer(lambda m, b: "Sure! I'd pick edge number 2.") as server:
        sel = llm(server.url)
        res = build_pool(
            world,
            3,
            selector=sel,
            concurrency=2,
            progress=False,
            max_attempts=4,
            abort_after_selector_failures=0,
            config=ExtractionConfig(max_retries=2),
        )
    assert res.accepted == 0 and res.rejections == {"selector_failed": 4}
    assert sel.failures == {"unparseable": 12} and len(server.requests) == 12
    assert any("not JSON" in e for e in res.errors)


def test_out_of_range_replies_are_counted(world):
    with OpenAIStubServer(lambda m, b: '{"answer": 99}') as server:
        sel = llm(server.url)
        res = build_pool(
            world,
            1,
            selector=sel,
            progress=False,
            max_attempts=2,
            abort_after_selector_failures=0,
            config=ExtractionConfig(max_retries=1),
        )
    assert res.rejections == {"selector_failed": 2} and sel.failures == {"out_of_range": 4}


def test_http_500s_are_retried_and_counted(world):
    with OpenAIStubServer(smart_reply, fail_every=3) as server:
        sel = llm(server.url)
        res = build_pool(world, 5, selector=sel, concurrency=2, progress=False)
    assert res.accepted == 5
    assert sel.failures["http_error"] >= 1 and set(sel.failures) == {"http_error"}
    assert sum(s.metadata["selector_failures"] for s in res.subgraphs) <= sel.failures["http_error"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_down_endpoint_stops_without_recording_rejections(world, tmp_path):
    sel = llm(f"http://127.0.0.1:{_free_port()}/v1")
    out = tmp_path / "pool.jsonl"
    res = build_pool(
        world, 50, selector=sel, concurrency=4, progress=False, out=out, config=ExtractionConfig(max_retries=1)
    )
    assert res.accepted == 0 and not res.rejections and res.attempted == 0
    assert "unavailable" in res.stopped_early and "cannot reach" in res.stopped_early
    assert "rerun the same command to resume" in res.stopped_early
    assert set(sel.failures) == {"unreachable"}
    assert out.read_text() == "" and rejections_path(out).read_text() == ""


def test_hung_endpoint_stops_in_time_and_resume_retries_its_seeds(world, tmp_path):
    """Issue 17: a hung selector ran past 170 s and its outage was saved as permanent rejections."""
    out = tmp_path / "pool.jsonl"
    cfg = ExtractionConfig(max_retries=1)
    with OpenAIStubServer(smart_reply) as server:
        ok = llm(server.url)
        build_pool(world, 3, selector=ok, concurrency=2, progress=False, out=out, config=cfg)  # a healthy session
        reference = build_pool(world, 6, selector=ok, concurrency=2, progress=False, config=cfg)
    with TrickleServer(stage="status") as hung:
        sel = llm(hung.url + "/v1", timeout=1.0)
        t0 = time.monotonic()
        res = build_pool(world, 6, selector=sel, concurrency=2, progress=False, out=out, config=cfg)
        elapsed = time.monotonic() - t0
    assert elapsed < 30  # 2 attempts x 1 s deadline (+ backoff); without deadlines it never ends
    assert res.accepted == 3 and "unavailable" in res.stopped_early
    assert set(res.selector_stats["failures"]) == {"timeout"}  # (read while the hung server was up)
    assert not any(r["reason"] == "selector_failed" for r in map(json.loads, lines_of(rejections_path(out))))
    with OpenAIStubServer(smart_reply) as server:
        resumed = build_pool(world, 6, selector=llm(server.url), concurrency=2, progress=False, out=out, config=cfg)
    assert resumed.stopped_early is None
    assert [s.to_dict() for s in resumed.subgraphs] == [s.to_dict() for s in reference.subgraphs]


def test_model_saying_no_is_a_rejection_not_an_outage(world):
    with OpenAIStubServer(lambda m, b: "no") as server:
        res = build_pool(
            world,
            2,
            selector=llm(server.url),
            progress=False,
            max_attempts=3,
            abort_after_selector_failures=0,
            config=ExtractionConfig(max_retries=0),
        )
    assert res.rejections == {"selector_failed": 3} and res.stopped_early.startswith("reached max_attempts")


def test_http_4xx_is_a_bad_request_not_an_outage(world):
    ctx = SelectionContext([], "X", [Candidate("r", "rel", "t", "T")], 0, 3, 7, "s")
    for message, kind in (
        ("http://x answered HTTP 400: too long", "bad_request"),
        ("http://x answered HTTP 503: busy", "http_error"),
        ("http://x answered HTTP 429: slow down", "http_error"),
    ):
        sel = LLMSelector(_Raising(message))
        with pytest.raises(SelectorError) as ei:
            sel.select(ctx)
        assert ei.value.kind == kind and ei.value.outage == (kind == "http_error")


def test_workers_run_requests_concurrently(world):
    active, peak, lock = [0], [0], threading.Lock()

    def reply(messages, body):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return smart_reply(messages, body)

    with OpenAIStubServer(reply) as server:
        res = build_pool(world, 8, selector=llm(server.url), concurrency=4, progress=False)
    assert res.accepted == 8 and peak[0] >= 2


class _Broken(TextGenerator):
    def generate(self, prompts, config=None):
        return ["a", "b"]


class _Raising(TextGenerator):
    def __init__(self, message="model crashed"):
        self.message = message

    def generate(self, prompts, config=None):
        raise GenerationError(self.message)


def test_any_text_generator_plugs_in_and_bad_ones_fail_closed():
    ctx = SelectionContext([], "X", [Candidate("r", "rel", "t", "T")], 0, 3, 7, "s")
    for gen, kind in ((_Broken(), "generation_error"), (_Raising(), "generation_error")):
        sel = LLMSelector(gen)
        with pytest.raises(SelectorError) as ei:
            sel.select(ctx)
        assert ei.value.kind == kind and sel.failures == {kind: 1}
    with pytest.raises(TypeError, match="TextGenerator"):
        LLMSelector(object())
    msgs = LLMSelector(_Broken()).build_messages(ctx)
    assert "1. rel -> T" in msgs[-1]["content"]


def test_cli_build_with_llm_selector(world, tmp_path, capsys):
    from searchgym.commands.subgraphs import main as cli_main

    wdir = tmp_path / "world"
    world.save(wdir)
    out = tmp_path / "pool.jsonl"
    with OpenAIStubServer(smart_reply) as server:
        rc = cli_main(
            [
                "subgraphs",
                "build",
                "--world",
                str(wdir),
                "--n",
                "4",
                "--out",
                str(out),
                "--selector",
                "llm",
                "--endpoint",
                server.url,
                "--model",
                "stub-model",
                "--concurrency",
                "3",
                "--no-progress",
            ]
        )
    assert rc == 0
    text = capsys.readouterr().out
    assert "4 subgraphs from" in text and "selector calls:" in text
    assert all(r["model"] == "stub-model" for r in server.requests)
    # the endpoint goes away: resuming needs no calls, a larger pool fails with a clear message and rc 1
    down = f"http://127.0.0.1:{_free_port()}/v1"
    rc = cli_main(
        [
            "subgraphs",
            "build",
            "--world",
            str(wdir),
            "--n",
            "4",
            "--out",
            str(out),
            "--selector",
            "llm",
            "--endpoint",
            down,
            "--model",
            "stub-model",
            "--concurrency",
            "3",
            "--no-progress",
        ]
    )
    assert rc == 0
    rc = cli_main(
        [
            "subgraphs",
            "build",
            "--world",
            str(wdir),
            "--n",
            "400",
            "--out",
            str(out),
            "--selector",
            "llm",
            "--endpoint",
            down,
            "--model",
            "stub-model",
            "--concurrency",
            "3",
            "--no-progress",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 1 and "unavailable" in captured.err and "cannot reach" in captured.err


def test_the_command_says_an_unreachable_endpoint_once_on_stderr(tmp_path, capsys):
    """``subgraphs build --selector llm`` with nothing listening: the summary on stdout names the stop, and
    stderr holds one ``searchgym subgraphs: error:`` line (the library's warning and a bare ``error:`` line once
    said it twice more)."""
    from searchgym.cli import main

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "pool.jsonl"
    argv = ["subgraphs", "build", "--synthetic", "--n", "2", "--out", str(out), "--no-progress"]
    assert main([*argv, "--selector", "llm", "--endpoint", f"http://127.0.0.1:{port}/v1", "--timeout", "2"]) == 1
    captured = capsys.readouterr()
    assert "stopped early: the selector endpoint is unavailable" in captured.out
    assert captured.err.count("\n") == 1 and captured.err.startswith("searchgym subgraphs: error: the selector")
    assert "rerun the same command to resume" in captured.err
