"""Run the LM head only where a loss reads it.

Training scores a sequence's *agent* tokens; the prompt and the env-inserted ``<information>`` text
carry no loss. For a 135M model with a 49k-token vocabulary the LM head is about a fifth of the
forward FLOPs and its ``[B, T, vocab]`` float32 logits (plus their softmax) are most of a step's
memory, so computing logits at every position wastes both. :func:`scores_at` takes the decoder's
last hidden states and applies the head to the selected positions alone; the log-probabilities and
entropies it returns are those of the full computation at those positions (zero elsewhere), so the
loss and its gradient are unchanged.

That needs the model's logits to be exactly ``lm_head(last_hidden_state)``. Most decoders are built
that way, but some scale or soft-cap their logits, so :func:`head_split` checks it once per model on
a short probe input (eval mode, no gradient) and answers ``None`` when the two differ; callers then
use the full forward pass.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any, Optional

logger = logging.getLogger(__name__)

__all__ = ["head_split", "scores_at", "logits_scores"]

_PROBE_TOKENS = 8
_checked: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()


def head_split(model) -> Optional[tuple[Any, Any]]:
    """``(decoder, lm_head)`` of ``model`` when its logits equal ``lm_head(decoder(...).last_hidden_state)``
    (checked once per model object on a probe input), else ``None``."""
    get_decoder = getattr(model, "get_decoder", None)
    get_head = getattr(model, "get_output_embeddings", None)
    if not callable(get_decoder) or not callable(get_head):
        return None
    decoder, head = get_decoder(), get_head()
    if decoder is None or head is None:
        return None
    ok = _checked.get(model)
    if ok is None:
        ok = _matches_full_logits(model, decoder, head)
        _checked[model] = ok
        if not ok:
            logger.info(
                "%s scales or caps its logits: scoring runs the LM head at every position", type(model).__name__
            )
    return (decoder, head) if ok else None


def _matches_full_logits(model, decoder, head) -> bool:
    import torch

    try:
        device = next(model.parameters()).device
    except StopIteration:
        return False
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    if vocab < 2:
        return False
    ids = (torch.arange(3, 3 + _PROBE_TOKENS, device=device) % vocab)[None, :]
    attn = torch.ones_like(ids)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            full = model(input_ids=ids, attention_mask=attn, use_cache=False).logits.float()
            hidden = decoder(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state
            fast = head(hidden).float()
    finally:
        model.train(was_training)
    return full.shape == fast.shape and bool(torch.allclose(full, fast, rtol=1e-4, atol=1e-4))


def scores_at(head, hidden, targets, select, *, with_entropy: bool = False):
    """Log-probabilities (and entropies) of ``targets`` where ``select`` is true, zero elsewhere.

    ``hidden``: ``[B, n, H]`` last hidden states, position j predicting ``targets[:, j]`` (``[B, n]``);
    ``select``: ``[B, n]`` bool. Returns ``(logp [B, n], entropy [B, n] or None)``; the entropy carries
    no gradient. The gradient reaches ``hidden`` (and the head) through the selected positions only,
    as the full computation's does when its loss is masked to them.
    """
    import torch

    rows, cols = select.nonzero(as_tuple=True)
    picked, ent = logits_scores(head(hidden[rows, cols]), targets[rows, cols], with_entropy=with_entropy)
    logp = torch.zeros(select.shape, dtype=picked.dtype, device=picked.device).index_put((rows, cols), picked)
    entropy = None
    if ent is not None:
        entropy = torch.zeros(select.shape, dtype=ent.dtype, device=ent.device).index_put((rows, cols), ent)
    return logp, entropy


def logits_scores(logits, targets, *, with_entropy: bool = False):
    """``(logp, entropy)`` of ``targets`` under ``logits`` (``[..., vocab]``, scored in float32; ``targets``
    the leading shape): log-softmax at the target, and the predictive entropy (no gradient) or ``None``.
    The one place every scoring path (full forward, shared prompt, selected positions) does this maths."""
    import torch

    logits = logits.float()
    logz = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - logz
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = logz - (torch.softmax(logits, dim=-1) * logits).sum(-1)
    return logp, entropy
