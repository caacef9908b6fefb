"""verl dataset rows (parquet) for searchgym tasks, as verl's ``RLHFDataset`` reads them.

Each row: ``data_source`` ``"searchgym"``, ``prompt`` (the env's Solver prompt as one user
message), ``agent_name`` (which registered loop plays it), ``reward_model.ground_truth`` (the gold
aliases, for ``compute_score``) and ``extra_info.searchgym`` with the task as JSON (``task``:
waypoints and subgraph included, so WCR/GDCR can shape the reward), its ``index`` and a ``seed``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional, Sequence

from ...errors import InvalidArgumentError, SearchGymRuntimeError
from .environments import EnvSpec, make_env

logger = logging.getLogger(__name__)

__all__ = ["dataset_rows", "write_dataset", "task_options"]


def dataset_rows(
    spec: EnvSpec,
    n: int,
    *,
    agent_names: Sequence[str] = ("searchgym_solver",),
    seed: int = 0,
    rewards: Optional[str] = None,
) -> list[dict]:
    """Rows over the env's first ``n`` tasks in order (task ``i`` for a Solver env, subgraph ``i``
    for self-play), one row per task and agent loop name (self-play: ``searchgym_proposer`` and
    ``searchgym_selfplay`` rows train both roles)."""
    if n < 1:
        raise InvalidArgumentError(f"need n >= 1 rows, got {n}")
    env = make_env(spec)
    rows = []
    for i in range(n):
        obs, info = env.reset(seed=seed + i, options={"index": i})
        task = info["task"]
        prompt = obs if isinstance(obs, str) else obs["texts"][0]
        sg = {"task": json.dumps(task.to_dict()), "index": i, "seed": seed + i}
        if rewards:
            sg["rewards"] = rewards
        rows += [
            {
                "data_source": "searchgym",
                "agent_name": name,
                "prompt": [{"role": "user", "content": prompt}],
                "reward_model": {"style": "rule", "ground_truth": list(task.answers)},
                "extra_info": {"searchgym": sg},
            }
            for name in agent_names
        ]
    return rows


def write_dataset(path: str | Path, rows: list[dict]) -> Path:
    """Write rows as parquet (needs pyarrow: the ``eval`` or ``verl`` extra)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise SearchGymRuntimeError("writing a verl dataset needs pyarrow: pip install 'searchgym[verl]'") from None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    logger.info("wrote %d rows to %s", len(rows), path)
    return path


def task_options(extra: dict) -> tuple[Optional[int], dict]:
    """``(seed, reset options)`` from a row's ``extra_info["searchgym"]``: its ``task`` (JSON or a
    dict) wins over ``index``."""
    from searchgym.envs.types import Task

    options: dict = {}
    task = extra.get("task")
    if task is not None:
        options["task"] = Task.from_dict(json.loads(task) if isinstance(task, str) else task)
    elif extra.get("index") is not None:
        options["index"] = int(extra["index"])
    seed = extra.get("seed")
    return (None if seed is None else int(seed)), options
