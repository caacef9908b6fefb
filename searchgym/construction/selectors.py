"""Selectors: who picks the next edge of a target path (kg-paths-wcr Alg. 1 line 9, ``LLM_Select``).

A selector sees a :class:`SelectionContext` (the path so far, the current node and at most
``max_candidates`` numbered candidate edges) and answers one integer: ``1..len(candidates)``
picks that edge, ``0`` stops the path. A failed call raises :class:`SelectorError`; the
extractor retries it (``ExtractionConfig.max_retries``) and rejects the seed if every attempt
fails, so an outage never produces a silently truncated path.

Two implementations:

* :class:`HeuristicSelector` — deterministic, no model, the offline default. It prefers
  informative (rare) relations and targets that have a document, and stops with a probability
  that rises with the path length so lengths spread over ``[min_hops, max_hops]``.
* :class:`LLMSelector` — sends the relation-selection prompt (paper Fig. 10,
  :func:`searchgym.core.prompts.render_selector`) to any :class:`TextGenerator` and parses the
  reply strictly as ``{"answer": <int>}``, counting every failure by kind.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, Sequence, runtime_checkable

from ..core.jsonl import loads_json
from ..core.rng_state import stable_seed
from ..errors import InvalidArgumentError, InvalidTypeError, SearchGymError

logger = logging.getLogger(__name__)

__all__ = [
    "Candidate",
    "SelectionContext",
    "Selector",
    "SelectorError",
    "HeuristicSelector",
    "LLMSelector",
    "LLMSelectorConfig",
    "OUTAGE_KINDS",
    "parse_selector_reply",
]


class SelectorError(SearchGymError, RuntimeError):
    """A selector call failed (backend down, timeout, unparseable or out-of-range reply).

    ``kind`` is a short code (``timeout``, ``unreachable``, ``http_error``, ``bad_request``,
    ``unparseable``, ``out_of_range``, ``generation_error``) used for failure statistics.
    :attr:`outage` tells "the endpoint is down" (timeout, unreachable, HTTP 5xx/429: retry later)
    from "the model answered badly" (a rejection of that seed).
    """

    def __init__(self, message: str, kind: str = "generation_error") -> None:
        super().__init__(message)
        self.kind = kind

    @property
    def outage(self) -> bool:
        """True when the failure says the endpoint is unavailable, not that the model said no."""
        return self.kind in OUTAGE_KINDS

    def __reduce__(self):
        return (SelectorError, (str(self), self.kind))


#: Failure kinds that mean the endpoint is unavailable (retry later) rather than a bad reply.
OUTAGE_KINDS = frozenset({"timeout", "unreachable", "http_error"})


class Candidate(NamedTuple):
    """One candidate edge from the current node, as shown to a selector.

    ``forward`` is False when the edge is walked against the KG direction (only with
    ``ExtractionConfig.allow_inverse_edges``). ``out_degree`` counts the target's eligible
    out-edges (0 for literals: a literal ends the path). ``relation_frequency`` is how many
    triples of the world use this relation; ``num_triples`` is the world total (for IDF).
    A named tuple because the extractor builds one per shown edge on the hot path.
    """

    relation_id: str
    relation: str
    target_id: str
    target_title: str
    is_literal: bool = False
    forward: bool = True
    has_document: bool = False
    out_degree: int = 0
    relation_frequency: int = 1
    num_triples: int = 1

    @property
    def text(self) -> str:
        """The candidate as one prompt line: ``place of birth -> Tarsk`` (``<-`` for inverse edges)."""
        arrow = "->" if self.forward else "<-"
        return f"{self.relation} {arrow} {self.target_title}"


@dataclass
class SelectionContext:
    """What a selector sees at one expansion step.

    ``path_lines`` are ``(title) -[relation]-> (title)`` lines of the path so far, ``current`` the
    title of the node being expanded, ``candidates`` the numbered edges (1-based in the prompt).
    ``depth`` is the number of hops already on the path; ``attempt`` counts retries of this step
    (0 first). ``seed_id`` identifies the extraction so stateless selectors can derive
    deterministic randomness independent of thread timing. ``trial`` counts re-drawn paths from
    the same seed (0 first; see ``ExtractionConfig.plan_retries``).
    """

    path_lines: list[str]
    current: str
    candidates: list[Candidate]
    depth: int
    min_hops: int
    max_hops: int
    seed_id: str = ""
    attempt: int = 0
    trial: int = 0

    @property
    def candidate_texts(self) -> list[str]:
        """The candidates as prompt lines, in display order."""
        return [c.text for c in self.candidates]


@runtime_checkable
class Selector(Protocol):
    """Picks the next edge: return ``1..len(context.candidates)`` or ``0`` to stop.

    Raise :class:`SelectorError` on failure. Implementations must be safe to call from several
    threads at once (the pool builder runs extractions concurrently). An optional
    ``describe() -> dict`` identifies the selector in pool fingerprints.
    """

    def select(self, context: SelectionContext) -> int:
        """Index of the chosen candidate (1-based) or 0 to stop."""
        ...


_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    """One step of SplitMix64: a well-mixed 64-bit value from any integer (cheap, stateless)."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


