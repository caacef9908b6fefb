"""The generator the self-play trainer rolls out with: the backend ``config.rollout_backend`` names in the
LLM-backend registry (:mod:`searchgym.llm.registry`), built from one :class:`~searchgym.llm.registry.BackendRequest`.

:func:`make_rollout_generator` is the one place a run picks its backend; a new backend is one
``register_backend`` call, not an edit here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.llm import TextGenerator
from .selfplay_config import TrainConfig

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
    """The backend of ``config.rollout_backend``; one that holds its own weights (a server's checkpoint, or the
    base model when the run starts from ``init``) is given the policy's first."""
    from ..llm.registry import BackendRequest, get_backend

    backend = get_backend(config.rollout_backend, purpose="train", key="rollout_backend")
    generator = backend.make(
        BackendRequest(
            purpose="train",
            model=config.model,
            policy=policy,
            tokenizer=tokenizer,
            endpoint=config.vllm_server_url,
            dtype=config.dtype,
            seed=config.seed,
            concurrency=config.max_batch_generate,
            max_context_tokens=config.max_prompt_tokens + config.max_response_tokens,
            engine=config.rollout_engine,
            rollout_dtype=config.rollout_dtype,
            cache=config.rollout_cache,
            model_cache_dir=config.model_cache_dir,
        )
    )
    if backend.weights == "server" or (backend.weights == "model" and config.init):
        sync_weights(generator, policy)
    engine = getattr(generator, "engine", None)  # rollouts in another dtype than the policy's: correct them
    return RolloutGenerator(generator, engine is not None and bool(engine.config.logprobs))
