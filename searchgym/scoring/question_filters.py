"""SSP's rule filters for proposed questions (docs/game.md, self-play game, SSP code defaults).

A question the Proposer emits is kept only if it passes every rule; the first failing rule's
stable reason code is reported so envs can log rejection counts by reason:

==================== ============================================================
reason               rule
==================== ============================================================
``no_question``      the rollout produced no (non-blank) question
``too_short``        fewer than ``min_chars`` characters (default 10)
``too_long``         more than ``max_chars`` characters (default 1000)
``too_few_words``    fewer than ``min_words`` whitespace-separated words (default 10)
``answer_leak``      the answer a* (lowercased) is a substring of the question (lowercased)
``no_information``   the trajectory never received an ``<information>`` block
``too_few_searches`` fewer than ``min_searches`` searches (default 2; with
                     ``min_searches_at_most_required``, that minimum capped at the prompt's count), or
                     -- with ``searches_at_least_required`` -- fewer than the prompt asked for
``duplicate_queries`` the same query (case/whitespace-insensitive) was searched twice
==================== ============================================================

The leak test is SSP's plain substring test on the canonical answer; ``leak_check_aliases=True``
extends it to every alias (stricter; a short alias can then reject harmless questions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

from ..core.answers import gold_list
from ..core.types import Trajectory
from ..errors import InvalidArgumentError

REASONS = (
    "no_question",
    "too_short",
    "too_long",
    "too_few_words",
    "answer_leak",
    "no_information",
    "too_few_searches",
    "duplicate_queries",
)


@dataclass(frozen=True)
class FilterConfig:
    """Thresholds of the rule filters; set a rule's flag False (or its bound to 0) to disable it."""

    min_chars: int = field(default=10, metadata={"help": "Shortest question accepted, in characters (0: no bound)."})
    max_chars: int = field(default=1000, metadata={"help": "Longest question accepted, in characters (0: no bound)."})
    min_words: int = field(default=10, metadata={"help": "Fewest words a question must have (0: no bound)."})
    min_searches: int = field(
        default=2, metadata={"help": "Fewest search calls the Proposer's trajectory must have made (0: no bound)."}
    )
    searches_at_least_required: bool = field(
        default=False,
        metadata={
            "help": "Also reject a question whose Proposer searched fewer times than its prompt's required search "
            "count (the target's hop count; SSP's prompt: the searches 'must precisely match the specified search "
            "count'). Off in SSP's code filters, which check min_searches only."
        },
    )
    min_searches_at_most_required: bool = field(
        default=False,
        metadata={
            "help": "Lower min_searches to the prompt's required search count (the target's hop count) where that is "
            "smaller, so a 1-hop target's question written after its one search is kept. Off in SSP's code filters, "
            "which ask min_searches of every question, while its prompt asks a 1-hop target for one search."
        },
    )
    require_information: bool = field(
        default=True, metadata={"help": "Reject a question whose trajectory retrieved no information at all."}
    )
    forbid_duplicate_queries: bool = field(
        default=True, metadata={"help": "Reject a trajectory that repeats a search query (case and spacing ignored)."}
    )
    forbid_answer_in_question: bool = field(
        default=True, metadata={"help": "Reject a question that contains its canonical answer (case ignored)."}
    )
    leak_check_aliases: bool = field(
        default=False,
        metadata={"help": "Also look for the answer's aliases in the question (with forbid_answer_in_question)."},
    )

    def __post_init__(self) -> None:
        for name in ("min_chars", "max_chars", "min_words", "min_searches"):
            if getattr(self, name) < 0:
                raise InvalidArgumentError(f"FilterConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.max_chars and self.max_chars < self.min_chars:
            raise InvalidArgumentError(
                f"FilterConfig.max_chars ({self.max_chars}) is below min_chars ({self.min_chars})"
            )


@dataclass(frozen=True)
class FilterResult:
    """Outcome of :func:`check_question`: ``ok``, the first failing rule's ``reason`` code (None
    when ok), and ``details`` (the measured quantities: chars, words, searches, ...)."""

    ok: bool
    reason: Optional[str] = None
    details: dict = field(default_factory=dict)


def _norm_query(q: str) -> str:
    return " ".join(q.lower().split())


def _information_blocks(trajectory: Trajectory) -> int:
    """Env insertions that were retrieved information (not corrective messages)."""
    return sum(t.information.count("<information>") for t in trajectory.turns)


def check_question(
    question: Optional[str],
    answers: Union[str, Sequence[str]],
    trajectory: Trajectory,
    config: Optional[FilterConfig] = None,
    *,
    required_searches: Optional[int] = None,
) -> FilterResult:
    """Apply the SSP rule filters to a proposed ``question`` for the answer(s) ``answers``.

    ``answers`` is the canonical answer a* or a list whose first item is a* (aliases after it);
    ``trajectory`` is the Proposer rollout that produced the question (its turns' searches and
    env-inserted information are checked). ``required_searches``: the search count the Proposer's
    prompt asked for: enforced as a minimum when ``config.searches_at_least_required`` is set, and the cap on
    ``min_searches`` when ``config.min_searches_at_most_required`` is. Returns the first
    failure, in the order of :data:`REASONS`, or ``FilterResult(ok=True)``.
    """
    cfg = config or FilterConfig()
    golds = gold_list(answers)
    q = " ".join(question.split()) if isinstance(question, str) else ""
    queries = [_norm_query(s.query) for t in trajectory.turns for s in t.searches]
    dupes = sorted({x for x in queries if queries.count(x) > 1})
    details = {
        "chars": len(q),
        "words": len(q.split()),
        "searches": len(queries),
        "information_blocks": _information_blocks(trajectory),
        "duplicate_queries": dupes,
    }

    def fail(reason: str, **extra) -> FilterResult:
        return FilterResult(False, reason, {**details, **extra})

    if not q:
        return fail("no_question")
    if len(q) < cfg.min_chars:
        return fail("too_short")
    if cfg.max_chars and len(q) > cfg.max_chars:
        return fail("too_long")
    if len(q.split()) < cfg.min_words:
        return fail("too_few_words")
    if cfg.forbid_answer_in_question:
        checked = golds if cfg.leak_check_aliases else golds[:1]
        leaked = [a for a in checked if a.strip() and a.strip().lower() in q.lower()]
        if leaked:
            return fail("answer_leak", leaked=leaked)
    if cfg.require_information and details["information_blocks"] == 0:
        return fail("no_information")
    floor = cfg.min_searches
    if cfg.min_searches_at_most_required and required_searches:
        floor = min(floor, required_searches)
    if len(queries) < floor:
        return fail("too_few_searches")
    if cfg.searches_at_least_required and required_searches and len(queries) < required_searches:
        return fail("too_few_searches", required=required_searches)
    if cfg.forbid_duplicate_queries and dupes:
        return fail("duplicate_queries")
    return FilterResult(True, None, details)


def filter_settings(items: Sequence[str], *, option: str = "--filter") -> dict[str, Any]:
    """Command-line ``FIELD=VALUE`` items (each VALUE read as YAML) as a mapping of :class:`FilterConfig` fields,
    what an env's ``filter_config`` takes; checked now, so an item without ``=``, an unknown field (one line naming
    the valid ones) or a value of the wrong type fails before any env is made. ``option`` names the flag in errors."""
    from dataclasses import fields

    from ..core.config_io import dataclass_from_mapping, override_value

    known = [f.name for f in fields(FilterConfig)]
    settings: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidArgumentError(f"{option} {item!r} must look like FIELD=VALUE (e.g. min_searches=1)")
        if key not in known:
            raise InvalidArgumentError(f"{option} {key}: no such rule filter; valid: {', '.join(known)}")
        settings[key] = override_value(raw, item, what=option)
    try:
        dataclass_from_mapping(FilterConfig, settings, what="rule filter")
    except ValueError as exc:
        raise InvalidArgumentError(f"{option}: {exc}") from None
    return settings


__all__ = ["FilterConfig", "FilterResult", "check_question", "filter_settings", "REASONS"]
