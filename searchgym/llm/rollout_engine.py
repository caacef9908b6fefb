"""The rollout engine: every pending turn in one batch, rows that leave when they stop, a slot KV cache.

:class:`~searchgym.llm.transformers_backend.TransformersGenerator` decodes with it when built with
``engine="static"`` (or ``"auto"``: this engine on CPU where :meth:`DecoderRunner.unsupported` finds
nothing against the model, today's loop elsewhere). What it does differently from the loop of
:mod:`searchgym.llm.decoding`:

* **Rows leave the batch.** A row stops at its EOS, its first stop string (checked after every token,
  exactly as :func:`~searchgym.llm.decoding.decode_tokens` checks it) or its own ``max_new_tokens``,
  and is then out: its keys/values go to the prefix store and the last active slot moves into its
  place, so later steps run on live rows only (no padding tail of finished rows). With more rows than
  ``max_batch`` slots, waiting rows are prefilled into freed slots (continuous batching).
* **A slot KV cache.** One preallocated tensor ``[2, layers, slots, kv_heads, columns + 1, head_dim]``
  (zeroed when made, so masked columns never hold NaN); a row's keys/values fill columns ``0 .. length - 1`` of its
  slot and a step writes one column per row with a single ``index_copy_`` per layer -- nothing is
  re-copied per step (transformers' ``DynamicCache`` concatenates every row each step). The columns
  grow by half when a row needs more (rare: one copy); a small cache is kept for the next call.
* **A lean forward.** :class:`DecoderRunner` runs a Llama-family decoder (Llama, SmolLM2, Qwen2,
  Mistral without a sliding window) by calling its weights directly: one embedding, per layer the
  same operations in the same order as transformers' modules (RMSNorm in float32, rotary embedding,
  SDPA attention with grouped heads packed as transformers packs them for one query, gated MLP), the
  LM head on the rows' last positions only. About 30 tensor operations per layer and step instead of
  transformers' module and mask machinery. On CPU the projections run on fused (q/k/v, gate/up),
  oneDNN-prepacked weight copies (``EngineConfig.pack``). Projections that are not plain ``nn.Linear``
  (a PEFT LoRA layer, say) are called as modules, so adapters work and can be toggled.
* **Prefill in length groups.** Rows admitted together are sorted by how many tokens they still need
  prefilled and split into calls where the padding saved outweighs another pass over the weights
  (:func:`prefill_groups`).
* **Prefix KV reuse** as :mod:`searchgym.llm.kv_reuse` does it: a prompt that extends a stored
  prompt + completion (the next turn of a rollout, a shared system prompt) copies the stored keys and
  values into its slot and prefills only the rest; a fresh batch whose rows share a prefix prefills it
  once. The engine keeps its own :class:`~searchgym.llm.kv_reuse.PrefixKVStore` (in its dtype).
* **bf16 rollouts** (``dtype="bfloat16"``): the runner keeps bf16 copies of the weights (refreshed when
  the model's parameters change) and a bf16 cache; norm statistics stay in float32 as in transformers,
  and the logits are sampled in float32. The sampled ids are what the trainer trains on; their
  log-probabilities under the rollout weights (``logprobs=True``) are returned for an importance
  correction.
* **Fixed-shape steps on a GPU** (``decode_steps``): on CUDA a decode step is bound by launching its
  kernels from Python, so the engine runs it in a fixed shape (slots in power-of-two buckets, every cache
  column under a mask) and replays it as a CUDA graph (:mod:`searchgym.llm.decode_graphs`); the slot cache
  takes at most ``memory_fraction`` of the free device memory (rows beyond it wait for a slot).
* **Per-row sampling streams.** Each row draws from its own ``torch.Generator``, seeded from the call's
  seed and the row's index (:func:`row_seed`), one uniform per token, by inverse CDF over the same
  (temperature, nucleus) distribution as today's sampler. So a row's tokens do not depend on which
  other rows share the call, how many slots there are, or when its batch mates stop (up to float
  rounding of batched matmuls, as for any batch). Greedy (temperature 0) is ``argmax`` as today, and
  gives today's token ids.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from ..errors import InvalidArgumentError
from .decode_graphs import FixedShapeDecode
from .decoder_weights import DecoderWeights
from .kv_reuse import PrefixKVStore
from .shared_prefix import common_prefix_len
from .slot_kv_cache import SlotKVCache

logger = logging.getLogger(__name__)

__all__ = [
    "DECODE_STEPS",
    "DTYPES",
    "DecoderRunner",
    "EngineConfig",
    "EngineOutput",
    "EngineStats",
    "RolloutEngine",
    "RowSampler",
    "StopChecker",
    "auto_engine_reason",
    "prefill_groups",
    "row_seed",
    "sample_rows",
]

DTYPES = ("auto", "float32", "bfloat16", "float16")
#: how decode steps run (``EngineConfig.decode_steps``)
DECODE_STEPS = ("auto", "exact", "fixed", "graphs")
#: rotary embeddings that grow their tables from a host-side length check (transformers' ``dynamic_rope_update``):
#: not capturable, so ``auto`` runs exact steps for them
GRAPH_UNSAFE_ROPE = ("dynamic", "longrope")
#: tokens decoded from the end of a row to look for a stop string (the same window as today's loop)
STOP_TAIL_TOKENS = 24
#: the fixed-shape path sizes its slot cache's columns in multiples of this (prompts of other lengths reuse it)
FIXED_COLUMN_QUANTUM = 256
#: model types whose decoder layers :class:`DecoderRunner` runs (Llama's layer: pre-norm, rotary, GQA, gated MLP)
SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "mistral")


@dataclass(frozen=True)
class EngineConfig:
    """Settings of :class:`RolloutEngine`.

    ``dtype``: weights and KV cache of rollouts (``auto``: the model's; ``bfloat16`` halves the bytes a
    step streams -- with the trainer's importance ratio, not its float32 policy, seeing the mismatch).
    ``max_batch``: slots (rows decoded together). ``refill``: waiting rows are prefilled into freed
    slots once at least this share of ``max_batch`` is free (each refill streams the weights once more).
    ``room``: decode columns allocated past the longest prompt at first (the cache grows by half when a
    row needs more). ``prefix_cache_mb``: memory for reused keys/values (0: off). ``logprobs``: also
    return each sampled token's float32 log-probability under the model (temperature 1). ``pack``: run
    the projections on oneDNN-prepacked weight copies (CPU; 1.3-1.7x faster decode steps at batch 4-16 for
    SmolLM2 in float32, other float rounding than ``F.linear``; re-packed, about 0.4 s for SmolLM2, when the
    weights change); ``None`` = when the weights are copied anyway (a ``dtype`` other than the model's) or
    the float32 copies take at most :data:`~searchgym.llm.decoder_weights.PACK_LIMIT_BYTES`; ``False`` runs
    transformers' own kernels.
    ``split_prefill``: rows admitted together are prefilled in groups of similar length when that saves more
    padded tokens than this many per extra call (a call re-reads the weights: ~20-30 tokens of prefill
    work for SmolLM2 on a CPU); ``-1`` prefills them in one call. ``keep_cache_mb``: the slot cache of the
    exact steps is kept for the next call when it takes at most this much (a new one costs ~0.4 s per GB to
    zero and fault in on a CPU), else released after the call; the fixed-shape steps' cache is always kept
    (their graphs hold its address), with ``max_batch`` slots and columns in multiples of
    :data:`FIXED_COLUMN_QUANTUM`, so calls with other batch sizes and prompt lengths replay the same graphs.
    ``decode_steps``: ``exact`` runs each step on the live rows and the attended width only; ``graphs`` runs
    fixed-shape steps (slots in power-of-two buckets, every cache column under a mask) replayed as CUDA graphs
    (CUDA only; :mod:`searchgym.llm.decode_graphs`); ``fixed`` runs those fixed-shape steps eagerly (what
    the tests check on a CPU); ``auto`` = ``graphs`` on CUDA, ``exact`` elsewhere. ``memory_fraction``: on
    CUDA the slot cache takes at most this share of the device memory free when a call starts (plus what the
    kept cache holds); more rows than fit wait for a slot. ``compile_steps``: a ``torch.compile`` backend
    (``"inductor"``) that traces the fixed-shape step before it is captured, dynamic in the slots, so its ~45
    kernels a layer are fused into a few (on an H200 the captured step of SmolLM2 took 2.9 ms at one row
    against 1.6 ms for transformers' compiled step); compiled once per process and cache, on first use (tens
    of seconds); ``None`` (the default until measured on a GPU) runs the step as it is. ``fold_lora``: a PEFT
    LoRA layer runs on its base weight with the active adapters folded in (re-derived after each optimiser step
    or adapter switch: other float rounding than the adapter's own two matmuls, the same function), so it is
    fused, packed and converted like a plain layer; ``False`` calls LoRA layers as modules in their own dtype.
    """

    dtype: str = "auto"
    max_batch: int = 64
    refill: float = 0.25
    room: int = 128
    prefix_cache_mb: int = 1024
    logprobs: bool = False
    pack: Optional[bool] = None
    split_prefill: int = 32
    keep_cache_mb: int = 512
    decode_steps: str = "auto"
    memory_fraction: float = 0.9
    compile_steps: Optional[str] = None
    fold_lora: bool = True

    def __post_init__(self) -> None:
        if self.decode_steps not in DECODE_STEPS:
            raise InvalidArgumentError(f"decode_steps={self.decode_steps!r}: use one of {', '.join(DECODE_STEPS)}")
        if not 0.0 < self.memory_fraction <= 1.0:
            raise InvalidArgumentError(
                f"memory_fraction={self.memory_fraction} must be in (0, 1]: the share of free device memory the "
                "slot cache may take"
            )
        if self.dtype not in DTYPES:
            raise InvalidArgumentError(f"rollout dtype {self.dtype!r}: use one of {', '.join(DTYPES)}")
        if self.max_batch < 1:
            raise InvalidArgumentError(f"max_batch={self.max_batch} must be >= 1")
        if not 0.0 < self.refill <= 1.0:
            raise InvalidArgumentError(f"refill={self.refill} must be in (0, 1]: the share of free slots to refill at")
        if self.room < 1:
            raise InvalidArgumentError(f"room={self.room} must be >= 1")
        if self.prefix_cache_mb < 0:
            raise InvalidArgumentError(f"prefix_cache_mb={self.prefix_cache_mb} must be >= 0 (0 turns reuse off)")
        if self.keep_cache_mb < 0:
            raise InvalidArgumentError(f"keep_cache_mb={self.keep_cache_mb} must be >= 0 (0: release after each call)")
        if self.split_prefill < -1:
            raise InvalidArgumentError(f"split_prefill={self.split_prefill} must be >= -1 (-1: one prefill call)")


@dataclass
class EngineStats:
    """Cumulative counters of a :class:`RolloutEngine` (every call adds to them)."""

    calls: int = 0
    rows: int = 0
    prompt_tokens: int = 0
    reused_tokens: int = 0
    prefilled_tokens: int = 0
    new_tokens: int = 0
    prefills: int = 0
    decode_steps: int = 0
    row_steps: int = 0
    moves: int = 0
    grows: int = 0
    captures: int = 0  #: CUDA graphs captured (``decode_steps="graphs"``; again after each weight or cache change)
    prefill_s: float = 0.0
    decode_s: float = 0.0

    def as_dict(self) -> dict:
        """The counters as a plain dict (for JSON)."""
        return dict(vars(self))


@dataclass
class EngineOutput:
    """What one :meth:`RolloutEngine.generate` call sampled: ``token_ids[i]`` for prompt ``i`` (its EOS or
    the token completing its stop string included), and ``logprobs[i]`` (same length) when asked for."""

    token_ids: list[list[int]]
    logprobs: Optional[list[list[float]]] = None
    stats: dict = field(default_factory=dict)


def auto_engine_reason(device) -> Optional[str]:
    """Why ``engine="auto"`` keeps transformers' loop on ``device``; ``None`` where the engine is the measured
    default: on a CPU (exact steps), and on CUDA (CUDA-graph steps: on an H200 the learning benchmark's rollout
    batch played end to end took 1.3 s against the loop's 26.7 s greedy and 3.1 s against 24.1 s at temperature
    1, ``benchmarks/results/rollout_gpu_episodes.json``). Other devices have no measurement."""
    if device.type in ("cpu", "cuda"):
        return None
    return f"the engine has no measurement on {device.type}; engine='static' runs it"


def row_seed(seed: int, index: int) -> int:
    """The sampling seed of row ``index`` of a call seeded ``seed``: independent streams per row, a
    function of (seed, index) alone."""
    state = np.random.SeedSequence([int(seed) % (2**63), int(index)]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


class StopChecker:
    """Whether a row's tokens have produced a stop string: its last :data:`STOP_TAIL_TOKENS` tokens decoded
    (special tokens skipped) contain one -- the test today's loop applies after every token.

    The engine asks after every token a row samples, so a stop string not there before can only end in the new
    token's text. When every stop string ends in a printable ASCII character (``>`` for the agent's tags), a
    token whose own text holds none of those characters cannot complete one, and its row's tail is not decoded
    (:func:`stop_enders`): the same answers, without a tokenizer call per row and step for most tokens (a
    decode is ~40 us; a GPU decode step of 60 rows is a few ms)."""

    def __init__(self, tokenizer, stops: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.stops = tuple(s for s in stops if s)
        last = frozenset(s[-1] for s in self.stops)
        try:
            self.enders = stop_enders(tokenizer, last) if self.stops else frozenset()
        except TypeError:  # an unhashable tokenizer: not cached, decoded once for this checker
            self.enders = stop_enders.__wrapped__(tokenizer, last)

    def __bool__(self) -> bool:
        return bool(self.stops)

    def hit(self, tokens: Sequence[int]) -> bool:
        """True when the decoded tail of ``tokens`` contains a stop string; ``tokens`` must have been asked about
        after each earlier token (a tail whose last token ends no stop string is not decoded)."""
        if self.enders is not None and tokens[-1] not in self.enders:
            return False
        tail = self.tokenizer.decode(list(tokens[-STOP_TAIL_TOKENS:]), skip_special_tokens=True)
        return any(s in tail for s in self.stops)


@functools.lru_cache(maxsize=8)
def stop_enders(tokenizer, last_chars: frozenset) -> Optional[frozenset]:
    """The token ids whose own decoded text holds one of ``last_chars`` (the stop strings' last characters), or
    ``None`` (decode every tail) when one is not printable ASCII: only an ASCII byte is the same character in
    every tokenizer's pieces and whatever bytes surround it. Decodes the vocabulary once per tokenizer and set
    (~0.8 s for SmolLM2's 49,152 tokens on one core)."""
    if not all(len(c) == 1 and 33 <= ord(c) <= 126 for c in last_chars):
        return None
    pieces = tokenizer.batch_decode([[i] for i in range(len(tokenizer))], skip_special_tokens=True)
    return frozenset(i for i, text in enumerate(pieces) if any(c in text for c in last_chars))


def sample_rows(logits, temperature: float, top_p: float, uniforms):
    """One token per row of ``logits`` ``[B, vocab]`` (float32): ``argmax`` at temperature 0, else the
    token whose cumulative probability first exceeds ``uniforms[b] * total`` under the temperature- and
    nucleus-shaped distribution (the distribution today's sampler draws from; ``uniforms``: ``[B]`` in
    ``[0, 1)``, one per row from the row's own stream)."""
    import torch

    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    order = None
    if top_p < 1.0:
        probs, order = probs.sort(dim=-1, descending=True)
        keep = probs.cumsum(-1) - probs < top_p
        keep[:, 0] = True
        probs = torch.where(keep, probs, torch.zeros_like(probs))
    cdf = probs.cumsum(-1)
    total = cdf[:, -1:]
    # strictly below the total, so the first cdf value above x belongs to a token with positive mass
    x = torch.minimum(uniforms[:, None].to(cdf.dtype) * total, torch.nextafter(total, torch.zeros_like(total)))
    idx = torch.searchsorted(cdf, x, right=True).clamp_(max=cdf.shape[-1] - 1)
    if order is not None:
        idx = order.gather(-1, idx)
    return idx.squeeze(-1)


# ====================================================================== the lean decoder
class DecoderRunner:
    """A Llama-family decoder run layer by layer over a slot KV cache (see the module docstring).

    Three parts, one job each: :attr:`weights` (:class:`~searchgym.llm.decoder_weights.DecoderWeights`: the
    layers as calls in the rollout dtype, refreshed when the model changes), :attr:`cache`
    (:class:`~searchgym.llm.slot_kv_cache.SlotKVCache`: a slot per row) and the forward here. Slots
    ``0 .. active - 1`` hold the rows being decoded; :meth:`prefill` fills the next slots, :meth:`decode`
    feeds one token per active slot, ``cache.move`` copies a slot into another (compaction)."""

    def __init__(
        self, model, dtype: str = "auto", *, pack: Optional[bool] = None, pack_rows: int = 16, fold_lora: bool = True
    ) -> None:
        reason = self.unsupported(model)
        if reason:
            raise InvalidArgumentError(f"the static rollout engine cannot run this model: {reason}; use engine='hf'")
        self.model = model
        base = self._base(model)
        cfg = base.config
        self.n_layers = int(cfg.num_hidden_layers)
        self.n_heads = int(cfg.num_attention_heads)
        self.n_kv = int(getattr(cfg, "num_key_value_heads", None) or self.n_heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // self.n_heads)
        self.groups = self.n_heads // self.n_kv
        self.scaling = self.head_dim**-0.5
        self.weights = DecoderWeights(
            model,
            base.get_decoder(),
            base.get_output_embeddings(),
            dtype,
            pack=pack,
            pack_rows=pack_rows,
            fold_lora=fold_lora,
        )
        self.device, self.dtype = self.weights.device, self.weights.dtype
        self.cache = SlotKVCache(self.n_layers, self.n_kv, self.head_dim, self.dtype, self.device)

    @property
    def pack(self) -> bool:
        """Whether the projections run on oneDNN-prepacked weight copies."""
        return self.weights.pack

    def refresh(self) -> None:
        """Bind the model's current weights (only what changed since the last call is remade)."""
        self.weights.refresh()

    def allocate(self, slots: int, columns: int) -> None:
        """A cache of at least ``slots`` rows and ``columns`` positions, every row empty."""
        self.cache.allocate(slots, columns)

    def release(self) -> None:
        """Drop the slot cache (its memory goes back)."""
        self.cache.release()

    @property
    def cache_bytes(self) -> int:
        """Bytes the slot cache holds (0 when released)."""
        return self.cache.cache_bytes

    # ------------------------------------------------------------------ support
    @staticmethod
    def _base(model):
        get_base = getattr(model, "get_base_model", None)
        return get_base() if callable(get_base) else model

    @classmethod
    def unsupported(cls, model) -> Optional[str]:
        """Why this runner cannot run ``model`` (``None`` when it can)."""
        import torch

        base = cls._base(model)
        cfg = getattr(base, "config", None)
        kind = getattr(cfg, "model_type", None)
        if kind not in SUPPORTED_MODEL_TYPES:
            return f"model type {kind!r} is not one of {', '.join(SUPPORTED_MODEL_TYPES)}"
        if getattr(cfg, "use_sliding_window", False) or (
            kind == "mistral" and getattr(cfg, "sliding_window", None) is not None
        ):
            return "sliding-window attention is not implemented"
        if any(t != "full_attention" for t in (getattr(cfg, "layer_types", None) or ())):
            return "layers other than full attention are not implemented"
        if int(getattr(cfg, "pretraining_tp", 1) or 1) != 1:
            return "pretraining_tp > 1 is not implemented"
        try:
            decoder, head = base.get_decoder(), base.get_output_embeddings()
        except (AttributeError, NotImplementedError):
            return "the model has no get_decoder / get_output_embeddings"
        if head is None or not all(hasattr(decoder, a) for a in ("embed_tokens", "layers", "norm", "rotary_emb")):
            return "the decoder lacks embed_tokens / layers / norm / rotary_emb"
        for layer in decoder.layers:
            attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
            if (
                attn is None
                or mlp is None
                or not all(hasattr(attn, a) for a in ("q_proj", "k_proj", "v_proj", "o_proj"))
            ):
                return "a decoder layer is not Llama-shaped (self_attn.q/k/v/o_proj)"
            if not all(hasattr(mlp, a) for a in ("gate_proj", "up_proj", "down_proj", "act_fn")):
                return "a decoder layer's MLP is not gated (gate/up/down_proj, act_fn)"
            if not all(hasattr(layer, a) for a in ("input_layernorm", "post_attention_layernorm")):
                return "a decoder layer lacks input_layernorm / post_attention_layernorm"
            if any(hasattr(attn, a) for a in ("q_norm", "k_norm")):
                return "query/key norms are not implemented"
        if not isinstance(decoder.embed_tokens, torch.nn.Module):
            return "the embedding is not a module"
        return None

    # ------------------------------------------------------------------ forward
    def _rope(self, x, cos, sin_signed):
        """``x * cos + rotate_half(x) * sin`` (transformers' rotary embedding) with ``rotate_half(x) * sin`` as
        ``roll(x) * sin_signed``: the same products, the sign moved onto ``sin`` (exact)."""
        return x * cos + x.roll(self.head_dim // 2, dims=-1) * sin_signed

    def _rotary(self, hidden, positions):
        """``(cos, sin_signed)`` ``[B, 1, S, D]`` for ``positions`` ``[B, S]`` from the model's rotary module."""
        import torch

        cos, sin = self.weights.decoder.rotary_emb(hidden, positions)
        half = self.head_dim // 2
        sin_signed = torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)
        return cos.unsqueeze(1), sin_signed.unsqueeze(1)

    def _layers_forward(self, h, cos, sin, write_idx, start: int, rows: int, width: int, mask):
        """All decoder layers over ``h`` ``[rows, S, hidden]`` for slots ``start .. start + rows - 1``:
        each layer writes its keys/values at the flat cache rows ``write_idx`` and attends over columns
        ``0 .. width - 1`` of those slots under ``mask`` (additive: 0 attends, -inf does not)."""
        import torch.nn.functional as F

        B, S = h.shape[0], h.shape[1]
        hq, hk, d, g = self.n_heads, self.n_kv, self.head_dim, self.groups
        end = start + rows
        cache, w = self.cache, self.weights
        assert cache.kv is not None
        for li, (n1, fqkv, fo, n2, fgu, fd, act) in enumerate(w.layers):
            x = n1(h)
            q, k, v = fqkv(x)
            q = q.view(B, S, hq, d).transpose(1, 2)
            k = k.view(B, S, hk, d).transpose(1, 2)
            v = v.view(B, S, hk, d).transpose(1, 2)
            q = self._rope(q, cos, sin)
            k = self._rope(k, cos, sin)
            cache.k_rows[li].index_copy_(0, write_idx, k.transpose(1, 2).reshape(-1, d))
            cache.v_rows[li].index_copy_(0, write_idx, v.transpose(1, 2).reshape(-1, d))
            keys = cache.kv[0, li, start:end, :, :width]
            values = cache.kv[1, li, start:end, :, :width]
            if S == 1:  # transformers' pack_gqa: the grouped query heads of one token share their kv head
                o = F.scaled_dot_product_attention(
                    q.reshape(B, hk, g, d), keys, values, attn_mask=mask, scale=self.scaling
                ).reshape(B, hq, 1, d)
            else:  # transformers' repeat_kv
                if g > 1:
                    keys = keys[:, :, None].expand(B, hk, g, width, d).reshape(B, hq, width, d)
                    values = values[:, :, None].expand(B, hk, g, width, d).reshape(B, hq, width, d)
                o = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=self.scaling)
            h = h + fo(o.transpose(1, 2).reshape(B, S, hq * d))
            gate, up = fgu(n2(h))
            h = h + fd(act(gate) * up)
        return h

    def _additive(self, attend):
        """The additive form of a bool mask (0 where True, -inf elsewhere), made once per forward rather than
        by SDPA in every layer (device kernels only, no host copy: a CUDA graph can capture it)."""
        import torch

        return torch.zeros(attend.shape, dtype=self.dtype, device=self.device).masked_fill_(~attend, float("-inf"))

    def prefill(self, start: int, prompts: Sequence[Sequence[int]], cached: Sequence[int]):
        """Fill slots ``start ..`` with ``prompts`` whose first ``cached[i]`` positions are already in the slot
        (``cache.load_prefix``); returns each row's next-token logits (float32 ``[rows, vocab]``)."""
        import torch

        cache, w = self.cache, self.weights
        rows = len(prompts)
        new = [list(p[c:]) for p, c in zip(prompts, cached)]
        if any(not n for n in new):
            raise InvalidArgumentError("every prompt needs at least one token to prefill (its logits pick the next)")
        S = max(len(n) for n in new)
        ends = [c + len(n) for c, n in zip(cached, new)]
        cache.ensure_columns(max(ends) + 1)
        dev = self.device
        ids = torch.zeros((rows, S), dtype=torch.long)
        for i, n in enumerate(new):
            ids[i, : len(n)] = torch.tensor(n, dtype=torch.long)
        c_t = torch.tensor(list(cached), dtype=torch.long, device=dev)
        j = torch.arange(S, device=dev)
        s_t = torch.tensor([len(n) for n in new], device=dev)
        pos = c_t[:, None] + j[None, :]  # [rows, S]; positions past a row's end are never read back
        valid = j[None, :] < s_t[:, None]
        assert cache.head_base is not None and cache.column_ids is not None and cache.lengths_t is not None
        cols = torch.where(valid, pos, torch.full_like(pos, cache.columns))  # padding writes the trash column
        base = cache.head_base[start : start + rows]  # [rows, kv]
        write_idx = (base[:, None, :] + cols[:, :, None]).reshape(-1)  # order (row, position, head)
        width = max(ends)
        mask = self._additive((cache.column_ids[None, None, :width] <= pos[:, :, None])[:, None])  # [rows, 1, S, width]
        h = w.embed(ids.to(dev))
        cos, sin = self._rotary(h, pos)
        h = self._layers_forward(h, cos, sin, write_idx, start, rows, width, mask)
        last = h[torch.arange(rows, device=dev), s_t - 1]  # [rows, hidden]
        logits = w.head(w.norm(last[:, None]))[:, 0].float()
        for i, e in enumerate(ends):
            cache.lengths[start + i] = e
        cache.lengths_t[start : start + rows] = torch.tensor(ends, dtype=torch.long, device=dev)
        return logits

    def decode(self, tokens, active: int):
        """Feed ``tokens`` ``[active]`` (one per slot ``0 .. active - 1``) at each slot's next position;
        returns the next-token logits (float32 ``[active, vocab]``)."""
        cache, w = self.cache, self.weights
        assert cache.head_base is not None and cache.lengths_t is not None and cache.column_ids is not None
        need = self.make_room(active)
        lens = cache.lengths_t[:active]
        write_idx = (cache.head_base[:active] + lens[:, None]).reshape(-1)
        mask = self._additive((cache.column_ids[None, :need] <= lens[:, None])[:, None, None])  # [B, 1, 1, width]
        h = w.embed(tokens[:, None])
        pos = lens[:, None]
        cos, sin = self._rotary(h, pos)
        h = self._layers_forward(h, cos, sin, write_idx, 0, active, need, mask)
        logits = w.head(w.norm(h))[:, 0].float()
        self.advance(active)
        return logits

    def make_room(self, active: int) -> int:
        """Grow the cache when a step of slots ``0 .. active - 1`` needs a column past it; returns the columns
        that step attends (the longest of those slots, plus the position it writes)."""
        need = max(self.cache.lengths[:active]) + 1
        self.cache.ensure_columns(need)
        return need

    def advance(self, active: int) -> None:
        """One more position in slots ``0 .. active - 1`` (after a decode step wrote it)."""
        cache = self.cache
        assert cache.lengths_t is not None
        cache.lengths_t[:active] += 1
        for i in range(active):
            cache.lengths[i] += 1

    def decode_fixed(self, tokens, active_t, batch: int):
        """A decode step with every shape fixed, what a CUDA graph captures
        (:class:`~searchgym.llm.decode_graphs.FixedShapeDecode`): slots ``0 .. batch - 1`` over all the cache's
        columns, the live ones (``slot < active_t``, a device scalar) fed ``tokens`` ``[batch]`` at their next
        position, the others (padding) writing the trash column. The same operations as :meth:`decode` on a
        wider mask (masked columns weigh exactly 0); lengths are not advanced (:meth:`advance`). Returns the
        next-token logits of all ``batch`` slots (float32)."""
        import torch

        cache, w = self.cache, self.weights
        assert cache.head_base is not None and cache.lengths_t is not None and cache.column_ids is not None
        width = cache.columns
        lens = cache.lengths_t[:batch]
        live = torch.arange(batch, device=self.device) < active_t
        cols = torch.where(live, lens, torch.full_like(lens, width))  # padding writes the trash column
        write_idx = (cache.head_base[:batch] + cols[:, None]).reshape(-1)
        mask = self._additive((cache.column_ids[None, :width] <= lens[:, None])[:, None, None])  # [B, 1, 1, W]
        h = w.embed(tokens[:, None])
        cos, sin = self._rotary(h, lens[:, None])
        h = self._layers_forward(h, cos, sin, write_idx, 0, batch, width, mask)
        return w.head(w.norm(h))[:, 0].float()


# ====================================================================== the engine
def prefill_groups(lengths: Sequence[int], call_tokens: int) -> list[tuple[int, int]]:
    """Split rows sorted by new-token count ``lengths`` into ``[lo, hi)`` groups prefilled one call each,
    minimising the padded tokens computed plus ``call_tokens`` per call (what one more pass over the
    weights costs, in tokens of prefill); ``call_tokens < 0`` keeps every row in one call."""
    n = len(lengths)
    if n == 0:
        return []
    if call_tokens < 0:
        return [(0, n)]
    best = [0.0] + [math.inf] * n  # best[j]: cost of rows [0, j)
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):  # rows [i, j) padded to lengths[j - 1] (sorted ascending)
            cost = best[i] + (j - i) * lengths[j - 1] + call_tokens
            if cost < best[j]:
                best[j], cut[j] = cost, i
    groups, j = [], n
    while j > 0:
        groups.append((cut[j], j))
        j = cut[j]
    return groups[::-1]


class RowSampler:
    """The tokens sampled for one call's rows: each row's own stream of uniforms, its stop rules
    (an EOS of ``eos_ids``, ``stop``, its ``max_new_tokens``) and, with ``logprobs``, the log-probability
    of every sampled token. ``out[r]`` / ``logps[r]`` grow as row ``r`` is decoded."""

    def __init__(
        self,
        max_new_tokens: Sequence[int],
        temperature: float,
        top_p: float,
        seeds: Sequence[int],
        eos_ids: Sequence[int],
        stop: Optional[StopChecker],
        logprobs: bool,
        device: Any,
    ) -> None:
        n = len(max_new_tokens)
        self.max_new_tokens, self.temperature, self.top_p, self.seeds = max_new_tokens, temperature, top_p, seeds
        self.eos = set(int(e) for e in eos_ids)
        self.stop, self.device = stop, device
        self.out: list[list[int]] = [[] for _ in range(n)]
        self.logps: Optional[list[list[float]]] = [[] for _ in range(n)] if logprobs else None
        self.uniforms: dict[int, Any] = {}

    def start(self, rows: Sequence[int]) -> None:
        """Draw the uniforms of ``rows`` (one per token they may sample) from their seeds' streams."""
        import torch

        if self.temperature <= 0:
            return
        for r in rows:
            gen = torch.Generator(device="cpu").manual_seed(self.seeds[r] % (2**63))
            self.uniforms[r] = torch.rand(self.max_new_tokens[r], generator=gen, dtype=torch.float64).tolist()

    def _draw(self, rows: Sequence[int]):
        """The next uniform of each of ``rows`` (``None`` when greedy)."""
        import torch

        if self.temperature <= 0:
            return None
        out = self.out
        return torch.tensor([self.uniforms[r][len(out[r])] for r in rows], dtype=torch.float64, device=self.device)

    def take(self, rows: Sequence[int], logits) -> list[int]:
        """Sample the next token of ``rows`` (in slot order); the positions (in ``rows``) that finished."""
        import torch

        tok = sample_rows(logits, self.temperature, self.top_p, self._draw(rows))
        toks = tok.tolist()
        logps, lp = self.logps, None
        if logps is not None:
            lp = (logits.gather(-1, tok[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)).tolist()
        done = []
        eos, stop, max_new_tokens = self.eos, self.stop, self.max_new_tokens
        for k, (r, t) in enumerate(zip(rows, toks)):
            row = self.out[r]
            row.append(t)
            if lp is not None and logps is not None:
                logps[r].append(lp[k])
            if t in eos or (stop and stop.hit(row)) or len(row) >= max_new_tokens[r]:
                done.append(k)
        return done


class RolloutEngine:
    """Batched decoding with rows that leave, per-row caps and stops, a slot cache and prefix reuse.

    ``model``: a Llama-family causal LM (:meth:`DecoderRunner.unsupported` says why another is refused);
    ``config``: :class:`EngineConfig`. :attr:`store` is the engine's prefix store (``None`` when off);
    :attr:`stats` counts what every call did."""

    def __init__(self, model, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()
        self.runner = DecoderRunner(
            model,
            self.config.dtype,
            pack=self.config.pack,
            pack_rows=min(self.config.max_batch, 64),
            fold_lora=self.config.fold_lora,
        )
        self.model = model
        mb = self.config.prefix_cache_mb
        self.store: Optional[PrefixKVStore] = PrefixKVStore(model, max_bytes=mb << 20) if mb > 0 else None
        self.stats = EngineStats()
        steps = self.config.decode_steps
        if steps == "auto":
            steps = "graphs" if self.runner.device.type == "cuda" else "exact"
        if steps == "graphs" and self.runner.device.type != "cuda":
            raise InvalidArgumentError(
                f"decode_steps='graphs' needs a CUDA device (the model is on {self.runner.device.type}); "
                "use decode_steps='fixed' for the same steps run eagerly, or 'exact'"
            )
        rope = getattr(self.runner.weights.decoder.rotary_emb, "rope_type", "default")
        if steps in ("graphs", "fixed") and rope in GRAPH_UNSAFE_ROPE:
            if self.config.decode_steps != "auto":
                raise InvalidArgumentError(
                    f"decode_steps={steps!r}: the model's {rope!r} rotary embedding re-checks its length on the host "
                    "every step, which a CUDA graph cannot hold; use decode_steps='exact'"
                )
            steps = "exact"
        #: how decode steps run: ``exact`` (:meth:`DecoderRunner.decode`), ``fixed`` or ``graphs``
        self.decode_steps = steps
        if self.config.compile_steps is not None and steps == "exact":
            raise InvalidArgumentError(
                f"compile_steps={self.config.compile_steps!r} compiles the fixed-shape steps, but this engine runs "
                f"exact ones (decode_steps={self.config.decode_steps!r} on {self.runner.device.type}); use "
                "decode_steps='graphs' (CUDA) or 'fixed', or compile_steps=None"
            )
        self.fixed: Optional[FixedShapeDecode] = (
            None
            if steps == "exact"
            else FixedShapeDecode(self.runner, graphs=steps == "graphs", compile_backend=self.config.compile_steps)
        )

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: Sequence[int],
        temperature: float,
        top_p: float,
        seeds: Sequence[int],
        eos_ids: Sequence[int],
        stop: Optional[StopChecker] = None,
    ) -> EngineOutput:
        """Sample a continuation of every prompt (token ids); row ``i`` stops at an EOS of ``eos_ids``, when
        ``stop`` hits, or after ``max_new_tokens[i]`` tokens, and draws from ``seeds[i]``'s stream."""
        import torch

        n = len(prompts)
        if not (len(max_new_tokens) == len(seeds) == n):
            raise InvalidArgumentError("max_new_tokens and seeds need one entry per prompt")
        if any(c < 1 for c in max_new_tokens):
            raise InvalidArgumentError("every row's max_new_tokens must be >= 1")
        if any(len(p) == 0 for p in prompts):
            raise InvalidArgumentError("an empty prompt cannot be continued; give at least one token")
        if n == 0:
            return EngineOutput([], [] if self.config.logprobs else None)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                return self._run(prompts, max_new_tokens, temperature, top_p, seeds, eos_ids, stop)
        finally:
            self.model.train(was_training)

    def _run(self, prompts, max_new_tokens, temperature, top_p, seeds, eos_ids, stop) -> EngineOutput:
        """One call: bind the weights, size the slot cache, decode every row to its end, count what it did."""
        n = len(prompts)
        stats0 = EngineStats(**self.stats.as_dict())
        cfg = self.config
        runner = self.runner
        runner.refresh()
        self.stats.calls += 1
        self.stats.rows += n
        self.stats.prompt_tokens += sum(len(p) for p in prompts)
        rows = RowSampler(max_new_tokens, temperature, top_p, seeds, eos_ids, stop, cfg.logprobs, runner.device)
        if self.fixed is None:
            columns = max(len(p) for p in prompts) + min(max(max_new_tokens), cfg.room)
            slots = self._slots_that_fit(min(cfg.max_batch, n), columns)
        else:
            # fixed-shape steps: a graph holds the cache's address, so one cache serves every call -- all the
            # slots, every row's cap, columns in whole quanta -- and is kept, else each call captures anew
            columns = max(len(p) for p in prompts) + max(max_new_tokens)
            columns = max(-(-columns // FIXED_COLUMN_QUANTUM) * FIXED_COLUMN_QUANTUM, runner.cache.columns)
            slots = self._slots_that_fit(max(cfg.max_batch, runner.cache.slots), columns)
        runner.allocate(slots, columns)
        try:
            self._decode_rows(prompts, rows, min(slots, n))
        finally:
            if self.fixed is None and runner.cache_bytes > cfg.keep_cache_mb << 20:
                runner.release()
        self.stats.new_tokens += sum(len(t) for t in rows.out)
        self.stats.grows = runner.cache.grows
        self.stats.captures = self.fixed.captures if self.fixed is not None else 0
        delta = {k: v - getattr(stats0, k) for k, v in self.stats.as_dict().items()}
        return EngineOutput(rows.out, rows.logps, delta)

    def _slots_that_fit(self, slots: int, columns: int) -> int:
        """``slots``, fewer on CUDA when the slot cache would take more than ``memory_fraction`` of the device
        memory free now (the cache kept from the last call counts as free: it is reused or replaced)."""
        import torch

        runner = self.runner
        if runner.device.type != "cuda":
            return slots
        free, _total = torch.cuda.mem_get_info(runner.device)
        # free to the driver, plus what torch's allocator holds unused, plus the kept cache (reused or replaced)
        free += torch.cuda.memory_reserved(runner.device) - torch.cuda.memory_allocated(runner.device)
        budget = self.config.memory_fraction * (free + runner.cache_bytes)
        per_slot = 2 * runner.n_layers * runner.n_kv * (columns + 1) * runner.head_dim * runner.dtype.itemsize
        fit = int(budget // per_slot)
        if fit < 1:
            raise InvalidArgumentError(
                f"one row of the slot cache ({per_slot / 2**20:.0f} MiB for {columns} positions) does not fit in "
                f"memory_fraction={self.config.memory_fraction} of the {free / 2**20:.0f} MiB free on "
                f"{runner.device}: raise memory_fraction or lower max_new_tokens / the prompt length"
            )
        if fit < slots:
            logger.info("slot cache: %d of %d slots fit in memory_fraction=%s", fit, slots, self.config.memory_fraction)
        return min(slots, fit)

    def _decode_rows(self, prompts: Sequence[Sequence[int]], rows: "RowSampler", slots: int) -> None:
        """The decode loop: admit waiting rows into free slots (when enough are free, or none is active),
        else decode one token for every active slot; rows that finish leave their slot."""
        import torch

        slot_row: list[int] = []  # slot -> row, for the active slots 0 .. len - 1
        waiting = deque(range(len(prompts)))
        refill_at = max(1, math.ceil(self.config.refill * slots))
        while waiting or slot_row:
            free = slots - len(slot_row)
            if waiting and free and (not slot_row or free >= min(refill_at, len(waiting))):
                admitted = [waiting.popleft() for _ in range(min(free, len(waiting)))]
                t0 = time.perf_counter()
                rows.start(admitted)
                first = len(slot_row)
                admitted, logits = self._admit(admitted, prompts, first)
                slot_row.extend(admitted)
                done = rows.take(admitted, logits)
                self.stats.prefill_s += time.perf_counter() - t0
                self._leave([first + k for k in done], slot_row, prompts, rows.out)
                continue
            t0 = time.perf_counter()
            active = len(slot_row)
            last = torch.tensor([rows.out[r][-1] for r in slot_row], dtype=torch.long, device=self.runner.device)
            logits = self.runner.decode(last, active) if self.fixed is None else self.fixed.step(last, active)
            done = rows.take(slot_row, logits)
            self.stats.decode_steps += 1
            self.stats.row_steps += active
            self.stats.decode_s += time.perf_counter() - t0
            self._leave(done, slot_row, prompts, rows.out)

    # ------------------------------------------------------------------ helpers
    def _admit(self, rows: list[int], all_prompts: Sequence[Sequence[int]], start: int):
        """Prefill the prompts of ``rows`` into slots ``start ..``, reusing stored prefixes, in groups of
        similar length (:func:`prefill_groups`); returns ``(rows in slot order, their next-token logits)``."""
        import torch

        runner = self.runner
        prompts = [all_prompts[r] for r in rows]
        matches: list = [(None, 0)] * len(rows)
        if self.store is not None:
            self._warm_shared(prompts, start)
            matches = self.store.lookup(prompts)
        order = sorted(range(len(rows)), key=lambda i: len(prompts[i]) - matches[i][1])
        cached = [matches[i][1] for i in order]
        for slot, i in enumerate(order, start):
            entry, m = matches[i]
            if entry is not None and m:
                runner.cache.load_prefix(slot, entry.keys, entry.values, m)
        ordered = [prompts[i] for i in order]
        self.stats.reused_tokens += sum(cached)
        self.stats.prefilled_tokens += sum(len(p) - c for p, c in zip(ordered, cached))
        logits = []
        for lo, hi in prefill_groups([len(p) - c for p, c in zip(ordered, cached)], self.config.split_prefill):
            logits.append(runner.prefill(start + lo, ordered[lo:hi], cached[lo:hi]))
            self.stats.prefills += 1
        return [rows[i] for i in order], torch.cat(logits)

    def _warm_shared(self, prompts: list, start: int) -> None:
        """Prefill the prefix every admitted row shares once (in slot ``start``) and store it, unless stored."""
        store = self.store
        if store is None or len(prompts) < 2:
            return
        shared = common_prefix_len(prompts)
        if shared < store.min_prefix or store.lookup([prompts[0][: shared + 1]], count=False)[0][1] >= shared:
            return
        prefix = list(prompts[0][:shared])
        entry, m = store.lookup([prefix], count=False)[0]  # a stored part of it, if any
        cached = 0
        if entry is not None and m:
            self.runner.cache.load_prefix(start, entry.keys, entry.values, m)
            cached = m
        self.runner.prefill(start, [prefix], [cached])
        self.stats.prefilled_tokens += shared - cached
        keys, values = self.runner.cache.row_kv(start)
        store.add(prefix, keys, values)

    def _leave(self, done: Sequence[int], slot_row: list[int], prompts, out) -> None:
        """Take the slots ``done`` out of the batch: store their keys/values, move the last active slots into
        the holes (the cache is compacted, never padded)."""
        if not done:
            return
        runner = self.runner
        if self.store is not None:
            for s in done:
                r = slot_row[s]
                ids = list(prompts[r]) + out[r][:-1]  # prompt + every fed token (the last sampled one was not fed)
                if len(ids) != runner.cache.lengths[s]:
                    raise AssertionError(f"slot {s} holds {runner.cache.lengths[s]} positions, expected {len(ids)}")
                keys, values = runner.cache.row_kv(s)
                self.store.add(ids, keys, values)
        gone = set(done)
        keep = len(slot_row) - len(gone)
        holes = sorted(s for s in gone if s < keep)
        movers = [s for s in range(keep, len(slot_row)) if s not in gone]
        runner.cache.move(movers, holes)
        self.stats.moves += len(movers)
        for src, dst in zip(movers, holes):
            slot_row[dst] = slot_row[src]
        del slot_row[keep:]

    def clear(self) -> None:
        """Forget the stored prefixes and release the slot cache."""
        if self.store is not None:
            self.store.clear()
        if self.fixed is not None:
            self.fixed.reset()
        self.runner.release()
