"""One registry of rewards: each name → its wrapper factory, its advantage kind and where its step rewards live.

``searchgym play --reward``, the trainer's ``reward`` setting, its config validation and the verl
adapter all read this table, so a reward registered once (or given as ``package.module:Wrapper``)
works everywhere. A reward string is one name or a comma-separated stack, innermost first
(``dynasearcher,wcr``); ``binary`` is the env's own reward.

What each entry declares (docs/rewards.md has the formulas):

* ``advantage``: ``"outcome"`` (one number per rollout: GRPO / REINFORCE) or ``"step"`` (per-step
  rewards too: the trainer then uses SAPO, gdcr-sapo §3.4);
* ``step_rewards_key``: the reward-component key holding a Solver rollout's per-step rewards (a list)
  when ``advantage == "step"``;
* ``replaces_reward``: the wrapper overwrites the reward with a full definition of its own, so it must
  be innermost in a stack.

A user wrapper given as ``package.module:Wrapper`` declares the same things as class attributes
(``advantage = "step"``, ``step_rewards_key = "my_steps"``, ``replaces_reward``), so it gets SAPO when it
provides step rewards; :func:`register_reward` adds one under a short name.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

import gymnasium as gym

from ..core.comma_lists import comma_items
from ..errors import InvalidArgumentError
from .dynasearcher_reward import DynaSearcherReward
from .evidence_verifier_reward import EvidenceVerifierReward
from .extra_search_discount import ExtraSearchDiscount
from .graph_distance_reward import GraphDistanceReward
from .recording import RecordGames, take_recording
from .short_search_discount import ShortSearchDiscount
from .waypoint_coverage_reward import WaypointCoverageReward

ADVANTAGE_KINDS = ("outcome", "step")


@dataclass(frozen=True)
class RewardSpec:
    """A reward the game can be played and trained with (see the module docstring for each field)."""

    name: str
    factory: Optional[Callable]  # env -> wrapped env; None: the env's own reward
    advantage: str = "outcome"
    step_rewards_key: Optional[str] = None
    replaces_reward: bool = False
    description: str = ""
    # objects the factory needs besides the env, passed by keyword (e.g. "answerer": EVE's verifier model,
    # the policy itself under the trainer); RewardPlan.wrap(env, **context) supplies them
    needs: tuple = ()

    def __post_init__(self) -> None:
        if self.advantage not in ADVANTAGE_KINDS:
            raise InvalidArgumentError(
                f"reward {self.name!r}: advantage={self.advantage!r}; use one of {', '.join(ADVANTAGE_KINDS)}"
            )
        if self.advantage == "step" and not self.step_rewards_key:
            raise InvalidArgumentError(
                f"reward {self.name!r} has step advantages: name the reward component that holds "
                "the per-step rewards (step_rewards_key)"
            )

    @classmethod
    def of_wrapper(cls, wrapper: type, name: Optional[str] = None, description: str = "") -> "RewardSpec":
        """The spec a wrapper class declares through its class attributes."""
        return cls(
            name or getattr(wrapper, "name", None) or wrapper.__name__,
            wrapper,
            advantage=getattr(wrapper, "advantage", "outcome"),
            step_rewards_key=getattr(wrapper, "step_rewards_key", None),
            replaces_reward=bool(getattr(wrapper, "replaces_reward", False)),
            description=description or (wrapper.__doc__ or "").strip().split("\n")[0],
        )


@dataclass(frozen=True)
class RewardPlan:
    """A parsed reward string: the wrappers to apply (innermost first) and how to compute advantages."""

    specs: tuple

    @property
    def advantage(self) -> str:
        """``"step"`` when one wrapper of the stack gives per-step rewards, else ``"outcome"``."""
        return "step" if self.step_rewards_key else "outcome"

    @property
    def step_rewards_key(self) -> Optional[str]:
        """The reward component holding per-step rewards (``None``: outcome rewards only)."""
        keys = [s.step_rewards_key for s in self.specs if s.advantage == "step"]
        return keys[0] if keys else None

    @property
    def names(self) -> list[str]:
        """The names of the stack, innermost first."""
        return [s.name for s in self.specs]

    @property
    def needs(self) -> list[str]:
        """What the stack's factories need besides the env (see :attr:`RewardSpec.needs`)."""
        return sorted({n for s in self.specs for n in s.needs})

    def check_options(self, options: Optional[Mapping[str, Mapping[str, Any]]]) -> dict:
        """``options`` (reward name → keyword arguments of its wrapper, e.g. ``{"wcr": {"alpha": 0.5}}``) checked
        against the plan: each name must be one of its rewards and each keyword a parameter of that reward's
        factory (one line naming the problem otherwise). Returns them as plain dicts."""
        if options is None:
            return {}
        if not isinstance(options, Mapping):
            raise InvalidArgumentError(
                f"reward options must map a reward name to its keyword arguments, e.g. {{wcr: {{alpha: 0.5}}}}; "
                f"got {options!r}"
            )
        by_name = {s.name: s for s in self.specs}
        out = {}
        for name, kwargs in options.items():
            spec = by_name.get(name)
            if spec is None:
                raise InvalidArgumentError(
                    f"reward options for {name!r}, which is not in the reward stack {','.join(self.names)}; "
                    "drop them or add the reward"
                )
            if spec.factory is None:
                raise InvalidArgumentError(f"reward {name!r} is the env's own reward and takes no options")
            if not isinstance(kwargs, Mapping):
                raise InvalidArgumentError(
                    f"reward options for {name!r} must be a mapping of keyword arguments, got {kwargs!r}"
                )
            params = inspect.signature(spec.factory).parameters
            accepted = _keyword_parameters(params, skip=("env", *spec.needs))
            unknown = sorted(set(kwargs) - set(accepted)) if accepted is not None else []
            if unknown:
                listed = ", ".join(accepted or ()) or "(none)"
                raise InvalidArgumentError(f"reward {name!r} has no option {', '.join(unknown)}; its options: {listed}")
            for key, value in kwargs.items():
                _check_option_type(name, key, params[key].default if key in params else None, value)
            out[name] = dict(kwargs)
        return out

    def wrap(self, env, *, options: Optional[Mapping[str, Mapping[str, Any]]] = None, **context):
        """``env`` wrapped in every reward of the plan, innermost first; ``options`` gives a reward's wrapper
        keyword arguments by name (:meth:`check_options`); ``context`` supplies what a
        reward needs besides the env (e.g. ``answerer=`` for ``eve``), refused by name when missing.

        Recording stays outermost: an env made with ``export_path=``, or a stack with a
        :class:`~searchgym.wrappers.recording.RecordGames` on top, comes back with a ``RecordGames`` outside the
        reward wrappers, so the export holds the shaped events."""
        specs = [spec for spec in self.specs if spec.factory is not None]
        for spec in specs:
            missing = [n for n in spec.needs if context.get(n) is None]
            if missing:
                raise InvalidArgumentError(
                    f"reward {spec.name!r} needs {', '.join(missing)}= (e.g. the policy's text generator); "
                    f"the trainer passes its own, or call wrap_rewards(env, {spec.name!r}, {missing[0]}=...)"
                )
        options = self.check_options(options)
        if not specs:
            return env
        env, writer = take_recording(env)
        for spec in specs:
            needs = {n: context[n] for n in spec.needs}
            env = _wrapped(spec.name, spec.factory, env, needs, options.get(spec.name, {}))
        return RecordGames(env, writer) if writer is not None else env

    def missing_in(self, env) -> list[str]:
        """The rewards of the plan that ``env``'s wrapper stack does not apply: a spec is found when one
        wrapper is an instance of its factory class or declares its ``name``. Lets a trainer given
        already-built envs refuse ones that would silently play another reward (fail closed)."""
        layers = []
        while env is not None:
            layers.append(env)
            env = getattr(env, "env", None) if isinstance(env, gym.Wrapper) else None
        missing = []
        for spec in self.specs:
            if spec.factory is None:
                continue
            found = any(
                (isinstance(spec.factory, type) and isinstance(layer, spec.factory))
                or getattr(layer, "name", None) == spec.name
                for layer in layers
            )
            if not found:
                missing.append(spec.name)
        return missing


