"""The generator the self-play trainer rolls out with, per ``rollout_backend``: transformers in this process
(the policy itself, optionally decoding in another dtype), vLLM in this process, or a vLLM server.

:func:`make_rollout_generator` is the one place a run picks its backend; each backend is one small builder.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from ..core.llm import TextGenerator
from ..errors import InvalidArgumentError
from .selfplay_config import TrainConfig

logger = logging.getLogger(__name__)

__all__ = ["RolloutGenerator", "make_rollout_generator", "sync_weights"]


@dataclass
class RolloutGenerator:
    """A rollout backend and whether the update must correct for it: ``rollout_correction`` is True when
    rollouts sample in another dtype than the policy trains in (each token is then weighted by the truncated
    importance ratio)."""

    generator: TextGenerator
    rollout_correction: bool = False


def sync_weights(generator: Any, policy: Any) -> None:
    """Give an out-of-model backend (vLLM) the policy's current weights; nothing for one that is the policy."""
    sync = getattr(generator, "load_weights", None)
    if callable(sync):
        sync(policy.state_dict())


def make_rollout_generator(config: TrainConfig, policy: Any, tokenizer: Any) -> RolloutGenerator:
    """The backend of ``config.rollout_backend``; out-of-process ones start from the policy's weights."""
    builders: dict[str, Callable[[TrainConfig, Any, Any], RolloutGenerator]] = {
        "vllm": _vllm,
        "vllm-server": _vllm_server,
    }
    return builders.get(config.rollout_backend, _transformers)(config, policy, tokenizer)


def _vllm(config: TrainConfig, policy: Any, tokenizer: Any) -> RolloutGenerator:
    """vLLM in this process, from the model's weights (the cold-start ones pushed when ``init`` is set)."""
    from ..llm.bundled_model import resolve_model_path
    from ..llm.vllm_backend import VLLMGenerator

    generator = VLLMGenerator(
        resolve_model_path(config.model, cache_dir=config.model_cache_dir),
        dtype=config.dtype,
        seed=config.seed,
        max_model_len=config.max_prompt_tokens + config.max_response_tokens,
    )
    if config.init:  # vLLM started from the base weights: push the cold-start ones
        sync_weights(generator, policy)
    return RolloutGenerator(generator)


def _vllm_server(config: TrainConfig, policy: Any, tokenizer: Any) -> RolloutGenerator:
    """A vLLM server at ``vllm_server_url``, given the policy's weights."""
    from ..llm.vllm_server import VLLMServerGenerator

    if not config.vllm_server_url:
        raise InvalidArgumentError("rollout_backend=vllm-server needs vllm_server_url (http://host:port)")
    generator = VLLMServerGenerator(config.vllm_server_url, seed=config.seed, max_concurrency=config.max_batch_generate)
    sync_weights(generator, policy)  # the server starts from the policy's weights, not its own checkpoint
    return RolloutGenerator(generator)


def _transformers(config: TrainConfig, policy: Any, tokenizer: Any) -> RolloutGenerator:
    """The policy itself through transformers (or the static-cache engine, in ``rollout_dtype``)."""
    from ..llm.decoding import DecodingConfig
    from ..llm.transformers_backend import TransformersGenerator

    policy_dtype = str(next(policy.parameters()).dtype).removeprefix("torch.")
    rollout_dtype = "auto" if config.rollout_dtype in ("auto", policy_dtype) else config.rollout_dtype
    generator = TransformersGenerator(
        policy,
        tokenizer,
        max_batch_size=config.max_batch_generate,
        max_context_tokens=config.max_prompt_tokens + config.max_response_tokens,
        seed=config.seed,
        decoding=DecodingConfig(cache=config.rollout_cache),
        engine=config.rollout_engine,
        rollout_dtype=rollout_dtype,
        logprobs=rollout_dtype != "auto",
    )
    if rollout_dtype != "auto" and generator.engine is None:
        logger.warning(
            "rollout_dtype=%s is not used: rollout_engine=auto decodes with transformers' loop on %s, "
            "in the policy's %s",
            rollout_dtype,
            generator.device,
            policy_dtype,
        )
    return RolloutGenerator(generator, generator.engine is not None and rollout_dtype != "auto")
