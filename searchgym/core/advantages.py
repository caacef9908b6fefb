"""Advantage estimators, one module for every trainer and wrapper: GRPO, REINFORCE baselines, SAPO.

Pure functions of the rewards (NumPy), on the bottom floor because both the trainer (agents) and the
SAPO step-reward wrappers' users need them (docs/rewards.md has every formula with its paper):

* :func:`grpo_advantages` — one group's outcome advantages, ``(R_i − mean) / (std + ε)``
  (``normalise=False``: ``R_i − mean``, SSP Eq. 4); :func:`group_advantages` — the same within each
  group key of a batch.
* :func:`baseline_advantages` — REINFORCE with the batch-mean baseline; :func:`proposer_advantages` —
  the Proposer's advantages under one of :data:`PROPOSER_BASELINES`: ``none`` (SSP Eq. 5, plain
  REINFORCE), ``verified`` (kg-paths-wcr Eq. 9 with b = the verified questions' mean), ``all`` (the
  batch mean), ``hop_group`` (EVE's HRPO, Eq. 5: standardised within each hop count), ``target`` (the mean
  over the questions written on the same subgraph, when a step plays each subgraph several times) or
  ``target_or_all`` (``target``, and the step mean for a subgraph whose questions all got the same reward).
* :func:`step_advantages`, :func:`sapo_step_advantages`, :func:`sapo_group_advantages` — SAPO
  (gdcr-sapo §3.4): ``A_t,g = clip((r_t − mean_t r) / (std_t r + ε), −1, 1)`` (Eq. 13) and
  ``A_t = Â_o + λ |Â_o| A_t,g`` with λ = 0.5 (Eq. 14), applied to every agent token of step t.

``std`` is the population standard deviation (``ddof=0``) by default. Neither GRPO nor the SAPO
paper says which; verl and TRL normalise outcome rewards by the sample std (``ddof=1``), which
gives advantages smaller by √(G/(G−1)) (÷1.118 at G = 5) — pass ``ddof=1`` (trainer:
``adv_std_ddof``) to match them. A constant sequence (including a single step) has step advantages
0, so SAPO falls back to GRPO there; an empty trajectory has no steps and gets ``[]``.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..errors import InvalidArgumentError

__all__ = [
    "STD_DDOFS",
    "PROPOSER_BASELINES",
    "SUBGRAPH_BASELINES",
    "SOLVER_ADVANTAGES",
    "check_ddof",
    "grpo_advantages",
    "group_advantages",
    "baseline_advantages",
    "proposer_advantages",
    "step_advantages",
    "sapo_step_advantages",
    "sapo_group_advantages",
]

STD_DDOFS = (0, 1)
#: the Proposer's REINFORCE baselines (see :func:`proposer_advantages`)
PROPOSER_BASELINES = ("none", "verified", "all", "hop_group", "target", "target_or_all")
#: the baselines that compare questions written on the same subgraph (they need ``targets`` and, in the trainer,
#: ``proposer_group_size`` > 1)
SUBGRAPH_BASELINES = ("target", "target_or_all")
#: the Solver's group advantages: ``grpo`` divides by the group std (GRPO, kg-paths-wcr Eq. 3/10),
#: ``grpo_centred`` does not (SSP Eq. 4: ``r − mean``)
SOLVER_ADVANTAGES = ("grpo", "grpo_centred")


def check_ddof(ddof: int) -> int:
    """``ddof`` of the group std, validated: 0 (population std) or 1 (sample std)."""
    if ddof not in STD_DDOFS:
        raise InvalidArgumentError(
            f"ddof={ddof!r}: the group std uses ddof 0 (population, default) or 1 (sample, as verl/TRL)"
        )
    return int(ddof)


def group_advantages(
    rewards: Sequence[float],
    groups: Sequence[object],
    eps: float = 1e-6,
    ddof: int = 0,
    *,
    normalise: bool = True,
) -> list[float]:
    """GRPO advantages of a batch: :func:`grpo_advantages` within the rollouts that share a group key.

    ``std`` is the population std of the group by default (``ddof=0``); the papers do not say
    which, and verl and TRL use the sample std (``ddof=1``, advantages ×√(G/(G−1)) smaller, e.g.
    ÷1.118 at G = 5). A group whose rewards are all equal (or a group of one) gets advantage 0.
    ``normalise=False`` leaves out the division by the std (SSP Eq. 4).
    """
    if len(rewards) != len(groups):
        raise InvalidArgumentError(f"{len(rewards)} rewards but {len(groups)} group keys")
    out = [0.0] * len(rewards)
    for idx in _members(groups).values():
        for i, a in zip(idx, grpo_advantages([rewards[i] for i in idx], eps, ddof, normalise=normalise)):
            out[i] = a
    return out


def _members(groups: Sequence[object]) -> dict[object, list[int]]:
    """group key -> the indices of its rollouts, in order."""
    members: dict[object, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    return members


def baseline_advantages(rewards: Sequence[float]) -> list[float]:
    """REINFORCE with a baseline: ``R − mean(R)`` over the batch."""
    if not rewards:
        return []
    mean = sum(float(r) for r in rewards) / len(rewards)
    return [float(r) - mean for r in rewards]


def proposer_advantages(
    rewards: Sequence[float],
    valid: Sequence[bool],
    baseline: str = "verified",
    *,
    hops: Optional[Sequence[object]] = None,
    targets: Optional[Sequence[object]] = None,
    eps: float = 1e-6,
    ddof: int = 0,
) -> list[float]:
    """REINFORCE advantages of a batch of Proposer questions, one per question.

    * ``baseline="none"`` — SSP Eq. 5: plain REINFORCE, the advantage is the reward itself
      (``1 − acc`` for a verified question, 0 for an invalid one: an invalid question is not pushed
      down, and every verified one is pushed up in proportion to how hard it was).
    * ``baseline="verified"`` — kg-paths-wcr Eq. 9 with its unspecified baseline b taken as the mean
      reward of the verified questions (SSP's Algorithm 1 updates on the verified set Q*); an invalid
      question gets advantage 0 (no update, no implicit penalty).
    * ``baseline="all"`` — the mean over every proposer event, invalid ones (reward 0) included: an
      invalid question gets −mean(R), a penalty the SSP paper found destabilising (its −0.1 ablation).
    * ``baseline="hop_group"`` — EVE's HRPO (Eq. 5): every question, invalid ones included, standardised
      within the questions of the same hop count, ``(R − mean_h) / (std_h + ε)`` (``hops`` required).
    * ``baseline="target"`` — every question minus the mean over the questions written on the same target
      (``targets``: one key per question, e.g. its subgraph id), ``R − mean_t``, not divided by a std so the scale
      stays SSP's. When a step plays each subgraph several times (the trainer's ``proposer_group_size``), an
      invalid wording is pushed down only where another sample on the *same* target was verified, and a verified
      one up against its own siblings: the contrast is between wordings of one path, not between easy and hard
      paths. A target played once gets 0.
    * ``baseline="target_or_all"`` — ``target`` where a target's questions got different rewards, and the step mean
      (``all``) where they all got the same: a path whose questions all failed is pushed down against the step, not
      left without a gradient (under ``target`` alone such paths, the 3-hop ones a drifting Proposer writes short,
      get nothing while the verified 2-hop ones keep pushing up).
    """
    if baseline not in PROPOSER_BASELINES:
        raise InvalidArgumentError(f"baseline={baseline!r}: use one of {', '.join(PROPOSER_BASELINES)}")
    if len(rewards) != len(valid):
        raise InvalidArgumentError(f"{len(rewards)} proposer rewards but {len(valid)} validity flags")
    if baseline == "none":
        return [float(r) for r in _finite(rewards, "rewards")]
    if baseline == "all":
        return baseline_advantages(rewards)
    if baseline == "hop_group":
        if hops is None or len(hops) != len(rewards):
            raise InvalidArgumentError("baseline='hop_group' (HRPO) needs one hop count per proposer question")
        return group_advantages(rewards, hops, eps, ddof)
    if baseline in SUBGRAPH_BASELINES:
        if targets is None or len(targets) != len(rewards):
            raise InvalidArgumentError(f"baseline={baseline!r} needs one target key per proposer question")
        within = group_advantages(rewards, targets, eps, ddof, normalise=False)
        if baseline == "target":
            return within
        tied = {t for t, idx in _members(targets).items() if len({float(rewards[i]) for i in idx}) == 1}
        step = baseline_advantages(rewards)  # a subgraph whose questions tied is measured against the step instead
        return [step[i] if t in tied else within[i] for i, t in enumerate(targets)]
    kept = [i for i, ok in enumerate(valid) if ok]
    out = [0.0] * len(rewards)
    for i, a in zip(kept, baseline_advantages([rewards[i] for i in kept])):
        out[i] = a
    return out


def _finite(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise InvalidArgumentError(f"{what} must be a flat list of numbers")
    if not np.all(np.isfinite(arr)):
        raise InvalidArgumentError(f"{what} contains NaN or infinite values: {list(values)}")
    return arr


def grpo_advantages(
    rewards: Sequence[float], eps: float = 1e-6, ddof: int = 0, *, normalise: bool = True
) -> list[float]:
    """Group-normalised outcome advantages (R_i − mean) / (std + ε) over one question's G rollouts
    (``ddof`` of the std: 0 population, 1 sample; a group of one gets 0). ``normalise=False``:
    ``R_i − mean`` (SSP Eq. 4, no division by the std)."""
    ddof = check_ddof(ddof)
    r = _finite(rewards, "rewards")
    if r.size == 0:
        raise InvalidArgumentError("an empty group has no advantages")
    if r.size - ddof < 1:
        return [0.0] * int(r.size)
    centred = r - r.mean()
    if not normalise:
        return centred.tolist()
    std = r.std(ddof=ddof)
    if std == 0:  # all equal: no signal (and no 0 / 0 when eps is 0)
        return [0.0] * int(r.size)
    return (centred / (std + eps)).tolist()


def step_advantages(step_rewards: Sequence[float], eps: float = 1e-6, ddof: int = 0) -> list[float]:
    """A_t,g of Eq. 13: the trajectory's step rewards standardised within it and clipped to [−1, 1]
    (``ddof`` of the std as in :func:`grpo_advantages`; a trajectory with fewer than ``ddof + 1``
    steps gets 0 for each)."""
    ddof = check_ddof(ddof)
    r = _finite(step_rewards, "step_rewards")
    if r.size == 0:
        return []
    std = r.std(ddof=ddof) if r.size - ddof >= 1 else 0.0
    if std == 0:  # a constant trajectory (or too few steps): no step signal, SAPO falls back to GRPO
        return [0.0] * int(r.size)
    return np.clip((r - r.mean()) / (std + eps), -1.0, 1.0).tolist()


def sapo_step_advantages(
    outcome_advantage: float, step_rewards: Sequence[float], lam: float = 0.5, eps: float = 1e-6, ddof: int = 0
) -> list[float]:
    """A_t = Â_o + λ |Â_o| A_t,g for every step t of one trajectory (Eq. 14)."""
    if lam < 0:
        raise InvalidArgumentError(f"lam (λ) must be non-negative (paper: 0.5); got {lam}")
    a_o = float(outcome_advantage)
    if not np.isfinite(a_o):
        raise InvalidArgumentError(f"outcome advantage must be finite; got {outcome_advantage}")
    return [a_o + lam * abs(a_o) * a for a in step_advantages(step_rewards, eps, ddof)]


def sapo_group_advantages(
    outcome_rewards: Sequence[float],
    step_rewards: Sequence[Sequence[float]],
    lam: float = 0.5,
    eps: float = 1e-6,
    ddof: int = 0,
) -> list[list[float]]:
    """Per-step advantages for every trajectory of one group (outcome rewards → GRPO → Eq. 14;
    ``ddof`` of both the outcome std and each trajectory's step std, as in :func:`grpo_advantages`)."""
    if len(outcome_rewards) != len(step_rewards):
        raise InvalidArgumentError(
            f"{len(outcome_rewards)} outcome rewards but {len(step_rewards)} step-reward sequences; one each "
            f"per rollout"
        )
    outcome = grpo_advantages(outcome_rewards, eps, ddof)
    return [sapo_step_advantages(a, steps, lam, eps, ddof) for a, steps in zip(outcome, step_rewards)]
