"""One registry of env families: each searchgym env id → its entry point and what it is (done on ``import searchgym``).

Everything that needs an env fact reads this table: ``gymnasium.make`` (every family is registered with
Gymnasium), the configs' ``env_id`` validation, the trainer and rejection sampling (which envs take a
``group_size``), ``searchgym play`` (its ``--env`` choices), the framework adapters (which envs a language model
can play) and the verl agent loops (which family each loop plays). A new env family is one
:func:`register_env_family` call.

What each :class:`EnvFamily` declares:

* ``entry_point``: ``"package.module:Class"``; a string, so registering imports nothing heavy (the env module
  loads on the first ``gymnasium.make``);
* ``kind``: the ``info["kind"]`` its ``info`` dicts carry (:mod:`searchgym.core.info`): ``"single"`` (one
  rollout), ``"group"`` (G Solver slots stepped together), ``"selfplay"`` (a Proposer, then G Solvers) or
  ``"navigate"`` (numeric observations); the slotted kinds take ``group_size=``;
* ``roles``: the roles whose turns it plays (``("solver",)``, ``("proposer", "solver")``, ``()`` for a
  non-text env);
* ``text``: observations and actions are text, so a language model (and ``searchgym play``'s scripted agents,
  TRL, verl, SkyRL, GEM, verifiers) can play it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterator, Mapping, Optional

import gymnasium as gym

from ..core.info import INFO_KINDS, SLOTTED_KINDS, InfoKind
from ..core.rewards import ROLES
from ..core.types import Role
from ..errors import InvalidArgumentError

__all__ = [
    "ENV_IDS",
    "EnvFamily",
    "register_env_family",
    "env_spec",
    "env_ids",
    "register_envs",
    "check_env_id",
]


@dataclass(frozen=True)
class EnvFamily:
    """One registered env id and what it is (see the module docstring for each field)."""

    env_id: str
    entry_point: str
    kind: InfoKind  # the ``info["kind"]`` its envs report
    roles: tuple[Role, ...] = ()
    text: bool = True
    description: str = ""

    def __post_init__(self) -> None:
        if ":" not in self.entry_point:
            raise InvalidArgumentError(f"env {self.env_id!r}: entry_point must be 'package.module:Class'")
        if self.kind not in INFO_KINDS:
            raise InvalidArgumentError(f"env {self.env_id!r}: kind={self.kind!r}; use one of {', '.join(INFO_KINDS)}")
        bad = [r for r in self.roles if r not in ROLES]
        if bad:
            raise InvalidArgumentError(f"env {self.env_id!r}: roles {bad}; use {', '.join(ROLES)}")
        if self.text and not self.roles:
            raise InvalidArgumentError(f"env {self.env_id!r} is a text env: name the roles it plays")

    @property
    def group(self) -> bool:
        """Whether the env steps G Solver slots together (it takes ``group_size=``)."""
        return self.kind in SLOTTED_KINDS


_REGISTRY: dict[str, EnvFamily] = {}


class _EntryPoints(Mapping[str, str]):
    """A read-only, live view of the registry: env id → entry point (:data:`ENV_IDS`)."""

    def __getitem__(self, env_id: str) -> str:
        return _REGISTRY[env_id].entry_point

    def __iter__(self) -> Iterator[str]:
        return iter(list(_REGISTRY))

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return f"ENV_IDS({dict(self)!r})"


#: every registered env id → its entry point (a live, read-only view of the registry)
ENV_IDS: Mapping[str, str] = _EntryPoints()


def register_env_family(family: EnvFamily, *, overwrite: bool = False) -> EnvFamily:
    """Add ``family`` (refused if its id is taken, unless ``overwrite``) and register it with Gymnasium."""
    if family.env_id in _REGISTRY and not overwrite:
        raise InvalidArgumentError(f"env {family.env_id!r} is already registered; pass overwrite=True to replace it")
    _REGISTRY[family.env_id] = family
    if overwrite and family.env_id in gym.registry:
        del gym.registry[family.env_id]
    _register_with_gymnasium(family)
    return family


def _register_with_gymnasium(family: EnvFamily) -> None:
    """Register one family's id with Gymnasium unless it already is."""
    if family.env_id not in gym.registry:
        gym.register(id=family.env_id, entry_point=family.entry_point)


def register_envs() -> None:
    """Register every family with Gymnasium (idempotent: ids already registered are left alone)."""
    for family in _REGISTRY.values():
        _register_with_gymnasium(family)


def check_env_id(env_id: str, *, key: str = "env_id") -> str:
    """Return ``env_id`` if it is a registered searchgym env; else raise naming the closest ones.

    Configs call this when they are built, so a typo is reported before a model loads (gymnasium's own
    "did you mean" would only come at ``gym.make`` time, and from its whole registry).
    """
    if env_id in _REGISTRY:
        return env_id
    lower = {i.lower(): i for i in _REGISTRY}
    close = [lower[m] for m in difflib.get_close_matches(str(env_id).lower(), list(lower), n=2, cutoff=0.75)]
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise InvalidArgumentError(f"{key}={env_id!r} is not a searchgym env; {hint}use one of {', '.join(_REGISTRY)}")


def env_spec(env_id: str) -> EnvFamily:
    """The family registered under ``env_id`` (an unknown id raises as :func:`check_env_id` does)."""
    return _REGISTRY[check_env_id(env_id)]


def env_ids(
    *,
    kind: Optional[InfoKind] = None,
    role: Optional[Role] = None,
    text: Optional[bool] = None,
    group: Optional[bool] = None,
) -> tuple[str, ...]:
    """The registered env ids, in registration order, that match every filter given: its ``kind``, a
    ``role`` it plays, whether it is a ``text`` env, whether it is a ``group`` (slotted) env."""
    return tuple(
        f.env_id
        for f in _REGISTRY.values()
        if (kind is None or f.kind == kind)
        and (role is None or role in f.roles)
        and (text is None or f.text == text)
        and (group is None or f.group == group)
    )


for _family in (
    EnvFamily(
        "KGSolver-v0",
        "searchgym.envs.solver:KGSolverEnv",
        "single",
        ("solver",),
        description="one Solver rollout on one task",
    ),
    EnvFamily(
        "KGProposer-v0",
        "searchgym.envs.proposer:KGProposerEnv",
        "single",
        ("proposer",),
        description="one Proposer rollout, then the rule filters and RAG verification",
    ),
    EnvFamily(
        "KGSolverGroup-v0",
        "searchgym.envs.group:KGSolverGroupEnv",
        "group",
        ("solver",),
        description="G Solver rollouts of one task stepped together (a GRPO group)",
    ),
    EnvFamily(
        "KGSelfPlay-v0",
        "searchgym.envs.selfplay:KGSelfPlayEnv",
        "selfplay",
        ("proposer", "solver"),
        description="the Search Self-Play game: a Proposer's question, then G Solvers",
    ),
    EnvFamily(
        "KGNavigate-v0",
        "searchgym.envs.navigate:KGNavigateEnv",
        "navigate",
        text=False,
        description="discrete actions over numeric observations, for classic RL",
    ),
):
    register_env_family(_family)
