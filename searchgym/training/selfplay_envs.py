"""The envs a self-play run plays: built from the config and reward-wrapped, checked when given, saved and
restored with a checkpoint, and the Solver envs its validation plays."""

from __future__ import annotations

from typing import Any, Sequence

from ..core.rng_state import numpy_generator_from_state
from ..errors import InvalidArgumentError
from ..wrappers.registry import reward_plan
from .selfplay_config import TrainConfig

__all__ = [
    "check_rewards_applied",
    "env_state",
    "load_env_state",
    "make_envs",
    "validation_env",
]


def make_envs(config: TrainConfig, n: int, **context: Any) -> list:
    """``n`` envs of ``config.env_id`` sharing one world/retriever (via ``clone()`` where the env has it),
    each wrapped in ``config.reward`` (with ``config.reward_options``); ``context`` supplies what a reward needs
    besides the env (the trainer passes ``answerer=`` its generator for ``eve``)."""
    from ..envs.registration import env_spec  # registers the envs too

    kwargs = {**config.env_kwargs, "max_turns": config.max_turns}  # the config validated that they agree
    if env_spec(config.env_id).group:  # it plays a group of Solver rollouts per question
        kwargs["group_size"] = config.group_size
    plan = reward_plan(config.reward)
    return [plan.wrap(e, options=config.reward_options, **context) for e in make_env_copies(config.env_id, kwargs, n)]


def make_env_copies(env_id: str, kwargs: dict, n: int) -> list:
    """``n`` envs of ``env_id``: one made with ``kwargs``, the rest its ``clone()`` (sharing its world, index and
    verifier, built once) where the env has one, else made anew the same way."""
    import gymnasium as gym

    first = gym.make(env_id, **kwargs)
    clone = getattr(first.unwrapped, "clone", None)
    return [first] + [clone() if callable(clone) else gym.make(env_id, **kwargs) for _ in range(n - 1)]


def check_rewards_applied(envs: Sequence, reward: str) -> None:
    """Refuse envs that do not apply the config's ``reward`` stack: a trainer given unwrapped envs with
    ``reward=dynasearcher`` would otherwise train on the binary reward while logging ``dynasearcher``.
    Objects that are not Gymnasium envs (a unit test's stand-in that is never stepped) are not checked."""
    import gymnasium as gym

    plan = reward_plan(reward)
    for j, env in enumerate(envs):
        missing = plan.missing_in(env) if isinstance(env, gym.Env) else []
        if missing:
            raise InvalidArgumentError(
                f"env {j} passed to the trainer does not apply reward {', '.join(missing)} of reward={reward!r}; "
                f"wrap it with searchgym.wrappers.registry.wrap_rewards(env, {reward!r}), or let the trainer "
                "build the envs (envs=None)"
            )


def env_state(env) -> Any:
    """Plain-data (JSON) state of an env: its ``state_dict()`` (every searchgym env has one: RNGs,
    replay buffer, pool cursor, noise window), else the bit generator state of Gymnasium's seeded
    ``np_random`` for any other env (nothing for an object that has neither)."""
    base = getattr(env, "unwrapped", env)
    if callable(getattr(base, "state_dict", None)):
        return {"state_dict": base.state_dict()}
    rng = getattr(base, "np_random", None)
    return {"np_random": rng.bit_generator.state if rng is not None else None}


def load_env_state(env, state: Any) -> None:
    """Inverse of :func:`env_state`."""
    base = getattr(env, "unwrapped", env)
    if "state_dict" in state:
        base.load_state_dict(state["state_dict"])
    elif state.get("np_random") is not None:
        base.np_random = numpy_generator_from_state(state["np_random"])


def validation_env(config: TrainConfig) -> Any:
    """A ``KGSolver-v0`` env for validation with the run's env settings (but ``group_size``) and ``max_turns``."""
    import gymnasium as gym

    import searchgym.envs  # noqa: F401  (registration)

    kwargs = {k: v for k, v in config.env_kwargs.items() if k != "group_size"}
    kwargs["max_turns"] = config.max_turns  # the config validated that an env_kwargs copy agrees
    return gym.make("KGSolver-v0", **kwargs)
