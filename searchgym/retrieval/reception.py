"""Connection reception for the retrieval server: a worker thread only for a request that has arrived.

A thread per connection lets a client that sends its request head one byte per second hold that
thread forever (a socket timeout bounds each ``recv``, not the request), and a few hundred such
clients starve everyone else (issue 33). Here no thread ever waits on one client. The ``workers``
threads share one one-shot poller (:mod:`searchgym.retrieval.pollers`: epoll on Linux) over every
connection: the thread woken for a readable connection reads what has arrived without
blocking, adds it to the connection's buffer and frames the request (the head up to its blank line,
then ``Content-Length`` body bytes). A complete request is answered right there, in that thread, by
an :class:`http.server.BaseHTTPRequestHandler` (:class:`FramedRequestHandler`) reading it from
memory; an incomplete one goes back to the poller and the thread to other connections. A slow
client costs a socket and a buffer, never a thread, while a normal request still costs one thread
wake-up, as with a thread per connection. And:

- a request must arrive in full within ``request_timeout`` seconds of its first byte (of the
  connection's opening, for a new connection), or it gets 408 and the connection is closed
  (a sweep every quarter second, by the thread running :meth:`ReceptionServer.serve_forever`);
- a kept-alive connection idle for ``idle_timeout`` seconds is closed (which also bounds each send of
  an answer to a client that stopped reading);
- at most ``max_connections`` connections are open (clipped to the open-file limit less
  :data:`FD_RESERVE`). At the limit, the connection whose unfinished request is the oldest gets 503
  and is closed to let the new one in (failing that, the longest idle kept-alive one is closed
  silently; clients reconnect): a normal request arrives in milliseconds, so the slow ones go;
- a request head over ``max_head_bytes`` gets 431; a body over ``max_body_bytes`` is read and
  dropped (up to ``max_discard_bytes``) before the handler answers 413, so a client still sending
  reads the 413 instead of a broken pipe.

Counters (``stats``): ``accepted``, ``timed_out`` (408), ``evicted`` (503 at the limit),
``refused`` (closed at once: the limit was reached and every connection was being answered) and
``head_too_large`` (431). Standard library only.
"""

from __future__ import annotations

import errno
import io
import json
import logging
import re
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer

from .pollers import make_poller

logger = logging.getLogger(__name__)

__all__ = ["Connection", "FramedRequestHandler", "ReceptionServer", "FD_RESERVE", "connection_limit", "parse_head"]

FD_RESERVE = 64  # file descriptors kept free of client connections (index files, logs, the wake pipe)
SWEEP_S = 0.25  # how often deadlines are checked
_READ_ROUND = 1 << 20  # bytes one wake-up reads from a connection before letting others have a turn
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_CONTENT_LENGTH = re.compile(rb"\ncontent-length[ \t]*:([^\r\n]*)", re.IGNORECASE)
_EXPECT_CONTINUE = re.compile(rb"\nexpect[ \t]*:[ \t]*100-continue[ \t]*\r?\n", re.IGNORECASE)
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_RESOURCE_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def connection_limit(requested: int) -> int:
    """``requested``, clipped to the process's soft open-file limit less :data:`FD_RESERVE`."""
    try:
        import resource
    except ImportError:  # not on Unix: no limit to read
        return requested
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return requested
    return max(1, min(requested, soft - FD_RESERVE))


def parse_head(head: bytes) -> tuple[int | None, bool]:
    """``(Content-Length, expects 100-continue)`` of a request head; the length is None when the
    header is missing or malformed (the handler then answers 411 / 400). The first Content-Length
    counts, as for :class:`BaseHTTPRequestHandler`'s ``headers.get``."""
    m = _CONTENT_LENGTH.search(head)
    value = m.group(1).strip() if m else b""
    length = int(value) if value.isdigit() and len(value) <= 18 else None
    return length, _EXPECT_CONTINUE.search(head) is not None


def _canned(status: int, message: str) -> bytes:
    """A complete ``Connection: close`` JSON error answer sent without a request handler."""
    body = json.dumps({"error": message}).encode("utf-8")
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: application/json; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


# -------------------------------------------------------------------- connections
class Connection:
    """One client connection: its buffer, how far its pending request is framed, its deadline,
    and whether a thread owns it now (``busy``: reading or answering it)."""

    __slots__ = (
        "sock",
        "fd",
        "addr",
        "buf",
        "head",
        "request",
        "body_left",
        "discard_left",
        "scan_from",
        "started",
        "deadline",
        "busy",
    )

    def __init__(self, sock: socket.socket, addr, now: float, request_timeout: float) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.addr = addr
        self.buf = bytearray()
        self.started: float | None = now  # when the pending request began; None while idle
        self.deadline = now + request_timeout
        self.busy = False
        self.reset()

    def reset(self) -> None:
        """Forget the framing of the last request (the buffer keeps any pipelined bytes)."""
        self.head: bytes | None = None  # the pending request's head, once complete
        self.request = b""  # the complete request (head and body) being answered
        self.body_left = 0
        self.discard_left = 0
        self.scan_from = 0


