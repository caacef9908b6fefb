"""The token loop of :class:`~searchgym.llm.transformers_backend.TransformersGenerator` and its KV caches.

Two caches sit behind the same loop:

* ``dynamic`` -- transformers' ``DynamicCache``, grown by one token a step (the CPU default: nothing
  is padded, so each step attends over exactly the tokens seen so far).
* ``static`` -- a preallocated ``StaticCache`` (kept between calls and reset in place), a fixed
  attention mask and, on CUDA, the one-token step compiled with ``torch.compile(mode="reduce-overhead")``
  so a whole step replays as one CUDA graph instead of hundreds of kernel launches from Python. Batch
  and cache length are rounded up to powers of two so few shapes are ever compiled. The CUDA default.

The loop keeps the sampled tokens on the device and looks at them on the host only every
``check_every`` steps (stop strings need the tokenizer); a row that hit EOS gets pad tokens from
then on, as before, and a row that hit a stop string between two checks is cut at the stop. The
tokens each row keeps, and so the texts, are the same for every ``check_every`` and either cache (up
to float rounding between the two caches' attention kernels); every random draw comes from ``gen``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from ..errors import InvalidArgumentError
from .cache_keyword import cache_keyword

if TYPE_CHECKING:
    from transformers import StaticCache

logger = logging.getLogger(__name__)

CACHES = ("auto", "dynamic", "static")
_MIN_CACHE_LEN = 256
_MIN_BATCH = 8


@dataclass(frozen=True)
class DecodingConfig:
    """How :class:`TransformersGenerator` decodes.

    ``cache``: ``"auto"`` (static on CUDA, dynamic elsewhere), ``"dynamic"`` or ``"static"``.
    ``compile``: compile the static cache's one-token step with ``torch.compile(mode=compile_mode)``;
    ``None`` = only on CUDA. ``check_every``: steps between host-side checks for stop strings and
    all-finished; ``None`` = 1 when not compiled (stop as soon as possible) and 8 when compiled (a host
    sync every step would stall the CUDA graphs). ``bucket``: round the static cache's batch and length
    up to powers of two (``None`` = when compiled, so few shapes are compiled). ``prefix_cache_mb``:
    memory for reusing earlier calls' keys/values when a prompt extends an earlier prompt + completion
    (the next turn of a rollout, a shared system prompt: :mod:`searchgym.llm.kv_reuse`); used with
    the dynamic cache, ``0`` turns it off.
    """

    cache: str = "auto"
    compile: bool | None = None
    check_every: int | None = None
    compile_mode: str = "reduce-overhead"
    bucket: bool | None = None
    prefix_cache_mb: int = 1024

    def __post_init__(self) -> None:
        if self.prefix_cache_mb < 0:
            raise InvalidArgumentError(
                f"prefix_cache_mb={self.prefix_cache_mb} must be >= 0 (0 turns prefix reuse off)"
            )
        if self.cache not in CACHES:
            raise InvalidArgumentError(f"decoding cache={self.cache!r}: use one of {', '.join(CACHES)}")
        if self.check_every is not None and self.check_every < 1:
            raise InvalidArgumentError(f"check_every={self.check_every} must be >= 1 (or None for the default)")
        if self.compile and self.cache == "dynamic":
            raise InvalidArgumentError(
                "compile=True needs cache='static' (or 'auto'): a growing cache changes shape every step"
            )

    def resolve(self, device) -> tuple[str, bool, int, bool]:
        """``(cache, compile, check_every, bucket)`` for ``device``."""
        cuda = getattr(device, "type", str(device)) == "cuda"
        cache = self.cache if self.cache != "auto" else ("static" if cuda else "dynamic")
        compiled = bool(self.compile) if self.compile is not None else (cache == "static" and cuda)
        if compiled and cache != "static":
            compiled = False
        check = self.check_every or (8 if compiled else 1)
        bucket = compiled if self.bucket is None else bool(self.bucket)
        return cache, compiled, check, bucket


def _pow2_at_least(n: int, floor: int) -> int:
    size = floor
    while size < n:
        size *= 2
    return size


class DynamicKV:
    """One call's ``DynamicCache``: the attention mask grows by one column a step."""

    def __init__(self, model) -> None:
        self.model = model
        self._cache_kw = cache_keyword(model)

    @property
    def cache(self):
        """The call's ``DynamicCache`` (prompt + every fed token), after :meth:`prefill`."""
        return self._cache

    @property
    def attention_mask(self):
        """The call's 2-D attention mask over every cached column."""
        return self._attn

    def prefill(self, input_ids, attn, pos, max_new_tokens: int):
        """Run the prompt; return the last position's logits (rows, vocab)."""
        from transformers import DynamicCache

        self._cache = DynamicCache()
        self._attn = attn
        out = self.model(
            input_ids=input_ids,
            attention_mask=attn,
            position_ids=pos,
            **{self._cache_kw: self._cache},
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1, :]

    def step(self, tokens, pos):
        """Feed one token per row at positions ``pos`` (rows, 1); return the next logits."""
        import torch

        self._attn = torch.cat([self._attn, self._attn.new_ones((self._attn.shape[0], 1))], dim=1)
        out = self.model(
            input_ids=tokens[:, None],
            attention_mask=self._attn,
            position_ids=pos,
            **{self._cache_kw: self._cache},
            use_cache=True,
        )
        return out.logits[:, -1, :]


