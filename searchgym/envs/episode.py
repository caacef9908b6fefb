"""The one rollout engine every text env shares: apply agent turns, run searches, record.

A :class:`Rollout` owns one :class:`~searchgym.core.types.Trajectory` (one role, one task).
:func:`advance` applies one turn to any number of rollouts at once — the single-role envs pass
one, the group and self-play envs pass G — and sends every search of that turn to the retriever
in a single ``batch_search`` call, so batching is the same code path as a lone rollout.

Per turn (docs/game.md, protocol): the action text is cut to ``max_action_chars`` and parsed with
:func:`~searchgym.envs.protocol.parse_action`; a Solver answer (or a Proposer question) ends the
rollout (searches in the same turn are not run); otherwise the turn's searches run and the env
inserts :func:`~searchgym.envs.protocol.format_information` of the results; a turn with neither
costs the turn and gets :func:`~searchgym.envs.protocol.corrective_message`. ``max_turns`` turns
without an answer truncate the rollout. More than ``max_answers`` ``<answer>`` tags in one
rollout make it invalid (never rewarded).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..core.arg_checks import check_choice, check_count
from ..core.prompts import check_protocol
from ..core.types import Role, SearchCall, Segment, Task, Trajectory, Turn
from ..errors import InvalidArgumentError, InvalidTypeError
from ..retrieval.base import DEFAULT_TOP_K, Retriever, check_layout, format_hits
from . import function_calling, protocol

logger = logging.getLogger(__name__)

__all__ = ["SearchEngine", "Rollout", "advance", "coerce_action", "DEFAULT_MAX_TURNS", "DEFAULT_MAX_ACTION_CHARS"]

DEFAULT_MAX_TURNS = 10  # SSP and the WCR paper: at most 10 interaction rounds
DEFAULT_MAX_ACTION_CHARS = 20_000  # longer agent turns are cut (and recorded cut)
DEFAULT_DOC_MAX_CHARS = 1_000  # per-document cap in an <information> block
DEFAULT_MAX_ANSWERS = 10  # docs/game.md, protocol decision: more than 10 <answer> tags in a rollout → invalid
#: what a rollout with more than ``max_answers`` answer tags gets: ``invalid`` (this project's decision) or
#: ``ssp`` (SSP's code: valid, and a correct answer is worth :data:`SSP_OVERFLOW_SCALE`)
TOO_MANY_ANSWERS = ("invalid", "ssp")
SSP_OVERFLOW_SCALE = 0.25


def coerce_action(action: Any) -> str:
    """The action as text: ``str`` as is, ``bytes`` decoded as UTF-8 (undecodable bytes replaced).

    Anything else is a programming error in the caller's loop and raises :class:`TypeError`.
    """
    if isinstance(action, str):
        return str(action)
    if isinstance(action, (bytes, bytearray)):
        return bytes(action).decode("utf-8", errors="replace")
    raise InvalidTypeError(f"an action must be a str (the agent's text for this turn), got {type(action).__name__}")


class SearchEngine:
    """Runs parsed search requests: corpus top-k via the retriever, KG triples via the KG tool.

    ``kg`` is any object with ``lookup(entities, relations, query) -> list[str]``
    (:class:`searchgym.retrieval.kg.KGLookup`); without one, JSON searches still search the
    corpus with their query. ``doc_max_chars`` caps each document's text in the observation.
    ``layout``: ``"searchgym"`` or ``"search-r1"`` (Search-R1's exact document and
    ``<information>`` text, for evaluating Search-R1 checkpoints on what they were trained on).
    """

    def __init__(
        self,
        retriever: Retriever,
        kg: Any = None,
        *,
        top_k: int = DEFAULT_TOP_K,
        doc_max_chars: Optional[int] = DEFAULT_DOC_MAX_CHARS,
        layout: str = "searchgym",
    ) -> None:
        top_k = check_count("top_k", top_k)
        doc_max_chars = check_count("doc_max_chars", doc_max_chars, optional=True, hint="None: no cap")
        self.layout = check_layout(layout)
        self.retriever = retriever
        self.kg = kg
        self.top_k = top_k
        self.doc_max_chars = doc_max_chars

    def run(self, requests: Sequence[protocol.SearchRequest]) -> list[tuple[str, SearchCall]]:
        """For each request: the observation text and the :class:`SearchCall` record."""
        if not requests:
            return []
        corpus = [r for r in requests if r.corpus]
        found = iter(self.retriever.batch_search([r.query for r in corpus], self.top_k) if corpus else [])
        out = []
        for req in requests:
            hits = next(found) if req.corpus else []
            text = format_hits(hits, max_chars=self.doc_max_chars, layout=self.layout) if req.corpus else ""
            triples: list[str] = []
            if req.uses_kg and self.kg is not None:
                triples = list(self.kg.lookup(list(req.entities), list(req.relations), req.query))
                if triples:
                    text = (text + "\n" if text else "") + "KG facts:\n" + "\n".join(triples)
            call = SearchCall(
                query=req.query,
                entities=list(req.entities),
                relations=list(req.relations),
                doc_ids=[h.doc_id for h in hits],
                titles=[h.title for h in hits],
                kg_triples=triples,
            )
            out.append((text or "No results.", call))
        return out


@dataclass
class _Pending:
    """A parsed turn waiting for its search results (``tools``: the function-calling form of the turn)."""

    text: str
    parsed: protocol.ParsedAction
    run_searches: bool
    tools: Optional[function_calling.ToolTurn] = None


class Rollout:
    """One role's rollout on one task; see the module docstring for the turn rules."""

    def __init__(
        self,
        role: Role,
        task: Task,
        prompt: str,
        *,
        max_turns: int = DEFAULT_MAX_TURNS,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
        max_answers: int = DEFAULT_MAX_ANSWERS,
        max_searches: int = protocol.DEFAULT_MAX_SEARCHES,
        protocol: str = "tags",  # noqa: F811 - the module of the same name is not used in __init__
        kg: bool = False,
        too_many_answers: str = "invalid",
    ) -> None:
        self.too_many_answers = check_choice("too_many_answers", too_many_answers, TOO_MANY_ANSWERS)
        max_turns = check_count("max_turns", max_turns)
        max_action_chars = check_count("max_action_chars", max_action_chars)
        self.protocol = check_protocol(protocol)
        self.kg = kg
        self.max_turns = max_turns
        self.max_action_chars = max_action_chars
        self.max_answers = max_answers
        self.max_searches = max_searches
        self.answer_count = 0
        self.trajectory = Trajectory(role=role, task=task, prompt=prompt, segments=[Segment(prompt, "prompt")])
        self.trajectory.metadata.update(
            {"invalid_turns": 0, "forged_information": False, "answer_count": 0, "max_turns": max_turns}
        )
        if self.protocol == "function_calling":
            self.trajectory.metadata["protocol"] = self.protocol
            self.trajectory.metadata["tools"] = function_calling.tool_schemas(kg=kg, answer=role == "solver")

    @property
    def done(self) -> bool:
        """Whether the rollout has ended (answer/question given or max turns reached)."""
        return self.trajectory.terminated or self.trajectory.truncated

    @property
    def last_turn(self) -> Optional[Turn]:
        """The most recent turn, if any."""
        return self.trajectory.turns[-1] if self.trajectory.turns else None

    def _prepare(self, action: Any) -> _Pending:
        tools = None
        if self.protocol == "function_calling":
            message = action if isinstance(action, dict) else coerce_action(action)
            tools = function_calling.parse_message(
                message, kg=self.kg, max_chars=self.max_action_chars, max_searches=self.max_searches
            )
            text, parsed = tools.text, tools.parsed
            if len(text) >= self.max_action_chars or parsed.truncated:
                self.trajectory.metadata["action_cut"] = True
        else:
            text = coerce_action(action)
            if len(text) > self.max_action_chars:
                text = text[: self.max_action_chars]
                self.trajectory.metadata["action_cut"] = True
            parsed = protocol.parse_action(text, max_chars=self.max_action_chars, max_searches=self.max_searches)
        final = parsed.answer if self.trajectory.role == "solver" else parsed.question
        return _Pending(text, parsed, run_searches=final is None and bool(parsed.searches), tools=tools)

    def _finish(self, pending: _Pending, results: list[tuple[str, SearchCall]], layout: str = "searchgym") -> str:
        traj, parsed = self.trajectory, pending.parsed
        turn = Turn(
            index=len(traj.turns),
            action=pending.text,
            think=parsed.think,
            answer=parsed.answer,
            question=parsed.question,
            evidence=parsed.evidence,
            forged_information=parsed.forged_information,
            error=";".join(parsed.errors) or None,
        )
        self.answer_count += parsed.answer_count
        traj.metadata["answer_count"] = self.answer_count
        if parsed.forged_information:
            traj.metadata["forged_information"] = True
        if self.answer_count > self.max_answers and traj.valid:
            if self.too_many_answers == "ssp":  # SSP's code: still scored, a correct answer earns 0.25
                traj.metadata["reward_scale"] = SSP_OVERFLOW_SCALE
            else:
                traj.valid = False
                traj.metadata["invalid_reason"] = "too_many_answers"
        final = parsed.answer if traj.role == "solver" else parsed.question
        inserted = ""
        if final is not None:
            traj.answer = parsed.answer
            if traj.role == "proposer":
                traj.question, traj.evidence = parsed.question, parsed.evidence
            traj.terminated = True
        elif pending.run_searches:
            turn.searches = [call for _, call in results]
            inserted = protocol.format_information("\n".join(text for text, _ in results), layout)
        else:
            traj.metadata["invalid_turns"] += 1
            inserted = protocol.corrective_message(parsed.errors, role=traj.role)
        turn.information = inserted if pending.run_searches else ""
        if pending.tools is not None and final is None:  # the tool messages are what the model is sent
            texts = [text for text, _ in results] if pending.run_searches else []
            turn.messages = function_calling.tool_messages(pending.tools, texts, role=traj.role)
            inserted = function_calling.render_messages(turn.messages)
        traj.turns.append(turn)
        if pending.text:
            traj.segments.append(Segment(pending.text, "agent", turn.index))
        if len(traj.turns) >= self.max_turns and not traj.terminated:
            traj.truncated = True
        if traj.terminated:
            return ""
        if inserted:
            traj.segments.append(Segment(inserted, "env", turn.index))
        return inserted


def advance(rollouts: Sequence[Rollout], actions: Sequence[Any], engine: SearchEngine) -> list[str]:
    """Apply one turn to each rollout (finished rollouts are skipped and get ``""``).

    Every search of every rollout this turn goes to the retriever in one batch. Returns the text
    the env inserted for each rollout (``""`` once a rollout has finished).
    """
    if len(rollouts) != len(actions):
        raise InvalidArgumentError(f"got {len(actions)} actions for {len(rollouts)} rollouts")
    pending: list[Optional[_Pending]] = [None if r.done else r._prepare(a) for r, a in zip(rollouts, actions)]
    requests = [req for p in pending if p is not None and p.run_searches for req in p.parsed.searches]
    results = engine.run(requests)
    out, pos = [], 0
    for r, p in zip(rollouts, pending):
        if p is None:
            out.append("")
            continue
        n = len(p.parsed.searches) if p.run_searches else 0
        out.append(r._finish(p, results[pos : pos + n], engine.layout))
        pos += n
    return out
