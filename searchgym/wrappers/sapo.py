"""Step Advantage Policy Optimization advantages (SAPO; gdcr-sapo §3.4, SPEC §7).

Pure numpy functions the trainer (and users' own trainers) call:

- outcome advantage (GRPO, group-normalised, SPEC §10): Â_o,i = (R_i − mean_j R_j) / (std_j R_j + ε);
- step advantage within one trajectory (Eq. 13): A_t,g = clip((r_t − mean_t r) / (std_t r + ε), −1, 1);
- combined (Eq. 14): A_t = Â_o + λ |Â_o| A_t,g, λ = 0.5, applied to every agent token of step t.

``std`` is the population standard deviation (``ddof=0``) by default. Neither GRPO nor the SAPO
paper says which; verl and TRL normalise outcome rewards by the sample std (``ddof=1``), which
gives advantages smaller by √(G/(G−1)) (÷1.118 at G = 5) — pass ``ddof=1`` (trainer:
``adv_std_ddof``) to match them. A constant sequence (including a single step) has step advantages
0, so SAPO falls back to GRPO there; an empty trajectory has no steps and gets ``[]``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..agents.losses import check_ddof
from ..errors import InvalidArgumentError


def _finite(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise InvalidArgumentError(f"{what} must be a flat list of numbers")
    if not np.all(np.isfinite(arr)):
        raise InvalidArgumentError(f"{what} contains NaN or infinite values: {list(values)}")
    return arr


def grpo_advantages(rewards: Sequence[float], eps: float = 1e-6, ddof: int = 0) -> list[float]:
    """Group-normalised outcome advantages (R_i − mean) / (std + ε) over one question's G rollouts
    (``ddof`` of the std: 0 population, 1 sample; a group of one gets 0)."""
    ddof = check_ddof(ddof)
    r = _finite(rewards, "rewards")
    if r.size == 0:
        raise InvalidArgumentError("an empty group has no advantages")
    if r.size - ddof < 1:
        return [0.0] * int(r.size)
    return ((r - r.mean()) / (r.std(ddof=ddof) + eps)).tolist()


def step_advantages(step_rewards: Sequence[float], eps: float = 1e-6) -> list[float]:
    """A_t,g of Eq. 13: the trajectory's step rewards standardised within it and clipped to [−1, 1]."""
    r = _finite(step_rewards, "step_rewards")
    if r.size == 0:
        return []
    return np.clip((r - r.mean()) / (r.std() + eps), -1.0, 1.0).tolist()


def sapo_step_advantages(
    outcome_advantage: float, step_rewards: Sequence[float], lam: float = 0.5, eps: float = 1e-6
) -> list[float]:
    """A_t = Â_o + λ |Â_o| A_t,g for every step t of one trajectory (Eq. 14)."""
    if lam < 0:
        raise InvalidArgumentError(f"lam (λ) must be non-negative (paper: 0.5); got {lam}")
    a_o = float(outcome_advantage)
    if not np.isfinite(a_o):
        raise InvalidArgumentError(f"outcome advantage must be finite; got {outcome_advantage}")
    return [a_o + lam * abs(a_o) * a for a in step_advantages(step_rewards, eps)]


def sapo_group_advantages(
    outcome_rewards: Sequence[float],
    step_rewards: Sequence[Sequence[float]],
    lam: float = 0.5,
    eps: float = 1e-6,
    ddof: int = 0,
) -> list[list[float]]:
    """Per-step advantages for every trajectory of one group (outcome rewards → GRPO → Eq. 14;
    ``ddof`` of the outcome std as in :func:`grpo_advantages`)."""
    if len(outcome_rewards) != len(step_rewards):
        raise InvalidArgumentError(
            f"{len(outcome_rewards)} outcome rewards but {len(step_rewards)} step-reward sequences; one each per rollout"
        )
    outcome = grpo_advantages(outcome_rewards, eps, ddof)
    return [sapo_step_advantages(a, steps, lam, eps) for a, steps in zip(outcome, step_rewards)]
