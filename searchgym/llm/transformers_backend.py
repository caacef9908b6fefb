"""A :class:`TextGenerator` running a Hugging Face causal LM in-process (CPU or GPU).

Batched generation with left padding and a KV cache (dynamic, or static with a CUDA-graph step on
CUDA: :mod:`searchgym.llm.decoding`), written as a small explicit sampling loop so
that (a) every random draw comes from a ``torch.Generator`` seeded per call (no global seeding),
(b) each row stops on its own at the first stop string or EOS, and (c) the trainer can reuse the
same model object it is optimising (weights update in place; no reload between steps).
Chat-message prompts go through the tokenizer's chat template; raw ``str`` prompts continue as-is;
a list of token ids continues exactly those ids. :meth:`TransformersGenerator.generate_with_stats`
returns the sampled ids of every row (the trainer trains on them, never on a re-tokenisation).

``engine`` picks the decoding loop: ``"hf"`` (the reference) is the loop above, over transformers'
forward; ``"static"`` is :mod:`searchgym.llm.rollout_engine` (rows leave the batch when they stop, a
slot KV cache, a lean layer loop, per-row sampling streams, optional bf16 weights via ``rollout_dtype``);
``"auto"`` (the default) is ``"static"`` on CPU and CUDA (there: its CUDA-graph steps) where the engine
supports the model, and ``"hf"`` on other devices, for models the engine does not run,
or when ``decoding`` sets a knob only the transformers loop has (``cache``, ``compile``, ``check_every``,
``bucket``: asking for that loop's cache is asking for that loop).
Greedy decoding gives the same token ids either way (up to float rounding of differently shaped
matmuls); seeded sampling is reproducible in each, but the two draw differently (the engine's draws
are per row, today's per call).
"""

from __future__ import annotations

import logging
import random
from typing import Optional, Sequence

from ..core.llm import (
    GenerationConfig,
    GenerationError,
    GenerationResult,
    Prompt,
    TextGenerator,
    is_token_prompt,
    truncate_at_stop,
)
from ..errors import InvalidArgumentError
from .decoding import DecodingConfig, DynamicKV, StaticKV, decode_tokens
from .kv_reuse import PrefixDynamicKV, PrefixKVStore, build_reuse_batch, warm_shared_prefix
from .role_adapters import ROLE_ADAPTERS, role_adapter, use_role_adapter
from .rollout_engine import (
    STOP_TAIL_TOKENS,
    DecoderRunner,
    EngineConfig,
    RolloutEngine,
    StopChecker,
    auto_engine_reason,
    row_seed,
)

logger = logging.getLogger(__name__)

_STOP_TAIL_TOKENS = STOP_TAIL_TOKENS  # tokens decoded from the end of a row to look for a stop string
#: decoding loops of :class:`TransformersGenerator` (``engine=``)
ENGINES = ("hf", "static", "auto")


