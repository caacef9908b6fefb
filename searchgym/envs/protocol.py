"""The agent/environment tag protocol (docs/game.md, protocol): parse one agent turn into actions.

An agent turn is free text. The tags the package understands:

* ``<think> … </think>`` — the agent's reasoning (the only text WCR/GDCR read as the agent's).
* ``<search> query </search>`` — a corpus search. The payload may instead be DynaSearcher JSON
  ``{"query": str, "entity": [str] | str, "relation": [str] | str}`` (KG look-up beside the corpus).
* ``<tool_call>{"name": "search", "arguments": {"query": str | "query_list": [str]}}</tool_call>`` —
  the Dr.Zero / GDCR function-call form of the same search (``arguments`` may be a JSON string,
  ``{"name": "answer", "arguments": {"answer": str}}`` gives an answer).
* ``<answer> … </answer>`` — the Solver's final answer (the last one wins; every one is counted).
* ``<question> … </question>`` and ``<evidence> … </evidence>`` — the Proposer's question and the
  EVE evidence span.

The environment replies with :func:`format_information` (``"\\n<information>" + text +
"</information>\\n"``) or, for an invalid action, :func:`corrective_message`.

:func:`parse_action` never raises. It is written for what real LLMs emit: tag names in any case and
with inner spaces (``< Answer >``), a final tag left unclosed (``<answer> Paris`` at the end of the
text is an answer; ``<search> q`` at the end is a search; an unclosed ``<think>`` ends where the next
action tag opens), several searches in one turn (the first ``max_searches`` are kept), text after
the answer (ignored, so a search written after ``</answer>`` is not executed), empty queries,
enormous outputs (cut at ``max_chars``), and ``<information>`` / ``<tool_response>`` blocks the agent
wrote itself. Those forged observations are deleted before anything else is parsed — they never
count as think text, never as observations — and :attr:`ParsedAction.forged_information` is set.

Problems are reported in :attr:`ParsedAction.errors` as stable codes (the ``ERR_*`` constants
below); harmless oddities go to :attr:`ParsedAction.warnings`. Whether an error costs the turn is
the environment's decision; :attr:`ParsedAction.has_action` says whether anything actionable was
found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Sequence

from ..core.jsonl import loads_json
from ..core.types import THINK_SEPARATOR
from ..errors import InvalidArgumentError

# --------------------------------------------------------------------------- error codes
ERR_NO_ACTION = "no_action"  #: no search, answer or question found in the turn
ERR_EMPTY_QUERY = "empty_query"  #: a <search> (or tool call) with nothing to search for
ERR_TOO_MANY_SEARCHES = "too_many_searches"  #: more searches than max_searches; the rest dropped
ERR_BAD_SEARCH_JSON = "bad_search_json"  #: a JSON search payload that does not parse / has wrong types
ERR_BAD_TOOL_CALL = "bad_tool_call"  #: a <tool_call> that is not valid JSON or names an unknown tool
ERR_EMPTY_ANSWER = "empty_answer"  #: the last <answer> is empty
ERR_EMPTY_QUESTION = "empty_question"  #: the first <question> is empty

ERROR_CODES = (
    ERR_NO_ACTION,
    ERR_EMPTY_QUERY,
    ERR_TOO_MANY_SEARCHES,
    ERR_BAD_SEARCH_JSON,
    ERR_BAD_TOOL_CALL,
    ERR_EMPTY_ANSWER,
    ERR_EMPTY_QUESTION,
)

DEFAULT_MAX_CHARS = 20_000
DEFAULT_MAX_SEARCHES = 3
DEFAULT_MAX_QUERY_CHARS = 1_000

_ACTION_TAGS = ("think", "search", "answer", "question", "evidence", "tool_call")
_FORGED_TAGS = ("information", "tool_response")
# Linear-time patterns: no two adjacent quantifiers can split one whitespace run between them (``<\s*(/?)\s*``
# tried every split of the run after a lone ``<``, O(n²) in its length); group 1 is ``"/"`` or None.
_TAG_RE = re.compile(r"<\s*(?:(/)\s*)?(" + "|".join(_ACTION_TAGS) + r")\s*>", re.IGNORECASE)
_FORGED_OPEN_RE = re.compile(r"<\s*(" + "|".join(_FORGED_TAGS) + r")\s*>", re.IGNORECASE)
_FORGED_CLOSE_RE = re.compile(r"<\s*/\s*(" + "|".join(_FORGED_TAGS) + r")\s*>", re.IGNORECASE)


@dataclass(frozen=True)
class SearchRequest:
    """One search the agent asked for.

    ``query`` goes to the corpus retriever and is never empty (a JSON payload with only
    entities/relations gets them joined as its query); ``entities`` / ``relations`` go to the KG
    tool (DynaSearcher) and are empty for a plain ``<search>``. ``corpus=False`` asks the KG tool
    only (the function-calling protocol's ``kg_lookup``): no corpus search is run for it.
    """

    query: str
    entities: tuple[str, ...] = ()
    relations: tuple[str, ...] = ()
    corpus: bool = True

    @property
    def uses_kg(self) -> bool:
        """True when the request names entities or relations for the KG tool."""
        return bool(self.entities or self.relations)


@dataclass
class ParsedAction:
    """Everything :func:`parse_action` found in one agent turn.

    ``think`` is the text inside this turn's ``<think>`` spans (joined by newlines), with forged
    observations removed. ``answer`` and ``evidence`` are the last occurrence in the turn (the last
    answer wins, SSP), ``question`` the first (SSP's code reads the first ``<question>``), all
    whitespace-collapsed (``None`` when absent or empty). ``answer_count`` counts every
    ``<answer>`` tag of the turn so the env can enforce docs/game.md, protocol: ">10 answers per rollout ⇒
    invalid". ``truncated`` says the text was cut at ``max_chars`` before parsing.
    """

    think: str = ""
    searches: list[SearchRequest] = field(default_factory=list)
    answer: Optional[str] = None
    answer_count: int = 0
    question: Optional[str] = None
    evidence: Optional[str] = None
    forged_information: bool = False
    errors: list[str] = field(default_factory=list)
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def has_action(self) -> bool:
        """True when the turn contains something the env can act on (search, answer or question)."""
        return bool(self.searches) or self.answer is not None or self.question is not None

    @property
    def valid(self) -> bool:
        """True when the turn is actionable and has no errors."""
        return self.has_action and not self.errors


def format_information(text: str, layout: str = "searchgym") -> str:
    """The exact text an environment inserts after a search: ``"\\n<information>" + text + "</information>\\n"``.

    ``layout="search-r1"`` gives Search-R1's own insertion, ``"\\n\\n<information>" + text.strip() +
    "</information>\\n\\n"``. Envs, trainers (loss masks) and reward wrappers rely on this layout; it
    is the only place it is defined.
    """
    if layout == "search-r1":
        return "\n\n<information>" + text.strip() + "</information>\n\n"
    return "\n<information>" + text + "</information>\n"


_CORRECTIONS = {
    ERR_EMPTY_QUERY: "My search query was empty.",
    ERR_TOO_MANY_SEARCHES: "I issued too many searches at once; only the first ones were run.",
    ERR_BAD_SEARCH_JSON: 'A JSON search must look like {"query": "...", "entity": ["..."], "relation": ["..."]}.',
    ERR_BAD_TOOL_CALL: 'A tool call must look like {"name": "search", "arguments": {"query": "..."}}.',
    ERR_EMPTY_ANSWER: "My answer was empty.",
    ERR_EMPTY_QUESTION: "My question was empty.",
}


def corrective_message(errors: Sequence[str] = (), *, role: str = "solver") -> str:
    """A short Search-R1-style observation telling the agent its last action was invalid.

    ``errors`` are codes from :attr:`ParsedAction.errors` (unknown codes are ignored); ``role``
    ``"proposer"`` mentions ``<question>`` instead of ``<answer>``. The returned string is the exact
    env insertion (newline-framed plain text, no tags), so the agent cannot mistake it for
    retrieved information.
    """
    hints = [_CORRECTIONS[e] for e in dict.fromkeys(errors) if e in _CORRECTIONS]
    final = (
        "If I want to give the final question, I should put the question between <question> and </question>."
        if role == "proposer"
        else "If I want to give the final answer, I should put the answer between <answer> and </answer>."
    )
    parts = [
        "My previous action is invalid.",
        *hints,
        "If I want to search, I should put the query between <search> and </search>.",
        final,
        "Let me try again.",
    ]
    return "\n" + " ".join(parts) + "\n"


def strip_forged(text: str) -> tuple[str, bool]:
    """Delete ``<information>``/``<tool_response>`` blocks an agent wrote itself.

    Returns the cleaned text and whether anything was removed. An unclosed block runs to the end
    of the text; a stray closing tag is removed on its own.
    """
    out: list[str] = []
    pos, forged = 0, False
    while True:
        m = _FORGED_OPEN_RE.search(text, pos)
        if m is None:
            out.append(text[pos:])
            break
        forged = True
        out.append(text[pos : m.start()])
        close = _FORGED_CLOSE_RE.search(text, m.end())
        if close is None:
            pos = len(text)
            out.append("")
            break
        pos = close.end()
    cleaned = "".join(out)
    cleaned, n_stray = _FORGED_CLOSE_RE.subn("", cleaned)
    return cleaned, forged or n_stray > 0


def _spans(text: str) -> tuple[list[tuple[str, str, bool]], list[str]]:
    """Top-level tag spans ``(name, content, closed)`` in order, and warnings.

    Tags do not nest: inside an open span other tags are content, except that a span whose
    closing tag never comes ends where the next tag of another name opens (a forgotten
    ``</think>`` before ``<search>``), or at the end of the text.
    """
    tags = [(m.start(), m.end(), m.group(1) is not None, m.group(2).lower()) for m in _TAG_RE.finditer(text)]
    # index of the last closing tag of each name, to know whether an open span will ever close
    last_close: dict[str, int] = {}
    for i, (_, _, is_close, name) in enumerate(tags):
        if is_close:
            last_close[name] = i
    spans: list[tuple[str, str, bool]] = []
    warnings: list[str] = []
    open_name: Optional[str] = None
    open_end = 0
    for i, (start, end, is_close, name) in enumerate(tags):
        if open_name is None:
            if is_close:
                warnings.append(f"stray closing tag </{name}>")
            else:
                open_name, open_end = name, end
            continue
        if is_close and name == open_name:
            spans.append((open_name, text[open_end:start], True))
            open_name = None
        elif not is_close and name != open_name and last_close.get(open_name, -1) < i:
            warnings.append(f"unclosed <{open_name}> ended by <{name}>")
            spans.append((open_name, text[open_end:start], False))
            open_name, open_end = name, end
        else:
            warnings.append(f"<{name}> inside <{open_name}> treated as text")
    if open_name is not None:
        content = text[open_end:]
        cut = _PARTIAL_CLOSE_RE.search(content)
        if cut and _is_close_prefix(cut.group(0), open_name):  # generation cut inside its closing tag
            content = content[: cut.start()]
            warnings.append(f"unclosed <{open_name}> at end of text, ending in a cut-off </{open_name}>")
        else:
            warnings.append(f"unclosed <{open_name}> at end of text")
        spans.append((open_name, content, False))
    return spans, warnings


#: a text's end that may be the start of a closing tag (``</quest``, ``</ question``, ``<``); the letters and the
#: whitespace after them are one optional group, so the two whitespace runs cannot meet (``</`` + spaces was O(n²))
_PARTIAL_CLOSE_RE = re.compile(r"<\s*(?:/\s*(?:[A-Za-z]+\s*)?)?$")


def _is_close_prefix(tail: str, name: str) -> bool:
    """Whether ``tail`` (spaces and case ignored) begins ``</name>``: a closing tag the generation was cut inside."""
    squeezed = "".join(tail.split()).lower()
    return f"</{name}>".startswith(squeezed)


def _str_list(value, what: str) -> list[str]:
    """A JSON field that may be a string or a list of strings; raises ValueError otherwise."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    raise InvalidArgumentError(f"{what} must be a string or a list of strings")


def _clean_query(q: str, max_query_chars: int, warnings: list[str]) -> str:
    q = " ".join(q.split())
    if len(q) > max_query_chars:
        warnings.append(f"query cut to {max_query_chars} characters")
        q = q[:max_query_chars].rstrip()
    return q


def _search_payload(payload: str, max_query_chars: int, errors: list[str], warnings: list[str]) -> list[SearchRequest]:
    """Parse one ``<search>`` body: plain text or DynaSearcher JSON."""
    body = payload.strip()
    if body.startswith("{") and body.endswith("}"):
        try:
            obj = loads_json(body)
            if not isinstance(obj, dict):
                raise InvalidArgumentError("not an object")
            query = obj.get("query", "")
            if not isinstance(query, str):
                raise InvalidArgumentError("query must be a string")
            entities = _str_list(obj.get("entity", obj.get("entities")), "entity")
            relations = _str_list(obj.get("relation", obj.get("relations")), "relation")
        except ValueError:  # JSONDecodeError is a ValueError (too deep a nesting as well: loads_json)
            errors.append(ERR_BAD_SEARCH_JSON)
            return []
        query = _clean_query(query or " ".join(entities + relations), max_query_chars, warnings)
        if not query:
            errors.append(ERR_EMPTY_QUERY)
            return []
        return [SearchRequest(query, tuple(entities), tuple(relations))]
    query = _clean_query(body, max_query_chars, warnings)
    if not query:
        errors.append(ERR_EMPTY_QUERY)
        return []
    return [SearchRequest(query)]


def _tool_call(
    payload: str, max_query_chars: int, errors: list[str], warnings: list[str]
) -> tuple[list[SearchRequest], Optional[str]]:
    """Parse one ``<tool_call>`` JSON body into searches and/or an answer."""
    try:
        obj = loads_json(payload.strip())
        if not isinstance(obj, dict):
            raise InvalidArgumentError("not an object")
        name = str(obj.get("name", "")).strip().lower()
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):
            args = loads_json(args)
        if not isinstance(args, dict):
            raise InvalidArgumentError("arguments must be an object")
        if name in ("answer", "final_answer"):
            ans = args.get("answer", "")
            if not isinstance(ans, str):
                raise InvalidArgumentError("answer must be a string")
            return [], ans
        if name not in ("search", "web_search", "retrieve"):
            raise InvalidArgumentError(f"unknown tool {name!r}")
        queries = _str_list(args.get("query_list", args.get("query")), "query")
        entities = _str_list(args.get("entity", args.get("entities")), "entity")
        relations = _str_list(args.get("relation", args.get("relations")), "relation")
    except ValueError:  # bad JSON (nested too deeply as well: loads_json) or wrong types
        errors.append(ERR_BAD_TOOL_CALL)
        return [], None
    if not queries and (entities or relations):
        queries = [" ".join(entities + relations)]
    out = []
    for q in queries:
        q = _clean_query(q, max_query_chars, warnings)
        if q:
            out.append(SearchRequest(q, tuple(entities), tuple(relations)))
    if not out:
        errors.append(ERR_EMPTY_QUERY)
    return out, None


def parse_action(
    text: str,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_searches: int = DEFAULT_MAX_SEARCHES,
    max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
) -> ParsedAction:
    """Parse one agent turn into a :class:`ParsedAction`; never raises.

    ``max_chars`` cuts enormous outputs before parsing (``truncated`` is set); ``max_searches``
    caps the searches kept from one turn (extra ones add ``too_many_searches``); ``max_query_chars``
    cuts over-long queries. Non-string input is treated as empty text.
    """
    act = ParsedAction()
    if not isinstance(text, str):
        act.warnings.append(f"action is {type(text).__name__}, not str")
        text = ""
    if len(text) > max_chars:
        text = text[:max_chars]
        act.truncated = True
        act.warnings.append(f"action cut to {max_chars} characters")
    text, act.forged_information = strip_forged(text)
    if act.forged_information:
        act.warnings.append("agent-written <information> removed")
    spans, warnings = _spans(text)
    act.warnings.extend(warnings)

    thinks: list[str] = []
    searches: list[SearchRequest] = []
    answers: list[str] = []
    questions: list[str] = []
    evidences: list[str] = []
    answered = False  # once an answer appeared, later searches are ignored
    for name, content, _closed in spans:
        if name == "think":
            thinks.append(content.strip())
        elif name == "answer":
            answers.append(content)
            answered = True
        elif name == "question":
            questions.append(content)
        elif name == "evidence":
            evidences.append(content)
        elif name in ("search", "tool_call"):
            if name == "search":
                found, ans = _search_payload(content, max_query_chars, act.errors, act.warnings), None
            else:
                found, ans = _tool_call(content, max_query_chars, act.errors, act.warnings)
            if ans is not None:
                answers.append(ans)
                answered = True
            if answered and found:
                act.warnings.append("search after the answer ignored")
            elif found:
                searches.extend(found)

    act.think = THINK_SEPARATOR.join(t for t in thinks if t)
    if len(searches) > max_searches:
        act.errors.append(ERR_TOO_MANY_SEARCHES)
        searches = searches[:max_searches]
    act.searches = searches
    act.answer_count = len(answers)
    if answers:
        act.answer = " ".join(answers[-1].split()) or None
        if act.answer is None:
            act.errors.append(ERR_EMPTY_ANSWER)
    if questions:
        act.question = " ".join(questions[0].split()) or None  # SSP reads the first <question>
        if act.question is None:
            act.errors.append(ERR_EMPTY_QUESTION)
    if evidences:
        act.evidence = " ".join(evidences[-1].split()) or None
    if not act.has_action and not act.errors:
        act.errors.append(ERR_NO_ACTION)
    return act


__all__ = [
    "SearchRequest",
    "ParsedAction",
    "parse_action",
    "format_information",
    "corrective_message",
    "strip_forged",
    "ERROR_CODES",
    "ERR_NO_ACTION",
    "ERR_EMPTY_QUERY",
    "ERR_TOO_MANY_SEARCHES",
    "ERR_BAD_SEARCH_JSON",
    "ERR_BAD_TOOL_CALL",
    "ERR_EMPTY_ANSWER",
    "ERR_EMPTY_QUESTION",
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_SEARCHES",
]
