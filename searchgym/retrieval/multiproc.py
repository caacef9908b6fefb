"""Serve one retriever from several processes on one port: CPU-bound search outgrows one GIL.

:class:`MultiProcessRetrievalServer` binds the listening socket in the parent, then forks
``processes`` workers that inherit it (and, copy-on-write, the already built index: no worker
re-indexes or holds a private copy until it writes). Each worker is an ordinary
:class:`~searchgym.retrieval.server.RetrievalServer` on the shared socket — its thread pool, and its
coalescer batching the concurrent requests it accepted into one ``batch_search``. The kernel hands
each new connection to one waiting worker. A worker that dies is restarted by :meth:`check`
(called by ``serve_forever`` every second), so the port keeps answering. Ctrl-C or SIGTERM to the
supervisor stops every worker; a worker whose supervisor was killed outright exits by itself.

Linux/macOS only (``fork``). ``searchgym serve --workers N`` uses it.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import socket
import threading
import time
from typing import Any, Optional

from ..errors import InvalidArgumentError, SearchGymRuntimeError
from .base import Retriever
from .server import RetrievalServer

logger = logging.getLogger(__name__)

__all__ = ["MultiProcessRetrievalServer"]


def _worker(retriever: Retriever, sock: socket.socket, server_kwargs: dict, parent: int) -> None:
    """A worker process: serve on the inherited socket until SIGTERM or until its parent is gone
    (Ctrl-C reaches the whole process group: the parent alone handles it and stops the workers)."""
    srv = RetrievalServer(retriever, listen_socket=sock, **server_kwargs)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def orphan_watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)  # the supervisor died without stopping us: free the port

    threading.Thread(target=orphan_watch, name="searchgym-retrieval-orphan-watch", daemon=True).start()
    srv.serve_forever()


def _raise_interrupt(*_) -> None:
    raise KeyboardInterrupt


class MultiProcessRetrievalServer:
    """``retriever`` served by ``processes`` forked workers on ``host:port`` (``port=0``: a free one).

    ``server_kwargs`` go to each worker's :class:`RetrievalServer` (``workers`` threads,
    ``default_topk``, limits, ``coalesce``). Use as a context manager, or :meth:`start` /
    :meth:`stop`, or :meth:`serve_forever` (CLI).
    """

    def __init__(
        self,
        retriever: Retriever,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        processes: int = 2,
        backlog: int = 1024,
        **server_kwargs: Any,
    ) -> None:
        if processes < 1:
            raise InvalidArgumentError(f"processes must be >= 1, got {processes}")
        if "fork" not in mp.get_all_start_methods():
            raise SearchGymRuntimeError(
                "several retrieval server processes need fork (Linux or macOS); use --workers 1"
            )
        RetrievalServer(retriever, host, port, backlog=backlog, **server_kwargs)  # validates the settings now
        self.retriever = retriever
        self.host, self._port, self.processes, self.backlog = host, port, processes, backlog
        self.server_kwargs = server_kwargs
        self._sock: Optional[socket.socket] = None
        self._procs: list = []
        self.restarts = 0

    @property
    def port(self) -> int:
        """The bound port."""
        return self._sock.getsockname()[1] if self._sock is not None else self._port

    @property
    def url(self) -> str:
        """Base URL clients use."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def bind(self) -> socket.socket:
        """Open the shared listening socket (idempotent)."""
        if self._sock is None:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((self.host, self._port))
            except OSError as exc:
                sock.close()
                raise SearchGymRuntimeError(
                    f"cannot listen on {self.host}:{self._port} ({exc.strerror or exc}); pick another --port"
                ) from None
            sock.listen(self.backlog)
            self._sock = sock
        return self._sock

    def _spawn(self):
        proc = mp.get_context("fork").Process(
            target=_worker,
            args=(self.retriever, self._sock, self.server_kwargs, os.getpid()),
            name="searchgym-retrieval-proc",
            daemon=True,
        )
        proc.start()
        return proc

    def start(self) -> "MultiProcessRetrievalServer":
        """Bind and fork the workers; returns self."""
        if self._procs:
            raise SearchGymRuntimeError("server already started")
        self.bind()
        self._procs = [self._spawn() for _ in range(self.processes)]
        logger.info("retrieval server on %s with %d processes", self.url, self.processes)
        return self

    def check(self) -> int:
        """Restart workers that died; returns how many were restarted."""
        n = 0
        for i, proc in enumerate(self._procs):
            if not proc.is_alive():
                logger.warning("retrieval worker process %d exited with %s; restarting it", proc.pid, proc.exitcode)
                self._procs[i] = self._spawn()
                n += 1
        self.restarts += n
        return n

    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        return [p.pid for p in self._procs if p.is_alive()]

    def serve_forever(self) -> None:
        """Start and supervise the workers until Ctrl-C or SIGTERM (then stop them)."""
        self.start()
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            while True:
                time.sleep(1.0)
                self.check()
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.stop()

    def stop(self) -> None:
        """Stop the workers and close the socket; idempotent."""
        for proc in self._procs:
            proc.terminate()
        for proc in self._procs:
            proc.join(timeout=10)
        self._procs = []
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> "MultiProcessRetrievalServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
