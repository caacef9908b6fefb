"""A :class:`Retriever` that asks a Search-R1 protocol server (``searchgym serve``, or Search-R1's
own ``retrieval_server.py``) over HTTP, with a total deadline per request and retries."""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
import urllib.parse
from typing import Any, Sequence

from searchgym.core.http_deadline import DeadlineExceeded, exchange, open_connection

from ..core.arg_checks import check_count, check_number
from ..errors import InvalidArgumentError, SearchGymError
from .base import DEFAULT_TOP_K, Hit, Retriever
from .corpus import check_queries

logger = logging.getLogger(__name__)

__all__ = ["RemoteRetriever", "RetrievalError", "RequestRejected", "parse_contents", "MAX_WAIT_S"]

#: the longest ``timeout`` or ``backoff`` a client takes, in seconds (about 11.6 days): a socket refuses a
#: timeout past the platform's clock range, so ``timeout=1e30`` would fail only at the first search
MAX_WAIT_S = 1_000_000


class RetrievalError(SearchGymError, RuntimeError):
    """The retrieval server could not be reached, failed, or rejected the request."""


class RequestRejected(RetrievalError):
    """The server answered 4xx: the request itself is wrong (another replica would reject it too)."""


def parse_contents(contents: str) -> tuple[str, str]:
    """Split Search-R1 ``contents`` (``"\\"Title\\"\\nbody"``) into ``(title, body)``."""
    title, _, body = contents.partition("\n")
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title, body


def _hit(item: Any, where: str) -> Hit:
    if isinstance(item, dict) and "document" in item:
        doc, score = item["document"], item.get("score")
    else:
        doc, score = item, None
    if not isinstance(doc, dict):
        raise RetrievalError(f"malformed server response: {where} is not a document object")
    if "title" in doc and "text" in doc:  # FlashRAG-style rows
        title, text = str(doc["title"]), str(doc["text"])
    elif isinstance(doc.get("contents"), str):
        title, text = parse_contents(doc["contents"])
    else:
        raise RetrievalError(f'malformed server response: {where} has no "contents" string')
    try:
        value = 0.0 if score is None else float(score)
    except (TypeError, ValueError):
        raise RetrievalError(f"malformed server response: {where} has a non-numeric score {score!r}") from None
    return Hit(str(doc.get("id", "")), title, text, value)


