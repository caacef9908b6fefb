"""searchgym inside SkyRL (the ``skyrl`` extra; written and tested against skyrl-gym 0.4.0): a SkyRL-Gym text env
over the Solver env and its reward wrappers, and dataset rows in SkyRL's layout. docs/frameworks.md has the
guide and the launch command.

* :class:`SearchGymSkyRLEnv` (:mod:`.env`, imports ``skyrl_gym``): ``init(prompt)`` / ``step(text)`` /
  ``get_metrics()``; :func:`register_env` registers it as ``env_class=searchgym``.
* :func:`dataset_rows` / :func:`row_options` (:mod:`.rows`, no SkyRL import): the rows SkyRL-train reads and
  the task a row asks for.
"""

from __future__ import annotations

from typing import Any

from .rows import ENV_CLASS, SkyRLRowError, dataset_rows, row_options

__all__ = ["ENV_CLASS", "SearchGymSkyRLEnv", "SkyRLRowError", "dataset_rows", "register_env", "row_options"]


def __getattr__(name: str) -> Any:
    """:class:`SearchGymSkyRLEnv` and :func:`register_env` on first use (they import ``skyrl_gym``)."""
    if name in ("SearchGymSkyRLEnv", "register_env"):
        from . import env

        return getattr(env, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
