"""searchgym as a verifiers environment, for ``vf-eval`` and prime-rl (the ``verifiers`` extra; written and tested
against verifiers 0.4.0, whose stack is ``verifiers.v1``). docs/frameworks.md has the guide.

verifiers finds environments by id among installed top-level packages: searchgym's is the
``searchgym_verifiers`` package (id ``searchgym-verifiers``), which exports the classes of
:mod:`.environment` — ``vf-eval searchgym-verifiers -m MODEL -b URL`` evaluates a model on it, and
prime-rl's orchestrator trains on it by the same id. :func:`load_environment` builds it in Python.

Importing this package imports verifiers.
"""

from __future__ import annotations

from typing import Any

import verifiers.v1 as vf

from .environment import (
    ENV_ID,
    VERIFIERS_VERSION_READ,
    SearchGymData,
    SearchGymEnv,
    SearchGymEnvConfig,
    SearchGymHarness,
    SearchGymHarnessConfig,
    SearchGymTask,
    SearchGymTaskset,
    SearchGymTasksetConfig,
    result_of,
)

__all__ = [
    "ENV_ID",
    "VERIFIERS_VERSION_READ",
    "SearchGymData",
    "SearchGymEnv",
    "SearchGymEnvConfig",
    "SearchGymHarness",
    "SearchGymHarnessConfig",
    "SearchGymTask",
    "SearchGymTaskset",
    "SearchGymTasksetConfig",
    "load_environment",
    "result_of",
]


def load_environment(**taskset: Any) -> vf.Env:
    """The searchgym environment through verifiers' own loader (``vf.load_environment``), its taskset settings
    from ``taskset`` (:class:`SearchGymTasksetConfig` fields: ``rewards="wcr"``, ``protocol``, ``pool``,
    ``retriever``, ...). Needs the ``searchgym_verifiers`` package importable (any install of searchgym)."""
    config = vf.resolve_env_config({"taskset": {"id": ENV_ID, **taskset}})
    return vf.load_environment(config)
