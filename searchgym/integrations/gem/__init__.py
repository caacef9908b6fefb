"""searchgym inside GEM (the ``gem`` extra; written and tested against gem-llm 0.1.0): the Solver env and its
reward wrappers as a GEM env, registered with GEM on import. docs/frameworks.md has the guide.

Importing this package imports ``gem`` (keeping the root logger's level and handlers, which gem's own import
changes) and registers (idempotently):

* ``searchgym:KGSolver-v0`` — :class:`~searchgym.integrations.gem.env.SearchGymGemEnv` with the env's own
  exact-match reward (``gem.make("searchgym:KGSolver-v0", rewards="wcr", ...)`` picks others);
* ``searchgym:KGSolver-WCR-v0`` — the same with the Waypoint Coverage Reward (``rewards="wcr"``).
"""

from __future__ import annotations

import logging

_root = logging.getLogger()
_logging_before = (_root.level, list(_root.handlers))
# gem's own __init__ calls logging.basicConfig(level=INFO) on first import; leave the caller's logging as it was
from .env import GEM_VERSION_READ, SearchGymGemEnv  # noqa: E402

_root.setLevel(_logging_before[0])
_root.handlers[:] = _logging_before[1]

__all__ = ["ENV_IDS", "GEM_VERSION_READ", "SearchGymGemEnv", "register_envs"]

#: GEM env ids → the keyword arguments each is registered with.
ENV_IDS = {"searchgym:KGSolver-v0": {}, "searchgym:KGSolver-WCR-v0": {"rewards": "wcr"}}


def register_envs() -> list[str]:
    """Register :data:`ENV_IDS` with GEM (those already registered are left as they are); the ids."""
    from gem.envs.registration import ENV_REGISTRY, register

    for env_id, kwargs in ENV_IDS.items():
        if env_id not in ENV_REGISTRY:
            register(env_id, f"{SearchGymGemEnv.__module__}:SearchGymGemEnv", **kwargs)
    return list(ENV_IDS)


register_envs()