class StaticKV:
    """A ``StaticCache`` reused across calls (reset in place), with an optionally compiled step.

    With ``bucket`` the batch is padded with one-token dummy rows up to a power of two (at least 8, at
    most ``max_batch``) and the cache length rounded up to a power of two (at least 256), so each
    (batch, length) bucket is compiled once; without it the shapes are exact.
    """

    def __init__(
        self, model, *, compiled: bool, bucket: bool, mode: str = "reduce-overhead", max_batch: int = 64
    ) -> None:
        import torch

        self.model = model
        self._cache_kw = cache_keyword(model)
        self.compiled = compiled
        self.bucket = bucket
        self.max_batch = max_batch
        self._caches: dict[tuple[int, int], StaticCache] = {}
        # fullgraph=False: a model that breaks the graph (a PEFT wrapper, say) still runs, only less of it graphed
        self._step_fn = (
            torch.compile(self._forward_step, mode=mode, fullgraph=False, dynamic=False)
            if compiled
            else self._forward_step
        )

    def _forward_step(self, input_ids, position_ids, attention_mask, cache):
        return self.model(
            input_ids=input_ids,
            position_ids=position_ids,
            attention_mask=attention_mask,
            **{self._cache_kw: cache},
            use_cache=True,
        ).logits[:, -1, :]

    def _cache_for(self, batch: int, length: int):
        from transformers import StaticCache

        key = (batch, length)
        cache = self._caches.get(key)
        if cache is None:
            if len(self._caches) >= 2:  # keep memory bounded: the two most recent shapes
                self._caches.pop(next(iter(self._caches)))
            cache = self._caches[key] = StaticCache(config=self.model.config, max_cache_len=length)
        else:
            cache.reset()
        return cache

    def prefill(self, input_ids, attn, pos, max_new_tokens: int):
        """Pad the batch/cache to their buckets, fill the cache with the prompt, return the real rows' logits."""
        import torch

        n, width = input_ids.shape
        total = width + max_new_tokens
        if self.bucket:
            rows = min(max(_pow2_at_least(n, _MIN_BATCH), n), max(n, self.max_batch))
            length = _pow2_at_least(total, _MIN_CACHE_LEN)
        else:
            rows, length = n, total
        self._n, self._rows = n, rows
        if rows > n:  # dummy rows: one attended pad token each, never read back
            extra = rows - n
            input_ids = torch.cat([input_ids, input_ids.new_full((extra, width), int(input_ids[0, 0]))])
            dummy = attn.new_zeros((extra, width))
            dummy[:, -1] = 1
            attn = torch.cat([attn, dummy])
            pos = torch.cat([pos, pos.new_zeros((extra, width))])
        self._cache = self._cache_for(rows, length)
        mask = attn.new_ones((rows, length))
        mask[:, :width] = attn
        self._mask = mask
        out = self.model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=pos,
            **{self._cache_kw: self._cache},
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:n, -1, :]

    def step(self, tokens, pos):
        """Feed one token per real row; dummy rows repeat their pad token at position 0."""
        import torch

        extra = self._rows - self._n
        if extra:
            tokens = torch.cat([tokens, tokens.new_zeros(extra)])
            pos = torch.cat([pos, pos.new_zeros((extra, 1))])
        if self.compiled:
            torch.compiler.cudagraph_mark_step_begin()
            return self._step_fn(tokens[:, None], pos, self._mask, self._cache)[: self._n].clone()
        return self._step_fn(tokens[:, None], pos, self._mask, self._cache)[: self._n]


