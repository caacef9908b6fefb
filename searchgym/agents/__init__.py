"""The agents: the LLM agent that plays an env turn by turn, the scripted agents, and the agents an evaluation
runs (:func:`make_agent` builds any of them from an :class:`AgentSpec`).

Backends that generate text live in :mod:`searchgym.llm`; training in :mod:`searchgym.training`.
"""

from ..core.moved import moved_getattr
from .eval_agents import SCRIPTED_AGENTS, AgentSpec, EvalAgent, LLMEvalAgent, ScriptedEvalAgent, agent_kinds, make_agent
from .llm_agent import AgentConfig, LLMAgent

__all__ = [
    "SCRIPTED_AGENTS",
    "agent_kinds",
    "AgentSpec",
    "EvalAgent",
    "LLMEvalAgent",
    "ScriptedEvalAgent",
    "make_agent",
    "AgentConfig",
    "LLMAgent",
]

__getattr__ = moved_getattr(__name__)
