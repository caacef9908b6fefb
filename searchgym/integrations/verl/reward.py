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
_MARKERS = re.compile(r"<\|im_start\|>\s*assistant\s*|<\|im_end\|>|<\|endoftext\|>")


def split_turns(solution_str: str) -> list[str]:
    """The agent's turns in a decoded multi-turn response (observation blocks removed)."""
    pieces = _INSERTED.split(solution_str)
    turns = []
    # re.split interleaves the captured tag name; keep only the text pieces between matches
    for i, piece in enumerate(pieces):
        if i % 2 == 1 or piece is None:
            continue
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
