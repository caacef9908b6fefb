"""Reuse the key/value cache of earlier generate calls for prompts that extend them.

A search agent's turn ``k + 1`` prompt is its turn-``k`` prompt, the tokens it sampled and the
env's ``<information>`` block: without reuse, every turn runs the whole growing context through the
model again, and on CPU that prefill is most of a rollout's time. Every prompt of a task also starts
with the same system prompt. :class:`PrefixKVStore` keeps, per finished row, the keys and values of
the tokens the model has already seen (prompt + sampled tokens but the last, which was never fed
back), and a later prompt takes the KV of its longest common prefix with any stored row; only the
rest is prefilled (:class:`PrefixDynamicKV`).

The attention is the same maths over the same keys and values, so texts match a fresh prefill up to
float rounding (the same caveat as between the dynamic and static caches). The store is tied to the
model's weights: any in-place update (an optimiser step, a loaded state dict, merged adapters) changes
the parameters' version counters and the store empties itself before the next lookup. Each row is also
kept under the adapters it was computed with (:func:`~searchgym.llm.role_adapters.adapter_state`): a PEFT
adapter switched off, or another adapter made active (a role's own, ``proposer_adapter``), looks up only
the rows computed the same way, and the others stay for when it is switched back.

Layout of a batch that reuses a cache: each row is ``[pad][cached c_i][pad][new s_i]`` -- the
cached part right-aligned in ``C = max c_i`` columns, the new part right-aligned in ``S`` columns --
with the attention mask zero on pads and positions counted over the unmasked columns, which is how
Hugging Face decoders handle padding anywhere in the sequence.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..errors import InvalidArgumentError, InvalidTypeError
from .cache_keyword import cache_kwargs
from .decoding import DynamicKV
from .role_adapters import adapter_state
from .shared_prefix import common_prefix_len

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


@dataclass
class _Entry:
    ids: np.ndarray  # the token ids whose KV is held, int64
    keys: list  # per layer: tensor [heads, len(ids), head_dim]
    values: list
    nbytes: int
    adapters: tuple = ()  # the adapter state the keys and values were computed under


@dataclass
class ReuseStats:
    """Counters of a :class:`PrefixKVStore`: prompt tokens seen, reused from the cache, and rows stored."""

    prompt_tokens: int = 0
    reused_tokens: int = 0
    stored_rows: int = 0
    evicted_rows: int = 0
    invalidations: int = 0

    @property
    def reuse_rate(self) -> float:
        """Share of prompt tokens whose prefill was skipped."""
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


class PrefixKVStore:
    """Per-row KV tensors of recent generations, looked up by longest common token prefix.

    ``max_bytes`` bounds the memory held (least recently used rows go first); ``min_prefix`` is the
    shortest match worth reusing. A stored row that is a prefix of a newly stored one is dropped (the
    new one covers it), so a multi-turn rollout holds one entry, not one per turn.
    """

    def __init__(self, model, *, max_bytes: int, min_prefix: int = 16) -> None:
        if max_bytes < 0:
            raise InvalidArgumentError(f"max_bytes={max_bytes} must be >= 0 (0 turns prefix reuse off)")
        self.model = model
        self.max_bytes = max_bytes
        self.min_prefix = max(1, min_prefix)
        self.stats = ReuseStats()
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._next_key = 0
        self._bytes = 0
        self._fingerprint = self._weights_fingerprint()

    # ---------------------------------------------------------------- validity
    def _weights_fingerprint(self) -> int:
        """Changes whenever a parameter is replaced or updated in place (version counters)."""
        return hash(tuple((id(p), p._version) for p in self.model.parameters()))

    def _check_weights(self) -> None:
        fp = self._weights_fingerprint()
        if fp != self._fingerprint:
            if self._entries:
                self.stats.invalidations += 1
                logger.debug("model weights changed: dropping %d cached rows", len(self._entries))
            self.clear()
            self._fingerprint = fp

    def clear(self) -> None:
        """Forget every stored row (the next prompts are prefilled in full)."""
        self._entries.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes of KV currently held."""
        return self._bytes

    # ------------------------------------------------------------------ lookup
    def lookup(self, prompts: Sequence[Sequence[int]], *, count: bool = True) -> list[tuple[_Entry | None, int]]:
        """For each prompt, the stored row sharing its longest prefix and that prefix's length.

        At least one token of every prompt is left to prefill (its logits pick the first new token);
        ``count=False`` leaves the reuse counters alone (a probe, not a prefill)."""
        self._check_weights()
        adapters = adapter_state(self.model)
        out: list[tuple[_Entry | None, int]] = []
        for prompt in prompts:
            ids = np.asarray(prompt, dtype=np.int64)
            best, best_n = None, 0
            limit = len(ids) - 1
            for key, entry in self._entries.items():
                m = min(limit, len(entry.ids))
                if m <= best_n or entry.adapters != adapters:
                    continue
                diff = np.flatnonzero(entry.ids[:m] != ids[:m])
                n = int(diff[0]) if diff.size else m
                if n > best_n:
                    best, best_n, best_key = entry, n, key
            if best is not None and best_n >= self.min_prefix:
                self._entries.move_to_end(best_key)
                out.append((best, best_n))
            else:
                out.append((None, 0))
            if count:
                self.stats.prompt_tokens += len(ids)
                self.stats.reused_tokens += out[-1][1]
        return out

    # ------------------------------------------------------------------- store
    def store(self, rows: Sequence[Sequence[int]], cache, attn) -> None:
        """Keep the KV of each row's first ``len(rows[i])`` attended columns of ``cache``.

        ``cache`` is the call's finished ``DynamicCache`` and ``attn`` its final 2-D attention mask;
        ``rows[i]`` are the ids whose KV that row holds (prompt + fed tokens), or empty to skip it."""
        if self.max_bytes == 0:
            return
        self._check_weights()
        adapters = adapter_state(self.model)
        layers = _cache_layers(cache)
        for i, ids in enumerate(rows):
            if len(ids) < self.min_prefix:
                continue
            cols = attn[i].nonzero().flatten()[: len(ids)]
            if len(cols) < len(ids):
                continue
            self._insert(
                ids,
                [k[i].index_select(1, cols) for k, _ in layers],
                [v[i].index_select(1, cols) for _, v in layers],
                adapters,
            )
        self._evict()

    def add(self, ids: Sequence[int], keys: Sequence, values: Sequence) -> None:
        """Keep one row: ``keys[l]`` / ``values[l]`` are layer ``l``'s ``[heads, len(ids), head_dim]`` tensors
        for the token ids ``ids`` (the rollout engine's slot cache hands rows over this way)."""
        if self.max_bytes == 0 or len(ids) < self.min_prefix:
            return
        self._check_weights()
        if any(k.shape[1] != len(ids) for k in keys) or len(keys) != len(values):
            raise InvalidArgumentError(
                f"add: {len(ids)} ids need keys/values of length {len(ids)} per layer, got "
                f"{sorted({int(k.shape[1]) for k in keys})}"
            )
        self._insert(ids, list(keys), list(values), adapter_state(self.model))
        self._evict()

    def _insert(self, ids: Sequence[int], keys: list, values: list, adapters: tuple) -> None:
        nbytes = sum(t.numel() * t.element_size() for t in keys + values)
        if nbytes > self.max_bytes:
            return
        arr = np.asarray(ids, dtype=np.int64)
        self._drop_prefixes_of(arr, adapters)
        self._entries[self._next_key] = _Entry(arr, keys, values, nbytes, adapters)
        self._next_key += 1
        self._bytes += nbytes
        self.stats.stored_rows += 1

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and self._entries:
            _, old = self._entries.popitem(last=False)
            self._bytes -= old.nbytes
            self.stats.evicted_rows += 1

    def _drop_prefixes_of(self, ids: np.ndarray, adapters: tuple) -> None:
        for key in [
            k
            for k, e in self._entries.items()
            if e.adapters == adapters and len(e.ids) <= len(ids) and np.array_equal(e.ids, ids[: len(e.ids)])
        ]:
            self._bytes -= self._entries.pop(key).nbytes


