"""The function-calling protocol: tools instead of tags, message-level turns (beside :mod:`.protocol`).

What Qwen2.5/3-class models, TRL's ``environment_factory`` and verl's tool agents expect. The env
offers JSON tool schemas (:func:`tool_schemas`):

* ``search(query)`` — the corpus search (top-k documents, Search-R1 ``Doc i (Title: "t") text`` layout);
* ``kg_lookup(entity, relation)`` — the KG look-up, only when the env's KG tool is on (DynaSearcher);
* ``answer(answer)`` — the final answer (ends the Solver's rollout).

An agent turn is one assistant message, given either as the model's raw text (tool calls in the Hermes
layout Qwen2.5/3 emit: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``) or as a parsed
message dict (``{"role": "assistant", "content", "reasoning_content"?, "tool_calls": [{"type":
"function", "function": {"name", "arguments"}}]}``, the form of OpenAI-compatible servers and of
``tokenizer.parse_response``; a ``<tool_call>`` block such a parser left in the content because it
could not read it counts as a malformed call). :func:`parse_message` reads it into the same
:class:`~searchgym.envs.protocol.ParsedAction` the tag protocol gives (so rollouts, judging, rewards
and exports are shared) plus the individual :class:`ToolCall` s, and **never raises**.

* The reasoning (WCR's T_i) is the message's ``reasoning_content`` and its ``<think>`` spans; a
  message with neither counts its plain content (tool calls and ``<answer>``/``<question>``/
  ``<evidence>`` spans removed) as reasoning — in this protocol the content channel *is* the
  reasoning channel.
* An answer is an ``answer`` call or an ``<answer>`` tag in the content (the last one wins, every one
  is counted); a Proposer's question is a ``<question>`` tag in the content. ``<search>`` tags in the
  content are not run (a warning): searches are tool calls.
* A call with malformed JSON arguments, an unknown tool name or missing / mistyped arguments is
  answered by a ``role: tool`` message that says what was wrong and how to call the tool
  (``bad_tool_call`` / ``empty_query`` in :attr:`ParsedAction.errors`); more than ``max_searches``
  search calls in one message run the first ones and the rest get a "too many calls" reply.

The env replies with :func:`tool_messages`: one ``role: tool`` message per call, in call order (the
search results, or the error), or — for a message with no tool call and no answer — one ``role:
user`` correction. The exact tokens of those messages come from the tokenizer's chat template
(:class:`searchgym.core.chat_template.ToolChatEncoder`); :func:`render_messages` is their text view
in the trajectory's ``env`` segments. A turn's ``information`` is the same
``<information>`` text the tag protocol would insert for the same searches, so filters, the RAG
verifier and every reward wrapper read both protocols alike.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from ..core.jsonl import loads_json
from ..core.types import THINK_SEPARATOR
from .protocol import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_QUERY_CHARS,
    DEFAULT_MAX_SEARCHES,
    ERR_BAD_TOOL_CALL,
    ERR_EMPTY_ANSWER,
    ERR_EMPTY_QUERY,
    ERR_NO_ACTION,
    ERR_TOO_MANY_SEARCHES,
    ParsedAction,
    SearchRequest,
    parse_action,
)

__all__ = [
    "TOOL_SEARCH",
    "TOOL_KG",
    "TOOL_ANSWER",
    "TOOL_DOCS",
    "ToolCall",
    "ToolTurn",
    "tool_schemas",
    "parse_message",
    "tool_messages",
    "render_messages",
    "correction_message",
]

TOOL_SEARCH, TOOL_KG, TOOL_ANSWER = "search", "kg_lookup", "answer"

#: Description of each tool and its arguments: the schemas below and the docstrings of the TRL
#: environment's tool methods (searchgym.integrations.trl) both say exactly this.
TOOL_DOCS = {
    TOOL_SEARCH: (
        "Search the document collection and return the top documents (title and text) for a query.",
        {"query": "What to look up, in a few words (for example an entity name and a relation)."},
    ),
    TOOL_KG: (
        "Look facts up in the knowledge graph: the facts that link the given entities through the given relations.",
        {
            "entity": "Names of the entities to look up.",
            "relation": "Names of relations to follow from those entities (may be empty).",
        },
    ),
    TOOL_ANSWER: (
        "Give the final answer to the question. This ends the episode.",
        {"answer": "The answer, in a few words, without explanation."},
    ),
}

_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_OPTIONAL_STRINGS = {**_STRINGS, "nullable": True}


def _schema(name: str, types: dict[str, dict], required: list[str]) -> dict:
    description, args = TOOL_DOCS[name]
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {arg: {**types[arg], "description": args[arg]} for arg in args},
                "required": required,
            },
            "return": {"type": "string"},
        },
    }


def tool_schemas(*, kg: bool = False, answer: bool = True) -> list[dict]:
    """The JSON tool schemas an env offers (OpenAI / ``apply_chat_template(tools=...)`` format):
    ``search``, ``kg_lookup`` when ``kg``, ``answer`` when ``answer`` (the Solver's; a Proposer asks
    its question in ``<question>`` tags)."""
    out = [_schema(TOOL_SEARCH, {"query": _STRING}, ["query"])]
    if kg:
        out.append(_schema(TOOL_KG, {"entity": _STRINGS, "relation": _OPTIONAL_STRINGS}, ["entity"]))
    if answer:
        out.append(_schema(TOOL_ANSWER, {"answer": _STRING}, ["answer"]))
    return out


_USAGE = {
    TOOL_SEARCH: '{"name": "search", "arguments": {"query": "..."}}',
    TOOL_KG: '{"name": "kg_lookup", "arguments": {"entity": ["..."], "relation": ["..."]}}',
    TOOL_ANSWER: '{"name": "answer", "arguments": {"answer": "..."}}',
}


@dataclass
class ToolCall:
    """One tool call of an assistant message: what it asks for, or why it cannot run (``error``,
    the text the model is sent back)."""

    name: str
    arguments: Any
    call_id: Optional[str] = None
    error: Optional[str] = None
    request: Optional[SearchRequest] = None
    answer: Optional[str] = None


@dataclass
class ToolTurn:
    """A parsed assistant message: the shared :class:`ParsedAction`, its calls and its text form."""

    parsed: ParsedAction
    calls: list[ToolCall] = field(default_factory=list)
    text: str = ""


_CALL_RE = re.compile(r"<\s*tool_call\s*>(.*?)(?:<\s*/\s*tool_call\s*>|$)", re.IGNORECASE | re.DOTALL)
_NAME_RE = re.compile(r'"name"\s*:\s*"([^"]{1,64})"')
_FINAL_SPANS = re.compile(r"<\s*(answer|question|evidence)\s*>.*?(?:<\s*/\s*\1\s*>|$)", re.IGNORECASE | re.DOTALL)
_ANY_TAG = re.compile(r"<\s*(?:/\s*)?[a-zA-Z_]+\s*>")  # not <\s*/?\s*: two adjacent \s* split a run O(n²) ways


def _call_json(body: str) -> tuple[str, Any, Optional[str]]:
    """``(name, arguments, error)`` of a Hermes ``<tool_call>`` body."""
    try:
        obj = loads_json(body.strip())
    except ValueError:  # not JSON, or nested too deeply to decode (loads_json)
        m = _NAME_RE.search(body)
        return (m.group(1) if m else "unknown"), body.strip(), "its JSON does not parse"
    if not isinstance(obj, dict):
        return "unknown", obj, "it is not a JSON object"
    return str(obj.get("name", "")).strip(), obj.get("arguments", obj.get("parameters", {})), None


def _text(value: Any) -> str:
    """A message field as text: a string, or the text parts of a multimodal content list."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


