"""A played game in words: why a question was rejected and what each reward is made of.

``searchgym play`` and ``searchgym demo`` print every game with :func:`game_lines`: the proposed
question and its gold answer, whether it was verified (and if not, the rejection reason in words:
:func:`rejection_text`), which question the Solvers played, and every reward with its components
(:func:`reward_text`), e.g. ``proposer reward 0.60 = 1 − solver accuracy 0.40`` or ``1.30 = outcome
1.00 + DynaSearcher gain 0.30``. The components are the ones the env and the reward wrappers put in
each reward event (docs/rewards.md); a part of a reward no component explains is printed as
``other terms`` rather than hidden, so the printed sum always equals the reward.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

__all__ = ["rejection_text", "reward_text", "game_lines"]

_EPS = 1e-6

# filter and rollout reasons (searchgym.scoring.question_filters.REASONS and the rollout's own), in words
_REASON_WORDS = {
    "no_question": "the Proposer wrote no <question>",
    "too_short": "the question has {chars} characters, fewer than the rule filter's minimum (default 10)",
    "too_long": "the question has {chars} characters, more than the rule filter's maximum (default 1000)",
    "too_few_words": "the question has {words} words, fewer than the rule filter's minimum (default 10)",
    "answer_leak": "the question contains the answer {leaked}",
    "no_information": "the Proposer never retrieved any <information>",
    "too_few_searches": "the Proposer searched {searches} time(s), fewer than the rule filter's minimum (default 2)",
    "duplicate_queries": "the Proposer repeated the search {duplicate_queries}",
    "too_many_answers": "the Proposer's rollout wrote more than 10 answer tags (invalid rollout)",
    "invalid_rollout": "the Proposer's rollout was invalid",
}


def _fmt(x: Any) -> str:
    return f"{float(x):.2f}" if isinstance(x, (int, float)) else str(x)


def rejection_text(validation: Optional[Mapping], answers: Sequence[str] = ()) -> str:
    """Why a question was rejected, in words, ending with its reason code; ``""`` for a valid one.

    ``validation`` is ``info["validation"]`` of ``KGSelfPlay-v0``/``KGProposer-v0``; ``answers`` the
    gold answers (named when the verifier answered something else).
    """
    if not validation or validation.get("valid"):
        return ""
    reason = str(validation.get("reason"))
    details = dict(validation.get("details") or {})
    if reason == "verifier_incorrect":
        said = validation.get("prediction")
        gold = f" (gold answer {answers[0]!r})" if answers else ""
        what = f"answered {said!r}" if said else "found no answer"
        words = (
            f"the RAG verifier, answering from the Proposer's retrieved documents plus noise documents without "
            f"search, {what}{gold}: the documents do not support the answer, or the question is ambiguous"
        )
    elif reason == "verifier_error":
        words = f"the RAG verifier failed ({validation.get('error')}); a question that cannot be verified is rejected"
    elif reason == "too_few_searches" and details.get("required"):
        words = (
            f"the Proposer searched {details.get('searches', '?')} time(s), fewer than the {details['required']} its "
            "prompt asked for (filter searches_at_least_required)"
        )
    elif reason in _REASON_WORDS:
        fields = {k: details.get(k, "?") for k in ("chars", "words", "searches")}
        fields["leaked"] = ", ".join(map(repr, details.get("leaked") or answers[:1]))
        fields["duplicate_queries"] = ", ".join(map(repr, details.get("duplicate_queries") or ()))
        words = _REASON_WORDS[reason].format(**fields)
    else:
        words = "rejected"
    return f"{words} [{reason}]"


def _sum_text(reward: float, terms: list[tuple[str, float]], notes: list[str], rest: str = "other terms") -> str:
    """``reward = t1 + t2 …``; whatever the terms leave unexplained is shown as a ``rest`` term."""
    left = reward - sum(v for _, v in terms)
    if abs(left) > _EPS or not terms:
        terms = terms + [(rest, left)]
    body = " + ".join(f"{label} {_fmt(v)}" for label, v in terms)
    return f"{_fmt(reward)} = {body}" + "".join(f"; {n}" for n in notes)


#: the search-count discounts: (reward component, printed term, the component counting the searches, its note)
_SEARCH_DISCOUNTS = (
    ("search_discount", "extra-search discount", "extra_searches", "beyond"),
    ("short_search_discount", "short-search discount", "missing_searches", "short of"),
)


def _solver_text(reward: float, c: Mapping) -> str:
    terms: list[tuple[str, float]] = []
    notes: list[str] = []
    weighted: list[str] = []  # terms whose weight the components do not carry: shown as the remainder
    if "dyna_acc" in c:  # DynaSearcher replaces the outcome (innermost)
        terms += [("DynaSearcher accuracy", c["dyna_acc"]), ("DynaSearcher gain", c.get("dyna_gain", 0.0))]
        notes.append(f"gain = α·(recall {_fmt(c.get('dyna_recall', 0))} − penalty {_fmt(c.get('dyna_penalty', 0))})")
    elif "eve_em" in c:  # EVE replaces the outcome (innermost)
        terms.append(("exact match", c["eve_em"]))
        weighted.append("λ_E·evidence F1")
        notes.append(f"evidence F1 {_fmt(c.get('eve_evidence_f1', 0))}")
    else:
        terms.append(("outcome", c.get("outcome", 0.0)))
    if "wcr_bonus" in c:
        terms.append(("WCR bonus", c["wcr_bonus"]))
        coverage = (
            f"waypoint coverage g {_fmt(c.get('wcr_coverage', 0))}, g̃ {_fmt(c.get('wcr_normalised_coverage', 0))}"
        )
        if "wcr_answered_waypoint" in c:  # waypoint_answer_credit=False: no bonus for an answer at a waypoint
            answered = "this answer is a waypoint" if c["wcr_answered_waypoint"] else "this answer is not a waypoint"
            notes.append(
                "WCR bonus = α·g̃ for a wrong answer that is not a waypoint, 0 for a right one, no answer or a waypoint "
                f"({answered}; {coverage})"
            )
        else:
            notes.append(f"WCR bonus = α·g̃ for a wrong answer, 0 for a right one or no answer ({coverage})")
    for term, label, count, where in _SEARCH_DISCOUNTS:
        if term in c:
            terms.append((label, c[term]))
            notes.append(f"{c.get(count, 0)} search(es) {where} the question's hops")
    if "gdcr_total" in c:
        weighted.append("weight·GDCR total")
        notes.append(f"GDCR step rewards total {_fmt(c['gdcr_total'])}, used by the SAPO step advantage")
    return _sum_text(reward, terms, notes, " + ".join(weighted) or "other terms")


def _proposer_text(reward: float, c: Mapping) -> str:
    if "eve_valid" in c:  # EVE replaces the Proposer's reward
        terms = [("½·format", 0.5 * float(c.get("eve_format", 0.0)))]
        if not c["eve_valid"]:
            return _sum_text(reward, terms, [f"EVE rejected the triple ({c.get('eve_reason')})"])
        terms.append(("difficulty R_DZ", c.get("eve_difficulty", 0.0)))
        notes = [f"verifier V {_fmt(c.get('eve_verifier', 0))}, brevity B {_fmt(c.get('eve_brevity', 0))}"]
        return _sum_text(reward, terms, notes, "(λ_V·V + λ_B·B)")
    if not c.get("valid", 1.0):
        text = f"{_fmt(reward)} for a rejected question (SSP: 0, never a penalty)"
        return text if abs(reward) <= _EPS else _sum_text(reward, [], [text])
    if "solve_rate" in c:
        text = f"{_fmt(reward)} = 1 − solver accuracy {_fmt(c['solve_rate'])}"
        return text if abs(reward - (1.0 - float(c["solve_rate"]))) <= _EPS else _sum_text(reward, [], [text])
    return _sum_text(reward, [("question verified", c.get("valid", 1.0))], ["a lone Proposer env rewards validity"])


def reward_text(event: Mapping) -> str:
    """One reward event as ``reward = its terms``, read from its ``components``."""
    c = event.get("components") or {}
    reward = float(event["reward"])
    return _proposer_text(reward, c) if event.get("role") == "proposer" else _solver_text(reward, c)


_SOURCE = {
    "replayed": "a verified question replayed from the buffer",
    "dummy": "the fallback template task (empty buffer)",
}


def game_lines(game: int, events: Sequence[Mapping], info: Mapping) -> list[str]:
    """The lines that describe one finished game: question, verification, Solvers' task, their answers (when
    the events carry the trajectories) and every reward as the sum of its terms."""
    lines: list[str] = []
    proposer = info.get("proposer") or next((e.get("trajectory") for e in events if e.get("role") == "proposer"), None)
    task = info.get("task")
    validation = info.get("validation")
    if proposer is not None and validation is not None:
        answers = list(getattr(proposer.task, "answers", None) or [])
        verdict = (
            "question verified"
            if validation.get("valid")
            else "question rejected: " + rejection_text(validation, answers)
        )
        lines.append(f"game {game}: {verdict}")
        lines.append(f"  proposed: {proposer.question!r}; gold answer {answers[0] if answers else None!r}")
        source = _SOURCE.get(str(info.get("replay")))
        if source and task is not None:
            lines.append(f"  the Solvers played {source} instead: {task.question!r} (gold {task.answer!r})")
    else:
        lines.append(
            f"game {game}: question {getattr(task, 'question', None)!r}; gold answer {getattr(task, 'answer', None)!r}"
        )
        if info.get("replay") == "solver_only":
            lines.append("  a solver-only game: no Proposer phase, the Solvers played the subgraph's own question")
    for ev in events:
        if ev.get("role") == "proposer":
            lines.append(f"  proposer reward {reward_text(ev)}")
    solver = [e for e in events if e.get("role") == "solver"]
    said = [(int(e.get("slot", 0)), getattr(e.get("trajectory"), "answer", None)) for e in solver]
    if any(answer is not None for _, answer in said):
        lines.append("  solver answers: " + ", ".join(f"{slot} {answer!r}" for slot, answer in sorted(said)))
    groups: dict[str, list[int]] = {}
    for ev in sorted(solver, key=lambda e: e.get("slot", 0)):
        groups.setdefault(reward_text(ev), []).append(int(ev.get("slot", 0)))
    for text, slots in groups.items():
        who = f"solver {slots[0]}" if len(slots) == 1 else f"solvers {', '.join(map(str, slots))}"
        lines.append(f"  {who} reward {text}")
    return lines