def warm_shared_prefix(model, store: PrefixKVStore, rows: Sequence[Sequence[int]], device) -> int:
    """Prefill the prefix all ``rows`` share once (one row) and store it, unless the store already
    covers it; returns the tokens prefilled. Turns a batch of fresh rollouts that share a system prompt
    into one prefill of that prompt plus each row's own tail."""
    import torch
    from transformers import DynamicCache

    if len(rows) < 2:
        return 0
    shared = common_prefix_len(rows)
    if shared < store.min_prefix or store.lookup([rows[0][: shared + 1]], count=False)[0][1] >= shared:
        return 0
    ids = torch.as_tensor([list(rows[0][:shared])], dtype=torch.long, device=device)
    attn = torch.ones_like(ids)
    cache = DynamicCache()
    model(input_ids=ids, attention_mask=attn, **cache_kwargs(model, cache), use_cache=True, logits_to_keep=1)
    store.store([list(rows[0][:shared])], cache, attn)
    return shared


def _cache_layers(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(keys, values)`` tensors ``[batch, heads, len, head_dim]`` of every layer of a ``DynamicCache``."""
    layers = getattr(cache, "layers", None)
    if layers is None:
        raise InvalidTypeError(f"prefix KV reuse needs transformers' layered DynamicCache, got {type(cache).__name__}")
    return [(layer.keys, layer.values) for layer in layers]


def build_reuse_batch(prompts: Sequence[Sequence[int]], matches, pad: int, device):
    """Token ids, attention mask and KV data of a batch laid out ``[pad][cached][pad][new]`` per row.

    Returns ``(input_ids, attn, cached_cols, cache_data)``: ``input_ids``/``attn`` span all
    ``C + S`` columns (the cached columns' ids are placeholders, never fed), ``cached_cols = C`` and
    ``cache_data`` the per-layer ``(keys, values)`` ``[batch, heads, C, head_dim]`` to seed a
    ``DynamicCache`` with (zeros on padded columns)."""
    import torch

    reused = [n for _, n in matches]
    C = max(reused)
    S = max(len(p) - n for p, n in zip(prompts, reused))
    ids = torch.full((len(prompts), C + S), pad, dtype=torch.long)
    attn = torch.zeros((len(prompts), C + S), dtype=torch.long)
    for i, (p, n) in enumerate(zip(prompts, reused)):
        new = list(p[n:])
        attn[i, C - n : C] = 1
        ids[i, C - n : C] = torch.as_tensor(list(p[:n]), dtype=torch.long)
        ids[i, C + S - len(new) :] = torch.as_tensor(new, dtype=torch.long)
        attn[i, C + S - len(new) :] = 1
    template = next(e for e, _ in matches if e is not None)
    cache_data = []
    for layer in range(len(template.keys)):
        k0, v0 = template.keys[layer], template.values[layer]
        keys = k0.new_zeros((len(prompts), k0.shape[0], C, k0.shape[2]))
        values = v0.new_zeros((len(prompts), v0.shape[0], C, v0.shape[2]))
        for i, (entry, n) in enumerate(matches):
            if entry is not None and n:
                keys[i, :, C - n :] = entry.keys[layer][:, :n]
                values[i, :, C - n :] = entry.values[layer][:, :n]
        cache_data.append((keys.to(device), values.to(device)))
    return ids.to(device), attn.to(device), C, cache_data


class PrefixDynamicKV(DynamicKV):
    """A ``DynamicCache`` seeded with reused KV for the first ``cached_cols`` columns.

    The token loop hands it the whole ``[B, C + S]`` batch; only the last ``S`` columns are fed
    (the one-token steps are :class:`DynamicKV`'s)."""

    def __init__(self, model, cache_data, cached_cols: int) -> None:
        super().__init__(model)
        self._cache_data = cache_data
        self._cols = cached_cols

    def prefill(self, input_ids, attn, pos, max_new_tokens: int):
        """Run the new part of every prompt over the seeded cache; return the last logits."""
        from transformers import DynamicCache

        self._cache = DynamicCache(ddp_cache_data=self._cache_data)
        self._cache_data = None
        self._attn = attn
        C = self._cols
        out = self.model(
            input_ids=input_ids[:, C:],
            attention_mask=attn,
            position_ids=pos[:, C:],
            **{self._cache_kw: self._cache},
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1, :]
