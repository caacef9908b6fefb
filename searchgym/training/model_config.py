"""The model half of every training config: which model to load, on which device, in which dtype, with which
LoRA adapter. :class:`~searchgym.training.selfplay_config.TrainConfig` and
:class:`~searchgym.training.sft_config.SFTConfig` both start with these fields."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..llm.bundled_model import DTYPES

__all__ = ["DTYPES", "ModelOptions"]


@dataclass
class ModelOptions:
    """The model fields shared by ``TrainConfig`` and ``SFTConfig``: which model, where, and LoRA."""

    model: str = "smollm2"
    dtype: str = "float32"
    device: str = "auto"
    cpu_threads: int | None = None
    gradient_checkpointing: bool = False
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: list = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    # LoRA on the last N decoder layers only (null: all). The backward pass then stops at layer L-N, so a CPU
    # step costs about 60 % of all-layer LoRA (SmolLM2-135M, N=10 of 30)
    lora_last_layers: int | None = None
    model_cache_dir: str | None = None