class RemoteRetriever(Retriever):
    """Search through a retrieval server at ``url`` (e.g. ``http://127.0.0.1:8000``).

    Each calling thread keeps one keep-alive connection. ``timeout``: total seconds per HTTP
    request (connect to last byte, :mod:`searchgym.core.http_deadline`; a trickling server cannot
    stretch it); ``retries``: extra attempts after a connection error, timeout or 5xx answer, waiting ``backoff *
    2**attempt`` seconds between them (4xx answers are
    not retried: the request itself is wrong). ``batch_size``: queries per request. Hits without a
    score (servers asked without ``return_scores``) get score 0.0.
    """

    backend = "remote"

    def __init__(
        self, url: str, timeout: float = 10.0, retries: int = 1, backoff: float = 0.5, *, batch_size: int = 256
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidArgumentError(f"retrieval server URL must start with http:// or https://, got {url!r}")
        timeout = check_number("timeout", timeout, above=0, most=MAX_WAIT_S, hint="seconds per request")
        retries = check_count("retries", retries, least=0)
        backoff = check_number("backoff", backoff, least=0, most=MAX_WAIT_S, hint="seconds")
        batch_size = check_count("batch_size", batch_size, hint="queries per request")
        self.url = url.rstrip("/")
        self._parts = urllib.parse.urlsplit(self.url)
        if not self._parts.hostname:
            raise InvalidArgumentError(f"retrieval server URL {url!r} has no host")
        self._prefix = self._parts.path
        self._local = threading.local()  # one keep-alive connection per calling thread
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.batch_size = batch_size

    def __repr__(self) -> str:
        return f"RemoteRetriever({self.url!r})"

    def _connection(self, fresh: bool) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and not fresh:
            return conn
        if conn is not None:
            conn.close()
        conn = self._local.conn = open_connection(self.url, self.timeout)
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _send_once(self, method: str, path: str, data: bytes | None) -> tuple[int, bytes]:
        """One HTTP exchange on this thread's keep-alive connection (reopened once if it went stale)."""
        reused = getattr(self._local, "conn", None) is not None
        try:
            return self._exchange(self._connection(fresh=False), method, path, data)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if not reused:
                raise
        # the server closed an idle keep-alive connection: reconnect once
        return self._exchange(self._connection(fresh=True), method, path, data)

    def _exchange(
        self, conn: http.client.HTTPConnection, method: str, path: str, data: bytes | None
    ) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"} if data is not None else {}
        try:
            status, body, will_close = exchange(conn, method, self._prefix + path, data, headers, self.timeout)
        except (OSError, http.client.HTTPException):
            self._drop_connection()
            raise
        if will_close:
            self._drop_connection()
        return status, body

    def _request(self, method: str, path: str, payload: dict | None = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                status, raw = self._send_once(method, path, data)
            except DeadlineExceeded as exc:
                last = f"retrieval server at {self.url} timed out ({exc})"
            except (OSError, http.client.HTTPException) as exc:
                last = f"cannot reach retrieval server at {self.url} ({type(exc).__name__}: {exc})"
            else:
                if status >= 400:
                    reason = _error_reason(raw)
                    if status < 500:
                        raise RequestRejected(
                            f"retrieval server at {self.url} rejected the request ({status}): {reason}"
                        )
                    last = f"server error {status}: {reason}"
                else:
                    try:
                        return json.loads(raw.decode("utf-8"))
                    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                        raise RetrievalError(f"retrieval server at {self.url} sent invalid JSON ({exc})") from None
            logger.warning("retrieval request failed (attempt %d/%d): %s", attempt + 1, self.retries + 1, last)
        if last.startswith("cannot reach"):
            raise RetrievalError(
                f"{last} after {self.retries + 1} attempts; start it with "
                "`searchgym serve --world DIR` (or --synthetic) or pass the right --url"
            )
        raise RetrievalError(f"retrieval server at {self.url} failed after {self.retries + 1} attempts: {last}")

    def close(self) -> None:
        """Close this thread's connection to the server (others close when their threads end)."""
        self._drop_connection()

    def health(self) -> dict:
        """The server's ``GET /health`` answer."""
        return self._request("GET", "/health")

    def batch_search(self, queries: Sequence[str], k: int = DEFAULT_TOP_K) -> list[list[Hit]]:
        """Top-``k`` hits per query, sent ``batch_size`` queries per request."""
        qs = check_queries(queries, k)
        out: list[list[Hit]] = []
        for start in range(0, len(qs), self.batch_size):
            chunk = qs[start : start + self.batch_size]
            resp = self._request("POST", "/retrieve", {"queries": chunk, "topk": k, "return_scores": True})
            result = resp.get("result") if isinstance(resp, dict) else None
            if not isinstance(result, list) or len(result) != len(chunk):
                raise RetrievalError(
                    f'malformed server response: expected "result" with {len(chunk)} lists, got {str(resp)[:200]}'
                )
            for qi, hits in enumerate(result):
                if not isinstance(hits, list):
                    raise RetrievalError(f"malformed server response: result {qi} is not a list")
                out.append([_hit(item, f"result {start + qi} item {j}") for j, item in enumerate(hits)])
        return out


def _error_reason(raw: bytes) -> str:
    body = raw.decode("utf-8", "replace")
    try:
        msg = json.loads(body)
    except json.JSONDecodeError:
        msg = None  # not JSON: report the raw body
    if isinstance(msg, dict):
        return str(msg.get("error") or msg.get("detail") or body)
    return body[:500]
