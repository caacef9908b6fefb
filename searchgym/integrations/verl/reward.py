"""``compute_score`` for verl's ``custom_reward_function``: searchgym's rewards for users who keep
verl's own tool loop (its ``SearchTool`` against ``searchgym serve``).

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` per sample with the
decoded response. The response is split into the agent's turns at the blocks the tool loop inserted
(``<tool_response>…</tool_response>``, ``<information>…</information>``, chat-template turn markers),
and the turns are replayed through a real ``KGSolver-v0`` with the reward wrappers named in
``extra_info["searchgym"]["rewards"]`` (default: none, the env's exact-match outcome). The env
re-runs the searches the turns ask for (BM25 is sub-millisecond), judges the final answer against
``ground_truth`` and shapes the reward exactly as in a searchgym rollout. The answer is a dict with
``score`` and every reward component, which verl logs.

``extra_info["searchgym"]`` may hold ``task`` (a ``Task.to_dict()``, carrying waypoints for WCR),
``rewards``, ``reward_options`` (their wrappers' keyword arguments by reward name, a mapping or its JSON, e.g.
``{"wcr": {"waypoint_answer_credit": false}}``) and ``env_kwargs`` (``world``, ``retriever`` URL ...): the rows
written by :func:`searchgym.integrations.verl.data.write_dataset` do.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from searchgym.core.types import Task

from ...errors import InvalidArgumentError
from ..environments import EnvSpec, cached_env
from .data import task_options

__all__ = ["compute_score", "split_turns"]

_INSERTED = re.compile(
    r"<\s*(tool_response|information)\s*>.*?<\s*/\s*\1\s*>"  # a tool / env observation block
    r"|<\|im_start\|>\s*(?:user|tool|system)\b.*?(?:<\|im_end\|>|$)",  # a non-assistant chat turn
    re.IGNORECASE | re.DOTALL,
)
#: where an _INSERTED match can start: an observation block's opening tag (group 1: its name) or a chat turn
_INSERTED_START = re.compile(r"<\s*(tool_response|information)\s*>|<\|im_start\|>", re.IGNORECASE)
_MARKERS = re.compile(r"<\|im_start\|>\s*assistant\s*|<\|im_end\|>|<\|endoftext\|>")


def _inserted_spans(text: str) -> list[tuple[int, int]]:
    """The spans of ``_INSERTED.finditer(text)``, in linear time.

    An observation block that is never closed made ``_INSERTED`` scan to the end of the text from its opening tag
    and again from every later one (O(n²) for n unclosed ``<information>`` tags). Once the closing tag of a name
    (compared as the pattern's back-reference does, ignoring case) is missing after some point, a later opening
    tag of that name cannot match, and is skipped.
    """
    spans: list[tuple[int, int]] = []
    unclosed: dict[str, int] = {}  # lowercased block name -> a position after which no closing tag of it follows
    pos = 0
    while (start := _INSERTED_START.search(text, pos)) is not None:
        name = start.group(1)
        key = name.lower() if name is not None else ""
        if name is not None and unclosed.get(key, len(text) + 1) <= start.end():
            pos = start.start() + 1
            continue
        m = _INSERTED.match(text, start.start())
        if m is None:
            if name is not None:  # its body ran to the end without a closing tag
                unclosed[key] = min(unclosed.get(key, len(text) + 1), start.end())
            pos = start.start() + 1
            continue
        spans.append(m.span())
        pos = m.end()
    return spans


def split_turns(solution_str: str) -> list[str]:
    """The agent's turns in a decoded multi-turn response (observation blocks removed)."""
    # the text between the matches of _INSERTED, as _INSERTED.split(solution_str) gives it (without the captures)
    pieces, last = [], 0
    for start, end in _inserted_spans(solution_str):
        pieces.append(solution_str[last:start])
        last = end
    pieces.append(solution_str[last:])
    turns = []
    for piece in pieces:
        text = _MARKERS.sub("", piece).strip()
        if text:
            turns.append(text)
    return turns


def _task(ground_truth: Any, extra: dict) -> Task:
    _, options = task_options(extra)
    if "task" in options:
        return options["task"]
    if isinstance(ground_truth, dict):  # verl's reward_model.ground_truth may be {"target": [...]}
        ground_truth = ground_truth.get("target", ground_truth.get("answers"))
    answers = [ground_truth] if isinstance(ground_truth, str) else [str(a) for a in (ground_truth or [])]
    if not answers:
        raise InvalidArgumentError("compute_score needs a ground_truth answer (a string or a list of aliases)")
    return Task(id="verl", question=str(extra.get("question", "")), answers=answers, source="verl")


def _reward_options(options: Any) -> Any:
    """A row's ``reward_options``: the rows :func:`~searchgym.integrations.verl.data.dataset_rows` writes hold them as
    JSON (parquet has no column type for a free-form mapping); a mapping passes as it is. Bad JSON is one line."""
    if not isinstance(options, str):
        return options
    try:
        return json.loads(options)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(
            f"extra_info.searchgym.reward_options is not JSON ({exc.msg} at character {exc.pos}): {options[:80]!r}; "
            "write the rows with dataset_rows(..., reward_options=...)"
        ) from None


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Optional[dict] = None, **_: Any
) -> dict:
    """searchgym's reward for one decoded verl response: ``{"score": float, **components, "turns": n}``."""
    extra = dict((extra_info or {}).get("searchgym") or {})
    task = _task(ground_truth, extra)
    spec = EnvSpec.from_config(
        {
            "env_id": "KGSolver-v0",
            "rewards": extra.get("rewards"),
            "env_kwargs": extra.get("env_kwargs"),
            "reward_options": _reward_options(extra.get("reward_options")),
        }
    )
    env = cached_env(spec)
    env.reset(options={"task": task})
    turns = split_turns(solution_str)
    events: list[dict] = []
    done = False
    for text in turns:
        _, _, terminated, truncated, info = env.step(text)
        events += info["rewards"]
        done = terminated or truncated
        if done:
            break
    if not done:  # the response stopped before an answer: the env never ended the rollout
        return {"score": 0.0, "outcome": 0.0, "unfinished": 1.0, "turns": float(len(turns))}
    score = float(sum(ev["reward"] for ev in events))
    components = {
        k: float(v) for ev in events for k, v in (ev.get("components") or {}).items() if isinstance(v, (int, float))
    }
    return {"score": score, **components, "unfinished": 0.0, "turns": float(len(turns))}
