"""A scripted OpenAI-compatible endpoint for the benchmarks that time searchgym's HTTP client.

searchgym's own server (:class:`searchgym.llm.openai_server.OpenAIServer`, the one
``python -m searchgym.llm.openai_server`` runs) in front of :class:`DelayedScript`, a generator that
waits ``delay`` seconds per request (a model's latency) and answers with ``reply(prompt)``. The
requests go through the real protocol on loopback: the official request shapes, stop strings dropped
and named in ``stop_reason``, ``usage``. Up to ``concurrency`` requests wait at once, as on a batching
server, so a client's concurrency shows in the figures. Importable as ``scripted_endpoint`` by the
benchmarks (their folder is on ``sys.path`` when run as ``python benchmarks/bench_x.py``).
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from searchgym.core.llm import GenerationConfig, Prompt, TextGenerator
from searchgym.llm.openai_server import OpenAIServer

__all__ = ["DelayedScript", "scripted_endpoint"]


class DelayedScript(TextGenerator):
    """A thread-safe stand-in model: each :meth:`generate` call sleeps ``delay`` s, then answers every
    prompt (a chat message list or a raw string) with ``reply(prompt)``."""

    def __init__(self, reply: Callable[[Prompt], str], delay: float = 0.0) -> None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0 seconds, got {delay}")
        self.reply = reply
        self.delay = delay

    def generate(self, prompts: Sequence[Prompt], config: GenerationConfig | None = None) -> list[str]:
        """``reply(prompt)`` for each prompt, after ``delay`` seconds."""
        if self.delay:
            time.sleep(self.delay)
        return [self.reply(p) for p in prompts]


def scripted_endpoint(reply: Callable[[Prompt], str], *, delay: float = 0.0, concurrency: int = 64) -> OpenAIServer:
    """An unstarted :class:`OpenAIServer` on a free loopback port serving :class:`DelayedScript`
    as model ``"scripted"``; use it as a context manager (``.url`` ends in ``/v1``, ``.requests`` counts)."""
    return OpenAIServer(DelayedScript(reply, delay), "scripted", port=0, concurrency=concurrency)
