"""A :class:`TextGenerator` running a Hugging Face causal LM in-process (CPU or GPU).

Batched generation with left padding and a KV cache (dynamic, or static with a CUDA-graph step on
CUDA: :mod:`searchgym.agents.decoding`), written as a small explicit sampling loop so
that (a) every random draw comes from a ``torch.Generator`` seeded per call (no global seeding),
(b) each row stops on its own at the first stop string or EOS, and (c) the trainer can reuse the
same model object it is optimising (weights update in place; no reload between steps).
Chat-message prompts go through the tokenizer's chat template; raw ``str`` prompts continue as-is;
a list of token ids continues exactly those ids. :meth:`TransformersGenerator.generate_with_stats`
returns the sampled ids of every row (the trainer trains on them, never on a re-tokenisation).
"""

from __future__ import annotations

import logging
import random
from typing import Sequence

from ..errors import InvalidArgumentError
from .base import (
    GenerationConfig,
    GenerationError,
    GenerationResult,
    Prompt,
    TextGenerator,
    is_token_prompt,
    truncate_at_stop,
)
from .decoding import DecodingConfig, DynamicKV, StaticKV, decode_tokens
from .kv_reuse import PrefixDynamicKV, PrefixKVStore, build_reuse_batch, warm_shared_prefix

logger = logging.getLogger(__name__)

_STOP_TAIL_TOKENS = 24  # tokens decoded from the end of a row to look for a stop string


