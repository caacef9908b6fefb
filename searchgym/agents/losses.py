"""Policy-gradient maths: advantages, per-token log-probabilities, the clipped loss with a k3 KL term.

Kept free of any trainer state so each piece is unit-testable:

* :func:`group_advantages` — GRPO, ``A_i = (R_i − mean_g) / (std_g + ε)`` within each question's group.
* :func:`baseline_advantages` — REINFORCE with the batch-mean baseline.
* :func:`proposer_advantages` — the Proposer's REINFORCE advantages: by default the baseline is the
  mean over *verified* questions and invalid ones get 0 (SSP Alg. 1 over Q*, kg-paths-wcr §3.1).
* :func:`token_logprobs` — log p(token_t | prefix) for every position, plus the entropy.
* :func:`policy_loss` — PPO-clip with asymmetric ε (0.2 / 0.28), k3 KL to a frozen reference
  (``exp(ref − logp) − (ref − logp) − 1``, unbiased and always ≥ 0), token-mean per sequence over
  the loss mask (env-inserted tokens excluded from both sum and normaliser), then mean over sequences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence
from ..errors import InvalidArgumentError


STD_DDOFS = (0, 1)
PROPOSER_BASELINES = ("verified", "all")


def check_ddof(ddof: int) -> int:
    """``ddof`` of the group std, validated: 0 (population std) or 1 (sample std)."""
    if ddof not in STD_DDOFS:
        raise InvalidArgumentError(f"ddof={ddof!r}: the group std uses ddof 0 (population, default) or 1 (sample, as verl/TRL)")
    return int(ddof)


def group_advantages(rewards: Sequence[float], groups: Sequence[object], eps: float = 1e-6, ddof: int = 0) -> list[float]:
    """GRPO advantages: normalise each reward within the rollouts that share its group key.

    ``std`` is the population std of the group by default (``ddof=0``); the papers do not say
    which, and verl and TRL use the sample std (``ddof=1``, advantages ×√(G/(G−1)) smaller, e.g.
    ÷1.118 at G = 5). A group whose rewards are all equal (or a group of one) gets advantage 0.
    """
    import math

    ddof = check_ddof(ddof)
    if len(rewards) != len(groups):
        raise InvalidArgumentError(f"{len(rewards)} rewards but {len(groups)} group keys")
    members: dict[object, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    out = [0.0] * len(rewards)
    for idx in members.values():
        vals = [float(rewards[i]) for i in idx]
        mean = sum(vals) / len(vals)
        if len(vals) - ddof < 1:
            continue  # a lone rollout has no spread: advantage 0
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - ddof))
        for i in idx:
            out[i] = (float(rewards[i]) - mean) / (std + eps)
    return out


def baseline_advantages(rewards: Sequence[float]) -> list[float]:
    """REINFORCE with a baseline: ``R − mean(R)`` over the batch."""
    if not rewards:
        return []
    mean = sum(float(r) for r in rewards) / len(rewards)
    return [float(r) - mean for r in rewards]


def proposer_advantages(rewards: Sequence[float], valid: Sequence[bool], baseline: str = "verified") -> list[float]:
    """REINFORCE advantages of a batch of Proposer questions.

    ``baseline="verified"`` (default, the papers): SSP's Algorithm 1 updates the Proposer on the
    verified set Q* and kg-paths-wcr §3.1 uses "only verified questions" for Proposer updates, so the
    baseline is the mean reward of the valid questions and an invalid question gets advantage 0
    (no update, no implicit penalty). ``baseline="all"``: the mean over every proposer event, invalid
    ones (reward 0) included — then an invalid question gets −mean(R), a penalty the SSP paper
    found destabilising (its −0.1 ablation); kept for comparison with earlier runs.
    """
    if baseline not in PROPOSER_BASELINES:
        raise InvalidArgumentError(f"baseline={baseline!r}: use one of {', '.join(PROPOSER_BASELINES)}")
    if len(rewards) != len(valid):
        raise InvalidArgumentError(f"{len(rewards)} proposer rewards but {len(valid)} validity flags")
    if baseline == "all":
        return baseline_advantages(rewards)
    kept = [i for i, ok in enumerate(valid) if ok]
    out = [0.0] * len(rewards)
    for i, a in zip(kept, baseline_advantages([rewards[i] for i in kept])):
        out[i] = a
    return out


def token_logprobs(model, input_ids, attention_mask, *, with_entropy: bool = False, start: int = 1):
    """Log-probability of each token given its prefix: shape ``[B, T-1]`` (position t predicts t+1).

    Only tokens ``start..T-1`` are scored (the LM head runs on those positions alone, via
    ``logits_to_keep``: the prompt never needs its ``[T, vocab]`` logits); earlier entries are 0.
    Returns ``(logp, entropy)``; ``entropy`` is ``None`` unless requested.
    """
    import torch

    T = input_ids.shape[1]
    start = max(1, min(int(start), T - 1))
    pos = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=pos, use_cache=False,
                logits_to_keep=T - start + 1)
    logits = out.logits[:, -(T - start + 1):-1, :].float()  # positions start-1 .. T-2
    target = input_ids[:, start:]
    logz = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1) - logz
    pad = logp.new_zeros((logp.shape[0], start - 1))
    entropy = None
    if with_entropy:
        with torch.no_grad():
            p = torch.softmax(logits, dim=-1)
            entropy = torch.cat([pad, logz - (p * logits).sum(-1)], dim=1)
    return torch.cat([pad, logp], dim=1), entropy


@dataclass
class LossStats:
    """Scalars logged per update (means over the sequences of the mini-batch)."""

    loss: float
    pg_loss: float
    kl: float
    clip_frac: float
    ratio_mean: float


def policy_loss(logp, old_logp, ref_logp, advantages, mask, *, clip_low: float = 0.2, clip_high: float = 0.28,
                kl_coef: float = 0.01):
    """PPO-clip + k3 KL, token-mean per sequence over ``mask``, mean over sequences.

    All tensors are ``[B, T]``; ``advantages`` is per token (a per-sequence scalar broadcast, or
    step-level SAPO advantages). ``ref_logp`` may be ``None`` when ``kl_coef`` is 0. Returns
    ``(loss, LossStats)``. Sequences with no loss token contribute 0 (and are not counted).
    """
    import torch

    mask = mask.to(logp.dtype)
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages
    pg = -torch.minimum(unclipped, clipped)
    if ref_logp is not None and kl_coef > 0:
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1.0
    else:
        kl = torch.zeros_like(logp)
    per_token = pg + kl_coef * kl
    n_tok = mask.sum(-1)
    has = n_tok > 0
    denom = n_tok.clamp(min=1.0)
    seq_loss = (per_token * mask).sum(-1) / denom
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
        )
    return loss, stats
