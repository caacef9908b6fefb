"""The role prompts, kept at their original path: they live in :mod:`searchgym.core.prompts` (the bottom
floor), because the envs, judges, verifiers, selectors and EVE render them too."""

from ..core.prompts import *  # noqa: F401,F403
from ..core.prompts import (  # noqa: F401
    DEFAULT_JUDGE_CRITERIA,
    EVE_PROPOSER_SUFFIX,
    EVIDENCE_ANSWER_PROMPT,
    JUDGE_CRITERIA,
    JUDGE_PROMPT,
    PROPOSER_KG_PROMPT,
    PROPOSER_VANILLA_PROMPT,
    RAG_VERIFIER_PROMPT,
    SELECTOR_PROMPT,
    SOLVER_KG_HINT,
    SOLVER_PROMPT,
)
