"""A small OpenAI-compatible HTTP server in front of any searchgym :class:`TextGenerator`.

``python -m searchgym.llm.openai_server --model smollm2`` serves a local model (a model folder, a
trainer / SFT checkpoint, ``smollm2``, or the random ``tiny`` model of :mod:`searchgym.llm.tiny_models`)
through :class:`~searchgym.llm.transformers_backend.TransformersGenerator` on loopback, so
``searchgym eval --agent openai --endpoint http://127.0.0.1:PORT/v1`` (or the official ``openai``
client) can talk to it without vLLM. It answers the request shapes the official client sends:

* ``GET /v1/models`` -- the one served model;
* ``POST /v1/chat/completions`` -- ``messages`` (string or text-part contents), ``max_tokens`` /
  ``max_completion_tokens``, ``temperature``, ``top_p``, ``stop``, ``seed``;
* ``POST /v1/completions`` -- ``prompt`` (a string, a list of strings, token ids), the same fields.

Replies carry ``choices`` (``finish_reason`` ``"stop"`` or ``"length"``) and ``usage``; as OpenAI and
vLLM do, a matched stop string is dropped from the text and named in ``stop_reason`` (vLLM's
field, which :class:`~searchgym.llm.openai_client.OpenAICompatibleGenerator` reads to restore it).
``n > 1``, streaming and tools are refused with HTTP 400 naming the field. Requests are served one at a
time (one model; ``concurrency`` lets a thread-safe generator serve several at once); sampling draws from
the generator's seeded stream when a request gives no ``seed``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional, Sequence

from ..core.llm import GenerationConfig, GenerationError, GenerationResult, TextGenerator
from ..errors import InvalidArgumentError

logger = logging.getLogger(__name__)

__all__ = ["OpenAIServer", "RequestError", "main"]

_REFUSED = {"stream": "streaming", "tools": "tool definitions", "functions": "function definitions"}


#: the largest request body read (a chat request is a few KB; a larger Content-Length is answered 413 unread)
MAX_BODY_BYTES = 16 * 1024 * 1024


class RequestError(InvalidArgumentError):
    """A request this server cannot honour; answered with HTTP 400 and this message."""


class OpenAIServer:
    """Serve ``generator`` as ``model`` on ``host:port`` (``port=0``: a free one); a context manager.

    ``max_new_tokens``: the cap when a chat request names none (completions default to 16, as OpenAI's do).
    ``concurrency``: requests generated at once (default 1: a model takes them in turn; more only for a
    thread-safe generator, such as a scripted one in a benchmark)."""

    def __init__(
        self,
        generator: TextGenerator,
        model: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_new_tokens: int = 512,
        concurrency: int = 1,
    ) -> None:
        if max_new_tokens < 1 or concurrency < 1:
            raise InvalidArgumentError(
                f"max_new_tokens and concurrency must be >= 1, got {max_new_tokens} and {concurrency}"
            )
        self.generator = generator
        self.model = model
        self.max_new_tokens = max_new_tokens
        self.requests = 0
        self._slots = threading.BoundedSemaphore(concurrency)  # 1: one model, requests take turns
        self._count = threading.Lock()
        handler = _handler(self)
        self._server = _Server((host, port), handler)
        self._server.daemon_threads = True
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        """Base URL including ``/v1``."""
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}/v1"

    def start(self) -> "OpenAIServer":
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted."""
        self._server.serve_forever()

    def close(self) -> None:
        """Stop serving and free the port."""
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "OpenAIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ requests
    def models(self) -> dict:
        """The ``GET /v1/models`` reply."""
        return {
            "object": "list",
            "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "searchgym"}],
        }

    def complete(self, path: str, body: dict) -> dict:
        """The reply to a ``POST`` of ``body`` to ``path`` (``/v1/chat/completions`` or ``/v1/completions``)."""
        chat = path == "/v1/chat/completions"
        for key, what in _REFUSED.items():
            if body.get(key):
                raise RequestError(f"{what} ({key!r}) is not supported by this server; leave {key!r} unset")
        if int(body.get("n") or 1) != 1:
            raise RequestError("only n=1 is supported; send one request per completion")
        prompts = [_messages(body.get("messages"))] if chat else _prompts(body.get("prompt"))
        config = _config(body, self.max_new_tokens if chat else 16)
        with self._slots:
            with self._count:
                self.requests += 1
            with_stats = getattr(self.generator, "generate_with_stats", None)
            result = (
                with_stats(prompts, config)
                if callable(with_stats)
                else GenerationResult(self.generator.generate(prompts, config), 0, 0, None)
            )
        choices = []
        ids_of = result.token_ids or [None] * len(prompts)
        for i, (text, ids) in enumerate(zip(result.texts, ids_of)):
            text, matched = _drop_stop(text, config.stop)
            hit_cap = matched is None and ids is not None and len(ids) >= config.max_new_tokens
            choice: dict[str, Any] = {
                "index": i,
                "finish_reason": "length" if hit_cap else "stop",
                "stop_reason": matched,
                "logprobs": None,
            }
            choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
            choices.append(choice)
        return {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": choices,
            "usage": {
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.new_tokens,
                "total_tokens": result.prompt_tokens + result.new_tokens,
            },
        }


class _Server(ThreadingHTTPServer):
    """The HTTP server; a listen backlog of 128 (the default 5 drops a burst of concurrent clients'
    connections, which their kernels retry only after 1 s)."""

    request_queue_size = 128


def _handler(server: OpenAIServer) -> type:
    """The request handler class bound to ``server``."""

    class Handler(BaseHTTPRequestHandler):
        """Routes ``/v1/models``, ``/v1/chat/completions`` and ``/v1/completions``."""

        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            logger.debug("%s " + format, self.address_string(), *args)

        def _send(self, code: int, obj: dict) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, message: str, kind: str) -> None:
            self._send(code, {"error": {"message": message, "type": kind, "param": None, "code": None}})

        def do_GET(self) -> None:
            """``/v1/models``."""
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, server.models())
            else:
                self._error(404, f"unknown path {self.path}", "not_found_error")

        def do_POST(self) -> None:
            """``/v1/chat/completions`` and ``/v1/completions``."""
            length = (self.headers.get("Content-Length") or "0").strip()
            is_count = length.isascii() and length.isdigit()
            # over 18 digits is far past the limit, and int() refuses a string of over 4,300 (retrieval's reception
            # frames requests by the same two rules)
            if not is_count or len(length) > 18 or int(length) > MAX_BODY_BYTES:
                self.close_connection = True  # the body's end is unknown: the connection cannot be reused
                return self._error(
                    413 if is_count else 400,
                    f"Content-Length must be a number of bytes up to {MAX_BODY_BYTES}, got {length[:40]!r}",
                    "invalid_request_error",
                )
            raw = self.rfile.read(int(length))
            path = self.path.split("?", 1)[0].rstrip("/")
            if path not in ("/v1/chat/completions", "/v1/completions"):
                return self._error(404, f"unknown path {self.path}", "not_found_error")
            try:
                body = json.loads(raw or b"{}")
            except RecursionError:
                return self._error(
                    400, "the request body's JSON is nested too deeply to parse", "invalid_request_error"
                )
            except ValueError:  # not UTF-8, not JSON, or an integer too long to convert
                return self._error(400, "the request body is not UTF-8 JSON", "invalid_request_error")
            try:
                if not isinstance(body, dict):
                    raise RequestError("the request body must be a JSON object")
                return self._send(200, server.complete(path, body))
            except RequestError as exc:
                return self._error(400, str(exc), "invalid_request_error")
            except GenerationError as exc:
                logger.warning("generation failed: %s", exc)
                return self._error(500, f"generation failed: {exc}", "server_error")

    return Handler


