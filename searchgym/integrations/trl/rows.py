"""A TRL dataset row ↔ a searchgym task: what every row must carry and how it is read back.

A row made by :func:`searchgym.integrations.trl.train_dataset` has ``prompt`` (the env's own prompt
as one user message: the exact text the env renders, so what TRL shows the model and what the env
plays agree) and ``searchgym``: JSON with the ``task`` (question, gold aliases, waypoints, subgraph —
what WCR / GDCR / DynaSearcher need), the row's ``role`` (``"solver"``: one Solver task;
``"selfplay"``: a self-play game whose Solver group is trained; ``"proposer"``: a self-play game whose
Proposer is trained), its ``index`` and ``seed``.

A row from elsewhere gives a Solver task when it is a FlashRAG or Search-R1 row: ``question`` and
``answer`` / ``answers`` / ``golden_answers`` columns, or a prompt ending in ``Question: …`` and
``reward_model.ground_truth.target`` (:mod:`searchgym.integrations.qa_rows`). A row with neither raises
:class:`DatasetRowError` naming the columns it has and the fix — never a rollout on an empty task.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from searchgym.core.types import Task

from ...errors import InvalidArgumentError
from ..qa_rows import prompt_user_text, qa_task

__all__ = ["ROW_KEY", "ROLES", "RowTask", "DatasetRowError", "task_of_row", "row_payload", "prompt_text"]

ROW_KEY = "searchgym"
ROLES = ("solver", "selfplay", "proposer")


class DatasetRowError(InvalidArgumentError):
    """A dataset row searchgym cannot play: no task, a malformed task, or a role it does not know."""


@dataclass(frozen=True)
class RowTask:
    """What one row asks for: the task, the role trained on it and the reset seed."""

    task: Task
    role: str = "solver"
    seed: Optional[int] = None


def row_payload(task: Task, role: str, index: int, seed: int) -> str:
    """The ``searchgym`` column of a row (JSON text, so Arrow stores it as one string column)."""
    return json.dumps({"task": task.to_dict(), "role": role, "index": index, "seed": seed}, ensure_ascii=False)


def prompt_text(prompt: Any) -> str:
    """The text of a row's ``prompt`` (a string, or chat messages: the last user message)."""
    text = prompt_user_text(prompt)
    if text is not None:
        return text
    raise DatasetRowError(
        f"a row's prompt must be a string or chat messages ending in a user message, got {str(prompt)[:120]!r}"
    )


def task_of_row(row: dict) -> RowTask:
    """The task a dataset row carries (see the module docstring); raises :class:`DatasetRowError`."""
    payload = row.get(ROW_KEY)
    if payload is not None:
        try:
            data = json.loads(payload) if isinstance(payload, str) else dict(payload)
            task = Task.from_dict(data["task"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DatasetRowError(
                f"the row's {ROW_KEY!r} column is not a searchgym task ({type(exc).__name__}: {exc}); build rows "
                "with searchgym.integrations.trl.train_dataset(...)"
            ) from None
        role = data.get("role", "solver")
        if role not in ROLES:
            raise DatasetRowError(f"row role {role!r} unknown; use one of {', '.join(ROLES)}")
        seed = data.get("seed")
        return RowTask(task, role, None if seed is None else int(seed))
    qa = qa_task(row, source="trl")
    if qa is not None:
        return RowTask(qa)
    columns = sorted(k for k in row if k != "environment")
    raise DatasetRowError(
        f"dataset row without a searchgym task (columns: {columns}); build the dataset with "
        f"searchgym.integrations.trl.train_dataset(...) (a {ROW_KEY!r} column), or give 'question' and "
        f"'answer' / 'answers' / 'golden_answers' columns (or Search-R1's reward_model.ground_truth.target)"
    )
