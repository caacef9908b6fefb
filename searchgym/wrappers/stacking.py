"""Stacking shaping wrappers by name, as ``searchgym play --reward dynasearcher,wcr,gdcr`` does.

Kept at its original path; the reward names and their rules live in :mod:`searchgym.wrappers.registry`.
"""

from __future__ import annotations

from typing import Sequence

from .registry import available_rewards, get_reward, wrap_rewards

#: The registered wrappers that work with their defaults alone, by name (EVE needs a model handle).
STACKABLE_BY_NAME = {n: get_reward(n).factory for n in available_rewards() if get_reward(n).factory is not None}


def stack_reward_wrappers(env, names: Sequence[str]):
    """Wrap ``env`` in the named rewards, innermost first (:func:`~searchgym.wrappers.registry.wrap_rewards`)."""
    return wrap_rewards(env, list(names))