def _wrapped(name: str, factory: Callable, env, needs: Mapping[str, Any], options: Mapping[str, Any]):
    """Reward ``name``'s ``factory`` applied to ``env``; refused in one line when what it builds is not an env (a
    user class given as ``package.module:Name`` that is no wrapper), instead of failing at the first ``reset``."""
    wrapped = factory(env, **needs, **options)
    if not isinstance(wrapped, gym.Env):
        raise InvalidArgumentError(
            f"reward {name!r} built a {type(wrapped).__name__}, not a wrapped env; give a gymnasium.Wrapper subclass"
        )
    return wrapped


def _keyword_parameters(params: Mapping[str, inspect.Parameter], skip: Sequence[str]) -> Optional[list[str]]:
    """The keyword parameters of a factory's signature ``params`` besides ``skip`` (``None``: it takes any, via
    ``**kwargs``)."""
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return [
        p.name
        for p in params.values()
        if p.name not in skip and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]


def _check_option_type(name: str, key: str, default: Any, value: Any) -> None:
    """Refuse an option whose value is not of its default's plain type (``true``/``false`` for a flag, a number
    for a number), so a config typo fails when the config is read, not when the first env is wrapped."""
    if default is None or default is inspect.Parameter.empty or type(default) not in (bool, int, float, str):
        return
    kind = type(default)
    ok = (
        isinstance(value, kind)
        if kind in (bool, str)
        else isinstance(value, (int, float)) and not isinstance(value, bool)
    )
    if not ok:
        expected = {bool: "true or false", str: "a string"}.get(kind, "a number")
        raise InvalidArgumentError(f"reward {name!r} option {key} expects {expected}, got {value!r}")


_REGISTRY: dict[str, RewardSpec] = {}