def _text(content: Any) -> str:
    """A message's text: a string, or the ``text`` of its ``{"type": "text"}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    raise RequestError("a message's content must be a string or a list of text parts")


def _messages(messages: Any) -> list[dict]:
    """The chat prompt of a request."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list of {'role', 'content'} objects")
    out = []
    for m in messages:
        if not isinstance(m, dict) or "role" not in m:
            raise RequestError("each message needs a 'role' and a 'content'")
        out.append({"role": str(m["role"]), "content": _text(m.get("content") or "")})
    return out


def _prompts(prompt: Any) -> list:
    """The completion prompts of a request: one string, a list of strings, token ids or lists of them."""
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return [list(prompt)]
    if isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
        return [p if isinstance(p, str) else _prompts(p)[0] for p in prompt]
    raise RequestError("'prompt' must be a string, a list of strings or a list of token ids")


def _config(body: dict, default_tokens: int) -> GenerationConfig:
    """The sampling settings of a request."""
    try:
        tokens = body.get("max_completion_tokens") or body.get("max_tokens") or default_tokens
        stop = body.get("stop") or ()
        stop = (stop,) if isinstance(stop, str) else tuple(str(s) for s in stop)
        temperature = 1.0 if body.get("temperature") is None else float(body["temperature"])
        top_p = 1.0 if body.get("top_p") is None else float(body["top_p"])
        seed = None if body.get("seed") is None else int(body["seed"])
        config = GenerationConfig(
            max_new_tokens=int(tokens), temperature=temperature, top_p=top_p, stop=stop, seed=seed
        )
    except (TypeError, ValueError) as exc:
        raise RequestError(f"bad sampling field: {exc}") from None
    if config.max_new_tokens < 1 or not 0.0 < config.top_p <= 1.0 or config.temperature < 0:
        raise RequestError("need max_tokens >= 1, 0 < top_p <= 1 and temperature >= 0")
    return config


