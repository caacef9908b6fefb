"""The env a verl loop plays: re-exported from :mod:`searchgym.integrations.environments` (shared with TRL)."""

from ..environments import TEXT_ENV_IDS, EnvSpec, cached_env, make_env

__all__ = ["EnvSpec", "make_env", "cached_env", "TEXT_ENV_IDS"]