def register_reward(spec: RewardSpec, *, overwrite: bool = False) -> RewardSpec:
    """Add ``spec`` under ``spec.name`` (refused if taken, unless ``overwrite``)."""
    if "," in spec.name or ":" in spec.name or not spec.name:
        raise InvalidArgumentError(f"reward name {spec.name!r}: use a plain word (no ',' or ':')")
    if spec.name in _REGISTRY and not overwrite:
        raise InvalidArgumentError(f"reward {spec.name!r} is already registered; pass overwrite=True to replace it")
    _REGISTRY[spec.name] = spec
    return spec


def available_rewards() -> list[str]:
    """Every registered reward name."""
    return sorted(_REGISTRY)


def get_reward(name: str) -> RewardSpec:
    """The spec of a registered name or of a ``package.module:Wrapper`` path."""
    name = name.strip()
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            wrapper = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise InvalidArgumentError(
                f"reward {name!r}: cannot import the wrapper ({exc}); give 'package.module:Name'"
            ) from None
        if not (inspect.isclass(wrapper) and issubclass(wrapper, gym.Wrapper)):  # never call os:system and the like
            what = wrapper.__name__ if inspect.isclass(wrapper) else type(wrapper).__name__
            raise InvalidArgumentError(
                f"reward {name!r} is a {what}, not a gymnasium.Wrapper subclass; give 'package.module:Wrapper' "
                "naming one"
            )
        return RewardSpec.of_wrapper(wrapper, name=name)
    if name not in _REGISTRY:
        raise InvalidArgumentError(
            f"unknown reward {name!r}; choose from {', '.join(available_rewards())} "
            "or give a wrapper as 'package.module:Wrapper'"
        )
    return _REGISTRY[name]


def reward_plan(reward: str | Sequence[str]) -> RewardPlan:
    """Parse ``"binary"``, ``"wcr"``, ``"dynasearcher,wcr"`` or ``"pkg.mod:Wrapper"`` (or a list of names)."""
    names = comma_items(
        reward,
        none="no reward given; use binary, one reward name or a comma-separated stack",
        gap=f"reward {reward!r} has an empty name between commas; drop the extra comma",
    )
    specs = [get_reward(n) for n in names]
    if len(specs) > 1 and any(s.factory is None for s in specs):
        raise InvalidArgumentError(f"{reward!r}: 'binary' is the env's own reward and cannot be stacked; drop it")
    for i, s in enumerate(specs):
        if s.replaces_reward and i > 0:
            raise InvalidArgumentError(
                f"{s.name} replaces the reward, so it must come first (innermost), e.g. {s.name},wcr"
            )
        if s.name in names[:i]:
            raise InvalidArgumentError(f"reward {s.name!r} is listed twice in {reward!r}; list each reward once")
    if sum(s.advantage == "step" for s in specs) > 1:
        raise InvalidArgumentError(f"{reward!r}: only one reward of a stack may give per-step rewards (SAPO reads one)")
    return RewardPlan(tuple(specs))


def reward_options_from_items(items: Sequence[str], *, flag: str = "--reward-option") -> dict[str, dict]:
    """Command-line ``NAME.KEY=VALUE`` items as reward name → keyword arguments (what :meth:`RewardPlan.wrap`
    takes as ``options``), each VALUE read as YAML (``false``, ``0.5``) as ``--set`` reads it; a name may hold dots
    (``pkg.mod:Wrapper.alpha=0.5``: the key is after the last one). A malformed item is one line naming ``flag``
    and the form; the names and keys are checked against a stack by :meth:`RewardPlan.check_options`."""
    from ..core.config_io import override_value

    options: dict[str, dict] = {}
    for item in items:
        target, sep, raw = item.partition("=")
        name, dot, key = (part.strip() for part in target.rpartition("."))
        if not sep or not dot or not name or not key:
            raise InvalidArgumentError(
                f"{flag} {item!r} must look like NAME.KEY=VALUE (e.g. wcr.waypoint_answer_credit=false)"
            )
        options.setdefault(name, {})[key] = override_value(raw, item, what=flag)
    return options


def wrap_rewards(env, reward: str | Sequence[str], **context):
    """``env`` wrapped in the rewards named by ``reward`` (see :func:`reward_plan`); ``context`` as in
    :meth:`RewardPlan.wrap`."""
    return reward_plan(reward).wrap(env, **context)


register_reward(RewardSpec("binary", None, description="the env's own reward: 1 for a correct answer, else 0"))
for _wrapper in (
    WaypointCoverageReward,
    GraphDistanceReward,
    DynaSearcherReward,
    ExtraSearchDiscount,
    ShortSearchDiscount,
):
    register_reward(RewardSpec.of_wrapper(_wrapper))


def _eve_in_self_play(env, answerer):
    """EVE's rewards for the self-play game: Solvers of a replayed or fallback task without an evidence
    span are scored on EM alone (``missing_evidence="answer_only"``) instead of stopping the run."""
    return EvidenceVerifierReward(env, answerer, missing_evidence="answer_only")


register_reward(
    RewardSpec(
        "eve",
        _eve_in_self_play,
        replaces_reward=True,
        needs=("answerer",),
        description="EVE-Agent: Proposer 1/2 F_fmt + R_DZ + 0.5 V + 0.1 B (needs an answerer model), "
        "Solver EM + 0.3 F1(e)",
    )
)
