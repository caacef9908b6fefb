"""The Search-R1 retrieval HTTP protocol, served from any :class:`Retriever` (standard library only).

::

    POST /retrieve  {"queries": ["q1", ...], "topk": 3, "return_scores": true}
      -> 200 {"result": [[{"document": {"id": "D1", "contents": "\\"Title\\"\\nbody"}, "score": 1.7}, ...], ...]}
         with "return_scores": false each hit is just the document {"id", "contents"} (as Search-R1)
    GET  /health    -> 200 {"status": "ok", "backend": "bm25", "num_docs": 123}

``contents`` is ``"\\"Title\\"\\nbody"`` as in Search-R1 / FlashRAG corpora. ``topk`` defaults to
the server's ``default_topk`` (3). Malformed requests get a 4xx JSON ``{"error": reason}`` (400 bad
JSON or fields, 404 unknown path, 405 wrong method, 411 no length, 413 body too large); a retriever
failure gets 500 with the message. An empty ``queries`` list is not an error: it answers
200 ``{"result": []}``. The server binds to loopback unless told otherwise.

Many rollouts at once: the listen backlog (``backlog``, default 1024; Python's default of 5 drops
connection attempts under a burst of new connections, which the client's kernel retries only after
1 s). ``workers`` threads (default 256) share one poller over every connection and answer a request
only once it has arrived in full (:mod:`searchgym.retrieval.reception`), so a slow client (one header
byte a second) holds a socket, never a thread: each request must arrive within ``request_timeout``
seconds (else 408), a kept-alive connection idle for ``idle_timeout`` seconds is closed, and at most
``max_connections`` are open (at the limit the slowest unfinished request is dropped with 503 to let a
new connection in). Concurrent requests are searched together in one
``batch_search`` (:class:`~searchgym.retrieval.coalesce.SearchCoalescer`; ``coalesce=False``
searches each alone). A client that disconnects (mid-body or before the answer) costs one debug log
line, never a traceback; JSON nested too deeply to parse is a 400, not a 500 with a traceback. A body over
``max_body_bytes`` is read and discarded (up to ``max_discard_bytes``) before the 413, so ordinary
clients see the 413 rather than a broken pipe; beyond that bound the 413 is sent and the connection
closed unread.
"""

from __future__ import annotations

import json
import logging
import math
import socket
import threading
from http import HTTPStatus
from typing import Any

from ..errors import InvalidArgumentError, InvalidTypeError, SearchGymError, SearchGymRuntimeError
from .base import DEFAULT_TOP_K, Hit, Retriever
from .coalesce import SearchCoalescer
from .reception import FramedRequestHandler, ReceptionServer

logger = logging.getLogger(__name__)

__all__ = ["RetrievalServer", "hit_to_document", "RequestError"]


