"""Configuration and result records of ``searchgym sft`` (:mod:`searchgym.training.sft_trainer`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

from ..core.config_io import ConfigIO
from ..errors import InvalidArgumentError
from .model_config import DTYPES, ModelOptions

LR_SCHEDULES = ("constant", "cosine")
MIXED_PRECISION = ("none", "bfloat16")
SOURCES = ("data", "self")


@dataclass
class SFTConfig(ModelOptions, ConfigIO):
    """Every knob of :func:`searchgym.training.sft_trainer.run_sft` (YAML via ``load/save``; ``searchgym sft --set
    key=value``)."""

    RESUME_MUTABLE = frozenset(
        {
            "share_prefix",
            "max_steps",
            "output_dir",
            "save_every",
            "keep_checkpoints",
            "progress",
            "device",
            "cpu_threads",
            "micro_batch_size",
            "log_every",
            "on_error",
        }
    )
    DUMP_HINT = "searchgym sft --dump-config"

    # model: the ModelOptions fields, then
    chat_template: str | None = None  # for a model without one: "chatml" or a Jinja template file
    save_adapter: bool = False
    # full fine-tune only: train just the linear layers with these names (e.g. the seven of lora_extract.ALL_LINEAR)
    # and freeze embeddings and norms, so a LoRA extracted from the result carries all of the change but its rank;
    # null: every weight trains
    trainable_modules: list | None = None
    # data
    source: str = "data"
    data: list = field(default_factory=list)
    val_data: list = field(default_factory=list)
    val_fraction: float = 0.1
    roles: list = field(default_factory=lambda: ["solver", "proposer"])
    min_reward: float | None = None
    on_error: str = "skip"
    max_tokens: int = 2048
    # rejection sampling (source=self)
    env_id: str = "KGSolver-v0"
    env_kwargs: dict = field(default_factory=dict)
    max_turns: int = 4
    num_tasks: int = 32
    samples_per_task: int = 4
    reward_threshold: float = 1.0
    rounds: int = 1
    max_new_tokens: int = 256
    temperature: float = 1.0
    max_batch_generate: int = 16
    # the sampling loop: "auto" (the static rollout engine on CPU for Llama-family models), "static", "hf"
    rollout_engine: str = "auto"
    # optimisation
    lr: float = 5e-5
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    batch_size: int = 16
    micro_batch_size: int = 4
    # "bfloat16": matmuls under torch.autocast, weights and optimizer state stay in `dtype` (1.6x faster
    # forward+backward for SmolLM2-135M on one AVX-512 BF16 core; see docs/sft.md). "none": plain `dtype`.
    mixed_precision: str = "none"
    share_prefix: bool = True  # run the token prefix a micro-batch shares (its system prompt) once: same maths
    epochs: float = 1.0
    max_steps: int | None = None
    # held-out loss
    eval_every: int = 10
    patience: int = 0
    min_delta: float = 0.0
    # bookkeeping
    seed: int = 0
    output_dir: str = "runs/sft"
    save_every: int = 10
    keep_checkpoints: int = 2
    log_every: int = 1
    progress: bool = True

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the bad field and what it accepts."""
        from ..envs.registration import check_env_id

        check_env_id(self.env_id)  # before anything loads: a typo must not cost a model load
        choices = (
            ("dtype", DTYPES),
            ("lr_schedule", LR_SCHEDULES),
            ("source", SOURCES),
            ("on_error", ("skip", "stop")),
            ("mixed_precision", MIXED_PRECISION),
            ("rollout_engine", ("auto", "static", "hf")),
        )
        for name, allowed in choices:
            if getattr(self, name) not in allowed:
                raise InvalidArgumentError(f"{name}={getattr(self, name)!r}: use one of {', '.join(allowed)}")
        if self.trainable_modules is not None and (self.lora or not self.trainable_modules):
            raise InvalidArgumentError(
                "trainable_modules applies to a full fine-tune: drop --lora (LoRA picks lora_target_modules), "
                "or give at least one layer name"
            )
        for name in (
            "batch_size",
            "micro_batch_size",
            "max_tokens",
            "max_turns",
            "num_tasks",
            "samples_per_task",
            "rounds",
            "max_new_tokens",
            "eval_every",
            "keep_checkpoints",
            "log_every",
            "max_batch_generate",
        ):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"{name}={getattr(self, name)} must be >= 1")
        for name in (
            "lr",
            "warmup_steps",
            "weight_decay",
            "max_grad_norm",
            "patience",
            "min_delta",
            "save_every",
            "temperature",
        ):
            if getattr(self, name) < 0:
                raise InvalidArgumentError(f"{name}={getattr(self, name)} must be >= 0")
        if self.epochs <= 0:
            raise InvalidArgumentError(f"epochs={self.epochs} must be > 0")
        if self.max_steps is not None and self.max_steps < 1:
            raise InvalidArgumentError(f"max_steps={self.max_steps} must be >= 1 (or null: epochs decide)")
        if not 0 <= self.val_fraction < 1:
            raise InvalidArgumentError(f"val_fraction={self.val_fraction} must be in [0, 1)")
        if self.save_adapter and not self.lora:
            raise InvalidArgumentError("save_adapter=true needs lora=true (a full fine-tune has no adapter to save)")
        if self.patience and not (self.val_data or self.val_fraction > 0):
            raise InvalidArgumentError("patience > 0 needs held-out data: set val_fraction > 0 or val_data")


@dataclass
class SFTResult:
    """What a run did: where the model is, steps, losses and entropies before/after, data counts, speed."""

    output_dir: str
    final_dir: str
    steps: int
    best_step: Optional[int]
    stopped_early: bool
    train_loss: Optional[float]
    val_loss_initial: Optional[float]
    val_loss_best: Optional[float]
    entropy_initial: Optional[float]
    entropy_final: Optional[float]
    train_examples: int
    val_examples: int
    truncated: int
    tokens_per_s: Optional[float]
    elapsed_s: float
    data: dict = field(default_factory=dict)
    rounds: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)
