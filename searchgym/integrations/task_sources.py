"""Where an adapter's training tasks come from (verl's and TRL's dataset rows).

One of: ``pool=`` (a list of :class:`~searchgym.core.subgraph.Subgraph` or a pool JSONL path:
template questions over the paths, waypoints and subgraph included), ``flashrag=`` (a FlashRAG JSONL:
``question``, ``golden_answers``), ``parquet=`` (Search-R1's verl parquet: its prompt kept as the
task's ``solver_prompt``, golds from ``reward_model.ground_truth.target``), ``tasks=`` (a list of
:class:`~searchgym.core.types.Task`), or none of them: the built-in tasks of the env (template questions
over the default world's heuristic pool, the tasks ``KGSolver-v0`` draws by default). FlashRAG and
Search-R1 tasks have no KG path, so they train the Solver only and without waypoint rewards (WCR).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from searchgym.core.types import Task
from searchgym.envs.resources import resolve_pool
from searchgym.tasks.sources import task_from_subgraph
from searchgym.tasks.tasksets import load_flashrag_jsonl, load_searchr1_parquet

from ..errors import InvalidArgumentError

__all__ = ["SOURCES", "given_source", "solver_tasks", "source_subgraphs"]

#: The task sources, by keyword.
SOURCES = ("pool", "flashrag", "parquet", "tasks")


def given_source(**sources: Any) -> Optional[str]:
    """The name of the one source given (``None``: none, the built-in tasks); two or more refused."""
    given = [name for name in SOURCES if sources.get(name) is not None]
    if len(given) > 1:
        raise InvalidArgumentError(
            f"give at most one of pool=, flashrag=, parquet=, tasks= (none: the built-in tasks), got {', '.join(given)}"
        )
    return given[0] if given else None


def solver_tasks(
    env, *, pool: Any = None, flashrag: Any = None, parquet: Any = None, tasks: Optional[Sequence[Task]] = None
) -> list[Task]:
    """Every Solver task of the source, in its order (``env``: a Solver env, for its world and built-in tasks)."""
    source = given_source(pool=pool, flashrag=flashrag, parquet=parquet, tasks=tasks)
    if source == "tasks":
        out = list(tasks or ())
        if not all(isinstance(t, Task) for t in out):
            raise InvalidArgumentError("tasks= must be a list of searchgym Task objects")
        return out
    if source == "flashrag":
        return list(load_flashrag_jsonl(flashrag).tasks)
    if source == "parquet":
        return [t for ts in load_searchr1_parquet(parquet) for t in ts.tasks]
    if source == "pool":
        return [task_from_subgraph(sg, env.world) for sg in source_subgraphs(env.world, pool)]
    return [env.tasks[i] for i in range(len(env.tasks))]


def source_subgraphs(world, pool: Any) -> list:
    """The subgraphs of ``pool`` in their given order (``None``: the world's default pool)."""
    return resolve_pool(world, pool, "given", 0)