class RequestError(SearchGymError, ValueError):
    """A client error: carries the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def hit_to_document(hit: Hit) -> dict:
    """Search-R1 corpus row for a hit: ``{"id", "contents": "\\"Title\\"\\nbody"}``."""
    return {"id": hit.doc_id, "contents": f'"{hit.title}"\n{hit.text}'}


def _parse_request(
    body: bytes, *, default_topk: int, max_topk: int, max_queries: int, max_query_chars: int
) -> tuple[list[str], int, bool]:
    try:
        req = json.loads(body.decode("utf-8"))
    except RecursionError:
        raise RequestError(
            400, 'request JSON is nested too deeply to parse; send a flat object like {"queries": ["..."]}'
        ) from None
    except ValueError as exc:  # not UTF-8, not JSON, or an integer too long to convert
        raise RequestError(400, f"request body is not valid UTF-8 JSON ({exc})") from None
    if not isinstance(req, dict):
        raise RequestError(400, 'request body must be a JSON object like {"queries": ["..."], "topk": 3}')
    if "queries" not in req:
        raise RequestError(400, 'missing field "queries" (a list of query strings)')
    queries = req["queries"]
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise RequestError(400, '"queries" must be a list of strings')
    if len(queries) > max_queries:
        raise RequestError(400, f"too many queries: {len(queries)} > {max_queries}; split the batch")
    for i, q in enumerate(queries):
        if len(q) > max_query_chars:
            raise RequestError(400, f"query {i} is {len(q)} characters long; the limit is {max_query_chars}")
    topk = req.get("topk")
    if topk is None:
        topk = default_topk
    if isinstance(topk, bool) or not isinstance(topk, int):
        raise RequestError(400, f'"topk" must be an integer, got {topk!r}')
    if not 1 <= topk <= max_topk:
        raise RequestError(400, f'"topk" must be between 1 and {max_topk}, got {topk}')
    scores = req.get("return_scores", False)
    if not isinstance(scores, bool):
        raise RequestError(400, f'"return_scores" must be true or false, got {scores!r}')
    return queries, topk, scores


class RetrievalServer:
    """Serve a retriever over the Search-R1 protocol on ``host:port`` (``port=0`` picks a free port).

    Use as a context manager (``with RetrievalServer(r, port=0) as srv: srv.url``), or
    :meth:`start` / :meth:`stop` for a background thread, or :meth:`serve_forever` to block (CLI).
    Requests are handled on threads; retrievers are thread-safe once built.
    """

    def __init__(
        self,
        retriever: Retriever,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        default_topk: int = DEFAULT_TOP_K,
        max_topk: int = 100,
        max_queries: int = 512,
        max_query_chars: int = 4096,
        max_body_bytes: int = 4 * 1024 * 1024,
        max_discard_bytes: int = 64 * 1024 * 1024,
        backlog: int = 1024,
        workers: int = 256,
        idle_timeout: float = 30.0,
        request_timeout: float = 15.0,
        max_connections: int = 4096,
        max_head_bytes: int = 64 * 1024,
        poller: str = "auto",
        coalesce: bool = True,
        listen_socket: socket.socket | None = None,
    ) -> None:
        if not isinstance(retriever, Retriever):
            raise InvalidTypeError(f"retriever must be a searchgym Retriever, got {type(retriever).__name__}")
        if not 1 <= default_topk <= max_topk:
            raise InvalidArgumentError(f"default_topk must be between 1 and max_topk={max_topk}, got {default_topk}")
        if backlog < 1 or workers < 1 or idle_timeout <= 0 or max_discard_bytes < 0:
            raise InvalidArgumentError(
                f"need backlog >= 1, workers >= 1, idle_timeout > 0 and max_discard_bytes >= 0, "
                f"got {backlog}, {workers}, {idle_timeout}, {max_discard_bytes}"
            )
        if request_timeout <= 0 or max_connections < 1 or max_head_bytes < 1024:
            raise InvalidArgumentError(
                f"need request_timeout > 0, max_connections >= 1 and max_head_bytes >= 1024, "
                f"got {request_timeout}, {max_connections}, {max_head_bytes}"
            )
        if poller not in ("auto", "epoll", "selectors"):
            raise InvalidArgumentError(f"poller must be 'auto', 'epoll' or 'selectors', got {poller!r}")
        self.retriever = retriever
        self._search = SearchCoalescer(retriever) if coalesce else retriever
        self.host = host
        self._port = port
        self.limits = dict(
            default_topk=default_topk, max_topk=max_topk, max_queries=max_queries, max_query_chars=max_query_chars
        )
        self.max_body_bytes = max_body_bytes
        self.max_discard_bytes = max_discard_bytes
        self.backlog = backlog
        self.workers = workers
        self.idle_timeout = idle_timeout
        self.request_timeout = request_timeout
        self.max_connections = max_connections
        self.max_head_bytes = max_head_bytes
        self.poller = poller  # "auto" (epoll on Linux) or "selectors" (portable): searchgym.retrieval.pollers
        self._listen_socket = listen_socket  # a bound, listening socket shared with other worker processes
        self._httpd: ReceptionServer | None = None
        self._thread: threading.Thread | None = None
        self._serving = False  # serve_forever runs (or is about to) in some thread

    # ------------------------------------------------------------- lifecycle
    def bind(self) -> ReceptionServer:
        """Open the listening socket now (idempotent), so :attr:`url` has the real port before serving."""
        if self._httpd is None:
            if self.host not in ("127.0.0.1", "localhost", "::1"):
                logger.warning("retrieval server listens on %s, reachable from other machines", self.host)
            reception: dict[str, Any] = dict(
                workers=self.workers,
                request_timeout=self.request_timeout,
                idle_timeout=self.idle_timeout,
                max_connections=self.max_connections,
                max_head_bytes=self.max_head_bytes,
                max_body_bytes=self.max_body_bytes,
                max_discard_bytes=self.max_discard_bytes,
                poller=self.poller,
            )
            if self._listen_socket is not None:
                self._httpd = ReceptionServer.on_socket(self._listen_socket, self._handler_class(), **reception)
                return self._httpd
            try:
                self._httpd = ReceptionServer(
                    (self.host, self._port), self._handler_class(), backlog=self.backlog, **reception
                )
            except OSError as exc:
                raise SearchGymRuntimeError(
                    f"cannot listen on {self.host}:{self._port} ({exc.strerror or exc}); pick another --port"
                ) from None
        return self._httpd

    @property
    def port(self) -> int:
        """The bound port (the real one when constructed with ``port=0`` and started)."""
        return self._httpd.server_address[1] if self._httpd is not None else self._port

    @property
    def url(self) -> str:
        """Base URL clients use, e.g. ``http://127.0.0.1:8000``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> "RetrievalServer":
        """Bind and serve on a background daemon thread; returns self."""
        if self._thread is not None:
            raise SearchGymRuntimeError("server already started")
        httpd = self.bind()
        self._serving = True
        self._thread = threading.Thread(target=httpd.serve_forever, name="searchgym-retrieval-server", daemon=True)
        self._thread.start()
        logger.info("retrieval server on %s", self.url)
        return self

    def serve_forever(self) -> None:
        """Bind and serve in the calling thread until :meth:`stop` (or Ctrl-C in the caller)."""
        httpd = self.bind()
        logger.info("retrieval server on %s", self.url)
        self._serving = True
        try:
            httpd.serve_forever()
        finally:
            httpd.server_close()

    def stop(self) -> None:
        """Stop serving and release the port; idempotent. Kept-alive and unfinished connections are
        closed; requests being answered are answered first."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None and self._serving:  # shutdown() would wait forever for a loop never started
            httpd.shutdown()
        self._serving = False
        if httpd is not None:
            httpd.server_close()  # waits for the workers (no worker ever waits for a client to send)
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> "RetrievalServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---------------------------------------------------------------- handling
    def handle_retrieve(self, body: bytes) -> dict:
        """Answer one ``/retrieve`` body (raises :class:`RequestError` for client errors)."""
        queries, topk, with_scores = _parse_request(body, **self.limits)
        results = self._search.batch_search(queries, topk) if queries else []
        out: list[list[Any]] = []
        for hits in results:
            if with_scores:
                out.append(
                    [
                        {"document": hit_to_document(h), "score": h.score if math.isfinite(h.score) else None}
                        for h in hits
                    ]
                )
            else:
                out.append([hit_to_document(h) for h in hits])
        return {"result": out}

    def health(self) -> dict:
        """The ``/health`` answer."""
        return {
            "status": "ok",
            "backend": getattr(self.retriever, "backend", type(self.retriever).__name__),
            "num_docs": getattr(self.retriever, "num_docs", None),
        }

    def _handler_class(self) -> type[FramedRequestHandler]:
        """The request handler class bound to this server (its limits, its search, its send timeout)."""
        return type("Handler", (_RetrievalHandler,), {"app": self, "timeout": self.idle_timeout})


_ENDPOINTS_HINT = "endpoints are POST /retrieve and GET /health"


class _RetrievalHandler(FramedRequestHandler):
    """One complete request (the reactor received it): routing, body checks and JSON answers.
    Searching is the job of :attr:`app`, the :class:`RetrievalServer` set on the per-server subclass
    its ``_handler_class`` makes."""

    app: RetrievalServer
    server: ReceptionServer
    protocol_version = "HTTP/1.1"
    server_version = "searchgym-retrieval"
    # timeout (set per server): seconds one send of the answer may wait for a client that stopped reading

    def log_message(self, format: str, *args: Any) -> None:  # route access logs to logging, not stderr
        logger.debug("%s " + format, self.address_string(), *args)

    # ----------------------------------------------------------------- answers
    def _send(self, status: int, payload: dict) -> None:
        data = _json_bytes(payload)
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        if status >= 400:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": message})

    # -------------------------------------------------------------------- body
    def _content_length(self) -> int | None:
        """The declared body length, or None after answering 411 / 400 for a missing or bad header."""
        length = self.headers.get("Content-Length")
        if length is None:
            self._error(int(HTTPStatus.LENGTH_REQUIRED), "Content-Length header is required")
            return None
        digits = length.strip()
        if not (digits.isascii() and digits.isdigit()):  # the reactor framed the request by the same rule
            self._error(400, f"bad Content-Length {length!r}")
            return None
        try:
            return int(digits)
        except ValueError:  # more digits than int() converts: far over any limit
            self._error(413, f"Content-Length {digits[:20]}... exceeds the {self.app.max_body_bytes}-byte limit")
            return None

    def _read_body(self, n: int) -> bytes | None:
        """The ``n``-byte body (the reactor received it in full), or ``None`` after a 400."""
        body = self.rfile.read(n)
        if len(body) < n:  # only if a head framed the body differently than Content-Length says
            self._error(400, f"request body is shorter than its Content-Length {n}")
            return None
        return body

    def _answer_retrieve(self, body: bytes) -> None:
        """Search a ``/retrieve`` body and answer 200, 4xx (client error) or 500 (retriever failure)."""
        try:
            payload = self.app.handle_retrieve(body)
        except RequestError as exc:
            self._error(exc.status, str(exc))
            return
        except Exception as exc:  # a retriever bug must not kill the server: report it as 500
            logger.exception("retrieval failed")
            self._error(500, f"internal error: {type(exc).__name__}: {exc}")
            return
        self._send(200, payload)

    # ------------------------------------------------------------------ routes
    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        path = self.path.split("?", 1)[0]
        if path == "/health":
            self._send(200, self.app.health())
        elif path == "/retrieve":
            self._error(405, "use POST /retrieve with a JSON body")
        else:
            self._error(404, f"unknown path {path!r}; {_ENDPOINTS_HINT}")

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        if path != "/retrieve":
            if path == "/health":
                self._error(405, "use GET /health")
            else:
                self._error(404, f"unknown path {path!r}; {_ENDPOINTS_HINT}")
            return
        n = self._content_length()
        if n is None:
            return
        if n > self.app.max_body_bytes:  # the reactor dropped the body (up to max_discard_bytes) unread
            self._error(
                413, f"request body of {n} bytes exceeds the {self.app.max_body_bytes}-byte limit; split the batch"
            )
            return
        body = self._read_body(n)
        if body is not None:
            self._answer_retrieve(body)

    def do_PUT(self) -> None:  # noqa: N802
        self._error(405, "only GET /health and POST /retrieve are supported")

    do_DELETE = do_PATCH = do_PUT


def _json_bytes(payload: dict) -> bytes:
    """UTF-8 JSON of an answer; text UTF-8 cannot encode (lone surrogates, which a JSON request can
    carry) falls back to ``\\uXXXX`` escapes instead of failing the response."""
    try:
        return json.dumps(payload, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload).encode("ascii")
