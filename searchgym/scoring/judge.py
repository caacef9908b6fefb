"""Answer judging (docs/game.md, judging): EM / F1 / cover-EM judges and a strict LLM judge.

The answer metrics themselves (Search-R1/FlashRAG normalisation, EM, token F1, cover-EM) live in
:mod:`searchgym.core.answers` and are re-exported here. Rule-based judges compare the prediction
with every gold alias; :class:`ExactMatchJudge` is this project's offline default (SSP itself judges
with an LLM). :class:`LLMJudge` follows SSP: exact match first, and only when EM fails it asks a model
(SSP's prompt layout and, by default, its five criteria restated in this project's words;
``criteria="strict"`` also rejects hedged answers).
The verdict is parsed strictly and the judge fails closed: a reply that is not clearly
``Correct``, a generator error or an empty prediction is never counted as correct. Every judge
keeps counters in :attr:`Judge.stats` (calls, correct, llm_calls, errors, ...).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Optional

from ..core.answers import Golds, cover_exact_match, exact_match, gold_list, normalize_answer, token_f1
from ..errors import InvalidArgumentError, SearchGymRuntimeError
from ..world.shared import LockFreePickling

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    """A judgement: ``correct`` (bool), how it was reached (``method``: "em", "f1", "cover_em",
    "llm", "empty"), a score in [0, 1], and ``error`` when the judge could not decide (then
    ``correct`` is always False)."""

    correct: bool
    method: str
    score: float
    error: Optional[str] = None


class Judge(LockFreePickling):
    """Base class: decide whether a prediction answers a question, given gold answers.

    Subclasses implement :meth:`_judge_one`; :meth:`judge` and :meth:`judge_batch` add the
    empty-prediction rule and the counters in :attr:`stats`. Judges are thread-safe.
    """

    method = "base"

    def __init__(self) -> None:
        self.stats: Counter = Counter()
        self._lock = threading.Lock()

    def _count(self, verdict: Verdict) -> Verdict:
        with self._lock:
            self.stats["calls"] += 1
            self.stats["correct"] += int(verdict.correct)
            self.stats["errors"] += int(verdict.error is not None)
        return verdict

    def _judge_one(self, question: str, prediction: str, golds: list[str]) -> Verdict:
        """Judge one non-empty prediction against a non-empty gold list."""
        raise NotImplementedError

    def _judge_many(self, items: list[tuple[str, str, list[str]]]) -> list[Verdict]:
        """Judge several non-empty predictions; batching judges override this."""
        return [self._judge_one(q, p, g) for q, p, g in items]

    def judge(self, question: str, prediction: Optional[str], golds: Golds) -> Verdict:
        """Judge one prediction. ``None``/blank predictions are incorrect (``method="empty"``)."""
        return self.judge_batch([(question, prediction, golds)])[0]

    def judge_batch(self, items: Iterable[tuple[str, Optional[str], Golds]]) -> list[Verdict]:
        """Judge many ``(question, prediction, golds)`` triples; same result as judging each."""
        items = list(items)
        results: dict[int, Verdict] = {}
        todo: list[tuple[int, tuple[str, str, list[str]]]] = []
        for i, (q, pred, golds) in enumerate(items):
            g = gold_list(golds)
            if not isinstance(pred, str) or not normalize_answer(pred) or not g:
                results[i] = Verdict(False, "empty", 0.0, None if g else "no gold answer given")
            else:
                todo.append((i, (q if isinstance(q, str) else "", pred, g)))
        results.update(zip((i for i, _ in todo), self._judge_many([t for _, t in todo])))
        return [self._count(results[i]) for i in range(len(items))]


class ExactMatchJudge(Judge):
    """Correct iff the normalised prediction equals a normalised gold alias.

    The envs' offline default (no model needed). SSP judges with an LLM (:class:`LLMJudge`); EM is
    the metric of Search-R1 and of EVE's solver reward.
    """

    method = "em"

    def _judge_one(self, question, prediction, golds):
        ok = exact_match(prediction, golds)
        return Verdict(ok, "em", float(ok))


class F1Judge(Judge):
    """Correct iff the token F1 against the best gold reaches ``threshold`` (score = the F1)."""

    method = "f1"

    def __init__(self, threshold: float = 0.5) -> None:
        super().__init__()
        if not 0.0 < threshold <= 1.0:
            raise InvalidArgumentError(f"F1Judge threshold must be in (0, 1], got {threshold}")
        self.threshold = threshold

    def _judge_one(self, question, prediction, golds):
        f1 = token_f1(prediction, golds)
        return Verdict(f1 >= self.threshold, "f1", f1)


class CoverEMJudge(Judge):
    """Correct iff some normalised gold occurs (as whole tokens) in the normalised prediction
    (stricter than Search-R1's substring cover-EM, which ``searchgym eval`` reports)."""

    method = "cover_em"

    def _judge_one(self, question, prediction, golds):
        ok = cover_exact_match(prediction, golds, whole_words=True)
        return Verdict(ok, "cover_em", float(ok))


_THINK_BLOCK = re.compile(r"<think>.*?(</think>|$)", re.IGNORECASE | re.DOTALL)
_NEGATIVE = re.compile(r"\b(wrong|incorrect|not correct|isn ?t correct|not right|false)\b")


def parse_verdict(reply: Optional[str]) -> Optional[bool]:
    """Read a judge model's one-word verdict strictly.

    Returns True only for ``Correct`` (any case, surrounded by punctuation/markdown/whitespace)
    or a reply whose first word is ``Correct`` with no negative word (wrong, incorrect, not
    correct, ...) anywhere; False for a reply starting with ``Wrong``/``Incorrect`` or one that
    contains a negative word without starting with ``Correct``; None (unparseable) otherwise,
    including the ambiguous "Correct ... wrong". ``<think>`` blocks are ignored.
    """
    if not isinstance(reply, str):
        return None
    text = _THINK_BLOCK.sub(" ", reply).lower()
    text = re.sub(r"[^\w\s]", " ", text)  # punctuation and markdown (*, _, `, #) → spaces
    text = text.replace("_", " ")
    words = text.split()
    if not words:
        return None
    flat = " ".join(words)
    negative = _NEGATIVE.search(flat) is not None
    if words[0] == "correct":
        return None if negative else True
    if words[0] in ("wrong", "incorrect") or negative:
        return False
    return None


class LLMJudge(Judge):
    """SSP's judging scheme: exact match first; if EM fails, ask a model and parse its verdict strictly.

    ``criteria`` names the prompt's evaluation criteria (:data:`searchgym.core.prompts.JUDGE_CRITERIA`):
    ``"ssp"`` (default: SSP's five criteria, so scores compare with the paper; an answer that
    includes the reference without contradicting it is correct) or ``"strict"`` (hedging between
    answers, another entity or an added wrong claim is wrong; use it when the policy learns to list
    several candidates).

    ``generator`` is any :class:`~searchgym.core.llm.TextGenerator` (the policy itself or an
    external model behind an OpenAI-compatible endpoint). ``references`` picks what the model is
    compared against: ``"canonical"`` (the first gold, one call; default) or ``"each"`` (one call
    per gold alias, correct if any is judged correct). ``fallback_first="em"`` tries EM before
    the model (``None`` always asks the model). A generator failure or an unparseable reply
    gives ``Verdict(correct=False, method="llm", error=...)`` and is counted in
    ``stats["errors"]`` — the judge fails closed.
    """

    method = "llm"

    def __init__(
        self,
        generator,
        *,
        fallback_first: Optional[str] = "em",
        references: str = "canonical",
        config=None,
        criteria: str = "ssp",
    ) -> None:
        super().__init__()
        from ..core.llm import GenerationConfig
        from ..core.prompts import JUDGE_CRITERIA

        if criteria not in JUDGE_CRITERIA:
            raise InvalidArgumentError(f"criteria={criteria!r}: use one of {', '.join(JUDGE_CRITERIA)}")
        self.criteria = criteria
        if fallback_first not in ("em", None):
            raise InvalidArgumentError(f"fallback_first must be 'em' or None, got {fallback_first!r}")
        if references not in ("canonical", "each"):
            raise InvalidArgumentError(f"references must be 'canonical' or 'each', got {references!r}")
        self.generator = generator
        self.fallback_first = fallback_first
        self.references = references
        self.config = config or GenerationConfig(max_new_tokens=16, temperature=0.0)

    def _judge_many(self, items: list[tuple[str, str, list[str]]]) -> list[Verdict]:
        from ..core.llm import GenerationError
        from ..core.prompts import render_judge

        verdicts: list[Optional[Verdict]] = [None] * len(items)
        prompts, owners = [], []
        for i, (q, pred, golds) in enumerate(items):
            if self.fallback_first == "em" and exact_match(pred, golds):
                verdicts[i] = Verdict(True, "em", 1.0)
                continue
            refs = golds[:1] if self.references == "canonical" else golds
            for ref in refs:
                prompts.append([{"role": "user", "content": render_judge(q, pred, ref, criteria=self.criteria)}])
                owners.append(i)
        if prompts:
            with self._lock:
                self.stats["llm_calls"] += len(prompts)
            try:
                replies = self.generator.generate(prompts, self.config)
                if len(replies) != len(prompts):
                    raise GenerationError(f"judge model returned {len(replies)} replies for {len(prompts)} prompts")
            except (GenerationError, RuntimeError, OSError, ValueError) as exc:  # fail closed, reported
                logger.warning("LLM judge failed; counting %d answers as incorrect: %s", len(set(owners)), exc)
                for i in set(owners):
                    verdicts[i] = Verdict(False, "llm", 0.0, f"judge model failed: {exc}")
                return _every_verdict(verdicts)
            parsed: dict[int, list[tuple[Optional[bool], str]]] = {}
            for i, reply in zip(owners, replies):
                parsed.setdefault(i, []).append((parse_verdict(reply), reply))
            for i, results in parsed.items():
                if any(ok is True for ok, _ in results):
                    verdicts[i] = Verdict(True, "llm", 1.0)
                elif all(ok is False for ok, _ in results):
                    verdicts[i] = Verdict(False, "llm", 0.0)
                else:
                    bad = next(r for ok, r in results if ok is None)
                    with self._lock:
                        self.stats["unparseable"] += 1
                    verdicts[i] = Verdict(False, "llm", 0.0, f"unparseable judge reply: {str(bad)[:200]!r}")
        return _every_verdict(verdicts)


__all__ = [
    "normalize_answer",
    "exact_match",
    "token_f1",
    "cover_exact_match",
    "parse_verdict",
    "Verdict",
    "Judge",
    "ExactMatchJudge",
    "F1Judge",
    "CoverEMJudge",
    "LLMJudge",
]


def _every_verdict(verdicts: list[Optional[Verdict]]) -> list[Verdict]:
    """The verdicts once every answer has one; a gap is a bug, raised rather than dropping an answer."""
    out = [v for v in verdicts if v is not None]
    if len(out) != len(verdicts):
        raise SearchGymRuntimeError(f"the judge left {len(verdicts) - len(out)} answer(s) without a verdict")
    return out
