"""Reward events: the role-tagged rewards an env reports in ``info["rewards"]`` (docs/envs.md, reward events).

An env emits one :class:`RewardEvent` per rollout whose reward became known on a step; the scalar reward
``step`` returns is the sum of that step's event rewards. Reward wrappers rewrite events: a term is added by
name with :meth:`RewardEvent.add_term` (or the reward replaced with :meth:`RewardEvent.set_reward`), so the
``components`` always say what the reward is made of. Export files hold :meth:`RewardEvent.to_dict` (every
field but the live trajectory); :meth:`RewardEvent.from_dict` reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, TypedDict, Union

from ..errors import InvalidArgumentError, InvalidTypeError
from .mapping_reads import MappingReads
from .types import Role, Trajectory

__all__ = ["RewardEvent", "RewardEventData", "ROLES"]

ROLES: tuple[Role, ...] = ("solver", "proposer")


class RewardEventData(TypedDict):
    """The JSON form of a reward event (an export file's ``rewards`` entries)."""

    role: Role
    slot: int
    reward: float
    components: dict[str, Any]


@dataclass
class RewardEvent(MappingReads):
    """One rollout's reward, known on this step: who earned it, how much, and what it is made of.

    ``role``: ``"solver"`` or ``"proposer"``; ``slot``: the rollout's slot (0 for single-role envs and the
    Proposer); ``reward``: the scalar reward; ``components``: named terms (``outcome``, ``valid``,
    ``wcr_bonus``, ...; values are numbers, or lists for per-step terms); ``trajectory``: the live
    :class:`Trajectory` (``None`` in an event read back from a file). Reading by key (``ev["reward"]``)
    works as it did when events were dicts (:class:`~searchgym.core.mapping_reads.MappingReads`).
    """

    role: Role
    slot: int
    reward: float
    components: dict[str, Any] = field(default_factory=dict)
    trajectory: Optional[Trajectory] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidArgumentError(f"a reward event's role is one of {', '.join(ROLES)}, got {self.role!r}")
        self.slot = int(self.slot)
        self.reward = float(self.reward)
        self.components = dict(self.components)

    def set_reward(self, reward: float, **terms: Any) -> None:
        """Replace the reward and record ``terms`` under their names in :attr:`components`."""
        self.reward = float(reward)
        self.components.update(terms)

    def add_term(self, name: str, value: float, **details: Any) -> None:
        """Add ``value`` to the reward as the component ``name`` (and record ``details``, e.g. the measures the
        term was computed from, under their own names)."""
        self.reward += float(value)
        self.components[name] = value
        self.components.update(details)

    def copy(self) -> "RewardEvent":
        """A copy with its own components (the trajectory is the same live object)."""
        return RewardEvent(self.role, self.slot, self.reward, dict(self.components), self.trajectory)

    def to_dict(self) -> RewardEventData:
        """The JSON form: every field but the trajectory."""
        return {"role": self.role, "slot": self.slot, "reward": self.reward, "components": dict(self.components)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], trajectory: Optional[Trajectory] = None) -> "RewardEvent":
        """An event from its JSON form (or an event dict built by hand, ``trajectory`` key included)."""
        try:
            return cls(
                data["role"],
                data.get("slot", 0),
                data["reward"],
                dict(data.get("components") or {}),
                data.get("trajectory", trajectory),
            )
        except KeyError as exc:
            raise InvalidArgumentError(f"a reward event needs 'role' and 'reward'; missing {exc}") from None

    @classmethod
    def coerce(cls, event: Union["RewardEvent", Mapping[str, Any]]) -> "RewardEvent":
        """A copy of ``event`` as a :class:`RewardEvent` (a dict event from an env written before the type
        existed is converted)."""
        if isinstance(event, RewardEvent):
            return event.copy()
        if isinstance(event, Mapping):
            return cls.from_dict(event)
        raise InvalidTypeError(f"a reward event is a RewardEvent or a dict, got {type(event).__name__}")
