"""The tiny causal LM + byte-level BPE tokenizer for fast CPU tests: :mod:`searchgym.llm.tiny_models`.

Kept as the tests' import path; the builders live in the package (examples and benchmarks use them too).
"""

from __future__ import annotations

from searchgym.llm.tiny_models import (
    CHAT_TEMPLATE,
    QWEN25_TEMPLATE,
    SPECIALS,
    build_model,
    build_tokenizer,
    build_tool_tokenizer,
    save_tiny,
)

__all__ = [
    "CHAT_TEMPLATE",
    "QWEN25_TEMPLATE",
    "SPECIALS",
    "build_model",
    "build_tokenizer",
    "build_tool_tokenizer",
    "save_tiny",
]
