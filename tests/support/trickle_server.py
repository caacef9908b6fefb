"""A hostile HTTP server for deadline tests: it answers one byte every ``interval`` seconds.

``stage="status"`` trickles from the first byte of the status line, ``stage="body"`` sends the
status line and headers at once (announcing a large ``Content-Length``) and trickles the body.
Each byte arrives well within any per-read socket timeout, so only a total deadline ends the
exchange. Real sockets on loopback; a context manager that stops its threads on exit.
"""

from __future__ import annotations

import socket
import threading

_BODY_LENGTH = 1_000_000


class TrickleServer:
    """Accepts connections on 127.0.0.1 and trickles an HTTP answer to each one."""

    def __init__(self, *, stage: str = "status", interval: float = 0.5) -> None:
        if stage not in ("status", "body"):
            raise ValueError(f"stage must be 'status' or 'body', got {stage!r}")
        self.stage, self.interval = stage, interval
        self.connections = 0
        self._stop = threading.Event()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.1)
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            t = threading.Thread(target=self._trickle, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _trickle(self, conn: socket.socket) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {_BODY_LENGTH}\r\n\r\n".encode()
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(65536)  # the request (small enough to arrive in one read on loopback)
                if self.stage == "body":
                    conn.sendall(head)
                    data = b'{"x": "' + b"a" * _BODY_LENGTH
                else:
                    data = head + b"{" * _BODY_LENGTH
                for i in range(len(data)):
                    if self._stop.wait(self.interval):
                        return
                    conn.sendall(data[i : i + 1])
            except OSError:
                return  # the client gave up (what a deadline should make it do)

    def __enter__(self) -> "TrickleServer":
        t = threading.Thread(target=self._accept_loop, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._sock.close()
        for t in self._threads:
            t.join(timeout=5)
