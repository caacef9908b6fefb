"""RAG verification of proposed questions (docs/game.md, self-play game, SSP).

A question that passed the rule filters is checked by having a reader answer it *without
search* from the Proposer's own retrieved materials plus a few noisy materials taken from other
proposer trajectories of the same batch (shuffled together). The question is valid iff the
judge says the reader's answer is correct. Readers:

* :class:`LLMReader` — any :class:`~searchgym.core.llm.TextGenerator` (the policy itself or an
  external model) with SSP's verification prompt, temperature 0, answer after the last ``Answer:``.
* :class:`~searchgym.scoring.extractive_reader.ExtractiveReader` — an offline, deterministic reader over a
  :class:`~searchgym.world.World`'s names, so the whole game runs without any model.

Verification fails closed: any reader or judge error makes the question invalid
(``reason="verifier_error"``) and is counted in :attr:`RAGVerifier.stats`.
"""

from __future__ import annotations

import logging
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional, Protocol, Sequence, Union, runtime_checkable

from ..core.text_scan import tag_bodies
from ..core.types import Trajectory
from ..errors import InvalidArgumentError, InvalidTypeError, SearchGymError

logger = logging.getLogger(__name__)

_THINK_RE = re.compile(r"<think>.*?(</think>|$)", re.IGNORECASE | re.DOTALL)
_ANSWER_RE = re.compile(r"answer\s*:", re.IGNORECASE)


class ReaderError(SearchGymError, RuntimeError):
    """A reader could not produce an answer (model failure, unparseable reply); says which."""


@runtime_checkable
class Reader(Protocol):
    """Answers a question from given materials, without search."""

    def answer(self, question: str, materials: list[str]) -> str:
        """The answer text ('' when the reader finds none); raises :class:`ReaderError` on failure."""
        ...


def materials_from_trajectory(trajectory: Trajectory) -> list[str]:
    """The texts inside every env-inserted ``<information>`` block of a rollout, in order.

    Corrective messages (which carry no ``<information>`` tag) are not materials.
    """
    return [
        m.strip()
        for t in trajectory.turns
        for m in tag_bodies(t.information, "<information>", "</information>")  # linear re.findall of (.*?)
        if m.strip()
    ]


def extract_final_answer(reply: str) -> str:
    """The text after the last ``Answer:`` (case-insensitive) of a verifier reply, first line only.

    ``<think>`` blocks are ignored; markdown emphasis and a trailing full stop are stripped.
    Raises :class:`ReaderError` when there is no ``Answer:`` or nothing after it.
    """
    text = _THINK_RE.sub(" ", reply or "")
    matches = list(_ANSWER_RE.finditer(text))
    if not matches:
        raise ReaderError(f"unparseable verifier reply (no 'Answer:'): {text.strip()[:200]!r}")
    tail = text[matches[-1].end() :].strip()
    first = tail.splitlines()[0] if tail else ""
    first = first.strip(" \t*_`.")
    if not first:
        raise ReaderError("unparseable verifier reply: nothing after 'Answer:'")
    return first


class LLMReader:
    """SSP's RAG verifier model: one chat call with ``render_rag_verifier``, temperature 0.

    ``generator`` is any TextGenerator; ``config`` overrides the generation settings (default
    256 new tokens, temperature 0). Generator failures become :class:`ReaderError`.
    """

    def __init__(self, generator, config=None) -> None:
        from ..core.llm import GenerationConfig

        self.generator = generator
        self.config = config or GenerationConfig(max_new_tokens=256, temperature=0.0)

    def answer(self, question: str, materials: list[str]) -> str:
        """Ask the model; the text after its last ``Answer:`` is the answer."""
        from ..core.llm import GenerationError
        from ..core.prompts import render_rag_verifier

        prompt = [{"role": "user", "content": render_rag_verifier(question, materials)}]
        try:
            replies = self.generator.generate([prompt], self.config)
        except (GenerationError, RuntimeError, OSError, ValueError) as exc:
            raise ReaderError(f"verifier model failed: {exc}") from exc
        if len(replies) != 1 or not isinstance(replies[0], str):
            raise ReaderError(f"verifier model returned {len(replies)} replies for 1 prompt")
        return extract_final_answer(replies[0])


