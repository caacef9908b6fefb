"""The LLM client interface, kept at its original path: it lives in :mod:`searchgym.core.llm` (the bottom
floor), because envs (judges, RAG verification), construction (LLM selectors) and wrappers (EVE) use it too."""

from ..core.llm import (
    ChatMessages,
    GenerationConfig,
    GenerationError,
    GenerationResult,
    Prompt,
    TextGenerator,
    TokenIds,
    is_token_prompt,
    truncate_at_stop,
)

__all__ = [
    "ChatMessages",
    "GenerationConfig",
    "GenerationError",
    "GenerationResult",
    "Prompt",
    "TextGenerator",
    "TokenIds",
    "is_token_prompt",
    "truncate_at_stop",
]
