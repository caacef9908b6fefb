"""TRL ``train_dataset`` s from searchgym tasks: a subgraph pool, the built-in tasks or a FlashRAG JSONL.

:func:`train_dataset` returns a ``datasets.Dataset`` whose rows :mod:`.rows` describes. Each prompt is
rendered by the env the rows are meant for (the same ``protocol``, ``kg_tool`` and ``env_kwargs``), so
the text TRL puts in front of the model is the env's own prompt; the adapters check that at run time.

* ``mode="solver"``: one row per task (``role`` ``"solver"``) — for the ``environment_factory``
  entry point (function calling) or the ``rollout_func`` (a Solver group per row's G generations).
* ``mode="selfplay"``: per subgraph a ``"proposer"`` row (each generation plays a whole game and is
  trained as its Proposer) and a ``"selfplay"`` row (one game per G generations: the Proposer writes
  the question in the same step and the G generations are its Solvers) — ``rollout_func`` only.

Sources: ``pool=`` (a list of :class:`~searchgym.core.subgraph.Subgraph` or a pool JSONL path:
template questions over the paths), ``flashrag=`` (a FlashRAG JSONL: ``question``,
``golden_answers``; Solver rows only), ``tasks=`` (a list of :class:`~searchgym.core.types.Task`), or
none of them: the built-in tasks (template questions over the default world's heuristic pool, the
tasks ``KGSolver-v0`` draws by default; the held-out evaluation benchmark is not among them).
"""

from __future__ import annotations

import logging
from typing import Any, Optional, Sequence

from searchgym.core.types import Task
from searchgym.tasks.sources import task_from_subgraph

from ...errors import InvalidArgumentError, SearchGymRuntimeError
from ..environments import EnvSpec, make_env
from ..task_sources import given_source, solver_tasks
from .rows import row_payload

logger = logging.getLogger(__name__)

__all__ = ["MODES", "dataset_rows", "train_dataset"]

MODES = ("solver", "selfplay")


def dataset_rows(
    *,
    pool: Any = None,
    flashrag: Any = None,
    tasks: Optional[Sequence[Task]] = None,
    n: Optional[int] = None,
    mode: str = "solver",
    protocol: str = "tags",
    kg_tool: bool = False,
    env_kwargs: Optional[dict] = None,
    seed: int = 0,
) -> list[dict]:
    """The rows of :func:`train_dataset` as plain dicts (see the module docstring)."""
    if mode not in MODES:
        raise InvalidArgumentError(f"mode {mode!r} unknown; use one of {', '.join(MODES)}")
    given_source(pool=pool, flashrag=flashrag, tasks=tasks)
    if n is not None and n < 1:
        raise InvalidArgumentError(f"n must be >= 1 (or None for every task), got {n}")
    kwargs = {**(env_kwargs or {}), "protocol": protocol, "kg_tool": kg_tool}
    if mode == "selfplay":
        if flashrag is not None or tasks is not None:
            raise InvalidArgumentError("self-play rows need KG subgraphs: give pool= (or nothing for the default pool)")
        return _selfplay_rows(pool, n, kwargs, seed)
    env = make_env(EnvSpec("KGSolver-v0", (), kwargs))
    found = solver_tasks(env, pool=pool, flashrag=flashrag, tasks=tasks)[:n]
    if not found:
        raise InvalidArgumentError("the source holds no task")
    return [
        {
            "prompt": [{"role": "user", "content": env.start_solver_rollout(task).trajectory.prompt}],
            "searchgym": row_payload(task, "solver", i, seed + i),
        }
        for i, task in enumerate(found)
    ]


def _selfplay_rows(pool: Any, n: Optional[int], kwargs: dict, seed: int) -> list[dict]:
    env = make_env(EnvSpec("KGSelfPlay-v0", (), {**kwargs, **({"pool": pool, "order": "given"} if pool else {})}))
    rows = []
    for i, sg in enumerate(env.pool[:n]):
        obs, info = env.reset(seed=seed + i, options={"subgraph": sg})
        task = info["task"]
        template = env.start_solver_rollout(task_from_subgraph(sg, env.world)).trajectory.prompt
        for role, prompt in (("proposer", obs["texts"][0]), ("selfplay", template)):
            rows.append(
                {"prompt": [{"role": "user", "content": prompt}], "searchgym": row_payload(task, role, i, seed + i)}
            )
    if not rows:
        raise InvalidArgumentError("the pool holds no subgraph")
    return rows


def train_dataset(**kwargs: Any):
    """A ``datasets.Dataset`` of :func:`dataset_rows` (same arguments), ready for ``GRPOTrainer(train_dataset=...)``."""
    try:
        from datasets import Dataset
    except ImportError:
        raise SearchGymRuntimeError("a TRL dataset needs the datasets package: pip install 'searchgym[trl]'") from None
    rows = dataset_rows(**kwargs)
    logger.info("TRL dataset: %d rows (%s)", len(rows), kwargs.get("mode", "solver"))
    return Dataset.from_list(rows)