class _SocketWriter(io.RawIOBase):
    """Writes to a non-blocking socket; only when its send buffer is full does a send wait, for
    at most ``timeout`` seconds (then :class:`TimeoutError`)."""

    def __init__(self, sock: socket.socket, timeout: float | None) -> None:
        self._sock, self._timeout = sock, timeout

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        try:
            return self._sock.send(b)
        except BlockingIOError:  # a client reading slowly: wait for it, within the timeout
            self._sock.settimeout(self._timeout)
            try:
                self._sock.sendall(b)
            finally:
                self._sock.setblocking(False)
            return len(b)


class FramedRequestHandler(BaseHTTPRequestHandler):
    """A request handler for one complete, already framed request (``self.request`` is a
    :class:`Connection`): it reads the request from memory, writes the answer to the socket with
    the class's ``timeout`` per send that has to wait, and never reads the socket itself."""

    request: Connection
    wbufsize = 1 << 16  # the answer leaves in one send (the handler flushes after each request)

    def setup(self) -> None:
        conn = self.request
        self.connection = conn.sock
        self.rfile = io.BytesIO(conn.request)
        self.wfile = io.BufferedWriter(_SocketWriter(conn.sock, self.timeout), self.wbufsize)

    def handle(self) -> None:
        """Answer exactly one request; the connection goes back to the poller for the next one."""
        self.close_connection = True
        self.handle_one_request()

    def handle_expect_100(self) -> bool:
        """``100 Continue`` was sent when the head arrived, before the body."""
        return True


