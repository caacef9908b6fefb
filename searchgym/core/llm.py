"""The one interface every text-generation backend implements.

Selectors, judges, the RAG verifier and the LLM agent all take a :class:`TextGenerator`, so any
backend (transformers in-process, vLLM, an OpenAI-compatible server, a test double) plugs in.
A prompt is either raw text (continued as-is) or a list of chat messages
(``[{"role": "system"|"user"|"assistant", "content": str}, ...]``); backends that set
``accepts_token_ids`` also take a list of token ids (continued exactly, no re-tokenisation).
Backends that can report the ids they sampled implement ``generate_with_stats`` and return them
in :attr:`GenerationResult.token_ids`, which the trainer trains on (:mod:`searchgym.llm.sequences`).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Sequence, TypeGuard, Union

from ..errors import InvalidArgumentError, SearchGymError

ChatMessages = list[dict]
TokenIds = list[int]
Prompt = Union[str, ChatMessages, TokenIds]


def is_token_prompt(prompt: object) -> TypeGuard[TokenIds]:
    """Whether ``prompt`` is a list of token ids (rather than text or chat messages)."""
    return isinstance(prompt, list) and bool(prompt) and all(isinstance(x, int) for x in prompt)


class GenerationError(SearchGymError, RuntimeError):
    """A backend could not produce text (server down, timeout, bad reply); the message says which.
    ``status``: the HTTP status of an endpoint's error answer (None when there was none)."""

    status: Optional[int] = None


@dataclass(frozen=True)
class GenerationConfig:
    """Sampling parameters shared by every backend.

    ``stop`` strings end a generation and are kept at the end of the returned text when they
    were hit (so ``</search>`` closes the tag the env parses). ``seed`` makes sampling
    reproducible where the backend supports it.
    """

    max_new_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    extra: dict = field(default_factory=dict)

    def with_(self, **kw) -> "GenerationConfig":
        """A copy with some fields changed."""
        return replace(self, **kw)


@dataclass
class GenerationResult:
    """Texts plus prompt / generated token counts and, where the backend knows them, the sampled ids.

    ``token_ids[i]`` is the exact list of token ids sampled for prompt ``i`` (the token that completed
    a stop string included, an end-of-sequence token included when one was sampled), or ``None`` when
    the backend only returned text. ``texts[i]`` is their decoding cut after the first stop string.
    ``logprobs[i]`` (same length as ``token_ids[i]``), when the backend was asked for them: each sampled
    token's log-probability under the weights that sampled it (temperature 1), for a trainer's
    importance correction of a sampler that differs from the trained policy (bf16 rollouts, say).
    """

    texts: list[str]
    prompt_tokens: int
    new_tokens: int
    token_ids: list | None = None
    logprobs: list | None = None


class TextGenerator(ABC):
    """Batch of prompts in, one completion text per prompt out.

    ``rng``: a backend that draws a seed per call (when the config gives none) keeps that stream here, so
    a trainer can checkpoint and restore it through :meth:`get_rng_state` / :meth:`set_rng_state`;
    ``None`` for backends whose sampling is not seeded locally (a server picks its own seeds).
    """

    rng: Optional[random.Random] = None

    def get_rng_state(self) -> Any:
        """The state of the backend's seed stream (``None``: it has none), for checkpoints."""
        return self.rng.getstate() if self.rng is not None else None

    def set_rng_state(self, state: Any) -> None:
        """Restore a state from :meth:`get_rng_state` (``None`` is a no-op: nothing was saved)."""
        if state is None:
            return
        if self.rng is None:
            raise InvalidArgumentError(
                f"{type(self).__name__} has no seed stream to restore; the checkpoint was written with another backend"
            )
        self.rng.setstate(state)

    @abstractmethod
    def generate(self, prompts: Sequence[Prompt], config: GenerationConfig | None = None) -> list[str]:
        """Complete every prompt; raises :class:`GenerationError` if the backend fails."""

    def close(self) -> None:
        """Release resources; idempotent."""


def truncate_at_stop(text: str, stop: Sequence[str]) -> str:
    """Cut ``text`` after the earliest stop string (kept), as the envs expect."""
    best = None
    for s in stop:
        if not s:
            continue
        j = text.find(s)
        if j >= 0 and (best is None or j + len(s) < best):
            best = j + len(s)
    return text if best is None else text[:best]