_RawCall = tuple[str, Any, Optional[str], Optional[str]]  # name, arguments, why unreadable, call id


def _raw_calls(action: Any) -> tuple[str, str, list[_RawCall], str]:
    """``(reasoning, content, [(name, arguments, error, call id)], text)`` of a raw text or a message dict."""
    if isinstance(action, dict):
        reasoning = _text(action.get("reasoning_content") or action.get("reasoning"))
        content = _text(action.get("content"))
        raw_calls = action.get("tool_calls") or []
        calls: list[_RawCall] = []
        for raw in raw_calls if isinstance(raw_calls, list) else [raw_calls]:
            fn = raw.get("function", raw) if isinstance(raw, dict) else None
            if not isinstance(fn, dict):
                calls.append(("unknown", raw, "it is not a JSON object", None))
                continue
            call_id = raw.get("id")
            calls.append(
                (
                    str(fn.get("name", "")).strip(),
                    fn.get("arguments", {}),
                    None,
                    call_id if isinstance(call_id, str) else None,
                )
            )
        parts = [f"<think>\n{reasoning}\n</think>\n\n" if reasoning else "", content]
        for name, args, _, _ in calls:
            shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            parts.append(f'\n<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {shown}}}\n</tool_call>')
        # a call the serving side could not parse stays in the content: it is still a (malformed) call
        left = [(*_call_json(m.group(1)), None) for m in _CALL_RE.finditer(content)]
        return str(reasoning), _CALL_RE.sub("", content), left + calls, "".join(parts)
    text = action if isinstance(action, str) else ""
    parsed: list[_RawCall] = [(*_call_json(m.group(1)), None) for m in _CALL_RE.finditer(text)]
    return "", _CALL_RE.sub("", text), parsed, text


