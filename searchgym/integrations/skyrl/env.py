"""searchgym's Solver env as a SkyRL-Gym text env (``skyrl_gym.envs.base_text_env.BaseTextEnv``; written and
tested against skyrl-gym 0.4.0).

SkyRL-train's generator builds one env per trajectory with ``skyrl_gym.make(env_class, env_config=...,
extras=...)``: ``env_config`` is the ``environment.skyrl_gym.<env_class>`` block of its Hydra config
(here: ``rewards``, ``reward_options`` and ``env_kwargs``, as in verl's agent-loop YAML) and ``extras`` the
dataset row's other columns but ``prompt`` and ``env_class``, plus ``max_turns`` (``generator.max_turns``,
which becomes the env's turn limit). ``init(prompt)`` resets the env on the row's task
(:func:`~searchgym.integrations.skyrl.rows.row_options` over the extras and the prompt; a row without a task
is refused there) and returns the env's prompt as one user message; ``step(text)`` plays the model's turn
and returns the env's insertion as the observation (tags: a ``user`` message holding
``<information>…</information>`` or a corrective message; function calling: the env's ``tool`` messages),
the step's reward (the env's reward events, after its reward wrappers — 0 until the rollout ends, then e.g.
``1 + wcr_bonus``) and ``done``. ``get_metrics()`` reports the reward components, which SkyRL logs per env
class.

With ``generator.use_conversation_multi_turn=false`` SkyRL appends each observation's tokens to the response
(mask 0) after the sampled ids (mask 1): exactly searchgym's tag-protocol stream, the one the verl and TRL
adapters train on (:mod:`searchgym.integrations.text_rollout`). The rollout state behind the env is
:class:`~searchgym.integrations.text_rollout.TextRollout` (one cached env per process and settings).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from ...errors import InvalidArgumentError
from ..environments import EnvSpec
from ..text_rollout import TEXT_ENV_ID, TextRollout
from .rows import ENV_CLASS, row_options

__all__ = ["SearchGymSkyRLEnv", "register_env", "SKYRL_GYM_VERSION_READ"]

#: The skyrl-gym release this env was written and tested against.
SKYRL_GYM_VERSION_READ = "0.4.0"


def _plain(cfg: Any) -> dict:
    """A plain dict of SkyRL's env config (an omegaconf ``DictConfig``, a mapping or ``None``)."""
    from omegaconf import DictConfig, OmegaConf

    if cfg is None:
        return {}
    if isinstance(cfg, DictConfig):  # SkyRL passes its Hydra config block
        return dict(OmegaConf.to_container(cfg, resolve=True))  # type: ignore[arg-type]
    if isinstance(cfg, Mapping):
        return dict(cfg)
    raise InvalidArgumentError(
        f"env_config must be a mapping (SkyRL's environment.skyrl_gym.{ENV_CLASS} block), got {type(cfg).__name__}"
    )


class SearchGymSkyRLEnv(BaseTextEnv):
    """One searchgym Solver rollout per SkyRL trajectory (see the module docstring)."""

    def __init__(self, env_config: Any = None, extras: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__()
        extras = dict(extras or {})
        cfg = _plain(env_config)
        env_kwargs = dict(cfg.get("env_kwargs") or {})
        if extras.get("max_turns") is not None:  # SkyRL's generator.max_turns is the turn limit
            env_kwargs["max_turns"] = int(extras["max_turns"])
        self.spec = EnvSpec.from_config({**cfg, "env_id": cfg.get("env_id", TEXT_ENV_ID), "env_kwargs": env_kwargs})
        self.extras = extras
        self.seed: Optional[int] = None
        self.options: dict = {}
        self.rollout = TextRollout(self.spec)
        self.max_turns = int(self.rollout.env.unwrapped.max_turns)

    def init(self, prompt: Any = None) -> tuple[list[dict], dict[str, Any]]:
        """Reset the env on the row's task (read from the extras and, for a Search-R1 row whose question is in
        its prompt, the ``prompt`` SkyRL passes here); the env's prompt as one user message (the row's prompt is
        the env's own for rows from :func:`~searchgym.integrations.skyrl.rows.dataset_rows`; a Search-R1 row's
        tag-teaching prompt is kept by its task), and the task's id and question."""
        row = dict(self.extras) if prompt is None else {**self.extras, "prompt": prompt}
        self.seed, self.options = row_options(row)
        self.rollout.reset(seed=self.seed, options=self.options)
        self.turns = 0
        task = self.rollout.task
        return self.rollout.prompt_messages(), {"task_id": task.id, "question": task.question}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Play the model's turn (see the module docstring)."""
        self.turns += 1
        step = self.rollout.step(action)
        return BaseTextEnvStepOutput(
            observations=step.messages,
            reward=float(step.reward),
            done=step.done,
            metadata={"reward_components": step.components, "terminated": step.terminated},
        )

    def get_metrics(self) -> dict[str, Any]:
        """The rollout's reward, reward components, turns and whether it answered."""
        return self.rollout.metrics()

    def tools(self) -> list[dict]:
        """The env's tool schemas in the function-calling protocol (render them into the row's prompt with
        the chat template's ``tools=``); ``[]`` for tags."""
        return self.rollout.tools()


def register_env(env_class: str = ENV_CLASS) -> str:
    """Register :class:`SearchGymSkyRLEnv` with SkyRL-Gym as ``env_class`` (idempotent) — call it in the
    SkyRL entrypoint task, before training starts; returns the name."""
    import skyrl_gym

    spec = skyrl_gym.registry.get(env_class)
    target = f"{__name__}:SearchGymSkyRLEnv"
    if spec is not None:
        if spec.entry_point not in (target, SearchGymSkyRLEnv):
            raise InvalidArgumentError(
                f"SkyRL-Gym already has an env {env_class!r} ({spec.entry_point}); register searchgym's under "
                "another name: register_env('searchgym_kg')"
            )
        return env_class
    skyrl_gym.register(id=env_class, entry_point=target)
    return env_class