def decode_tokens(
    kv,
    input_ids,
    attn,
    *,
    max_new_tokens: int,
    sample: Callable,
    eos_ids: Sequence[int],
    pad: int,
    check_every: int,
    hit_stop: Callable[[list[int]], bool] | None,
) -> list[list[int]]:
    """Generate up to ``max_new_tokens`` per row with ``kv``; return each row's kept token ids.

    A row keeps its tokens up to and including its first EOS, or up to and including the token after
    which ``hit_stop(tokens)`` is true (the caller decodes text with special tokens skipped). ``sample(logits) ->
    ids`` draws the next token of every row.
    """
    import torch

    dev = input_ids.device
    n = input_ids.shape[0]
    eos = torch.tensor(list(eos_ids) or [-1], device=dev)
    finished = torch.zeros(n, dtype=torch.bool, device=dev)
    buffer = torch.full((n, max_new_tokens), pad, dtype=torch.long, device=dev)
    eos_step = torch.full((n,), max_new_tokens, dtype=torch.long, device=dev)
    out_tokens: list[list[int]] = [[] for _ in range(n)]
    open_rows = set(range(n))  # rows the host has not closed yet (EOS or stop string)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    logits = kv.prefill(input_ids, attn, pos, max_new_tokens)
    pos = pos[:, -1:]
    checked = 0
    for step in range(max_new_tokens):
        nxt = sample(logits.float())
        nxt = torch.where(finished, torch.full_like(nxt, pad), nxt)
        hit_eos = torch.isin(nxt, eos) & ~finished
        eos_step = torch.where(hit_eos, torch.full_like(eos_step, step), eos_step)
        finished |= hit_eos
        buffer[:, step] = nxt
        last = step + 1 == max_new_tokens
        if last or (step + 1 - checked) >= check_every:
            stopped = _collect(
                buffer[:, checked : step + 1].tolist(), eos_step.tolist(), checked, out_tokens, open_rows, hit_stop
            )
            if stopped:
                finished[torch.tensor(stopped, device=dev)] = True
            checked = step + 1
            if not open_rows:
                break
        if last:
            break
        pos = pos + 1
        logits = kv.step(nxt, pos)
    return out_tokens


def _collect(
    new: list[list[int]], eos_step: list[int], start: int, out_tokens: list[list[int]], open_rows: set, hit_stop
) -> list[int]:
    """Move the tokens of steps ``start ...`` into ``out_tokens``; close rows at EOS or a stop string.

    Returns the rows newly closed by a stop string (the device must stop feeding them)."""
    stopped = []
    for i in sorted(open_rows):
        row = out_tokens[i]
        for offset, tok in enumerate(new[i]):
            if start + offset >= eos_step[i]:
                if start + offset == eos_step[i]:
                    row.append(tok)  # the sampled end-of-sequence token is kept: the policy chose it
                open_rows.discard(i)
                break
            row.append(tok)
            if hit_stop is not None and hit_stop(row):
                open_rows.discard(i)
                stopped.append(i)
                break
    return stopped
