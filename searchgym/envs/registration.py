"""Register the searchgym envs with Gymnasium (done on ``import searchgym``).

Entry points are strings, so registering imports nothing heavy; the env modules load on the
first ``gymnasium.make``.
"""

from __future__ import annotations

import difflib

import gymnasium as gym

from ..errors import InvalidArgumentError

__all__ = ["ENV_IDS", "register_envs", "check_env_id"]

ENV_IDS = {
    "KGSolver-v0": "searchgym.envs.solver:KGSolverEnv",
    "KGProposer-v0": "searchgym.envs.proposer:KGProposerEnv",
    "KGSolverGroup-v0": "searchgym.envs.group:KGSolverGroupEnv",
    "KGSelfPlay-v0": "searchgym.envs.selfplay:KGSelfPlayEnv",
    "KGNavigate-v0": "searchgym.envs.navigate:KGNavigateEnv",
}


def register_envs() -> None:
    """Register every id in :data:`ENV_IDS` (idempotent: ids already registered are left alone)."""
    for env_id, entry_point in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point)


def check_env_id(env_id: str, *, key: str = "env_id") -> str:
    """Return ``env_id`` if it is one of searchgym's env ids; else raise naming the closest ones.

    Configs call this when they are built, so a typo is reported before a model loads (gymnasium's own
    "did you mean" would only come at ``gym.make`` time, and from its whole registry).
    """
    if env_id in ENV_IDS:
        return env_id
    lower = {i.lower(): i for i in ENV_IDS}
    close = [lower[m] for m in difflib.get_close_matches(str(env_id).lower(), list(lower), n=2, cutoff=0.75)]
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise InvalidArgumentError(f"{key}={env_id!r} is not a searchgym env; {hint}use one of {', '.join(ENV_IDS)}")
