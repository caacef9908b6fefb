"""A retriever over several retrieval-server replicas: spread the load, fail over, count errors.

:class:`ReplicatedRetriever` sends each ``batch_search`` to the next replica in turn (round robin
from a per-instance counter, so concurrent rollouts spread over all of them). When a replica cannot
be reached, times out or answers 5xx (after its own ``retries``), the same request goes to the next
replica, and :attr:`errors` counts the failure against the first one; a 4xx answer is not retried
elsewhere (the request itself is wrong). Only when every replica failed does the call raise, with
each replica's error. ``searchgym`` accepts the replicas as one comma-separated string wherever it
takes a retrieval-server URL (``retriever="http://a:8000,http://b:8000"``).
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Sequence

from ..errors import InvalidArgumentError
from .base import DEFAULT_TOP_K, Hit, Retriever
from .client import RemoteRetriever, RequestRejected, RetrievalError

logger = logging.getLogger(__name__)

__all__ = ["ReplicatedRetriever", "split_urls"]


def split_urls(urls: str | Sequence[str]) -> list[str]:
    """A list of replica URLs from a comma-separated string or a sequence (blank entries dropped)."""
    items = urls.split(",") if isinstance(urls, str) else list(urls)
    out = [u.strip() for u in items if u and u.strip()]
    if not out:
        raise InvalidArgumentError("no retrieval server URL given; pass one or more http:// URLs, comma-separated")
    if len(set(out)) != len(out):
        raise InvalidArgumentError(f"a retrieval server URL is listed twice in {out}")
    return out


class ReplicatedRetriever(Retriever):
    """Search through replicas ``urls`` (each a ``searchgym serve``); ``timeout`` / ``retries`` /
    ``backoff`` apply per replica (:class:`RemoteRetriever`), so a dead replica costs at most
    ``timeout * (retries + 1)`` before the next is tried."""

    backend = "remote"

    def __init__(
        self,
        urls: str | Sequence[str],
        timeout: float = 10.0,
        retries: int = 0,
        backoff: float = 0.1,
        *,
        batch_size: int = 256,
    ) -> None:
        self.replicas = [
            RemoteRetriever(u, timeout=timeout, retries=retries, backoff=backoff, batch_size=batch_size)
            for u in split_urls(urls)
        ]
        self.errors: dict[str, int] = {r.url: 0 for r in self.replicas}
        self.served: dict[str, int] = {r.url: 0 for r in self.replicas}
        self._next = itertools.count()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ReplicatedRetriever({[r.url for r in self.replicas]!r})"

    @property
    def urls(self) -> list[str]:
        """The replica URLs."""
        return [r.url for r in self.replicas]

    def batch_search(self, queries: Sequence[str], k: int = DEFAULT_TOP_K) -> list[list[Hit]]:
        """Top-``k`` hits per query from the next replica, failing over to the others."""
        start = next(self._next)
        n = len(self.replicas)
        failures = []
        for i in range(n):
            replica = self.replicas[(start + i) % n]
            try:
                hits = replica.batch_search(queries, k)
            except RequestRejected:
                raise
            except RetrievalError as exc:
                with self._lock:
                    self.errors[replica.url] += 1
                failures.append(f"{replica.url}: {exc}")
                logger.warning("retrieval replica %s failed; trying the next one (%s)", replica.url, exc)
                continue
            with self._lock:
                self.served[replica.url] += 1
            return hits
        raise RetrievalError(f"all {n} retrieval replicas failed: " + "; ".join(failures))

    def report(self) -> dict:
        """Per replica: requests served and failures counted (``{url: {"served", "errors"}}``)."""
        with self._lock:
            return {u: {"served": self.served[u], "errors": self.errors[u]} for u in self.served}

    def close(self) -> None:
        """Close this thread's connections to every replica."""
        for r in self.replicas:
            r.close()
