"""Configuration and result records of ``searchgym sft`` (:mod:`searchgym.training.sft_trainer`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

from ..core.config_io import ConfigIO
from ..errors import InvalidArgumentError
from .config_checks import check_shared_fields
from .model_config import DTYPES, MIXED_PRECISION, ModelOptions

__all__ = ["SFTConfig", "SFTResult"]

LR_SCHEDULES = ("constant", "cosine")
SOURCES = ("data", "self")
#: the fields only rejection sampling (source=self) reads
SAMPLING_FIELDS = (
    "env_id",
    "env_kwargs",
    "max_turns",
    "num_tasks",
    "samples_per_task",
    "reward_threshold",
    "rounds",
    "max_new_tokens",
    "temperature",
    "max_batch_generate",
    "rollout_engine",
)


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
            "threads",
            "micro_batch_size",
            "log_every",
            "on_error",
        }
    )
    DUMP_HINT = "searchgym sft --dump-config"

    # model: the ModelOptions fields, then
    chat_template: str | None = field(
        default=None,
        metadata={
            "help": (
                "For a model without a chat template: 'chatml' or the path of a Jinja template file (null: the "
                "tokenizer's own)."
            )
        },
    )
    save_adapter: bool = field(
        default=False, metadata={"help": "With lora=true: final/ holds the LoRA adapter instead of the merged model."}
    )
    lora_init: str | None = field(
        default=None,
        metadata={
            "help": (
                "With lora=true: a LoRA adapter folder (or shipped-cold-start) whose weights start the trained adapter "
                "instead of fresh ones -- continues a LoRA fine-tune (e.g. the shipped cold start) so the result is "
                "still one adapter of the same size; model must be its base, and lora_r, lora_alpha and "
                "lora_target_modules must match it. With source=self, rounds sample from it."
            )
        },
    )
    trainable_modules: list | None = field(
        default=None,
        metadata={
            "help": (
                "Full fine-tune only: train just the linear layers with these names (e.g. lora_extract.ALL_LINEAR) "
                "and freeze embeddings and norms, so an extracted LoRA carries all of the change; null: every weight "
                "trains."
            )
        },
    )
    # data
    source: str = field(
        default="data",
        metadata={
            "help": (
                "Where the training examples come from: data (the JSONL files in data) or self (rejection sampling of"
                " the model's own rollouts)."
            )
        },
    )
    data: list = field(
        default_factory=list,
        metadata={
            "help": (
                "Demonstration, trajectory or env-export JSONL files to train on (source=data); with source=self, "
                "replayed in every round next to the kept samples."
            )
        },
    )
    val_data: list = field(
        default_factory=list,
        metadata={"help": "Held-out JSONL files for the validation loss (empty: a val_fraction split of data)."},
    )
    val_fraction: float = field(
        default=0.1,
        metadata={"help": "Share of the tasks held out for the validation loss when val_data is empty, in [0, 1)."},
    )
    roles: list = field(
        default_factory=lambda: ["solver", "proposer"],
        metadata={"help": "Roles whose turns are trained on: solver, proposer or both."},
    )
    min_reward: float | None = field(
        default=None, metadata={"help": "Keep only trajectories whose reward is >= this (null: keep all)."}
    )
    on_error: str = field(
        default="skip",
        metadata={"help": "Malformed data lines: skip (count them and go on) or stop (raise naming file:line)."},
    )
    max_tokens: int = field(
        default=2048,
        metadata={"help": "Most tokens of one training sequence; longer ones are truncated (and counted)."},
    )
    # rejection sampling (source=self)
    env_id: str = field(default="KGSolver-v0", metadata={"help": "Gymnasium id of the env sampled with source=self."})
    env_kwargs: dict = field(default_factory=dict, metadata={"help": "Extra keyword arguments of that env."})
    max_turns: int = field(default=4, metadata={"help": "Most agent turns per sampled rollout."})
    num_tasks: int = field(default=32, metadata={"help": "Tasks sampled per rejection-sampling round."})
    samples_per_task: int = field(default=4, metadata={"help": "Rollouts sampled per task."})
    reward_threshold: float = field(default=1.0, metadata={"help": "Keep sampled rollouts whose reward is >= this."})
    rounds: int = field(
        default=1,
        metadata={"help": "Rejection-sampling rounds: sample, fine-tune, then sample again from the new model."},
    )
    max_new_tokens: int = field(default=256, metadata={"help": "Most tokens the model generates in one sampled turn."})
    temperature: float = field(
        default=1.0, metadata={"help": "Sampling temperature of the rejection-sampling rollouts."}
    )
    max_batch_generate: int = field(
        default=16, metadata={"help": "Most rollouts generated together in one batch; lower it when memory runs out."}
    )
    rollout_engine: str = field(
        default="auto",
        metadata={
            "help": (
                "The sampling loop: auto (the static rollout engine on CPU and CUDA for Llama-family models), "
                "static or hf (transformers' loop)."
            )
        },
    )
    # optimisation
    lr: float = field(default=5e-5, metadata={"help": "Peak learning rate of AdamW (LoRA usually wants ~2e-4)."})
    lr_schedule: str = field(
        default="constant",
        metadata={"help": "Learning rate after warm-up: constant or cosine (decay to 0 at the last step)."},
    )
    warmup_steps: int = field(default=0, metadata={"help": "Optimizer steps of linear warm-up from 0 to lr."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay."})
    max_grad_norm: float = field(
        default=1.0,
        metadata={"help": "Clip the gradient's global norm to this value before each optimizer step (0: no clipping)."},
    )
    batch_size: int = field(default=16, metadata={"help": "Sequences per optimizer step."})
    micro_batch_size: int = field(
        default=4,
        metadata={
            "help": (
                "Sequences per forward/backward pass (gradient accumulation up to batch_size); lower it when memory "
                "runs out."
            )
        },
    )
    mixed_precision: str = field(
        default="none",
        metadata={
            "help": (
                "bfloat16: matmuls under torch.autocast with weights and optimizer state in dtype (1.6x faster on an "
                "AVX-512 BF16 CPU, several times slower on a CPU without bf16 hardware, docs/sft.md); auto: bfloat16 "
                "where the device multiplies bf16 in hardware, else none; none: plain dtype."
            )
        },
    )
    share_prefix: bool = field(
        default=True,
        metadata={
            "help": "Run the token prefix a micro-batch shares (its system prompt) once: same maths, less compute."
        },
    )
    epochs: float = field(
        default=1.0, metadata={"help": "Passes over the training data (fractions allowed); max_steps overrides it."}
    )
    max_steps: int | None = field(default=None, metadata={"help": "Optimizer steps to run (null: epochs decide)."})
    # held-out loss
    eval_every: int = field(
        default=10, metadata={"help": "Compute the held-out loss every N optimizer steps (and at the last one)."}
    )
    patience: int = field(
        default=0,
        metadata={
            "help": (
                "Stop after this many held-out evaluations without improvement; the best weights become final (0: "
                "never stop early)."
            )
        },
    )
    min_delta: float = field(
        default=0.0, metadata={"help": "Smallest drop of the held-out loss that counts as an improvement."}
    )
    final_weights: str = field(
        default="best",
        metadata={
            "help": (
                "What final/ holds: best (the weights of the lowest held-out loss, the starting ones when no step "
                "lowered it) or last (the last step's)."
            )
        },
    )
    # bookkeeping
    seed: int = field(default=0, metadata={"help": "Seed of the validation split, the data order and sampling."})
    output_dir: str = field(
        default="runs/sft", metadata={"help": "Run folder: final/ (the model), metrics.jsonl and checkpoints/."}
    )
    save_every: int = field(
        default=10, metadata={"help": "Write a checkpoint every N optimizer steps and at the end (0: only at the end)."}
    )
    keep_checkpoints: int = field(
        default=2, metadata={"help": "Most checkpoints kept in output_dir/checkpoints; older ones are deleted."}
    )
    log_every: int = field(default=1, metadata={"help": "Append a metrics line every N optimizer steps."})
    progress: bool = field(default=True, metadata={"help": "Show progress lines on stderr."})

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the bad field and what it accepts."""
        from ..envs.registration import check_env_id

        check_env_id(self.env_id)  # before anything loads: a typo must not cost a model load
        check_shared_fields(self)
        choices = (
            ("dtype", DTYPES),
            ("lr_schedule", LR_SCHEDULES),
            ("source", SOURCES),
            ("on_error", ("skip", "stop")),
            ("mixed_precision", MIXED_PRECISION),
            ("rollout_engine", ("auto", "static", "hf")),
            ("final_weights", ("best", "last")),
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
        if self.lora_init and not self.lora:
            raise InvalidArgumentError("lora_init needs lora=true (it starts the trained LoRA adapter); add --lora")
        if self.save_adapter and not self.lora:
            raise InvalidArgumentError("save_adapter=true needs lora=true (a full fine-tune has no adapter to save)")
        if self.patience and not (self.val_data or self.val_fraction > 0):
            raise InvalidArgumentError("patience > 0 needs held-out data: set val_fraction > 0 or val_data")

    def refuse_unread_sampling_settings(self) -> None:
        """With ``source=data`` no sampling setting is read: one the user changed (``searchgym sft --rounds 3``
        without ``--source self``) is refused by name instead of ignored. (A rejection-sampling round's own
        data-source config carries them on purpose, so this is the command line's check, not :meth:`validate`'s.)"""
        if self.source != "data":
            return
        defaults = type(self)()
        given = [name for name in SAMPLING_FIELDS if getattr(self, name) != getattr(defaults, name)]
        if given:
            raise InvalidArgumentError(
                f"{', '.join(f'{n}={getattr(self, n)!r}' for n in given)}: rejection-sampling settings, read only "
                "with source=self (--source self); drop them to train on --data files"
            )


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
