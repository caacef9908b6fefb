"""Score many completions of a few shared prompts with each prompt's forward pass run once.

A GRPO group is G completions of one prompt; a step scores them with the policy (with gradient)
and with the frozen reference. Run naively, the prompt -- usually most of each sequence -- goes
through the model G times in the forward pass and G times in the backward pass.
:func:`shared_token_logprobs` instead

1. runs the distinct prompts once (batch ``U``) and keeps their key/value cache,
2. gathers each sequence's prompt cache (``index_select`` on the batch axis: differentiable, so the
   backward pass sums each sequence's gradient into its prompt's single forward) and
3. runs only the completions (batch ``B``) on top, with the positions they have in the full sequence.

The result has exactly the layout of :func:`searchgym.training.losses.token_logprobs` (``[B, T-1]``,
position t scores token t + 1, zeros before the first scored position), so the loss code is the
same for both. The maths is the same attention over the same keys and values: only the order of
floating-point sums differs (a different batch shape picks different matmul blocking), so log-probs
agree to ~1e-6 relative in fp32 (``tests/test_trainer_prefix.py``).

The last prompt token goes with the completion (its logits score the first completion token), so a
prompt needs at least two tokens to be shared. The model must accept a KV cache (``cache`` or
``past_key_values``, :mod:`.cache_keyword`) with an explicit 2-D ``attention_mask`` and ``position_ids``
(every Hugging Face decoder does). Gradient checkpointing recomputes layers and would re-append to the
cache, so the trainer uses the plain path when it is on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..errors import InvalidArgumentError
from .cache_keyword import cache_kwargs

if TYPE_CHECKING:
    import torch


@dataclass
class SharedPrefixBatch:
    """Sequences split into distinct prompt prefixes (``[U, P]``) and per-sequence suffixes (``[B, S]``).

    ``group[b]`` is the prefix row of sequence ``b``; ``prefix_len[b]`` its prefix length;
    ``width`` the full padded length ``T`` of the same batch laid out by :func:`collate`.
    """

    prefix_ids: torch.Tensor
    prefix_attn: torch.Tensor
    group: torch.Tensor
    prefix_len: torch.Tensor
    suffix_ids: torch.Tensor
    suffix_attn: torch.Tensor
    width: int

    @property
    def num_prefixes(self) -> int:
        """How many distinct prompts the batch holds (``U``)."""
        return int(self.prefix_ids.shape[0])


def common_prefix_len(rows: Sequence[Sequence[int]]) -> int:
    """Length of the token prefix every row shares (at most each row's length minus one)."""
    first = np.asarray(rows[0], dtype=np.int64)
    n = min(len(r) for r in rows) - 1
    for row in rows[1:]:
        m = min(n, len(row))
        diff = np.flatnonzero(np.asarray(row[:m], dtype=np.int64) != first[:m])
        n = int(diff[0]) if diff.size else m
        if n <= 0:
            return 0
    return max(n, 0)


def shared_prefix_lengths(sequences: Sequence[Sequence[int]], prompt_lens: Sequence[int]) -> list[int]:
    """The shareable prefix of each sequence: its prompt minus the last token (0 = nothing to share)."""
    return [max(0, min(p, len(s)) - 1) for s, p in zip(sequences, prompt_lens)]


def can_share(requested: bool, gradient_checkpointing: bool) -> bool:
    """Whether a trainer may run a prefix its micro-batch shares once: asked for (``share_prompt`` /
    ``share_prefix``), and no gradient checkpointing, which the two-call forward does not support. The one rule
    of the RL update and SFT."""
    return requested and not gradient_checkpointing


def worth_sharing(sequences: Sequence[Sequence[int]], prompt_lens: Sequence[int]) -> bool:
    """Whether some prompt is shared by two sequences and every sequence has a shareable prefix."""
    lens = shared_prefix_lengths(sequences, prompt_lens)
    if min(lens, default=0) < 1:
        return False
    keys = {tuple(s[:p]) for s, p in zip(sequences, lens)}
    return len(keys) < len(sequences)


def pack_shared(
    sequences: Sequence[Sequence[int]], prompt_lens: Sequence[int], pad_id: int, device=None
) -> SharedPrefixBatch:
    """Split right-padded sequences into distinct prefixes and suffixes (see :class:`SharedPrefixBatch`)."""
    import torch

    lens = shared_prefix_lengths(sequences, prompt_lens)
    if min(lens, default=0) < 1:
        raise InvalidArgumentError("every sequence needs a prompt of at least 2 tokens to share it; use token_logprobs")
    rows: dict[tuple, int] = {}
    group = [rows.setdefault(tuple(s[:p]), len(rows)) for s, p in zip(sequences, lens)]
    prefixes = list(rows)
    P = max(len(x) for x in prefixes)
    S = max(len(s) - p for s, p in zip(sequences, lens))
    prefix_ids = torch.full((len(prefixes), P), pad_id, dtype=torch.long)
    prefix_attn = torch.zeros((len(prefixes), P), dtype=torch.long)
    for u, pre in enumerate(prefixes):
        prefix_ids[u, : len(pre)] = torch.tensor(pre)
        prefix_attn[u, : len(pre)] = 1
    suffix_ids = torch.full((len(sequences), S), pad_id, dtype=torch.long)
    suffix_attn = torch.zeros((len(sequences), S), dtype=torch.long)
    for b, (s, p) in enumerate(zip(sequences, lens)):
        suffix_ids[b, : len(s) - p] = torch.tensor(list(s[p:]))
        suffix_attn[b, : len(s) - p] = 1
    tensors = [prefix_ids, prefix_attn, torch.tensor(group), torch.tensor(lens), suffix_ids, suffix_attn]
    if device is not None:
        tensors = [t.to(device) for t in tensors]
    prefix_ids, prefix_attn, group_rows, prefix_lens, suffix_ids, suffix_attn = tensors
    return SharedPrefixBatch(
        prefix_ids, prefix_attn, group_rows, prefix_lens, suffix_ids, suffix_attn, width=max(len(s) for s in sequences)
    )


def shared_token_logprobs(model, batch: SharedPrefixBatch, *, with_entropy: bool = False, only=None):
    """``(logp, entropy)`` in :func:`~searchgym.training.losses.token_logprobs`' layout, each prompt run once.

    ``only`` (``[B, T-1]`` in that layout, e.g. the loss mask): score just those positions when the model
    allows it (:mod:`searchgym.llm.lm_head`); the rest are 0."""
    import torch
    from transformers import DynamicCache

    from .lm_head import head_split, logits_scores, scores_at

    split = head_split(model) if only is not None else None
    cache = DynamicCache()
    pos = (batch.prefix_attn.cumsum(-1) - 1).clamp(min=0)
    prefix = dict(
        input_ids=batch.prefix_ids,
        attention_mask=batch.prefix_attn,
        position_ids=pos,
        use_cache=True,
        **cache_kwargs(model, cache),
    )
    if split is not None:
        split[0](**prefix)  # the prefix needs no logits at all
    else:
        model(**prefix, logits_to_keep=1)
    cache.batch_select_indices(batch.group)  # [U, ...] -> [B, ...]; differentiable gather
    S = batch.suffix_ids.shape[1]
    attn = torch.cat([batch.prefix_attn.index_select(0, batch.group), batch.suffix_attn], dim=1)
    pos = batch.prefix_len[:, None] + torch.arange(S, device=batch.suffix_ids.device)[None, :]
    suffix = dict(
        input_ids=batch.suffix_ids,
        attention_mask=attn,
        position_ids=pos,
        use_cache=True,
        **cache_kwargs(model, cache),
    )
    if split is not None:
        hidden = split[0](**suffix).last_hidden_state
        select = _to_suffix_layout(only > 0, batch, S - 1)
        logp, entropy = scores_at(split[1], hidden[:, :-1], batch.suffix_ids[:, 1:], select, with_entropy=with_entropy)
        return _to_full_layout(logp, batch), None if entropy is None else _to_full_layout(entropy, batch)
    # suffix position j scores suffix token j + 1
    logp, entropy = logits_scores(model(**suffix).logits[:, :-1, :], batch.suffix_ids[:, 1:], with_entropy=with_entropy)
    return _to_full_layout(logp, batch), None if entropy is None else _to_full_layout(entropy, batch)


def _to_suffix_layout(values, batch: SharedPrefixBatch, n: int):
    """Inverse of :func:`_to_full_layout` for a ``[B, T-1]`` selection: suffix position j of row b is full
    position ``prefix_len[b] + j`` (positions past the row's end read False)."""
    import torch

    idx = batch.prefix_len[:, None] + torch.arange(n, device=values.device)[None, :]
    inside = idx < values.shape[1]
    return values.gather(1, idx.clamp(max=values.shape[1] - 1)) & inside


def _to_full_layout(values, batch: SharedPrefixBatch):
    """Place suffix-layout scores ``[B, S-1]`` at full-sequence positions ``prefix_len + j`` of ``[B, T-1]``
    (padding scores land in a spill area that is cut off; each row's indices are distinct)."""
    import torch

    B, n = values.shape
    idx = batch.prefix_len[:, None] + torch.arange(n, device=values.device)[None, :]
    full = values.new_zeros((B, batch.width - 1 + n))
    return full.scatter(1, idx, values)[:, : batch.width - 1]