class TransformersGenerator(TextGenerator):
    """Generate with ``model`` / ``tokenizer`` on ``device`` (default: the model's device).

    Prompts may be token-id lists (``accepts_token_ids``); results carry the sampled ids.

    ``max_batch_size`` splits large batches; ``max_context_tokens`` left-truncates over-long prompts
    (with a warning); ``seed`` seeds the draws of calls whose config has no ``seed``; ``decoding``
    picks the KV cache and compilation (:class:`~searchgym.agents.decoding.DecodingConfig`: a static
    cache with a CUDA-graph step on CUDA, the dynamic cache elsewhere).
    """

    accepts_token_ids = True
    rng: random.Random

    def __init__(
        self,
        model,
        tokenizer,
        device=None,
        *,
        max_batch_size: int = 64,
        max_context_tokens: int | None = None,
        seed: int | None = 0,
        decoding: DecodingConfig | None = None,
    ) -> None:
        import torch

        if max_batch_size < 1:
            raise InvalidArgumentError("max_batch_size must be >= 1")
        self.model = model
        self.tokenizer = tokenizer
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        if device is not None:
            self.model.to(self.device)
        self.max_batch_size = max_batch_size
        self.max_context_tokens = max_context_tokens or getattr(model.config, "max_position_embeddings", None)
        self.rng = random.Random(seed)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        eos = set()
        for src in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
            if isinstance(src, int):
                eos.add(src)
            elif isinstance(src, (list, tuple)):
                eos.update(int(x) for x in src)
        self.eos_ids = sorted(eos)
        self.decoding = decoding or DecodingConfig()
        self._cache_kind, self._compiled, self._check_every, self._bucket = self.decoding.resolve(self.device)
        self._static: StaticKV | None = None
        reuse = self._cache_kind == "dynamic" and self.decoding.prefix_cache_mb > 0
        self.prefix_cache = PrefixKVStore(model, max_bytes=self.decoding.prefix_cache_mb << 20) if reuse else None
        logger.debug(
            "decoding on %s: %s cache, compiled=%s, host check every %d steps",
            self.device,
            self._cache_kind,
            self._compiled,
            self._check_every,
        )

    # ------------------------------------------------------------------ prompts
    def render(self, prompt: Prompt) -> str:
        """The exact text the model is conditioned on: chat template for messages, raw text as-is."""
        if isinstance(prompt, str):
            return prompt
        if not isinstance(prompt, list) or not all(
            isinstance(m, dict) and "role" in m and "content" in m for m in prompt
        ):
            raise GenerationError("a prompt must be a str or a list of {'role', 'content'} chat messages")
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise GenerationError(
                "this tokenizer has no chat template; pass raw-text prompts or a tokenizer with a chat_template"
            )
        return self.tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)

    def encode(self, text: str) -> list[int]:
        """Token ids of rendered text (no extra special tokens: templates already carry them)."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    # --------------------------------------------------------------- generation
    def generate(self, prompts: Sequence[Prompt], config: GenerationConfig | None = None) -> list[str]:
        """Complete every prompt; texts are cut after the first stop string (kept)."""
        return self.generate_with_stats(prompts, config).texts

    def generate_with_stats(
        self, prompts: Sequence[Prompt], config: GenerationConfig | None = None
    ) -> GenerationResult:
        """Like :meth:`generate`, also counting tokens and returning each row's sampled token ids."""
        cfg = config or GenerationConfig()
        if cfg.max_new_tokens < 1:
            raise GenerationError("max_new_tokens must be >= 1")
        seed = cfg.seed if cfg.seed is not None else self.rng.randrange(2**63)
        ids = [list(p) if is_token_prompt(p) else self.encode(self.render(p)) for p in prompts]
        texts: list[str] = []
        sampled: list[list[int]] = []
        n_prompt = 0
        for start in range(0, len(ids), self.max_batch_size):
            chunk = ids[start : start + self.max_batch_size]
            rows = self._generate_ids(chunk, cfg, seed + start)
            texts.extend(truncate_at_stop(self.tokenizer.decode(t, skip_special_tokens=True), cfg.stop) for t in rows)
            sampled.extend(rows)
            n_prompt += sum(len(x) for x in chunk)
        return GenerationResult(texts, n_prompt, sum(len(t) for t in sampled), sampled)

    def _generate_ids(self, batch: list[list[int]], cfg: GenerationConfig, seed: int) -> list[list[int]]:
        """The token ids sampled for each row: up to and including the token that completes a stop
        string or an end-of-sequence token (both kept: the policy chose them)."""
        import torch

        limit = self.max_context_tokens
        if limit is not None:
            budget = max(1, limit - cfg.max_new_tokens)
            for i, row in enumerate(batch):
                if len(row) > budget:
                    logger.warning(
                        "prompt of %d tokens left-truncated to %d (context limit %d)", len(row), budget, limit
                    )
                    batch[i] = row[-budget:]
        if any(len(row) == 0 for row in batch):
            raise GenerationError("an empty prompt cannot be continued; give at least one token of text")
        pad = self.tokenizer.pad_token_id
        dev = self.device
        gen = torch.Generator(device=dev).manual_seed(seed % (2**63))
        hit_stop = (lambda tokens: self._hit_stop(tokens, cfg.stop)) if cfg.stop else None
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                kv, input_ids, attn = self._prepare(batch, pad)
                out_tokens = decode_tokens(
                    kv,
                    input_ids,
                    attn,
                    max_new_tokens=cfg.max_new_tokens,
                    sample=lambda logits: _sample(logits, cfg.temperature, cfg.top_p, gen),
                    eos_ids=self.eos_ids,
                    pad=pad,
                    check_every=self._check_every,
                    hit_stop=hit_stop,
                )
                if self.prefix_cache is not None:  # the KV of prompt + every fed token (all sampled but the last)
                    self.prefix_cache.store(
                        [row + toks[:-1] for row, toks in zip(batch, out_tokens)], kv.cache, kv.attention_mask
                    )
        except RuntimeError as exc:
            hint = (
                " (in the torch.compile'd static-cache step; decode without compiling with "
                "decoding=DecodingConfig(cache='dynamic'), or --set rollout_cache=dynamic in the trainer)"
                if self._compiled
                else ""
            )
            raise GenerationError(f"generation failed on {dev}: {exc}{hint}") from exc
        finally:
            self.model.train(was_training)
        return out_tokens

    def _prepare(self, batch: list[list[int]], pad: int):
        """The KV strategy, token ids and attention mask of a call: left-padded prompts, or, where
        earlier calls' KV covers a prefix, the prefix-reuse layout of :mod:`~searchgym.agents.kv_reuse`."""
        import torch

        dev = self.device
        matches = []
        if self.prefix_cache is not None:
            warm_shared_prefix(self.model, self.prefix_cache, batch, dev)
            matches = self.prefix_cache.lookup(batch)
        if any(n for _, n in matches):
            input_ids, attn, cols, cache_data = build_reuse_batch(batch, matches, pad, dev)
            return PrefixDynamicKV(self.model, cache_data, cols), input_ids, attn
        width = max(len(r) for r in batch)
        input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in batch], device=dev)
        attn = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in batch], device=dev)
        return self._kv(), input_ids, attn

    def clear_prefix_cache(self) -> None:
        """Forget the reusable KV of earlier calls (needed only after changing the model without
        touching its weights, e.g. toggling a PEFT adapter: weight updates are detected)."""
        if self.prefix_cache is not None:
            self.prefix_cache.clear()

    def _kv(self):
        """The KV cache strategy of this call (the static one is kept: its cache and compiled step are reused)."""
        if self._cache_kind == "dynamic":
            return DynamicKV(self.model)
        if self._static is None:
            self._static = StaticKV(
                self.model,
                compiled=self._compiled,
                bucket=self._bucket,
                mode=self.decoding.compile_mode,
                max_batch=self.max_batch_size,
            )
        return self._static

    def _hit_stop(self, tokens: list[int], stop: Sequence[str]) -> bool:
        tail = self.tokenizer.decode(tokens[-_STOP_TAIL_TOKENS:], skip_special_tokens=True)
        return any(s and s in tail for s in stop)


def _sample(logits, temperature: float, top_p: float, gen):
    """Greedy at temperature 0, else temperature + nucleus sampling drawn from ``gen``."""
    import torch

    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sp, si = probs.sort(dim=-1, descending=True)
        keep = sp.cumsum(-1) - sp < top_p
        keep[:, 0] = True
        sp = torch.where(keep, sp, torch.zeros_like(sp))
        choice = torch.multinomial(sp, 1, generator=gen)
        return si.gather(-1, choice).squeeze(-1)
    return torch.multinomial(probs, 1, generator=gen).squeeze(-1)
