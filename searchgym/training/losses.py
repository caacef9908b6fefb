"""Policy-gradient maths: advantages, per-token log-probabilities, the clipped loss with a k3 KL term.

Kept free of any trainer state so each piece is unit-testable:

* advantages (GRPO, REINFORCE baselines, SAPO) live in :mod:`searchgym.core.advantages`, re-exported here.
* :func:`token_logprobs` — log p(token_t | prefix) for every position, plus the entropy.
* :func:`policy_loss` — PPO-clip with asymmetric ε (0.2 / 0.28), k3 KL to a frozen reference
  (``exp(ref − logp) − (ref − logp) − 1``, unbiased and always ≥ 0), token-mean per sequence over
  the loss mask (env-inserted tokens excluded from both sum and normaliser), then mean over sequences;
  ``aggregation="token_sum"`` sums over each sequence's tokens instead (the REINFORCE objective of SSP
  Eq. 5 and kg-paths-wcr Eq. 9, ``R · Σ_t log π``).
* :func:`truncated_is_weights` — the truncated importance ratio ``min(exp(old − rollout), cap)`` that
  corrects a rollout sampler which differs from the trained policy (bf16 rollouts of a float32 policy);
  :func:`policy_loss` multiplies each token's policy-gradient term by it (``is_weights``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.advantages import (  # noqa: F401
    PROPOSER_BASELINES,
    SOLVER_ADVANTAGES,
    STD_DDOFS,
    baseline_advantages,
    check_ddof,
    group_advantages,
    proposer_advantages,
)
from ..errors import InvalidArgumentError


def token_logprobs(model, input_ids, attention_mask, *, with_entropy: bool = False, start: int = 1, only=None):
    """Log-probability of each token given its prefix: shape ``[B, T-1]`` (position t predicts t+1).

    Only tokens ``start..T-1`` are scored (the LM head runs on those positions alone, via
    ``logits_to_keep``: the prompt never needs its ``[T, vocab]`` logits); earlier entries are 0.
    ``only`` (``[B, T-1]``, e.g. the loss mask) narrows that further to the positions a loss reads,
    when the model allows it (:mod:`searchgym.llm.lm_head`); the rest are 0.
    Returns ``(logp, entropy)``; ``entropy`` is ``None`` unless requested.
    """
    import torch

    from ..llm.lm_head import head_split, logits_scores, scores_at

    T = input_ids.shape[1]
    start = max(1, min(int(start), T - 1))
    pos = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    split = head_split(model) if only is not None else None
    if split is not None:
        decoder, head = split
        hidden = decoder(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=pos, use_cache=False
        ).last_hidden_state
        return scores_at(head, hidden[:, :-1], input_ids[:, 1:], only > 0, with_entropy=with_entropy)
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=pos,
        use_cache=False,
        logits_to_keep=T - start + 1,
    )
    logits = out.logits[:, -(T - start + 1) : -1, :]  # positions start-1 .. T-2 score tokens start .. T-1
    logp, entropy = logits_scores(logits, input_ids[:, start:], with_entropy=with_entropy)
    pad = logp.new_zeros((logp.shape[0], start - 1))
    return torch.cat([pad, logp], dim=1), None if entropy is None else torch.cat([pad, entropy], dim=1)


#: how a sequence's per-token losses are combined: ``token_mean`` (GRPO's 1/|τ| Σ_t, SSP Eq. 4) or
#: ``token_sum`` (REINFORCE's Σ_t, SSP Eq. 5 / kg-paths-wcr Eq. 9)
LOSS_AGGREGATIONS = ("token_mean", "token_sum")


@dataclass
class LossStats:
    """Scalars logged per update (means over the sequences of the mini-batch)."""

    loss: float
    pg_loss: float
    kl: float
    clip_frac: float
    ratio_mean: float
    is_weight_mean: float = 1.0


def truncated_is_weights(old_logp, rollout_logp, mask, cap: float):
    """Per-token weights ``min(exp(old_logp − rollout_logp), cap)`` (detached), 1 where ``rollout_logp`` is
    NaN (no rollout log-prob recorded) or ``mask`` is 0.

    Truncated importance sampling (TIS) for a rollout engine whose numerics differ from the trainer's
    (Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training"), as verl
    0.9 implements it: ``verl/trainer/ppo/rollout_corr_helper.py::compute_rollout_correction_weights`` with
    ``rollout_is="token"`` and ``rollout_is_threshold=2.0`` (the ratio of the training policy's old
    log-probs to the rollout's, clamped above, detached), applied by ``core_algos.compute_policy_loss_vanilla``
    as ``pg_losses * rollout_is_weights`` -- the policy-gradient term only, the KL term unweighted.
    ``old_logp``, ``rollout_logp``, ``mask``: ``[B, T]``; ``cap`` > 0."""
    import torch

    if not cap > 0:
        raise InvalidArgumentError(f"the importance-ratio cap must be > 0, got {cap}")
    with torch.no_grad():
        known = ~torch.isnan(rollout_logp) & (mask > 0)
        diff = torch.where(known, old_logp.detach().to(torch.float32) - rollout_logp, torch.zeros_like(rollout_logp))
        # exp(min(d, log cap)) == min(exp(d), cap), without overflowing for a large d
        weights = torch.exp(torch.clamp(diff, max=math.log(cap)))
        return torch.where(known, weights, torch.ones_like(weights)).to(old_logp.dtype)


def policy_loss(
    logp,
    old_logp,
    ref_logp,
    advantages,
    mask,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    kl_coef: float = 0.01,
    aggregation: str = "token_mean",
    is_weights=None,
):
    """PPO-clip + k3 KL over ``mask``, aggregated per sequence (``token_mean`` or ``token_sum``, see
    :data:`LOSS_AGGREGATIONS`), then the mean over sequences.

    All tensors are ``[B, T]``; ``advantages`` is per token (a per-sequence scalar broadcast, or
    step-level SAPO advantages). ``ref_logp`` may be ``None`` when ``kl_coef`` is 0. ``is_weights``
    (``[B, T]``, no gradient; :func:`truncated_is_weights`) multiply each token's policy-gradient term
    (``None``: no correction, the same loss as all ones). Returns ``(loss, LossStats)``; the statistics
    are token means whatever the aggregation. Sequences with no loss token contribute 0 (and are not
    counted).
    """
    import torch

    if aggregation not in LOSS_AGGREGATIONS:
        raise InvalidArgumentError(f"aggregation={aggregation!r}: use one of {', '.join(LOSS_AGGREGATIONS)}")

    mask = mask.to(logp.dtype)
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages
    pg = -torch.minimum(unclipped, clipped)
    if is_weights is not None:
        pg = pg * is_weights.detach()
    if ref_logp is not None and kl_coef > 0:
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1.0
    else:
        kl = torch.zeros_like(logp)
    per_token = pg + kl_coef * kl
    n_tok = mask.sum(-1)
    has = n_tok > 0
    denom = n_tok.clamp(min=1.0)
    seq_loss = (per_token * mask).sum(-1)
    if aggregation == "token_mean":
        seq_loss = seq_loss / denom
    n_seq = has.sum().clamp(min=1)
    loss = (seq_loss * has).sum() / n_seq
    with torch.no_grad():
        seq_mean = lambda x: float((((x * mask).sum(-1) / denom) * has).sum() / n_seq)  # noqa: E731
        clip_ind = ((ratio < 1.0 - clip_low) & (advantages < 0)) | ((ratio > 1.0 + clip_high) & (advantages > 0))
        stats = LossStats(
            loss=float(loss.detach()),
            pg_loss=seq_mean(pg),
            kl=seq_mean(kl),
            clip_frac=seq_mean(clip_ind.to(logp.dtype)),
            ratio_mean=seq_mean(ratio),
            is_weight_mean=1.0 if is_weights is None else seq_mean(is_weights),
        )
    return loss, stats
