"""verl dataset rows (parquet) for searchgym tasks, as verl's ``RLHFDataset`` reads them, and the task
an agent loop plays for a row.

Each row written here: ``data_source`` ``"searchgym"``, ``prompt`` (the env's Solver prompt as one user
message; self-play rows: the Proposer's), ``agent_name`` (which registered loop plays it),
``reward_model.ground_truth`` (the gold aliases, for ``compute_score``) and ``extra_info.searchgym``
with the task as JSON (``task``: waypoints and subgraph included, so WCR/GDCR can shape the reward),
its ``index`` and a ``seed``. Tasks come from a subgraph pool, a FlashRAG JSONL, a Search-R1 parquet
or the built-in tasks (:mod:`searchgym.integrations.task_sources`).

A row from elsewhere — Search-R1's or FlashRAG's own, without ``extra_info.searchgym`` — is played as a
Solver task built from its question and golds (:mod:`searchgym.integrations.qa_rows`); a row with
neither is refused with the fix (:func:`row_options`), never played as a random task of the default pool.
"""

from __future__ import annotations

import json
import logging
import numbers
import random
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from searchgym.core.types import Task
from searchgym.envs.registration import env_spec

from ...core.atomic_writes import write_file
from ...errors import InvalidArgumentError, SearchGymRuntimeError
from ..environments import EnvSpec, make_env, reward_names
from ..qa_rows import qa_task
from ..task_sources import given_source, solver_tasks, source_subgraphs

logger = logging.getLogger(__name__)

__all__ = ["VerlRowError", "dataset_rows", "write_dataset", "task_options", "row_options"]


class VerlRowError(InvalidArgumentError):
    """A verl dataset row an agent loop cannot play: no searchgym task and no question with gold answers."""


def dataset_rows(
    spec: EnvSpec,
    n: Optional[int] = None,
    *,
    agent_names: Sequence[str] = ("searchgym_solver",),
    seed: int = 0,
    rewards: Optional[str] = None,
    reward_options: Optional[dict] = None,
    pool: Any = None,
    flashrag: Any = None,
    parquet: Any = None,
    tasks: Optional[Sequence[Task]] = None,
) -> list[dict]:
    """One row per task and agent loop name (self-play: ``searchgym_proposer`` and ``searchgym_selfplay``
    rows train both roles), over ``n`` tasks of the source (a seeded sample kept in the source's order;
    ``None``: every task). A Solver env plays tasks, ``KGSelfPlay-v0`` the pool's subgraphs. ``rewards`` and
    ``reward_options`` (their wrappers' keyword arguments by reward name) go into each row for
    :func:`~searchgym.integrations.verl.reward.compute_score`, checked here."""
    if n is not None and n < 1:
        raise InvalidArgumentError(f"need n >= 1 rows, got {n}")
    scoring = EnvSpec("KGSolver-v0", reward_names(rewards), reward_options=reward_options or {})  # compute_score's
    source = given_source(pool=pool, flashrag=flashrag, parquet=parquet, tasks=tasks)
    env = make_env(spec)
    base = env.unwrapped
    items: list[tuple[str, Any]]
    if env_spec(spec.env_id).kind == "selfplay":
        if source not in (None, "pool"):
            raise InvalidArgumentError(
                "self-play rows need KG subgraphs: give a subgraph pool (or none: the env's pool); "
                "FlashRAG and Search-R1 questions train the Solver (searchgym_solver rows)"
            )
        items = [("subgraph", sg) for sg in (source_subgraphs(base.world, pool) if pool is not None else base.pool)]
    else:
        found = solver_tasks(base, pool=pool, flashrag=flashrag, parquet=parquet, tasks=tasks)
        items = [("task", t) for t in found]
    if not items:
        raise InvalidArgumentError("the source holds no task")
    if n is not None and n < len(items):  # a seeded sample, kept in the source's order
        items = [items[k] for k in sorted(random.Random(seed).sample(range(len(items)), n))]
    rows = []
    for i, (kind, item) in enumerate(items):
        obs, info = env.reset(seed=seed + i, options={kind: item})
        task = info["task"]
        prompt = obs if isinstance(obs, str) else obs["texts"][0]
        sg = {"task": json.dumps(task.to_dict(), ensure_ascii=False), "index": i, "seed": seed + i}
        if rewards:
            sg["rewards"] = rewards
        if scoring.reward_options:  # JSON, as the task: parquet has no column type for a free-form mapping
            sg["reward_options"] = json.dumps(scoring.reward_options)
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
    """Write rows as parquet (needs pyarrow: the ``eval`` or ``verl`` extra), atomically (a temporary file
    renamed into place)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise SearchGymRuntimeError("writing a verl dataset needs pyarrow: pip install 'searchgym[verl]'") from None
    path = Path(path)
    write_file(path, lambda tmp: pq.write_table(pa.Table.from_pylist(rows), tmp))  # never seen half-written
    logger.info("wrote %d rows to %s", len(rows), path)
    return path


def task_options(extra: dict) -> tuple[Optional[int], dict]:
    """``(seed, reset options)`` from a row's ``extra_info["searchgym"]``: its ``task`` (JSON or a
    dict) wins over ``index``; neither gives no options (an agent loop refuses that, :func:`row_options`)."""
    options: dict = {}
    task = extra.get("task")
    if task is not None:
        options["task"] = Task.from_dict(json.loads(task) if isinstance(task, str) else task)
    elif extra.get("index") is not None:
        options["index"] = int(extra["index"])
    seed = extra.get("seed")
    return (None if seed is None else int(seed)), options


def row_options(row: Mapping[str, Any]) -> tuple[Optional[int], dict]:
    """``(seed, reset options)`` of the task a verl row asks for (the row's columns, as verl passes them
    to an agent loop): ``extra_info.searchgym`` when present, else a Solver task built from a Search-R1 /
    FlashRAG row (question and golds; a prompt teaching the tag protocol is kept as the Solver's prompt;
    seed: ``extra_info.index``). A row with neither raises :class:`VerlRowError`."""
    extra = row.get("extra_info")
    extra = extra if isinstance(extra, Mapping) else {}
    searchgym = extra.get("searchgym")
    # in a parquet mixing both kinds of rows, a row without extra_info.searchgym reads back as all nulls
    if isinstance(searchgym, Mapping) and any(v is not None for v in searchgym.values()):
        seed, options = task_options(dict(searchgym))
        if not options:  # the env would play a random task of its pool
            raise VerlRowError(
                f"the row's extra_info.searchgym has neither a task nor an index (keys: {sorted(searchgym)}); "
                "write rows with examples/verl/make_data.py"
            )
        return seed, options
    task = qa_task(row, source="verl", keep_tag_prompt=True)
    if task is None:
        columns = sorted(k for k in row if not k.startswith("__"))
        raise VerlRowError(
            f"verl row without a searchgym task (columns: {columns}); write rows with examples/verl/make_data.py "
            "(extra_info.searchgym), or give a question ('question' column, or a prompt ending in 'Question: ...') "
            "and gold answers ('golden_answers' / 'answers' / 'answer', or reward_model.ground_truth.target)"
        )
    index = extra.get("index")
    return (int(index) if isinstance(index, numbers.Integral) else None), {"task": task}
