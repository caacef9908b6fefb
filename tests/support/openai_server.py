"""A small OpenAI-compatible HTTP server for tests: real protocol on loopback, scripted replies.

``reply(prompt_or_messages, body) -> str`` decides each completion. ``delay`` simulates a slow
model; ``fail_every`` makes every n-th request answer HTTP 500. ``routes`` adds endpoints:
``{("GET" | "POST", path): handler(body) -> (status, json_obj)}`` (a GET's body is ``{}``).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


class OpenAIStubServer:
    """Context manager that serves /v1/chat/completions, /v1/completions and /v1/models."""

    def __init__(
        self,
        reply: Callable[[object, dict], str],
        *,
        delay: float = 0.0,
        fail_every: int = 0,
        token_ids: Callable[[str], list] | None = None,
        routes: dict | None = None,
    ):
        """``token_ids(text)``, when given, answers requests that carry vLLM's ``return_token_ids``;
        ``routes`` maps extra paths to handlers."""
        self.reply = reply
        self.token_ids = token_ids
        self.routes = dict(routes or {})
        self.delay = delay
        self.fail_every = fail_every
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # keep test output quiet
                pass

            def _send(self, code: int, obj: dict) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                route = outer.routes.get(("GET", self.path))
                if route is not None:
                    return self._send(*route({}))
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "stub", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                try:
                    body = json.loads(self.rfile.read(n) or b"{}")
                except json.JSONDecodeError:
                    return self._send(400, {"error": {"message": "body is not JSON"}})
                route = outer.routes.get(("POST", self.path))
                if route is not None:
                    return self._send(*route(body))
                with outer._lock:
                    outer.requests.append(body)
                    count = len(outer.requests)
                if outer.delay:
                    time.sleep(outer.delay)
                if outer.fail_every and count % outer.fail_every == 0:
                    return self._send(500, {"error": {"message": "injected failure"}})
                if self.path == "/v1/chat/completions":
                    text = outer.reply(body.get("messages"), body)
                    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    if outer.token_ids is not None and body.get("return_token_ids"):
                        choice["token_ids"] = outer.token_ids(text)
                    return self._send(200, {"id": "x", "object": "chat.completion", "choices": [choice]})
                if self.path == "/v1/completions":
                    text = outer.reply(body.get("prompt"), body)
                    return self._send(
                        200,
                        {
                            "id": "x",
                            "object": "text_completion",
                            "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
                        },
                    )
                self._send(404, {"error": {"message": f"unknown path {self.path}"}})

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # the default backlog of 5 drops bursts of concurrent connections

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        """Base URL including /v1."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "OpenAIStubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