def _strings(value: Any) -> Optional[list[str]]:
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    return None


def _check_call(
    name: str, args: Any, kg: bool, max_query_chars: int
) -> tuple[Optional[str], Optional[SearchRequest], Optional[str]]:
    """``(error, search request, answer)`` of one call."""
    known = [TOOL_SEARCH] + ([TOOL_KG] if kg else []) + [TOOL_ANSWER]
    if name not in known:
        return (
            f"there is no tool named {name!r}; the tools are {', '.join(known)} (call one as {_USAGE[TOOL_SEARCH]})",
            None,
            None,
        )
    if isinstance(args, str):
        try:
            args = loads_json(args)
        except ValueError:  # not JSON, or nested too deeply to decode (loads_json)
            return f"the arguments are not valid JSON; call it as {_USAGE[name]}", None, None
    if not isinstance(args, dict):
        return f"the arguments must be a JSON object; call it as {_USAGE[name]}", None, None
    if name == TOOL_ANSWER:
        ans = args.get("answer")
        if not isinstance(ans, str) or not ans.strip():
            return f"the answer tool needs a non-empty 'answer' string; call it as {_USAGE[name]}", None, None
        return None, None, " ".join(ans.split())
    if name == TOOL_SEARCH:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            return f"the search tool needs a non-empty 'query' string; call it as {_USAGE[name]}", None, None
        return None, SearchRequest(" ".join(query.split())[:max_query_chars].rstrip()), None
    relation = args.get("relation")  # optional and nullable in the schema: absent or null means none
    entities = _strings(args.get("entity", args.get("entities")))
    relations = _strings([] if relation is None else relation)
    if not entities or relations is None:
        return (
            f"kg_lookup needs a list of entity names (and optionally relations); call it as {_USAGE[name]}",
            None,
            None,
        )
    query = " ".join(entities + relations)[:max_query_chars].rstrip()
    return None, SearchRequest(query, tuple(entities), tuple(relations), corpus=False), None


def _reasoning_of(reasoning: str, content: str, think: str) -> str:
    own = THINK_SEPARATOR.join(t.strip() for t in (reasoning, think) if t and t.strip())
    if own:
        return own
    plain = _ANY_TAG.sub(" ", _FINAL_SPANS.sub(" ", content))
    return " ".join(plain.split())


