"""Per-process counters of the TRL adapters: failures that must not pass silently, and the time spent in
searchgym (env steps, retrieval, judging, reward wrappers, token bookkeeping) for the performance share.

:data:`STATS` is what both entry points add to; the reward functions log its per-step deltas through
TRL's ``log_metric`` (``searchgym/...`` in TRL's logs), and :meth:`AdapterStats.snapshot` is what the
benchmark and tests read.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import contextmanager
from typing import Iterator

__all__ = ["AdapterStats", "STATS", "bad_tool_call"]


def bad_tool_call(turn) -> bool:
    """Whether a turn had a tool call the env could not run (malformed, unknown tool, bad arguments)."""
    return bool(turn.error) and any(code in turn.error for code in ("bad_tool_call", "empty_query"))


class AdapterStats:
    """Thread-safe counters (``Counter`` of names) and accumulated seconds of searchgym work."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter = Counter()
        self.seconds = 0.0

    def count(self, name: str, n: int = 1) -> None:
        """Add ``n`` to counter ``name``."""
        if n:
            with self._lock:
                self.counts[name] += n

    @contextmanager
    def timed(self) -> Iterator[None]:
        """Add the wall time of the ``with`` block to :attr:`seconds`."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self.seconds += time.perf_counter() - t0

    def snapshot(self) -> dict:
        """A copy: ``{"seconds": s, name: count, ...}``."""
        with self._lock:
            return {"seconds": self.seconds, **self.counts}

    def reset(self) -> None:
        """Zero everything (benchmarks and tests)."""
        with self._lock:
            self.counts.clear()
            self.seconds = 0.0


#: The process-wide counters of both TRL entry points.
STATS = AdapterStats()
