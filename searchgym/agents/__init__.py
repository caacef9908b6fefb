"""LLM backends, prompts, scripted agents and the trainer."""

from .base import GenerationConfig, GenerationError, TextGenerator
from .config import TrainConfig
from .llm_agent import AgentConfig, LLMAgent
from .play import play_games

__all__ = [
    "GenerationConfig",
    "GenerationError",
    "TextGenerator",
    "TrainConfig",
    "AgentConfig",
    "LLMAgent",
    "play_games",
]
