"""Gymnasium environments; importing searchgym registers them.

Ids: ``KGSolver-v0``, ``KGProposer-v0``, ``KGSolverGroup-v0``, ``KGSelfPlay-v0``, ``KGNavigate-v0``.
The env classes, task sources, replay buffer and export helpers are importable from here; they
load on first access so ``import searchgym`` stays light.
"""

from importlib import import_module

from .registration import ENV_IDS, register_envs
from .types import SearchCall, Segment, Task, Trajectory, Turn

register_envs()

_LAZY = {
    "KGSolverEnv": "solver",
    "KGProposerEnv": "proposer",
    "KGSolverGroupEnv": "group",
    "KGSelfPlayEnv": "selfplay",
    "TaskSource": "tasks",
    "SubgraphTaskSource": "tasks",
    "JsonlTaskSource": "tasks",
    "ListTaskSource": "tasks",
    "task_from_subgraph": "tasks",
    "ReplayBuffer": "replay",
    "TrajectoryWriter": "export",
    "read_trajectories": "export",
    "GameRecord": "export",
    "UnicodeText": "spaces",
    "Rollout": "rollout",
    "SearchEngine": "rollout",
    "path_question": "templates",
    "KGNavigateEnv": "navigate",
    "parse_action": "protocol",
    "format_information": "protocol",
    "ParsedAction": "protocol",
    "SearchRequest": "protocol",
    "ExactMatchJudge": "judge",
    "LLMJudge": "judge",
    "FilterConfig": "filters",
    "check_question": "filters",
    "RAGVerifier": "verifier",
    "ExtractiveReader": "verifier",
    "LLMReader": "verifier",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SearchCall", "Segment", "Task", "Trajectory", "Turn", "ENV_IDS", "register_envs", *_LAZY]
