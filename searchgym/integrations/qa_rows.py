"""A question-answering dataset row from another RAG-RL stack, read as a searchgym :class:`Task`.

Rows of FlashRAG datasets carry ``question`` and ``golden_answers`` (``answers`` / ``answer``
accepted). Search-R1's verl parquet rows carry ``prompt`` (chat messages: Search-R1's template ending
in ``Question: …``) and the gold aliases in ``reward_model.ground_truth.target`` (plus FlashRAG's
columns when Search-R1's own script made them). :func:`qa_task` takes the question from the
``question`` column or else the prompt's text after its last ``Question:``, and the golds from the
FlashRAG columns or else ``reward_model.ground_truth`` (its ``target``). Lists may come as numpy
arrays (verl hands non-tensor columns over as object arrays). Shared by the verl and TRL adapters.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from searchgym.core.types import Task
from searchgym.tasks.tasksets import GOLD_FIELDS

__all__ = [
    "GOLD_COLUMNS",
    "TAG_PROMPT_MARKERS",
    "gold_answers",
    "prompt_user_text",
    "row_prompt",
    "row_question",
    "qa_task",
]

#: Columns holding gold aliases, in the order they are tried (FlashRAG's first): the eval loader's own fields.
GOLD_COLUMNS = GOLD_FIELDS
#: A row prompt mentioning both of these teaches the tag protocol (Search-R1's template does).
TAG_PROMPT_MARKERS = ("<search>", "<answer>")


def _strings(value: Any) -> list[str]:
    """Non-empty stripped strings of a string or a sequence of strings (``[]`` for anything else)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    return []


def gold_answers(row: Mapping[str, Any]) -> list[str]:
    """The row's gold aliases (see the module docstring); ``[]`` when it has none."""
    for key in GOLD_COLUMNS:
        golds = _strings(row.get(key))
        if golds:
            return golds
    rm = row.get("reward_model")
    truth = rm.get("ground_truth") if isinstance(rm, Mapping) else None
    if isinstance(truth, Mapping):
        truth = truth.get("target")
    return _strings(truth)


def prompt_user_text(prompt: Any) -> Optional[str]:
    """The text of a row's prompt: a string, or the last user message of chat messages."""
    if hasattr(prompt, "tolist"):
        prompt = prompt.tolist()
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        users = [m.get("content") for m in prompt if isinstance(m, Mapping) and m.get("role", "user") == "user"]
        if users and isinstance(users[-1], str):
            return users[-1]
    return None


def row_prompt(row: Mapping[str, Any]) -> Optional[str]:
    """The text of the row's ``prompt`` (or of ``raw_prompt``, the messages verl's dataset hands a loop)."""
    prompt = row.get("prompt")
    return prompt_user_text(prompt if prompt is not None else row.get("raw_prompt"))


def row_question(row: Mapping[str, Any]) -> Optional[str]:
    """The row's question: its ``question`` column, else the prompt's text after its last ``Question:``."""
    question = row.get("question")
    if isinstance(question, str) and question.strip():
        return question.strip()
    prompt = row_prompt(row)
    if prompt and "Question:" in prompt:
        return prompt.rsplit("Question:", 1)[1].strip() or None
    return None


def qa_task(row: Mapping[str, Any], *, source: str = "qa", keep_tag_prompt: bool = False) -> Optional[Task]:
    """The :class:`Task` of a FlashRAG / Search-R1 row, or ``None`` when it lacks a question or golds.

    ``keep_tag_prompt``: a row prompt that teaches the tag protocol (:data:`TAG_PROMPT_MARKERS`, e.g.
    Search-R1's template) becomes the task's ``solver_prompt``, so the Solver sees the dataset's own
    prompt; any other prompt is left out (the env renders its Solver prompt for the question). The id
    is the row's ``id``, else ``extra_info.index``, else the question's first 64 characters.
    """
    question, golds = row_question(row), gold_answers(row)
    if not question or not golds:
        return None
    extra = row.get("extra_info")
    index = extra.get("index") if isinstance(extra, Mapping) else None
    rid = row.get("id")
    tid = str(rid if rid is not None else index if index is not None else question[:64])
    metadata: dict = {}
    prompt = row_prompt(row)
    if keep_tag_prompt and prompt and all(m in prompt for m in TAG_PROMPT_MARKERS):
        metadata["solver_prompt"] = prompt
    return Task(id=tid, question=question, answers=golds, source=source, metadata=metadata)
