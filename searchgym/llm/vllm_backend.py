"""A :class:`TextGenerator` on vLLM in-process (GPU; optional extra ``searchgym[vllm]``).

vLLM is imported only when a :class:`VLLMGenerator` is built, so ``import searchgym`` never needs it.
:meth:`VLLMGenerator.load_weights` copies updated policy weights into the running engine (the
model object behind ``llm.llm_engine.model_executor``) after each training update -- no restart,
no reload from disk. That needs the engine's model in this process: with vLLM's V1 engine set
``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (this class does so by default before creating the engine).
Prompts may be token-id lists, and :meth:`VLLMGenerator.generate_with_stats` returns the sampled ids
of every request (vLLM's ``CompletionOutput.token_ids``), which the trainer trains on.
"""

from __future__ import annotations

import logging
import os
import random
from typing import Iterable, Sequence

from ..core.llm import (
    GenerationConfig,
    GenerationError,
    GenerationResult,
    Prompt,
    TextGenerator,
    is_token_prompt,
    truncate_at_stop,
)

logger = logging.getLogger(__name__)


class VLLMGenerator(TextGenerator):
    """Generate with ``vllm.LLM(model, **engine_kwargs)``; chat prompts use the model's chat template.

    ``seed`` seeds calls whose config has no seed (each request gets ``seed + index``).
    """

    accepts_token_ids = True
    rng: random.Random

    def __init__(
        self,
        model: str,
        *,
        dtype: str = "bfloat16",
        gpu_memory_utilization: float = 0.5,
        seed: int = 0,
        in_process: bool = True,
        **engine_kwargs,
    ) -> None:
        if in_process:
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        try:
            from vllm import LLM
        except ImportError:
            raise ImportError("the vLLM backend needs vllm on a CUDA machine: pip install 'searchgym[vllm]'") from None
        self.rng = random.Random(seed)
        self.llm = LLM(
            model=model, dtype=dtype, gpu_memory_utilization=gpu_memory_utilization, seed=seed, **engine_kwargs
        )
        self.tokenizer = self.llm.get_tokenizer()

    def render(self, prompt: Prompt) -> str:
        """Chat template for messages; raw text as-is (same rule as the transformers backend)."""
        if isinstance(prompt, str):
            return prompt
        return self.tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)

    def generate(self, prompts: Sequence[Prompt], config: GenerationConfig | None = None) -> list[str]:
        """One batched vLLM call; stop strings are kept in the returned text."""
        return self.generate_with_stats(prompts, config).texts

    def generate_with_stats(
        self, prompts: Sequence[Prompt], config: GenerationConfig | None = None
    ) -> GenerationResult:
        """Like :meth:`generate`, with token counts and the sampled token ids of each request."""
        from vllm import SamplingParams

        cfg = config or GenerationConfig()
        base = cfg.seed if cfg.seed is not None else self.rng.randrange(2**31)
        params = [
            SamplingParams(
                max_tokens=cfg.max_new_tokens,
                temperature=cfg.temperature,
                top_p=cfg.top_p,
                stop=list(cfg.stop) or None,
                include_stop_str_in_output=True,
                seed=base + i,
            )
            for i in range(len(prompts))
        ]
        try:
            inputs = [{"prompt_token_ids": list(p)} if is_token_prompt(p) else self.render(p) for p in prompts]
            outs = self.llm.generate(inputs, params, use_tqdm=False)
        except Exception as exc:  # vLLM raises many types; surface them as one clear error
            raise GenerationError(f"vLLM generation failed: {exc}") from exc
        ids = [list(o.outputs[0].token_ids) for o in outs]
        return GenerationResult(
            [truncate_at_stop(o.outputs[0].text, cfg.stop) for o in outs],
            sum(len(o.prompt_token_ids or []) for o in outs),
            sum(len(x) for x in ids),
            ids,
        )

    def _engine_model(self):
        executor = self.llm.llm_engine.model_executor
        worker = executor.driver_worker
        for path in (("worker", "model_runner", "model"), ("model_runner", "model")):
            obj = worker
            for attr in path:
                obj = getattr(obj, attr, None)
                if obj is None:
                    break
            if obj is not None and hasattr(obj, "load_weights"):
                return obj
        raise GenerationError(
            "cannot reach the vLLM model in this process to update its weights; create the generator with "
            "in_process=True (VLLM_ENABLE_V1_MULTIPROCESSING=0) and tensor_parallel_size=1"
        )

    def load_weights(self, state_dict) -> None:
        """Copy new policy weights (a state dict or ``(name, tensor)`` pairs) into the engine, then drop
        its prefix cache so no stale KV entries are reused."""
        items: Iterable = state_dict.items() if hasattr(state_dict, "items") else state_dict
        self._engine_model().load_weights(items)
        reset = getattr(self.llm, "reset_prefix_cache", None)
        if callable(reset):
            reset()

    def close(self) -> None:
        """Free the engine."""
        self.llm = None
