"""Scoring demonstrations for their negative log-likelihood, the instruction prefix a micro-batch shares run once.

Two losses read demonstrations: the cold start's supervised loss (:class:`~searchgym.training.sft_trainer.SFTRun`)
and the self-play update's anchor loss (``anchor_coef``, :mod:`searchgym.training.selfplay_update`). Their
demonstrations open with the same system prompt and instructions, and differ from the question on; scoring them
through :func:`~searchgym.llm.shared_prefix.pack_shared` runs that prefix once per micro-batch (its gradient summed
over the rows) instead of once per row. Same maths as the plain forward, float rounding apart.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..llm.sequences import EncodedTrajectory, collate
from ..llm.shared_prefix import common_prefix_len, pack_shared, shared_token_logprobs
from .losses import token_logprobs

MIN_SHARED_PREFIX = 16  # shorter shared prefixes are not worth a second forward call

__all__ = ["MIN_SHARED_PREFIX", "shared_prefix_len", "demonstration_logprobs"]


def shared_prefix_len(batch: Sequence[EncodedTrajectory], *, enabled: bool = True) -> int:
    """Tokens of the prefix every demonstration of ``batch`` shares before its first agent token; 0 when sharing
    is off, the batch has one row, or the prefix is shorter than :data:`MIN_SHARED_PREFIX`."""
    if not enabled or len(batch) < 2:
        return 0
    shared = min(common_prefix_len([e.input_ids for e in batch]), min(e.first_agent_token for e in batch) - 1)
    return shared if shared >= MIN_SHARED_PREFIX else 0


def demonstration_logprobs(
    policy: Any,
    batch: Sequence[EncodedTrajectory],
    pad_id: int,
    device: Any = None,
    *,
    share: bool = True,
    with_entropy: bool = False,
):
    """``(logp, entropy, mask)`` of one micro-batch of demonstrations in
    :func:`~searchgym.training.losses.token_logprobs`' layout, only the agent tokens (``mask``) through the LM
    head; the shared prefix (:func:`shared_prefix_len`) runs once when ``share`` (turn it off under gradient
    checkpointing, which the two-call forward does not support). ``entropy`` is ``None`` unless asked for."""
    rows = list(batch)
    ids, attn, mask, _ = collate(rows, pad_id, [[0.0]] * len(rows), device)
    shared = shared_prefix_len(rows, enabled=share)
    if shared:  # the prefix every row shares runs once; its gradient sums over the rows
        packed = pack_shared([e.input_ids for e in rows], [shared + 1] * len(rows), pad_id, device)
        logp, ent = shared_token_logprobs(policy, packed, with_entropy=with_entropy, only=mask)
    else:
        start = min(e.first_agent_token for e in rows)
        logp, ent = token_logprobs(policy, ids, attn, with_entropy=with_entropy, start=start, only=mask)
    return logp, ent, mask
