"""The model half of every training config: which model to load, on which device, in which dtype, with which
LoRA adapter. :class:`~searchgym.training.selfplay_config.TrainConfig` and
:class:`~searchgym.training.sft_config.SFTConfig` both start with these fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..llm.bundled_model import DTYPES

__all__ = ["DTYPES", "MIXED_PRECISION", "ModelOptions"]

#: ``mixed_precision`` of SFT's and the RL update's forwards: plain dtype, bf16 autocast, or bf16 where hardware has it
MIXED_PRECISION = ("none", "bfloat16", "auto")


@dataclass
class ModelOptions:
    """The model fields shared by ``TrainConfig`` and ``SFTConfig``: which model, where, and LoRA.

    ``threads`` was ``cpu_threads`` (docs/glossary.md): the old key still loads, with a warning."""

    RENAMED_KEYS: ClassVar[dict[str, str]] = {"cpu_threads": "threads"}

    model: str = field(
        default="smollm2",
        metadata={
            "help": "Model to train: 'smollm2' (the bundled SmolLM2-135M-Instruct), a local HF model folder or "
            "a cached hub id."
        },
    )
    dtype: str = field(
        default="float32",
        metadata={
            "help": "Dtype of the trained weights: float32, bfloat16 or float16 (bfloat16 halves memory on a "
            "GPU; keep float32 on a CPU)."
        },
    )
    device: str = field(
        default="auto",
        metadata={"help": "Where the model runs: auto (CUDA when available, else the CPU), cpu, cuda or cuda:N."},
    )
    threads: int | None = field(
        default=None,
        metadata={
            "help": "Torch CPU threads of this process (null: torch's default, every core); 1-2 are fastest "
            "for a small model on a busy machine."
        },
    )
    gradient_checkpointing: bool = field(
        default=False,
        metadata={
            "help": "Recompute activations in the backward pass instead of storing them: less memory, about "
            "a third more compute per step."
        },
    )
    lora: bool = field(
        default=False,
        metadata={
            "help": "Train a LoRA adapter (peft) instead of every weight: far less optimizer memory, "
            "usually a higher learning rate."
        },
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank (with lora=true): the adapter's capacity."})
    lora_alpha: int = field(
        default=32, metadata={"help": "LoRA scaling alpha (with lora=true): the update is scaled by alpha / r."}
    )
    lora_dropout: float = field(
        default=0.05, metadata={"help": "Dropout probability on the LoRA branch's input (with lora=true)."}
    )
    lora_target_modules: list = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        metadata={
            "help": "Names of the linear layers that get a LoRA adapter (with lora=true); add the MLP's "
            "gate_proj, up_proj, down_proj for more capacity."
        },
    )
    lora_last_layers: int | None = field(
        default=None,
        metadata={
            "help": "LoRA on the last N decoder layers only (null: all); the backward pass then stops at "
            "layer L-N, so a CPU step costs about 60 % of all-layer LoRA (SmolLM2-135M, N=10 of 30)."
        },
    )
    model_cache_dir: str | None = field(
        default=None,
        metadata={"help": "Folder of the Hugging Face model cache to load hub ids from (null: HF_HOME's)."},
    )