class HeuristicSelector:
    """Deterministic selector without a model (the default; everything runs offline).

    Weights each candidate by the relation's inverse frequency in the world (generic relations
    such as ``instance of`` are common, so they score low) and doubles it when the target has a
    document (so the Proposer can ground the hop by searching) and scales quantity literals by
    ``quantity_weight`` (exact figures such as populations make brittle answers; the paper's pool
    has 0.3% number answers). Each extraction draws a target
    length ``L ~ Uniform{min_hops..max_hops}``: the selector stops (answers 0) once the path has
    ``L`` hops, i.e. the stop probability rises with the path length as the hazard
    ``1 / (max_hops - depth + 1)``, spreading lengths evenly over ``[min_hops, max_hops]`` like
    the paper's Fig. 5a. Before the last planned hop it avoids literals and dead ends (choosing
    one would end the path early). All randomness is a hash of ``(seed, context.seed_id, depth,
    attempt, trial)``, so a choice never depends on thread timing or on earlier calls; ``target_length``
    is the plan the extractor re-draws short paths against (``ExtractionConfig.plan_retries``).
    """

    def __init__(self, seed: int = 0, *, document_bonus: float = 2.0, quantity_weight: float = 0.2) -> None:
        if document_bonus <= 0 or quantity_weight < 0:
            raise InvalidArgumentError("document_bonus must be > 0 and quantity_weight >= 0")
        self.seed = int(seed)
        self.document_bonus = float(document_bonus)
        self.quantity_weight = float(quantity_weight)
        self._idf_cache: dict[tuple[int, int], float] = {}

    def describe(self) -> dict:
        """Identity for pool fingerprints."""
        return {
            "kind": "heuristic-v2",
            "seed": self.seed,
            "document_bonus": self.document_bonus,
            "quantity_weight": self.quantity_weight,
        }

    def _idf(self, freq: int, total: int) -> float:
        key = (freq, total)
        v = self._idf_cache.get(key)
        if v is None:
            v = math.log((1.0 + total) / (1.0 + freq)) + 1.0
            if len(self._idf_cache) < 100_000:
                self._idf_cache[key] = v
        return v

    def target_length(self, context: SelectionContext) -> int:
        """The path length this selector aims at for ``context.seed_id``."""
        h = _splitmix64(stable_seed(self.seed, context.seed_id))
        span = max(0, context.max_hops - context.min_hops) + 1
        return context.min_hops + h % span

    def select(self, context: SelectionContext) -> int:
        """Weighted random choice of an informative edge, or 0 once the target length is reached."""
        cands = context.candidates
        if not cands:
            return 0
        depth = context.depth
        length = self.target_length(context)
        if depth >= length:
            return 0
        final = depth + 1 >= length
        if final and depth >= context.min_hops and all(c.target_id.startswith("lit:quantity:") for c in cands):
            return 0  # end one hop early at an entity rather than at a bare figure
        weights = []
        total = 0.0
        for c in cands:
            w = self._idf(c.relation_frequency, c.num_triples)
            if c.has_document:
                w *= self.document_bonus
            elif c.is_literal and c.target_id.startswith("lit:quantity:"):
                w *= self.quantity_weight
            if not final and (c.is_literal or c.out_degree == 0):
                w *= 1e-6
            total += w
            weights.append(total)
        salt = (context.attempt,) if context.trial == 0 else (context.attempt, context.trial)
        z = _splitmix64(stable_seed(self.seed, context.seed_id, depth, *salt))
        x = (z >> 11) / float(1 << 53) * total
        for i, cum in enumerate(weights, 1):
            if x < cum:
                return i
        return len(cands)


def _unfenced(s: str) -> str:
    r"""A stripped reply without one Markdown code fence around it (```` ```json … ``` ````), else as it is.

    What ``re.match(r"^```(?:json|JSON)?\s*\n?(.*?)\n?\s*```$", s, re.DOTALL).group(1).strip()`` gave, in
    linear time: that pattern backtracked O(n³) over the whitespace after an unclosed fence (2,000 spaces: 8 s).
    """
    if len(s) < 6 or not (s.startswith("```") and s.endswith("```")):
        return s
    return s[7 if s[3:7] in ("json", "JSON") else 3 : -3].strip()


def parse_selector_reply(text: str, num_candidates: int) -> int:
    """Parse a selector reply strictly: a JSON object ``{"answer": <int>}`` and nothing else.

    Surrounding whitespace and one Markdown code fence (```json ... ```) are tolerated. Raises
    :class:`SelectorError` with kind ``unparseable`` for anything else (prose, extra keys,
    non-integer or boolean answers) and ``out_of_range`` for an integer outside
    ``0..num_candidates``.
    """
    s = _unfenced((text or "").strip())
    try:
        obj = loads_json(s)
    except ValueError:  # not JSON (JSONDecodeError is a ValueError), or nested too deeply (loads_json)
        raise SelectorError(f"selector reply is not JSON: {text[:120]!r}", "unparseable") from None
    if not isinstance(obj, dict) or set(obj) != {"answer"}:
        raise SelectorError(f'selector reply must be exactly {{"answer": <int>}}, got {text[:120]!r}', "unparseable")
    ans = obj["answer"]
    if isinstance(ans, bool) or not isinstance(ans, int):
        raise SelectorError(f"selector answer must be an integer, got {ans!r}", "unparseable")
    if not 0 <= ans <= num_candidates:
        raise SelectorError(f"selector answer {ans} is outside 0..{num_candidates}", "out_of_range")
    return ans


