"""The searchgym env an adapter plays (verl agent loops and reward function, TRL entry points): an env
id, reward wrappers and their options, kwargs.

Envs are built once per (process, config) and reused: building the default world, pool and index
takes seconds, and verl instantiates an agent loop per sample (TRL an environment per rollout). Bad
names fail with the valid ones.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import gymnasium as gym

from searchgym.core.moved import moved_getattr
from searchgym.envs.registration import env_ids, env_spec, register_envs
from searchgym.wrappers.registry import reward_plan, wrap_rewards

from ..errors import InvalidArgumentError

logger = logging.getLogger(__name__)

__all__ = ["EnvSpec", "make_env", "cached_env", "state_lock", "reward_names"]


def reward_names(rewards: Any) -> tuple[str, ...]:
    """Reward wrapper names from ``"wcr"``, ``"dynasearcher,wcr"`` or a sequence of names; ``"binary"``
    alone (the env's own reward, no wrapper) gives ``()``. Validated by :class:`EnvSpec`."""
    raw = rewards.split(",") if isinstance(rewards, str) else (rewards or ())
    names = tuple(str(r).strip() for r in raw if str(r).strip())
    return () if names == ("binary",) else names


@dataclass(frozen=True)
class EnvSpec:
    """Which env to play: ``env_id``, reward wrapper names innermost first (``("wcr",)``), and
    ``env_kwargs`` for ``gymnasium.make`` (``world``, ``retriever`` URL, ``group_size``, ``max_turns``,
    ``protocol`` ...). ``wrappers``: further wrapper factories (``env -> wrapped env``, applied after
    the named rewards) for wrappers that need arguments, e.g. EVE's answerer. ``reward_options``: keyword
    arguments of the named rewards' wrappers by reward name (``{"wcr": {"waypoint_answer_credit": False}}``),
    checked against the stack (:meth:`~searchgym.wrappers.registry.RewardPlan.check_options`)."""

    env_id: str = "KGSolver-v0"
    rewards: tuple[str, ...] = ()
    env_kwargs: dict = field(default_factory=dict)
    wrappers: tuple = ()
    reward_options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.env_id not in env_ids():
            raise InvalidArgumentError(f"unknown env id {self.env_id!r}; searchgym registers {', '.join(env_ids())}")
        if not env_spec(self.env_id).text:  # the adapters play text envs (KGNavigate-v0 is numeric)
            raise InvalidArgumentError(
                f"env {self.env_id!r} cannot be played by a language-model adapter; "
                f"use one of {', '.join(env_ids(text=True))}"
            )
        object.__setattr__(self, "rewards", tuple(self.rewards))
        object.__setattr__(self, "wrappers", tuple(self.wrappers))
        if self.rewards:  # registered names (or 'package.module:Wrapper'), a valid stack, options it takes
            object.__setattr__(self, "reward_options", reward_plan(self.rewards).check_options(self.reward_options))
        elif self.reward_options:
            names = ",".join(map(str, self.reward_options)) if isinstance(self.reward_options, Mapping) else ""
            raise InvalidArgumentError(
                f"reward options {self.reward_options!r} given with no reward stack (rewards is empty: the env's own "
                f"reward); add the reward they configure to rewards, e.g. rewards={names or 'wcr'!r}"
            )
        else:
            object.__setattr__(self, "reward_options", {})
        for w in self.wrappers:
            if not callable(w):
                raise InvalidArgumentError(f"wrappers must be callables env -> wrapped env, got {type(w).__name__}")

    @classmethod
    def from_config(cls, cfg: Any) -> "EnvSpec":
        """From a mapping (verl's agent-loop YAML or a row's ``extra_info["searchgym"]``); ``rewards``
        may be a comma-separated string, ``reward_options`` a mapping reward name → keyword arguments."""
        cfg = dict(cfg or {})
        unknown = set(cfg) - {"env_id", "rewards", "env_kwargs", "reward_options"}
        if unknown:
            raise InvalidArgumentError(
                f"unknown searchgym env settings {sorted(unknown)}; use env_id, rewards, env_kwargs, reward_options"
            )
        rewards = reward_names(cfg.get("rewards"))
        return cls(
            cfg.get("env_id", "KGSolver-v0"),
            rewards,
            dict(cfg.get("env_kwargs") or {}),
            reward_options=cfg.get("reward_options") or {},
        )

    def key(self) -> str:
        """A hashable identity of this spec (kwargs and reward options by value, wrapper factories by identity)."""
        extra = [f"{getattr(w, '__qualname__', type(w).__name__)}@{id(w)}" for w in self.wrappers]
        parts = [self.env_id, list(self.rewards), self.env_kwargs, self.reward_options, extra]
        return json.dumps(parts, sort_keys=True, default=str)


def make_env(spec: EnvSpec):
    """A fresh env for ``spec`` with its reward wrappers (given their options)."""
    register_envs()
    env = gym.make(spec.env_id, **spec.env_kwargs).unwrapped  # the text envs skip gym's checker wrappers
    env = wrap_rewards(env, spec.rewards, options=spec.reward_options) if spec.rewards else env
    for wrap in spec.wrappers:
        env = wrap(env)
    return env


_CACHE: dict[str, Any] = {}
_CACHE_LOCK = threading.Lock()
_STATE_LOCKS: "weakref.WeakKeyDictionary[Any, threading.Lock]" = weakref.WeakKeyDictionary()


def cached_env(spec: EnvSpec, clone: bool = True):
    """An env for ``spec`` sharing this process's world, index and judge: a copy of the cached
    prototype (``clone=True``: safe to play concurrently) or the prototype itself.

    Self-play copies also share the prototype's replay buffer (cleared every ``replay_reset_every``
    games of the process) and its noise window of recent Proposer rollouts: the games a worker plays
    form one stream, as the env driven alone does (docs/envs.md, "Env alone vs. under the trainer")."""
    with _CACHE_LOCK:
        proto = _CACHE.get(spec.key())
        if proto is None:
            proto = _CACHE[spec.key()] = make_env(spec)
    if not clone:
        return proto
    env = copy.deepcopy(proto)  # shares world/index/judge (see docs/envs.md "Copies and snapshots")
    base, proto_base = env.unwrapped, proto.unwrapped
    if hasattr(proto_base, "replay") and hasattr(proto_base, "validation"):
        base.own_replay = base.replay = proto_base.own_replay  # the buffer every reset without options uses
        base.validation.recent = proto_base.validation.recent
    return env


def state_lock(env) -> Optional[threading.Lock]:
    """The lock to hold while stepping ``env`` from a thread when its copies share mutable state
    (self-play copies from :func:`cached_env` share the replay buffer and noise window, which are not
    thread-safe); ``None`` when ``env`` shares none (its copies step concurrently)."""
    base = env.unwrapped
    replay = getattr(base, "replay", None)
    if replay is None or not hasattr(base, "validation"):
        return None
    with _CACHE_LOCK:
        lock = _STATE_LOCKS.get(replay)
        if lock is None:
            lock = _STATE_LOCKS[replay] = threading.Lock()
        return lock


__getattr__ = moved_getattr(__name__)  # a moved name (TEXT_ENV_IDS) raises naming its new home