def _drop_stop(text: str, stop: Sequence[str]) -> tuple[str, Optional[str]]:
    """``(text without the stop string it ends with, that stop string or None)`` (OpenAI's convention)."""
    for s in stop:
        if s and text.endswith(s):
            return text[: -len(s)], s
    return text, None


def load_generator(model: str, *, seed: int = 0, dtype: str = "float32", device: Optional[str] = None):
    """A :class:`TransformersGenerator` for ``model``: ``tiny`` / ``tiny-qwen``, ``smollm2``, a model folder
    or a trainer / SFT checkpoint (a LoRA one merged), opened offline."""
    from .transformers_backend import TransformersGenerator

    if model in ("tiny", "tiny-qwen"):
        from .tiny_models import tiny_policy

        policy, tokenizer = tiny_policy(model, seed=seed)
    else:
        from .pretrained import open_model

        policy, tokenizer = open_model(model, dtype=dtype)
    return TransformersGenerator(policy, tokenizer, device=device, seed=seed)


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m searchgym.llm.openai_server --model M [--port P]``: serve until interrupted."""
    ap = argparse.ArgumentParser(description="Serve a local model through an OpenAI-compatible API (loopback).")
    ap.add_argument("--model", required=True, help="tiny | tiny-qwen | smollm2 | a model or checkpoint folder")
    ap.add_argument("--name", default=None, help="the model name the API reports (default: --model)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000, help="0: any free port (the URL is printed)")
    ap.add_argument("--max-new-tokens", type=int, default=512, help="cap for chat requests that name none")
    ap.add_argument("--seed", type=int, default=0, help="seeds sampling for requests without a seed")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--debug", action="store_true", help="tracebacks and request logs")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING)
    from ..errors import SearchGymError

    try:
        if args.threads < 1:
            raise InvalidArgumentError(f"--threads must be >= 1, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
        generator = load_generator(args.model, seed=args.seed, dtype=args.dtype, device=args.device)
        server = OpenAIServer(
            generator, args.name or args.model, host=args.host, port=args.port, max_new_tokens=args.max_new_tokens
        )
    except (SearchGymError, OSError) as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"serving {args.name or args.model} at {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