class ReceptionServer(HTTPServer):
    """An HTTP server whose ``workers`` threads receive requests from every connection without
    blocking on any one and answer each complete request with ``handler`` (see the module docstring).
    ``poller``: ``"epoll"`` (Linux), ``"selectors"`` (anywhere) or ``"auto"`` (epoll where it exists)."""

    def __init__(
        self,
        address,
        handler: type[FramedRequestHandler],
        *,
        backlog: int,
        workers: int,
        request_timeout: float,
        idle_timeout: float,
        max_connections: int,
        max_head_bytes: int,
        max_body_bytes: int,
        max_discard_bytes: int,
        poller: str = "auto",
        bind_and_activate: bool = True,
    ) -> None:
        self.request_queue_size = backlog  # read by server_activate's listen()
        self.workers = workers
        self.request_timeout = request_timeout
        self.idle_timeout = idle_timeout
        self.max_connections = connection_limit(max_connections)
        if self.max_connections < max_connections:
            logger.info(
                "retrieval server: at most %d connections (max_connections=%d clipped by the open-file limit; "
                "raise `ulimit -n` to allow more)",
                self.max_connections,
                max_connections,
            )
        self.max_head_bytes = max_head_bytes
        self.max_body_bytes = max_body_bytes
        self.max_discard_bytes = max_discard_bytes
        self.stats = {"accepted": 0, "timed_out": 0, "evicted": 0, "refused": 0, "head_too_large": 0}
        self._poller = make_poller(poller)
        self._handler = handler
        self._conns: dict[int, Connection] = {}  # fd -> every open connection
        self._lock = threading.Lock()  # guards _conns, every Connection.busy and stats
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._closing = False  # serving ended: connections are closed, not kept alive
        super().__init__(address, handler, bind_and_activate=bind_and_activate)

    @classmethod
    def on_socket(cls, sock: socket.socket, handler, **kwargs) -> "ReceptionServer":
        """A server accepting on an already bound and listening ``sock`` (shared by several
        processes: a process that loses the race for a connection just goes back to waiting)."""
        self = cls(sock.getsockname()[:2], handler, bind_and_activate=False, **{**kwargs, "backlog": 1})
        self.socket.close()
        self.socket = sock
        host, port = sock.getsockname()[:2]
        self.server_address = (host, port)
        self.server_name, self.server_port = socket.getfqdn(host), port
        return self

    @property
    def open_connections(self) -> int:
        """Connections open now (waiting for a request, receiving one, or being answered)."""
        return len(self._conns)

    # ------------------------------------------------------------------ lifecycle
    def serve_forever(self, poll_interval: float = SWEEP_S) -> None:
        """Serve until :meth:`shutdown`: start the worker threads, then sweep deadlines every
        ``poll_interval`` seconds (at most :data:`SWEEP_S`) in the calling thread."""
        self._stopped.clear()
        self._closing = False
        self.socket.setblocking(False)
        self._poller.add(self.socket.fileno())
        threads = [
            threading.Thread(target=self._work, name=f"searchgym-retrieval-worker-{i}", daemon=True)
            for i in range(self.workers)
        ]
        for t in threads:
            t.start()
        every = min(poll_interval, SWEEP_S, self.request_timeout / 4, self.idle_timeout / 4)
        try:
            while not self._stop.wait(every):
                self._sweep(time.monotonic())
        finally:
            self._closing = True
            self._poller.stop()
            for t in threads:
                t.join()
            with self._lock:
                for conn in self._conns.values():
                    self._close_socket(conn)
                self._conns.clear()
            self._stop.clear()
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` and wait for it (call it from another thread); requests being
        answered are answered first."""
        self._stop.set()
        self._stopped.wait()

    def server_close(self) -> None:
        """Close the listening socket and the poller."""
        super().server_close()
        self._poller.close()

    # -------------------------------------------------------------------- workers
    def _work(self) -> None:
        """A worker thread: take the next readable connection (or new connections) and serve it."""
        listen_fd = self.socket.fileno()
        while True:
            fd = self._poller.poll()
            if fd is None:
                return
            if fd == listen_fd:
                try:
                    self._accept(time.monotonic())
                finally:
                    if not self._closing:
                        self._poller.rearm(listen_fd)
                continue
            with self._lock:
                conn = self._conns.get(fd)
                if conn is None or conn.busy:  # closed meanwhile, or another thread owns it: it re-arms
                    continue
                conn.busy = True
            try:
                self._serve(conn)
            except Exception:  # a bug here must cost one connection, not a worker thread
                logger.exception("error while serving %s", conn.addr[0])
                self._discard(conn)

    def _serve(self, conn: Connection) -> None:
        """Read what ``conn`` sent, answer every complete request, then re-arm or close it."""
        ended = self._receive(conn)
        while True:
            request = self._frame(conn)
            if conn.sock.fileno() < 0:  # refused (431) and closed while framing
                return
            if request is None:
                break
            if not self._answer(conn, request):
                self._discard(conn)
                return
            now = time.monotonic()
            conn.reset()
            if conn.buf:  # pipelined: the next request has begun
                conn.started, conn.deadline = now, now + self.request_timeout
            else:
                conn.started, conn.deadline = None, now + self.idle_timeout
                break
        if ended is not None or self._closing:
            if ended is not None:
                self._log_disconnect(conn, ended)
            self._discard(conn)
            return
        with self._lock:  # released and re-armed at once: a sweep sees it either owned or watched
            conn.busy = False
            self._poller.rearm(conn.fd)

    def _receive(self, conn: Connection) -> str | None:
        """Append what has arrived to ``conn``'s buffer. None while the client may send more, else
        why it will not (``"closed"`` or the error): what it sent in full is still answered."""
        got = 0
        while got < _READ_ROUND:
            try:
                data = conn.sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                return None
            except OSError as exc:
                return type(exc).__name__
            if not data:
                return "closed"
            if conn.started is None:  # the first byte of the next request starts its clock
                conn.started = time.monotonic()
                conn.deadline = conn.started + self.request_timeout
            conn.buf += data
            got += len(data)
            if len(data) < 1 << 16:  # all there was (more wakes the poller again): spare a recv
                return None
        return None

    @staticmethod
    def _log_disconnect(conn: Connection, why: str) -> None:
        """One debug line for a client gone with a request unfinished (none when it left between requests)."""
        if conn.head is not None:
            logger.debug(
                "client %s disconnected mid-body (after %d of %d body bytes; %s)",
                conn.addr[0],
                len(conn.buf) if conn.body_left else 0,
                conn.body_left or conn.discard_left,
                why,
            )
        elif conn.buf:
            logger.debug("client %s disconnected mid-head (after %d bytes; %s)", conn.addr[0], len(conn.buf), why)

    def _frame(self, conn: Connection) -> bytes | None:
        """The complete next request in ``conn``'s buffer (taken out of it), or None for not yet.
        A head over ``max_head_bytes`` is answered 431 here (and the connection closed: None)."""
        buf = conn.buf
        if conn.head is None:
            if buf and buf[0] in b"\r\n":  # empty lines before a request line are ignored (RFC 9112)
                del buf[: len(buf) - len(buf.lstrip(b"\r\n"))]
            end = _HEAD_END.search(buf, max(0, conn.scan_from - 3))
            if end is None:
                conn.scan_from = len(buf)
                if len(buf) > self.max_head_bytes:
                    self._count("head_too_large")
                    self._refuse(conn, 431, f"request head exceeds {self.max_head_bytes} bytes")
                return None
            conn.head = head = bytes(buf[: end.end()])
            del buf[: end.end()]
            length, expect = parse_head(head)
            if length is not None and length > self.max_body_bytes:
                if length > self.max_discard_bytes:  # answered 413 at once, the body left unread
                    return head
                conn.discard_left = length
            else:
                conn.body_left = length or 0
            if expect and (conn.body_left or conn.discard_left) and not buf:
                self._send_quietly(conn, _CONTINUE)
        if conn.discard_left:  # the handler answers 413 to the head alone
            dropped = min(conn.discard_left, len(buf))
            del buf[:dropped]
            conn.discard_left -= dropped
            return None if conn.discard_left else conn.head
        if len(buf) < conn.body_left:
            return None
        body = bytes(buf[: conn.body_left])
        del buf[: conn.body_left]
        return conn.head + body

    def _answer(self, conn: Connection, request: bytes) -> bool:
        """Answer one complete request in this thread; True when the connection stays open."""
        conn.request = request
        handler = None
        try:
            handler = self._handler(conn, conn.addr, self)  # type: ignore[arg-type]  # a framed request, not a socket
        except Exception:  # reported (a traceback for a bug, one debug line for a vanished client)
            self.handle_error(conn.sock, conn.addr)
        return isinstance(handler, BaseHTTPRequestHandler) and not handler.close_connection

    # ------------------------------------------------------------- connections
    def _accept(self, now: float) -> None:
        """Accept the pending connections (making room at the connection limit)."""
        for _ in range(64):
            try:
                sock, addr = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno not in _RESOURCE_ERRNOS:  # e.g. the client reset before its accept
                    logger.debug("accept failed (%s)", exc)
                    continue
                logger.warning("retrieval server cannot accept a connection (%s)", exc.strerror)
                if not self._evict():
                    time.sleep(0.05)  # out of descriptors and nothing to free: let answers finish
                return
            with self._lock:
                self.stats["accepted"] += 1
                full = len(self._conns) >= self.max_connections
            if full and not self._evict():
                self._count("refused")
                sock.close()
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(sock, addr, now, self.request_timeout)
            with self._lock:
                self._conns[conn.fd] = conn
                self._poller.add(conn.fd)

    def _evict(self) -> bool:
        """Close one connection to make room: the oldest unfinished request (503), else the longest
        idle kept-alive connection (silently). False when every connection is being answered."""
        with self._lock:
            candidates = [c for c in self._conns.values() if not c.busy]
            if not candidates:
                return False
            victim = min(
                candidates, key=lambda c: (c.started is None, c.started if c.started is not None else c.deadline)
            )
            victim.busy = True  # ours now: no worker takes it
            if victim.started is not None:
                self.stats["evicted"] += 1
        if victim.started is not None:
            self._refuse(
                victim,
                503,
                f"the server is at its limit of {self.max_connections} connections and this request "
                f"was the slowest to arrive; send it again",
            )
        else:
            self._discard(victim)
        return True

    def _sweep(self, now: float) -> None:
        """Close connections past their deadline: 408 for an unfinished request, silently when idle."""
        with self._lock:
            late = [c for c in self._conns.values() if not c.busy and now >= c.deadline]
            for conn in late:
                conn.busy = True  # ours now: no worker takes it
        for conn in late:
            if conn.started is None:
                self._discard(conn)
            else:
                self._count("timed_out")
                self._refuse(conn, 408, f"the request did not arrive in full within {self.request_timeout:g} s")

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _refuse(self, conn: Connection, status: int, message: str) -> None:
        """Answer ``status`` without a request handler (best effort: the socket does not block) and close."""
        logger.debug("client %s: %d %s", conn.addr[0], status, message)
        self._send_quietly(conn, _canned(status, message))
        self._discard(conn)

    @staticmethod
    def _send_quietly(conn: Connection, data: bytes) -> None:
        try:
            conn.sock.send(data)
        except OSError as exc:  # full buffer or gone: nothing more is owed to this client
            logger.debug("could not answer %s (%s)", conn.addr[0], type(exc).__name__)

    def _discard(self, conn: Connection) -> None:
        """Forget ``conn``, stop watching it and close it (the caller owns it: ``busy``)."""
        with self._lock:
            if self._conns.get(conn.fd) is conn:
                del self._conns[conn.fd]
            self._close_socket(conn)

    def _close_socket(self, conn: Connection) -> None:
        if conn.sock.fileno() < 0:
            return
        try:
            self._poller.remove(conn.fd)  # before close: the descriptor number cannot be reused yet
        except (OSError, ValueError) as exc:
            logger.debug("connection %d was not watched (%s)", conn.fd, exc)
        conn.sock.close()

    def handle_error(self, request, client_address) -> None:
        """Log a handler error: one debug line for a client that disconnected, else a traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            logger.debug("client %s went away (%s)", client_address[0], type(exc).__name__)
        else:
            logger.exception("error while handling a request from %s", client_address[0])
