"""Play a list of tasks on Solver envs through the batch runner: the rollout loop of ``searchgym eval``,
its Ray actors, the trainer's validation and the learning checks.

Every task is one episode, reset with ``options={"task": task}`` and a seed made from the run's seed and the
task's key, so an env's random generator starts from the same state for a task whichever env plays it, in any
order, resumed or not.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Sequence

from ..core.rng_state import stable_seed
from ..core.types import Task, Trajectory
from ..tasks.tasksets import task_key
from .batch_runner import BatchRunner, EpisodeStart

__all__ = ["play_tasks", "solver_envs"]


def play_tasks(
    agent: Any,
    envs: Sequence[Any],
    tasks: Iterable[Task],
    on_done: Callable[[list[Trajectory]], None],
    *,
    seed: int = 0,
    repeats: int = 1,
) -> None:
    """Play every task to the end on ``envs`` (one rollout in flight per env), calling ``on_done``
    with the rollouts that finished after each batched agent turn. ``agent.act_batch`` gets all
    pending turns at once; a backend error propagates with nothing half-reported. Each episode is reset
    with a seed made from ``seed`` and the task's key, so the env's random generator starts from the same
    state for a task whichever env plays it, in any order, resumed or not. (What an env draws from may still
    carry its own history: a KGProposer env verifies with noise documents from its recent rollouts.)
    ``repeats`` > 1 plays each task that many times (rejection sampling's samples per task), episode ``k`` of a
    task keyed and seeded by ``(task key, k)``."""

    def starts() -> Iterator[EpisodeStart]:
        for task in tasks:
            key = task_key(task)
            if repeats == 1:
                yield EpisodeStart(key=key, seed=stable_seed(seed, key), options={"task": task})
                continue
            for k in range(repeats):
                yield EpisodeStart(key=(key, k), seed=stable_seed(seed, key, k), options={"task": task})

    BatchRunner(envs).play(
        agent, starts(), on_finished=lambda eps: on_done([e.info["trajectory"] for e in eps]), keep=False
    )


def solver_envs(world: Any, retriever: Any, config: Any, first: Task, n: int) -> list:
    """``n`` ``KGSolver-v0`` envs over ``world`` and ``retriever`` with an
    :class:`~searchgym.evaluation.runner.EvalConfig`'s turn, search and layout settings (one built, the rest
    its clones sharing the index); ``first`` is a placeholder task (every episode is given its own)."""
    from ..envs.solver import KGSolverEnv

    env = KGSolverEnv(
        world,
        [first],
        retriever=retriever,
        max_turns=config.max_turns,
        top_k=config.top_k,
        doc_max_chars=config.doc_max_chars,
        observation_layout=config.layout,
    )
    return [env] + [env.clone() for _ in range(n - 1)]
