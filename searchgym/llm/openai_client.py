"""A :class:`TextGenerator` for any OpenAI-compatible server (``vllm serve``, SGLang, llama.cpp, ...).

Chat prompts go to ``/v1/chat/completions``, raw-text prompts to ``/v1/completions``. A batch
is sent as concurrent requests (the server does the batching). Every request has a *total*
deadline (connect to last body byte, :mod:`searchgym.core.http_deadline`: a trickling server cannot
stretch it) and bounded retries with backoff; a failure raises :class:`GenerationError` naming
the endpoint. The defaults (20 s, 1 retry) keep a hung judge from stalling an RL step for minutes.
Uses only the standard library so the core package needs no HTTP dependency.

Token ids: with ``request_token_ids=True`` every request asks for the sampled ids (vLLM's
``return_token_ids`` extension; ``logprobs`` with ``return_tokens_as_token_ids`` as the fallback
form) and :meth:`OpenAICompatibleGenerator.generate_with_stats` returns them, so a trainer can train
on the tokens the server sampled. Servers that offer neither (OpenAI itself, llama.cpp) answer with
text only: the generator then logs once that the ids are unavailable and returns ``None`` for them,
and the trainer re-tokenises those turns' text (and says so in its metrics).
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from searchgym.core.http_deadline import DeadlineExceeded, exchange, open_connection

from ..core.llm import GenerationConfig, GenerationError, GenerationResult, Prompt, TextGenerator, truncate_at_stop
from ..core.renamed import renamed_kwargs
from ..errors import InvalidArgumentError

logger = logging.getLogger(__name__)


class OpenAICompatibleGenerator(TextGenerator):
    """Generate through an OpenAI-compatible HTTP endpoint.

    ``base_url`` is the server root or its ``/v1`` (both accepted). ``timeout``: total seconds
    per HTTP request (the whole exchange, not per read); ``max_retries``: extra attempts after a
    timeout, connection error, 5xx or 429, waiting ``backoff * 2**attempt`` between them, so one
    call takes at most about ``timeout * (max_retries + 1)`` plus the backoff.
    ``concurrency`` (``max_concurrency`` before) bounds in-flight requests per :meth:`generate` call.
    ``request_token_ids`` asks the server for the sampled token ids (see the module docstring); leave it off
    for servers that reject unknown fields.
    """

    @renamed_kwargs(max_concurrency="concurrency")
    def __init__(
        self,
        base_url: str,
        model: str = "default",
        *,
        api_key: str | None = None,
        timeout: float = 20.0,
        max_retries: int = 1,
        backoff: float = 0.5,
        concurrency: int = 16,
        request_token_ids: bool = False,
    ) -> None:
        url = base_url.rstrip("/")
        self.base_url = url if url.endswith("/v1") else url + "/v1"
        self._prefix = urllib.parse.urlsplit(self.base_url).path
        open_connection(self.base_url, 1.0)  # validates the URL now rather than at the first request
        if timeout <= 0 or max_retries < 0 or backoff < 0:
            raise InvalidArgumentError(
                f"need timeout > 0, max_retries >= 0 and backoff >= 0, got {timeout}, {max_retries}, {backoff}"
            )
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.concurrency = concurrency
        self.request_token_ids = request_token_ids
        self._warned_no_ids = False
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="openai")

    def _post(self, path: str, body: dict) -> dict:
        return self._request(self.base_url + path, body)

    def _request(
        self,
        url: str,
        body: dict | None = None,
        *,
        method: str = "POST",
        retries: int | None = None,
        timeout: float | None = None,
    ) -> dict:
        """JSON request to ``url`` with bounded retries on 5xx/429/connection errors; GenerationError on failure."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        retries = self.max_retries if retries is None else retries
        timeout = self.timeout if timeout is None else timeout
        parts = urllib.parse.urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        last: GenerationError | None = None
        for attempt in range(retries + 1):
            conn = open_connection(url, timeout)
            try:
                status, raw, _ = exchange(conn, method, target, data, headers, timeout)
            except DeadlineExceeded as exc:
                last = GenerationError(f"{url} timed out: {exc} (deadline {timeout}s per request, {retries} retries)")
            except (OSError, http.client.HTTPException) as exc:
                last = GenerationError(
                    f"cannot reach {url} ({type(exc).__name__}: {exc}); is the server running? "
                    f"(deadline {timeout}s per request, {retries} retries)"
                )
            else:
                if status < 400:
                    try:
                        text = raw.decode()
                        return json.loads(text) if text.strip() else {}
                    except (UnicodeDecodeError, json.JSONDecodeError):
                        last = GenerationError(f"{url} returned a body that is not JSON")
                else:
                    detail = raw.decode(errors="replace")[:300]
                    last = GenerationError(f"{url} answered HTTP {status}: {detail}")
                    last.status = status
                    if status < 500 and status != 429:
                        raise last
            finally:
                conn.close()
            if attempt < retries:
                time.sleep(self.backoff * (2**attempt))
        assert last is not None
        raise last

    def _one(self, prompt: Prompt, cfg: GenerationConfig) -> tuple[str, list[int] | None, int, int]:
        """(text, sampled ids or None, prompt tokens, completion tokens) of one request."""
        body: dict = {
            "model": self.model,
            "max_tokens": cfg.max_new_tokens,
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            **cfg.extra,
        }
        if cfg.stop:
            body["stop"] = list(cfg.stop)
        if cfg.seed is not None:
            body["seed"] = cfg.seed
        if self.request_token_ids:
            body.update(
                {
                    "return_token_ids": True,
                    "logprobs": True if not isinstance(prompt, str) else 1,
                    "return_tokens_as_token_ids": True,
                }
            )
        if isinstance(prompt, str):
            out = self._post("/completions", {**body, "prompt": prompt})
            extract = lambda c: c["text"]  # noqa: E731
        else:
            out = self._post("/chat/completions", {**body, "messages": prompt})
            extract = lambda c: c["message"]["content"]  # noqa: E731
        try:
            choice = out["choices"][0]
            text = extract(choice) or ""
        except (KeyError, IndexError, TypeError):
            raise GenerationError(f"{self.base_url} returned an unexpected reply: {str(out)[:300]}") from None
        # OpenAI servers drop the matched stop string; restore it so tags stay closed.
        matched = choice.get("stop_reason") if isinstance(choice, dict) else None
        if isinstance(matched, str) and matched in cfg.stop and not text.endswith(matched):
            text += matched
        elif choice.get("finish_reason") == "stop" and cfg.stop and not any(text.endswith(s) for s in cfg.stop):
            for s in cfg.stop:
                if s.startswith("</") and text.count(s[:1] + s[2:]) > text.count(s):
                    text += s
                    break
        usage = out.get("usage") or {}
        ids = _reply_token_ids(choice) if self.request_token_ids else None
        if self.request_token_ids and ids is None and not self._warned_no_ids:
            self._warned_no_ids = True
            logger.warning(
                "%s returned no token ids (it offers neither vLLM's return_token_ids nor "
                "return_tokens_as_token_ids logprobs); a trainer will re-tokenise this server's text",
                self.base_url,
            )
        return (
            truncate_at_stop(text, cfg.stop),
            ids,
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or (len(ids) if ids is not None else max(1, len(text) // 4))),
        )

    def generate(self, prompts: Sequence[Prompt], config: GenerationConfig | None = None) -> list[str]:
        """Complete every prompt concurrently; raises GenerationError on the first failure."""
        return self.generate_with_stats(prompts, config).texts

    def _configs(self, n: int, cfg: GenerationConfig) -> list[GenerationConfig]:
        """The sampling config of each of ``n`` prompts of one call (the same one here)."""
        return [cfg] * n

    def generate_with_stats(
        self, prompts: Sequence[Prompt], config: GenerationConfig | None = None
    ) -> GenerationResult:
        """Like :meth:`generate`, with token counts (the server's ``usage``, estimated when absent) and
        the sampled ids where the server returned them (``None`` entries where not)."""
        cfgs = self._configs(len(prompts), config or GenerationConfig())
        rows = list(self._pool.map(lambda job: self._one(*job), zip(prompts, cfgs)))
        return GenerationResult(
            [r[0] for r in rows], sum(r[2] for r in rows), sum(r[3] for r in rows), [r[1] for r in rows]
        )

    def close(self) -> None:
        """Shut the worker pool down."""
        self._pool.shutdown(wait=False)


def _reply_token_ids(choice: dict) -> list[int] | None:
    """Sampled ids from a choice: vLLM's ``token_ids`` field, else ``token_id:N`` logprob tokens."""
    ids = choice.get("token_ids")
    if isinstance(ids, list) and all(isinstance(x, int) for x in ids):
        return ids
    logprobs = choice.get("logprobs") or {}
    tokens = logprobs.get("tokens") if "tokens" in logprobs else [c.get("token") for c in logprobs.get("content") or []]
    if tokens and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
        return [int(t.split(":", 1)[1]) for t in tokens]
    return None
