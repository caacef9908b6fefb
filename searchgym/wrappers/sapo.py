"""SAPO step advantages (gdcr-sapo §3.4), kept at their original path: every advantage estimator lives in
:mod:`searchgym.core.advantages` (docs/rewards.md)."""

from ..core.advantages import grpo_advantages, sapo_group_advantages, sapo_step_advantages, step_advantages

__all__ = ["grpo_advantages", "sapo_group_advantages", "sapo_step_advantages", "step_advantages"]