@dataclass(frozen=True)
class VerifierResult:
    """Outcome of one verification: ``valid``; ``reason`` (None if valid, else
    ``"verifier_incorrect"`` or ``"verifier_error"``); the reader's ``prediction``; ``error``
    text on failure; ``materials_used`` — the shuffled materials the reader saw."""

    valid: bool
    reason: Optional[str]
    prediction: Optional[str]
    error: Optional[str] = None
    materials_used: list[str] = field(default_factory=list)


def _as_rng(rng: Union[random.Random, int]) -> random.Random:
    if isinstance(rng, random.Random):
        return rng
    if isinstance(rng, int) and not isinstance(rng, bool):
        return random.Random(rng)
    raise InvalidTypeError(f"rng must be a random.Random or an int seed, got {type(rng).__name__}")


class RAGVerifier:
    """Validate a proposed question by answering it from (own + noisy) materials without search.

    ``reader`` answers, ``judge`` (a :class:`~searchgym.scoring.judge.Judge`) compares with the gold
    answers, ``n_noise`` noisy materials (SSP default 4) are sampled from ``noise_pool``.
    ``stats`` counts ``verified``, ``valid``, ``invalid`` and ``errors``.
    """

    def __init__(self, reader: Reader, judge, n_noise: int = 4) -> None:
        if n_noise < 0:
            raise InvalidArgumentError(f"n_noise must be >= 0, got {n_noise}")
        if not callable(getattr(reader, "answer", None)):
            raise InvalidTypeError("reader must have an answer(question, materials) method")
        self.reader = reader
        self.judge = judge
        self.n_noise = n_noise
        self.stats: Counter = Counter()

    def select_materials(
        self, materials: Sequence[str], noise_pool: Sequence[str], rng: Union[random.Random, int]
    ) -> list[str]:
        """Own materials + ``n_noise`` distinct noise items not among them, shuffled with ``rng``."""
        r = _as_rng(rng)
        own = [m for m in materials if isinstance(m, str) and m.strip()]
        seen = set(own)
        pool = [m for m in dict.fromkeys(noise_pool) if isinstance(m, str) and m.strip() and m not in seen]
        noise = r.sample(pool, min(self.n_noise, len(pool)))
        chosen = own + noise
        r.shuffle(chosen)
        return chosen

    def verify(
        self,
        question: str,
        answers: Union[str, Sequence[str]],
        materials: Sequence[str],
        noise_pool: Sequence[str] = (),
        rng: Union[random.Random, int] = 0,
    ) -> VerifierResult:
        """Verify one question; never raises for reader/judge failures (they make it invalid)."""
        used = self.select_materials(materials, noise_pool, rng)
        self.stats["verified"] += 1
        try:
            prediction = self.reader.answer(question, list(used))
        except (ReaderError, RuntimeError, OSError, ValueError) as exc:
            return self._error(f"reader failed: {exc}", None, used)
        if not isinstance(prediction, str):
            return self._error(f"reader returned {type(prediction).__name__}, not str", None, used)
        verdict = self.judge.judge(question, prediction, answers)
        if verdict.error is not None:
            return self._error(f"judge failed: {verdict.error}", prediction, used)
        self.stats["valid" if verdict.correct else "invalid"] += 1
        return VerifierResult(
            verdict.correct, None if verdict.correct else "verifier_incorrect", prediction, None, used
        )

    def _error(self, message: str, prediction: Optional[str], used: list[str]) -> VerifierResult:
        self.stats["errors"] += 1
        logger.warning("RAG verification failed closed: %s", message)
        return VerifierResult(False, "verifier_error", prediction, message, used)


from .extractive_reader import ExtractiveReader  # noqa: E402  (re-exported; light module)

__all__ = [
    "Reader",
    "ReaderError",
    "LLMReader",
    "ExtractiveReader",
    "RAGVerifier",
    "VerifierResult",
    "materials_from_trajectory",
    "extract_final_answer",
]
