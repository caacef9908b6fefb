"""``searchgym eval --ray``: questions fanned out over Ray actors, records committed in order.

Each actor builds the Solver envs once (world, retriever, :class:`EvalConfig`) and plays a chunk of
questions with its copy of the agent (:func:`~searchgym.evaluation.task_rollouts.play_tasks`, the local
engine); the finished trajectories come back and the driver records, judges and journals them
exactly as a local run does, chunk by chunk in question order, so ``eval.jsonl`` resumes the same
way. The agent must pickle (scripted agents, OpenAI-compatible endpoint agents; a local model is
loaded by each actor from its pickled settings where the agent supports it).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional, Sequence

from ..core.ray_support import RayConfig, init_ray, ordered_map
from ..core.types import Task, Trajectory
from ..errors import InvalidArgumentError, SearchGymRuntimeError
from ..tasks.tasksets import task_key
from .task_rollouts import play_tasks, solver_envs

__all__ = ["play_tasks_on_ray", "EvalActor", "DEFAULT_CHUNK", "check_ray_address"]

#: the forms of ``--ray ADDRESS`` Ray accepts: ``local``/``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``
_RAY_ADDRESS = re.compile(r"(ray://)?[A-Za-z0-9._-]+:(\d{1,5})")

#: Questions per actor call.
DEFAULT_CHUNK = 32


def check_ray_address(address: Optional[str]) -> None:
    """Refuse a ``--ray`` address Ray cannot parse (one line naming the accepted forms), before any output is
    made: Ray itself fails with a traceback only when it is first contacted."""
    if address is None or address in ("local", "auto"):
        return
    match = _RAY_ADDRESS.fullmatch(address)
    if match is None or not 0 < int(match.group(2)) < 65536:
        raise InvalidArgumentError(
            f"--ray {address!r} is not a Ray address; give HOST:PORT, ray://HOST:PORT, auto, or no value for a "
            "local instance"
        )


def _connect(ray_config: RayConfig) -> None:
    """Join (or start) Ray, a failure being one line naming the address: the finished questions stay recorded."""
    try:
        init_ray(ray_config)
    except SearchGymRuntimeError:  # Ray is not installed: that message already names the fix
        raise
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
        where = ray_config.address or "a local instance"
        raise SearchGymRuntimeError(f"cannot reach Ray at {where} ({exc}); start the cluster, or check --ray") from None


class EvalActor:
    """A Ray actor playing chunks of questions with its own envs and agent."""

    def __init__(self, agent: Any, world: Any, retriever: Any, config: Any, first: Task) -> None:
        self.agent = agent
        self.seed = config.seed
        self.envs = solver_envs(world, retriever, config, first, config.concurrency)

    def run(self, tasks: list[Task]) -> list[Trajectory]:
        """Play every task of the chunk; the trajectories in the chunk's order."""
        done: list[Trajectory] = []
        play_tasks(self.agent, self.envs[: len(tasks)], tasks, done.extend, seed=self.seed)
        order = {task_key(t): i for i, t in enumerate(tasks)}
        return sorted(done, key=lambda tr: order[task_key(tr.task)])


def play_tasks_on_ray(
    ray_config: RayConfig,
    agent: Any,
    world: Any,
    retriever: Any,
    config: Any,
    tasks: Sequence[Task],
    on_done: Callable[[list[Trajectory]], None],
) -> None:
    """Play ``tasks`` on Ray actors; ``on_done`` gets each chunk's trajectories, in question order."""
    _connect(ray_config)
    size = ray_config.chunk or DEFAULT_CHUNK
    chunks = [list(tasks[i : i + size]) for i in range(0, len(tasks), size)]
    ordered_map(
        ray_config, EvalActor, (agent, world, retriever, config, tasks[0]), chunks, lambda _chunk, trajs: on_done(trajs)
    )
