"""One-shot readiness polling shared by many threads: each readable socket wakes exactly one thread.

The retrieval server's worker threads (:mod:`searchgym.retrieval.reception`) all wait in one
poller; a connection that becomes readable is handed to one of them and stays disarmed until that
thread calls :meth:`rearm`, so no two threads ever read the same connection and no thread waits on
a single client. :class:`EpollPoller` is the Linux kernel's own one-shot epoll (one wake-up per
event); :class:`SelectorPoller` gives the same contract on any platform over :mod:`selectors`.
:func:`make_poller` picks one. Standard library only.
"""

from __future__ import annotations

import collections
import os
import select
import selectors
import socket
import threading

from ..errors import InvalidArgumentError

__all__ = ["EpollPoller", "SelectorPoller", "make_poller"]


def make_poller(kind: str = "auto") -> EpollPoller | SelectorPoller:
    """``"epoll"`` (Linux), ``"selectors"`` (anywhere) or ``"auto"`` (epoll where the platform has it)."""
    if kind not in ("auto", "epoll", "selectors"):
        raise InvalidArgumentError(f"poller must be 'auto', 'epoll' or 'selectors', got {kind!r}")
    if kind == "epoll" or (kind == "auto" and hasattr(select, "epoll")):
        return EpollPoller()
    return SelectorPoller()


class EpollPoller:
    """Linux: one epoll set shared by every worker thread, each connection registered one-shot, so
    the kernel wakes exactly one waiting thread per readable connection and disarms it until
    :meth:`rearm`."""

    def __init__(self) -> None:
        self._ep = select.epoll()
        self._stop_r, self._stop_w = os.pipe()
        self._ep.register(self._stop_r, select.EPOLLIN)  # level-triggered: once written, wakes every poller

    def add(self, fd: int) -> None:
        """Watch ``fd`` (armed)."""
        self._ep.register(fd, select.EPOLLIN | select.EPOLLONESHOT)

    def rearm(self, fd: int) -> None:
        """Watch ``fd`` again after the one wake-up it caused was handled."""
        self._ep.modify(fd, select.EPOLLIN | select.EPOLLONESHOT)

    def remove(self, fd: int) -> None:
        """Stop watching ``fd`` (before it is closed)."""
        self._ep.unregister(fd)

    def poll(self) -> int | None:
        """Wait for one readable ``fd`` (now disarmed); None once :meth:`stop` was called."""
        while True:
            for fd, _ in self._ep.poll(-1, 1):
                return None if fd == self._stop_r else fd

    def stop(self) -> None:
        """Make every :meth:`poll`, current and future, return None."""
        os.write(self._stop_w, b"x")

    def close(self) -> None:
        """Release the epoll set and the stop pipe."""
        self._ep.close()
        os.close(self._stop_r)
        os.close(self._stop_w)


class SelectorPoller:
    """Elsewhere: the same one-shot contract over :mod:`selectors`. One thread at a time selects;
    it takes every ready connection out of the selector (disarming it) and they are handed out one
    per :meth:`poll`; :meth:`add` / :meth:`rearm` register again and wake the selecting thread."""

    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()
        self._lock = threading.Lock()  # held by the selecting thread
        self._ready: collections.deque[int] = collections.deque()
        self._stopping = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ)

    def add(self, fd: int) -> None:
        """Watch ``fd`` (armed)."""
        self._sel.register(fd, selectors.EVENT_READ)
        self._wake()

    rearm = add

    def remove(self, fd: int) -> None:
        """Stop watching ``fd`` (before it is closed)."""
        try:
            self._sel.unregister(fd)
        except KeyError:  # disarmed: taken out by the selecting thread
            return

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except BlockingIOError:  # the wake-up is pending already
            return

    def poll(self) -> int | None:
        """Wait for one readable ``fd`` (now disarmed); None once :meth:`stop` was called."""
        with self._lock:
            while not self._ready and not self._stopping:
                for key, _ in self._sel.select():
                    if key.fileobj is self._wake_r:
                        try:
                            while self._wake_r.recv(4096):
                                pass
                        except BlockingIOError:
                            pass  # drained
                        continue
                    self._sel.unregister(key.fd)
                    self._ready.append(key.fd)
            return None if self._stopping else self._ready.popleft()

    def stop(self) -> None:
        """Make every :meth:`poll`, current and future, return None."""
        self._stopping = True
        self._wake()

    def close(self) -> None:
        """Release the selector and the wake socket pair."""
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()
