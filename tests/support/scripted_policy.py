"""A tiny causal LM whose ``generate`` writes scripted turns: :func:`searchgym.llm.tiny_models.scripted_model`.

Kept as the tests' import path (TRL tests that need the model to search, answer and make mistakes on cue).
"""

from __future__ import annotations

from searchgym.llm.tiny_models import question_of, scripted_model

__all__ = ["question_of", "scripted_model"]
