"""searchgym's Solver env as a GEM env (``gem.core.Env``; written and tested against gem-llm 0.1.0).

GEM's envs are Gymnasium-style text envs: ``reset(seed)`` → ``(observation, info)`` and ``step(action)`` →
``(observation, reward, terminated, truncated, info)``, with per-turn rewards (GEM's trainers compute
returns over turns). :class:`SearchGymGemEnv` plays one ``KGSolver-v0`` rollout per episode through
:class:`~searchgym.integrations.text_rollout.TextRollout`:

* ``reset(seed)`` draws a task of its source (``pool=``, ``flashrag=``, ``parquet=``, ``tasks=``; none: the
  env's built-in tasks) with its seeded RNG — constructed with ``seed`` (``gem.make_vec`` gives env *i*
  ``seed + i``), re-seeded by ``reset(seed=...)`` — and returns the env's Solver prompt;
* ``step(text)`` returns the env's insertion as the next observation (``<information>…</information>`` or
  a corrective message; in the function-calling protocol the tool replies, with ``info["use_tool"]`` set so
  GEM's chat observation wrapper renders them as ``tool`` messages), the turn's reward (the env's reward
  events after its reward wrappers: 0 until the rollout ends, then e.g. ``1 + wcr_bonus``) and GEM's
  ``TERMINAL_STATE`` as the observation once the rollout ended; ``info["reward_components"]`` holds the
  named components, ``info["metrics"]`` what :meth:`TextRollout.metrics` reports.

GEM's trainers tokenize each turn's observation and train on the action's sampled tokens only; with GEM's
``concat_chat`` / ``concat_with_action`` observation wrappers the context is the conversation so far.
"""

from __future__ import annotations

import random
from typing import Any, Optional, Sequence

from gem.core import Env
from gem.utils.constants import TERMINAL_STATE

from searchgym.core.types import Task

from ...errors import InvalidArgumentError
from ..environments import EnvSpec, reward_names
from ..task_sources import solver_tasks
from ..text_rollout import TEXT_ENV_ID, TextRollout

__all__ = ["SearchGymGemEnv", "GEM_VERSION_READ"]

#: The gem-llm release this env was written and tested against.
GEM_VERSION_READ = "0.1.0"


class SearchGymGemEnv(Env):
    """One searchgym Solver rollout per GEM episode (see the module docstring).

    ``rewards``: reward wrapper names (``"binary"``, ``"wcr"``, ``"dynasearcher,wcr"``, ...); ``reward_options``:
    their wrappers' keyword arguments by reward name (``{"wcr": {"waypoint_answer_credit": False}}``); ``protocol``:
    ``"tags"`` or ``"function_calling"``; ``kg_tool``, ``max_turns`` and ``env_kwargs`` (``world``,
    ``retriever`` URL, ``judge``, ...) configure ``KGSolver-v0``; one task source at most."""

    def __init__(
        self,
        rewards: Any = "binary",
        *,
        reward_options: Optional[dict] = None,
        protocol: str = "tags",
        kg_tool: bool = False,
        max_turns: Optional[int] = None,
        env_kwargs: Optional[dict] = None,
        pool: Any = None,
        flashrag: Any = None,
        parquet: Any = None,
        tasks: Optional[Sequence[Task]] = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self._config = dict(
            rewards=rewards,
            reward_options=reward_options,
            protocol=protocol,
            kg_tool=kg_tool,
            max_turns=max_turns,
            env_kwargs=env_kwargs,
            pool=pool,
            flashrag=flashrag,
            parquet=parquet,
            tasks=tasks,
        )
        kwargs = {**(env_kwargs or {}), "protocol": protocol, "kg_tool": kg_tool}
        if max_turns is not None:
            kwargs["max_turns"] = int(max_turns)
        spec = EnvSpec(TEXT_ENV_ID, reward_names(rewards), kwargs, reward_options=reward_options or {})
        self.rollout = TextRollout(spec)
        self.tasks = solver_tasks(
            self.rollout.env.unwrapped, pool=pool, flashrag=flashrag, parquet=parquet, tasks=tasks
        )
        if not self.tasks:
            raise InvalidArgumentError("the task source holds no task; give a pool, FlashRAG file or tasks with rows")
        self.seed = int(seed)
        self._rng = random.Random(self.seed)

    def reset(self, seed: Optional[int] = None) -> tuple[str, dict[str, Any]]:
        """Draw a task (see the module docstring); the env's prompt and ``info`` (task id, question)."""
        super().reset(seed)  # GEM's own convention: a seed also seeds Python's and numpy's global RNGs
        if seed is not None:
            self._rng = random.Random(int(seed))
        task = self.tasks[self._rng.randrange(len(self.tasks))]
        prompt = self.rollout.reset(seed=self._rng.randrange(2**31), options={"task": task})
        return prompt, {"task_id": task.id, "question": task.question, "use_tool": False}

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Play the model's turn (see the module docstring)."""
        step = self.rollout.step(action)
        info: dict[str, Any] = {
            "reward_components": step.components,
            "use_tool": self.rollout.protocol == "function_calling",
        }
        if step.done:
            info["metrics"] = self.rollout.metrics()
        observation = TERMINAL_STATE if step.done else step.observation
        return observation, float(step.reward), step.terminated, step.truncated, info

    def spawn(self, same_state: bool = False, **kwargs: Any) -> "SearchGymGemEnv":
        """A new env with this one's settings (``kwargs`` override them; ``seed`` defaults to this env's + 1);
        ``same_state``: also this env's RNG state (the same next draws)."""
        child = SearchGymGemEnv(**{**self._config, "seed": self.seed + 1, **kwargs})
        if same_state:
            child._rng.setstate(self._rng.getstate())
        return child

    def tools(self) -> list[dict]:
        """The env's tool schemas in the function-calling protocol (for the chat template's ``tools=``)."""
        return self.rollout.tools()