def parse_message(
    action: Any,
    *,
    kg: bool = False,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_searches: int = DEFAULT_MAX_SEARCHES,
    max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
) -> ToolTurn:
    """Parse one assistant message (raw text or message dict); never raises. See the module docstring."""
    reasoning, content, raw, text = _raw_calls(action)
    content_act = parse_action(content, max_chars=max_chars, max_searches=max_searches)
    act = ParsedAction(
        question=content_act.question,
        evidence=content_act.evidence,
        forged_information=content_act.forged_information,
        truncated=content_act.truncated,
        warnings=list(content_act.warnings),
    )
    act.think = _reasoning_of(reasoning, content if not content_act.forged_information else "", content_act.think)
    if content_act.searches:
        act.warnings.append("<search> tags in the content are not run in the function-calling protocol")
    call_answers: list[str] = []
    calls: list[ToolCall] = []
    searches = 0
    for name, args, error, call_id in raw:
        call = ToolCall(name or "unknown", args, call_id=call_id, error=None)
        if error is not None:
            call.error = f"the call could not be read ({error}); call a tool as {_USAGE.get(name, _USAGE[TOOL_SEARCH])}"
        else:
            call.error, call.request, call.answer = _check_call(call.name, args, kg, max_query_chars)
        if call.request is not None:
            searches += 1
            if searches > max_searches:
                call.request = None
                call.error = f"too many tool calls in one message; only the first {max_searches} searches ran"
                if ERR_TOO_MANY_SEARCHES not in act.errors:
                    act.errors.append(ERR_TOO_MANY_SEARCHES)
        if call.error is not None:
            code = ERR_EMPTY_QUERY if "non-empty 'query'" in call.error else ERR_BAD_TOOL_CALL
            if code not in act.errors:
                act.errors.append(code)
        if call.answer is not None:
            call_answers.append(call.answer)
        calls.append(call)
    act.searches = [c.request for c in calls if c.request is not None]
    act.answer_count = content_act.answer_count + len(call_answers)
    if call_answers:  # a tool call comes after the content it follows: the last answer call wins
        act.answer = call_answers[-1]
    elif content_act.answer_count:
        act.answer = content_act.answer
        if act.answer is None:
            act.errors.append(ERR_EMPTY_ANSWER)
    if content_act.question is None and "empty_question" in content_act.errors:
        act.errors.append("empty_question")
    if not act.has_action and not act.errors:
        act.errors.append(ERR_NO_ACTION)
    return ToolTurn(act, calls, text[:max_chars])


def correction_message(role: str = "solver") -> dict:
    """The ``role: user`` message sent after an assistant message with no tool call and no final answer."""
    final = (
        "to finish, give the question inside <question> and </question>"
        if role == "proposer"
        else "to finish, call the answer tool with your final answer"
    )
    return {
        "role": "user",
        "content": f"Your last message called no tool. To look something up, call the search tool; {final}.",
    }


def tool_messages(turn: ToolTurn, results: list[str], *, role: str = "solver") -> list[dict]:
    """The env's reply to ``turn``: one ``role: tool`` message per call in order (``results`` holds the
    text of each call that searched, in order), or :func:`correction_message` when it made no call."""
    if not turn.calls:
        return [correction_message(role)]
    out, pos = [], 0
    for call in turn.calls:
        if call.request is not None:
            content = results[pos]
            pos += 1
        elif call.error is not None:
            content = f"Error: {call.error}."
        else:  # an answer call next to searches (the rollout ends; nothing is sent)
            content = "Answer recorded."
        msg = {"role": "tool", "name": call.name, "content": content}
        if call.call_id:
            msg["tool_call_id"] = call.call_id
        out.append(msg)
    return out


def render_messages(messages: list[dict]) -> str:
    """The text view of inserted messages (the trajectory's ``env`` segment): tool results in the
    Hermes ``<tool_response>`` layout, a user message as its text. The tokens the model sees come from
    its chat template instead."""
    parts = []
    for m in messages:
        if m.get("role") == "tool":
            parts.append(f"\n<tool_response>\n{m.get('content', '')}\n</tool_response>")
        else:
            parts.append(f"\n{m.get('content', '')}")
    return "".join(parts) + "\n"
