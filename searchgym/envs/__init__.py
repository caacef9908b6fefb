"""Gymnasium environments; importing searchgym registers them.

Ids: ``KGSolver-v0``, ``KGProposer-v0``, ``KGSolverGroup-v0``, ``KGSelfPlay-v0``, ``KGNavigate-v0``; each is an
:class:`EnvFamily` of the one env registry (:mod:`.registration`: :func:`env_spec`, :func:`env_ids`, and
:func:`register_env_family` to add one).
The env classes, replay buffer and export helpers are importable from here; they load on first access so
``import searchgym`` stays light. Task sources live in :mod:`searchgym.tasks`, judges, filters and the RAG
verifier in :mod:`searchgym.scoring`.
"""

from ..core.moved import lazy_getattr
from ..core.types import SearchCall, Segment, Task, Trajectory, Turn
from .registration import ENV_IDS, EnvFamily, env_ids, env_spec, register_env_family, register_envs

register_envs()

_LAZY = {
    "KGSolverEnv": "solver",
    "KGProposerEnv": "proposer",
    "KGSolverGroupEnv": "group",
    "KGSelfPlayEnv": "selfplay",
    "ReplayBuffer": "replay",
    "TrajectoryWriter": "export",
    "read_trajectories": "export",
    "GameRecord": "export",
    "UnicodeText": "spaces",
    "Rollout": "episode",
    "SearchEngine": "episode",
    "KGNavigateEnv": "navigate",
    "parse_action": "protocol",
    "format_information": "protocol",
    "ParsedAction": "protocol",
    "SearchRequest": "protocol",
}

__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "SearchCall",
    "Segment",
    "Task",
    "Trajectory",
    "Turn",
    "ENV_IDS",
    "EnvFamily",
    "env_ids",
    "env_spec",
    "register_env_family",
    "register_envs",
    *_LAZY,
]
