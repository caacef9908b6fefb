"""SkyRL dataset rows for searchgym tasks, and the task a SkyRL row asks for.

SkyRL-train reads a parquet whose rows carry ``prompt`` (chat messages), ``env_class`` (the registered
env that plays the row) and ``reward_spec`` (``{"method": "rule", "ground_truth": ...}``); every column
but ``prompt`` and ``env_class`` reaches the env as its ``extras``. :func:`dataset_rows` writes the same
rows as the verl adapter's (:func:`searchgym.integrations.verl.data.dataset_rows`: the env's own prompt,
``extra_info.searchgym`` with the task as JSON — waypoints and subgraph included, so WCR / GDCR can shape
the reward — and a seed) under SkyRL's column names.

:func:`row_options` reads a row back: ``extra_info.searchgym`` when present, else a Solver task built from
a Search-R1 / FlashRAG row (question and golds; SkyRL's own Search-R1 rows keep the golds in
``reward_spec.ground_truth.target``); a row with neither is refused, never played as a random task.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from searchgym.core.types import Task

from ...errors import InvalidArgumentError
from ..environments import EnvSpec
from ..text_rollout import TEXT_ENV_ID
from ..verl.data import VerlRowError
from ..verl.data import dataset_rows as verl_rows
from ..verl.data import row_options as verl_row_options

__all__ = ["ENV_CLASS", "SkyRLRowError", "dataset_rows", "row_options"]

#: The name searchgym's env is registered under in SkyRL-Gym (``environment.env_class``).
ENV_CLASS = "searchgym"


class SkyRLRowError(InvalidArgumentError):
    """A SkyRL row the env cannot play: no searchgym task and no question with gold answers."""


def dataset_rows(
    n: Optional[int] = None,
    *,
    env_class: str = ENV_CLASS,
    seed: int = 0,
    env_kwargs: Optional[dict] = None,
    pool: Any = None,
    flashrag: Any = None,
    parquet: Any = None,
    tasks: Optional[Sequence[Task]] = None,
) -> list[dict]:
    """SkyRL rows (``data_source``, ``prompt``, ``env_class``, ``reward_spec``, ``extra_info``) for ``n`` tasks
    of the source (one of ``pool``, ``flashrag``, ``parquet``, ``tasks``; none: the built-in tasks), each
    prompt rendered by a ``KGSolver-v0`` made with ``env_kwargs`` — give the same ``env_kwargs`` (protocol,
    KG tool, world) as the env config SkyRL plays the rows with. Write them with
    :func:`searchgym.integrations.verl.data.write_dataset` (parquet, atomic)."""
    spec = EnvSpec(TEXT_ENV_ID, (), dict(env_kwargs or {}))
    rows = verl_rows(spec, n, seed=seed, pool=pool, flashrag=flashrag, parquet=parquet, tasks=tasks)
    out = []
    for row in rows:
        row = dict(row)
        row.pop("agent_name")
        row["env_class"] = env_class
        row["reward_spec"] = {"method": "rule", "ground_truth": row.pop("reward_model")["ground_truth"]}
        out.append(row)
    return out


def row_options(extras: Mapping[str, Any]) -> tuple[Optional[int], dict]:
    """``(seed, reset options)`` of the task a SkyRL row asks for (the ``extras`` SkyRL hands the env — the row's
    columns but ``prompt`` and ``env_class`` — with the ``prompt`` it passes to ``init``); see the module docstring.
    Raises :class:`SkyRLRowError`."""
    row = dict(extras)
    if row.get("reward_model") is None and isinstance(row.get("reward_spec"), Mapping):
        row["reward_model"] = row["reward_spec"]  # SkyRL's name for verl's reward_model column
    try:
        return verl_row_options(row)
    except VerlRowError:
        columns = sorted(k for k in extras if k not in ("max_turns", "prompt"))
        raise SkyRLRowError(
            f"SkyRL row without a searchgym task (columns: {columns}); write rows with "
            "searchgym.integrations.skyrl.dataset_rows(...) (extra_info.searchgym with a task), or give a question "
            "('question' column, or a prompt ending in 'Question: ...') and gold answers ('golden_answers' / "
            "'answers' / 'answer', or reward_spec.ground_truth.target)"
        ) from None
