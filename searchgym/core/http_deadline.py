"""HTTP exchanges bounded by a total deadline (issue 17: nothing hung).

A socket timeout bounds each *read*, so a server that trickles one byte every half second keeps
a plain ``http.client`` / ``urllib`` call alive indefinitely. :func:`exchange` bounds the whole
request (connect, send, status line, headers and body) by one deadline: a watchdog timer shuts
the socket down when the deadline passes, which wakes any blocked read, and the call raises
:class:`DeadlineExceeded`. Every HTTP client of the package (the OpenAI-compatible generator
behind LLM judges, readers and selectors, and the remote retriever) goes through it.

Standard library only; the lowest floor of the package (imports nothing from searchgym).
"""

from __future__ import annotations

import http.client
import logging
import socket
import threading
import time
import urllib.parse

from ..errors import InvalidArgumentError, SearchGymError

logger = logging.getLogger(__name__)

__all__ = ["DeadlineExceeded", "exchange", "open_connection"]


class DeadlineExceeded(SearchGymError, TimeoutError):
    """The whole HTTP exchange took longer than its deadline (the connection was closed)."""


def open_connection(url: str, timeout: float) -> http.client.HTTPConnection:
    """An unopened HTTP(S) connection to the host of ``url`` (``timeout`` bounds the connect)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgumentError(f"expected an http:// or https:// URL with a host, got {url!r}")
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return cls(parts.hostname, parts.port, timeout=timeout)


def _cut(conn: http.client.HTTPConnection, expired: threading.Event) -> None:
    """Watchdog action: mark the exchange expired and wake every blocked socket call."""
    expired.set()
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError as exc:  # already closed by the peer or by the caller
            logger.debug("shutting down a late connection: %s", exc)


def exchange(
    conn: http.client.HTTPConnection,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    deadline_s: float,
) -> tuple[int, bytes, bool]:
    """Send one request on ``conn`` and read the whole response within ``deadline_s`` seconds.

    Returns ``(status, body, will_close)``. Raises :class:`DeadlineExceeded` (after closing
    ``conn``) when the deadline passes at any stage, and the usual ``OSError`` /
    ``http.client.HTTPException`` for other failures. ``conn`` may be an open keep-alive
    connection; it stays usable after a successful exchange unless ``will_close``.
    """
    if deadline_s <= 0:
        raise InvalidArgumentError(f"deadline_s must be > 0, got {deadline_s}")
    end = time.monotonic() + deadline_s
    expired = threading.Event()
    timer = threading.Timer(deadline_s, _cut, args=(conn, expired))
    timer.daemon = True
    timer.start()
    try:
        if conn.sock is None:
            conn.timeout = deadline_s
            conn.connect()
        remaining = end - time.monotonic()
        if remaining <= 0 or expired.is_set():
            raise DeadlineExceeded(f"connecting took longer than the {deadline_s:g}s deadline")
        conn.sock.settimeout(remaining)
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        status, will_close = resp.status, resp.will_close
    except (OSError, http.client.HTTPException) as exc:
        conn.close()
        if expired.is_set() and not isinstance(exc, DeadlineExceeded):
            raise DeadlineExceeded(f"no complete answer within the {deadline_s:g}s deadline") from None
        raise
    finally:
        timer.cancel()
    if expired.is_set():  # the watchdog fired as the body completed: the socket is unusable
        conn.close()
        raise DeadlineExceeded(f"no complete answer within the {deadline_s:g}s deadline")
    return status, data, will_close
