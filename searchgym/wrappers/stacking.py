"""Stacking shaping wrappers by name, as ``searchgym play --reward dynasearcher,wcr,gdcr`` does."""

from __future__ import annotations

from typing import Sequence

from .dynasearcher import DynaSearcherReward
from .gdcr import GraphDistanceReward
from .wcr import WaypointCoverageReward
from ..errors import InvalidArgumentError

#: The wrappers that work with their defaults alone, by their ``name`` (EVE needs a model handle).
STACKABLE_BY_NAME = {cls.name: cls for cls in (DynaSearcherReward, WaypointCoverageReward, GraphDistanceReward)}


def stack_reward_wrappers(env, names: Sequence[str]):
    """Wrap ``env`` in the named wrappers, innermost first; a reward-replacing one may only come first."""
    for i, name in enumerate(names):
        cls = STACKABLE_BY_NAME.get(name)
        if cls is None:
            raise InvalidArgumentError(f"unknown reward wrapper {name!r}; choose from {', '.join(STACKABLE_BY_NAME)} (innermost first)")
        if cls.replaces_reward and i > 0:
            raise InvalidArgumentError(f"{name} replaces the reward, so it must come first (innermost), e.g. {name},wcr")
        if name in names[:i]:
            raise InvalidArgumentError(f"reward wrapper {name!r} is listed twice")
        env = cls(env)
    return env
