"""The OpenAI-compatible model server (``searchgym.llm.openai_server``) answers a hostile request with a 4xx and
keeps serving: before, JSON nested a thousand deep escaped as a ``RecursionError`` (the connection dropped with
a traceback in the server's log, no answer), a body that was not UTF-8 or a Content-Length that was not a number
did the same."""

from __future__ import annotations

import http.client
import json

import pytest

from searchgym.core.llm import TextGenerator
from searchgym.llm.openai_server import MAX_BODY_BYTES, OpenAIServer


class _Echo(TextGenerator):
    """Answers every prompt with the same word (the test is about requests, not generation)."""

    def generate(self, prompts, config=None):
        return ["ok" for _ in prompts]


@pytest.fixture(scope="module")
def server():
    with OpenAIServer(_Echo(), "echo") as srv:
        yield srv


def _post(server, body: bytes, headers: dict | None = None) -> tuple[int, dict]:
    host, port = server.url.split("//", 1)[1].split("/", 1)[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.putrequest("POST", "/v1/chat/completions")
        for key, value in {
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            **(headers or {}),
        }.items():
            conn.putheader(key, value)
        conn.endheaders()
        conn.send(body)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


GOOD = json.dumps({"model": "echo", "messages": [{"role": "user", "content": "hi"}]}).encode()


@pytest.mark.parametrize(
    "body, headers, status, words",
    [
        (b"[" * 100_000, None, 400, "nested too deeply"),
        (b'{"a":' * 50_000 + b"1" + b"}" * 50_000, None, 400, "nested too deeply"),
        (b"\xff\xfe{}", None, 400, "not UTF-8 JSON"),
        (b"{not json", None, 400, "not UTF-8 JSON"),
        (b'{"n": ' + b"9" * 5000 + b"}", None, 400, "not UTF-8 JSON"),  # int() refuses over 4300 digits
        (b"[1, 2]", None, 400, "must be a JSON object"),
        (GOOD, {"Content-Length": "-5"}, 400, "Content-Length must be a number"),
        (GOOD, {"Content-Length": "ten"}, 400, "Content-Length must be a number"),
        (GOOD, {"Content-Length": str(MAX_BODY_BYTES + 1)}, 413, "Content-Length must be a number"),
        (GOOD, {"Content-Length": "9" * 5000}, 413, "Content-Length must be a number"),  # past int()'s digits
    ],
)
def test_a_hostile_request_is_a_clear_4xx_and_the_server_keeps_serving(server, body, headers, status, words):
    got, answer = _post(server, body, headers)
    assert got == status and words in answer["error"]["message"], (got, answer)
    assert answer["error"]["type"] == "invalid_request_error"
    ok, reply = _post(server, GOOD)  # the next request is served as usual
    assert ok == 200 and reply["choices"][0]["message"]["content"] == "ok"