class TransformersGenerator(TextGenerator):
    """Generate with ``model`` / ``tokenizer`` on ``device`` (default: the model's device).

    Prompts may be token-id lists (``accepts_token_ids``); results carry the sampled ids.

    ``max_batch_size`` splits large batches (with ``engine="static"``: the rows decoded at once, the
    rest waiting for freed slots); ``max_context_tokens`` left-truncates over-long prompts (with a
    warning); ``seed`` seeds the draws of calls whose config has no ``seed``; ``decoding`` picks the KV
    cache and compilation of the ``"hf"`` loop (:class:`~searchgym.llm.decoding.DecodingConfig`: a
    static cache with a CUDA-graph step on CUDA, the dynamic cache elsewhere) and the prefix store's
    size for both. ``engine``: ``"hf"``, ``"static"`` or ``"auto"`` (see the module docstring);
    ``rollout_dtype``: the static engine's weights and cache (``"auto"``: the model's; ``"bfloat16"``);
    ``engine_config``: every setting of the static engine, used as given (its ``max_batch`` and
    ``prefix_cache_mb`` too: :class:`~searchgym.llm.rollout_engine.EngineConfig`). ``logprobs``: the
    static engine also returns each sampled token's float32 log-probability under the rollout weights
    (temperature 1), in :attr:`GenerationResult.logprobs` and :attr:`last_logprobs` (the transformers loop
    returns none; ``engine_config.logprobs`` says the same when ``engine_config`` is given).
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
        engine: str = "auto",
        rollout_dtype: str = "auto",
        engine_config: EngineConfig | None = None,
        logprobs: bool = False,
    ) -> None:
        import torch

        if max_batch_size < 1:
            raise InvalidArgumentError("max_batch_size must be >= 1")
        if engine not in ENGINES:
            raise InvalidArgumentError(f"engine={engine!r}: use one of {', '.join(ENGINES)}")
        if rollout_dtype != "auto" and engine == "hf":
            raise InvalidArgumentError(
                f"rollout_dtype={rollout_dtype!r} needs engine='static' (today's loop runs the model as it is)"
            )
        if engine_config is not None and rollout_dtype != "auto":
            raise InvalidArgumentError("give the rollout dtype once: in engine_config.dtype or as rollout_dtype")
        if logprobs and engine == "hf":
            raise InvalidArgumentError("logprobs=True needs engine='static' or 'auto' (today's loop returns none)")
        if engine_config is not None and logprobs and not engine_config.logprobs:
            raise InvalidArgumentError("give logprobs once: engine_config=EngineConfig(logprobs=True) or logprobs=True")
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
        self.engine: RolloutEngine | None = None
        if engine != "hf":
            reason = DecoderRunner.unsupported(model)
            if engine == "auto" and reason is None:
                reason = auto_engine_reason(self.device)
            if engine == "auto" and reason is None and _loop_settings(self.decoding):
                reason = f"decoding sets {', '.join(_loop_settings(self.decoding))} of the transformers loop"
            if reason is None:
                self.engine = RolloutEngine(
                    model,
                    engine_config
                    or EngineConfig(
                        dtype=rollout_dtype,
                        max_batch=max_batch_size,
                        prefix_cache_mb=self.decoding.prefix_cache_mb,
                        logprobs=logprobs,
                    ),
                )
            elif engine == "static":
                raise InvalidArgumentError(f"engine='static' cannot run this model: {reason}; use engine='hf'")
            else:
                logger.info("engine=auto: %s; decoding with the transformers loop", reason)
        self.engine_name = "static" if self.engine is not None else "hf"
        #: with ``engine_config.logprobs``: the float32 log-probabilities of the last call's sampled ids
        self.last_logprobs: list[list[float]] | None = None
        self.prefix_cache: PrefixKVStore | None
        if self.engine is not None:
            self.prefix_cache = self.engine.store
        else:
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
    def role_adapters(self) -> bool:
        """Whether the model holds an adapter of a role's own (:mod:`~searchgym.llm.role_adapters`): callers that
        generate for several roles then call :meth:`playing` per role."""
        return any(role_adapter(self.model, r) for r in ROLE_ADAPTERS)

    def playing(self, role: Optional[str]):
        """A block in which generation plays ``role``: with the role's own adapter when the model holds one
        (outside every such block: the ``default`` adapter, which the RAG verifier and judges use)."""
        return use_role_adapter(self.model, role)

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
        self,
        prompts: Sequence[Prompt],
        config: GenerationConfig | None = None,
        *,
        max_new_tokens: Sequence[int] | None = None,
    ) -> GenerationResult:
        """Like :meth:`generate`, also counting tokens and returning each row's sampled token ids.

        ``max_new_tokens``: a cap per prompt (a rollout's room left, say) instead of the config's one cap.
        The static engine stops each row at its cap; today's loop decodes to the largest cap and cuts each
        row at its own (the same ids: a row's tokens up to its cap do not depend on the cap)."""
        cfg = config or GenerationConfig()
        caps = [cfg.max_new_tokens] * len(prompts) if max_new_tokens is None else [int(c) for c in max_new_tokens]
        if len(caps) != len(prompts):
            raise GenerationError(f"max_new_tokens: {len(caps)} caps for {len(prompts)} prompts; give one per prompt")
        if any(c < 1 for c in caps):
            raise GenerationError("max_new_tokens must be >= 1")
        seed = cfg.seed if cfg.seed is not None else self.rng.randrange(2**63)
        ids = [list(p) if is_token_prompt(p) else self.encode(self.render(p)) for p in prompts]
        self._truncate(ids, caps)
        if any(len(row) == 0 for row in ids):
            raise GenerationError("an empty prompt cannot be continued; give at least one token of text")
        sampled: list[list[int]] = []
        self.last_logprobs = None
        if self.engine is not None:
            sampled = self._engine_ids(ids, cfg, caps, seed)
        else:
            for start in range(0, len(ids), self.max_batch_size):
                chunk = ids[start : start + self.max_batch_size]
                chunk_caps = caps[start : start + self.max_batch_size]
                rows = self._generate_ids(chunk, cfg.with_(max_new_tokens=max(chunk_caps)), seed + start)
                sampled.extend(row[:cap] for row, cap in zip(rows, chunk_caps))
        texts = [truncate_at_stop(self.tokenizer.decode(t, skip_special_tokens=True), cfg.stop) for t in sampled]
        return GenerationResult(
            texts, sum(len(x) for x in ids), sum(len(t) for t in sampled), sampled, self.last_logprobs
        )

    def _truncate(self, ids: list[list[int]], caps: Sequence[int]) -> None:
        """Left-truncate prompts that would not leave room for their cap within ``max_context_tokens``."""
        limit = self.max_context_tokens
        if limit is None:
            return
        for i, (row, cap) in enumerate(zip(ids, caps)):
            budget = max(1, limit - cap)
            if len(row) > budget:
                logger.warning("prompt of %d tokens left-truncated to %d (context limit %d)", len(row), budget, limit)
                ids[i] = row[-budget:]

    def _engine_ids(self, ids: list[list[int]], cfg: GenerationConfig, caps: list[int], seed: int) -> list[list[int]]:
        """The static engine's sampled ids: one call for every row, row ``i`` drawing from ``row_seed(seed, i)``."""
        assert self.engine is not None
        try:
            out = self.engine.generate(
                ids,
                max_new_tokens=caps,
                temperature=cfg.temperature,
                top_p=cfg.top_p,
                seeds=[row_seed(seed, i) for i in range(len(ids))],
                eos_ids=self.eos_ids,
                stop=StopChecker(self.tokenizer, cfg.stop),
            )
        except RuntimeError as exc:
            raise GenerationError(
                f"generation failed on {self.device} (static rollout engine): {exc}; engine='hf' decodes with "
                "the transformers loop"
            ) from exc
        self.last_logprobs = out.logprobs
        return out.token_ids

    def _generate_ids(self, batch: list[list[int]], cfg: GenerationConfig, seed: int) -> list[list[int]]:
        """The token ids sampled for each row: up to and including the token that completes a stop
        string or an end-of-sequence token (both kept: the policy chose them)."""
        import torch

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
        earlier calls' KV covers a prefix, the prefix-reuse layout of :mod:`~searchgym.llm.kv_reuse`."""
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

    @property
    def engine_stats(self) -> dict:
        """The static engine's cumulative counters (:class:`~searchgym.llm.rollout_engine.EngineStats`);
        empty with the transformers loop."""
        return self.engine.stats.as_dict() if self.engine is not None else {}

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


def _loop_settings(decoding: DecodingConfig) -> list[str]:
    """The settings of ``decoding`` that only the transformers loop reads, where they differ from the defaults."""
    defaults = DecodingConfig()
    return [k for k in ("cache", "compile", "check_every", "bucket") if getattr(decoding, k) != getattr(defaults, k)]


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