@dataclass(frozen=True)
class LLMSelectorConfig:
    """Sampling settings of the LLM selector.

    A non-zero temperature lets a retry after a malformed reply come out differently; the
    per-request ``seed`` is derived from ``(seed, seed entity, depth, attempt)`` so servers
    that honour seeds (vLLM, SGLang) reproduce a pool.
    """

    temperature: float = 0.6
    top_p: float = 1.0
    max_new_tokens: int = 32
    seed: int = 0
    system_prompt: str | None = None


_HTTP_STATUS = re.compile(r"answered HTTP (\d{3})")


def _classify_generation_error(message: str) -> str:
    """Failure kind of a GenerationError message (see :class:`SelectorError`)."""
    low = message.lower()
    if "timed out" in low:
        return "timeout"
    status = _HTTP_STATUS.search(message)
    if status:
        code = int(status.group(1))
        return "http_error" if code >= 500 or code == 429 else "bad_request"
    if "cannot reach" in low:
        return "unreachable"
    return "generation_error"


@dataclass
class _Counts:
    calls: int = 0
    ok: int = 0
    failures: Counter = field(default_factory=Counter)


class LLMSelector:
    """Relation selection by a language model behind any :class:`TextGenerator`.

    Each call renders :func:`~searchgym.core.prompts.render_selector` as one user chat message
    (OpenAI-compatible endpoints via ``OpenAICompatibleGenerator``, or an in-process model), and
    parses the reply with :func:`parse_selector_reply`. Failures raise :class:`SelectorError`
    and are counted by kind in :attr:`failures` (thread-safe), so pool statistics can say how
    many calls timed out, found no server, or returned garbage.
    """

    def __init__(self, generator, config: LLMSelectorConfig | None = None) -> None:
        if not hasattr(generator, "generate"):
            raise InvalidTypeError(
                f"LLMSelector needs a TextGenerator (an object with generate(prompts, config)), got "
                f"{type(generator).__name__}"
            )
        self.generator = generator
        self.config = config or LLMSelectorConfig()
        self._lock = threading.Lock()
        self._counts = _Counts()

    def describe(self) -> dict:
        """Identity for pool fingerprints: the backend class, model and sampling settings."""
        return {
            "kind": "llm",
            "backend": type(self.generator).__name__,
            "model": getattr(self.generator, "model", None),
            "temperature": self.config.temperature,
            "seed": self.config.seed,
        }

    @property
    def calls(self) -> int:
        """Number of selector calls made so far."""
        with self._lock:
            return self._counts.calls

    @property
    def failures(self) -> dict[str, int]:
        """Failed calls by kind (``timeout``, ``unreachable``, ``http_error``, ``unparseable``, ...)."""
        with self._lock:
            return dict(self._counts.failures)

    def stats(self) -> dict:
        """Calls, successes and failures by kind, for logs and pool statistics."""
        with self._lock:
            return {"calls": self._counts.calls, "ok": self._counts.ok, "failures": dict(self._counts.failures)}

    def _record(self, kind: str | None) -> None:
        with self._lock:
            self._counts.calls += 1
            if kind is None:
                self._counts.ok += 1
            else:
                self._counts.failures[kind] += 1

    def build_messages(self, context: SelectionContext) -> list[dict]:
        """The chat messages sent for ``context``."""
        from searchgym.core.prompts import render_selector

        prompt = render_selector(context.path_lines, context.current, context.candidate_texts)
        msgs = [{"role": "system", "content": self.config.system_prompt}] if self.config.system_prompt else []
        return msgs + [{"role": "user", "content": prompt}]

    def select(self, context: SelectionContext) -> int:
        """Ask the model; return its parsed choice or raise :class:`SelectorError`."""
        from searchgym.core.llm import GenerationConfig, GenerationError

        cfg = GenerationConfig(
            max_new_tokens=self.config.max_new_tokens,
            temperature=self.config.temperature,
            top_p=self.config.top_p,
            seed=stable_seed(self.config.seed, context.seed_id, context.depth, context.attempt) & 0x7FFFFFFF,
        )
        try:
            replies = self.generator.generate([self.build_messages(context)], cfg)
        except GenerationError as exc:
            kind = _classify_generation_error(str(exc))
            self._record(kind)
            raise SelectorError(str(exc), kind) from None
        if not isinstance(replies, Sequence) or len(replies) != 1 or not isinstance(replies[0], str):
            self._record("generation_error")
            raise SelectorError(f"generator returned {replies!r:.120} instead of one text", "generation_error")
        try:
            choice = parse_selector_reply(replies[0], len(context.candidates))
        except SelectorError as exc:
            self._record(exc.kind)
            raise
        self._record(None)
        return choice
