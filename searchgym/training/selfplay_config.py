"""Trainer configuration: one dataclass with the SSP paper's defaults, YAML load/save, CLI overrides.

Defaults follow search-self-play Table 4 / docs/game.md, optimisation (lr 1e-6, 5 warm-up steps, batch 256, G 5,
10 turns, prompt 4096 / response 8192 tokens, temperature 1.0 / 0.0, 1 epoch, KL 0.01, clip
0.2 / 0.28). They are the paper's numbers; scale them down yourself for a laptop run
(``--set batch_size=4 --set max_new_tokens=128``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..core.config_io import ConfigIO
from ..core.moved import moved_getattr
from ..errors import InvalidArgumentError
from ..llm.decoding import CACHES
from .losses import LOSS_AGGREGATIONS, PROPOSER_BASELINES, SOLVER_ADVANTAGES, STD_DDOFS
from .model_config import DTYPES, ModelOptions

# Fields that may change between a checkpoint and its resume (they do not alter the training state).
RESUME_MUTABLE = frozenset(
    {
        "total_steps",
        "output_dir",
        "save_every",
        "keep_checkpoints",
        "log_every",
        "val_every",
        "tensorboard",
        "progress",
        "device",
        "cpu_threads",
        "rollout_backend",
        "micro_batch_size",
        "max_batch_generate",
        "eval_every",
        "eval_tasks",
        "eval_limit",
        "share_prompt",
        "rollout_cache",
        "rollout_engine",
        "rollout_dtype",
        "vllm_server_url",
        "recipe",  # a name only: the recipe's values are the other fields, checked one by one
        "recipe_size",
    }
)
#: decoding loops of the transformers rollout backend (``TransformersGenerator(engine=...)``)
ROLLOUT_ENGINES = ("auto", "static", "hf")
#: weights and KV cache of transformers rollouts (``auto``: the policy's ``dtype``)
ROLLOUT_DTYPES = ("auto", "float32", "bfloat16")


@dataclass
class TrainConfig(ModelOptions, ConfigIO):
    """Every knob of :class:`searchgym.training.selfplay_trainer.SelfPlayTrainer`, with the paper's defaults."""

    RESUME_MUTABLE = RESUME_MUTABLE

    # model: the ModelOptions fields, then
    init: str | None = None  # start from this SFT output / checkpoint (same model family as `model`)
    # environment
    env_id: str = "KGSelfPlay-v0"
    env_kwargs: dict = field(default_factory=dict)
    reward: str = "binary"
    # rollout
    batch_size: int = 256
    replay_reset_steps: int = 10
    group_size: int = 5
    max_turns: int = 10
    max_prompt_tokens: int = 4096
    max_response_tokens: int = 8192
    max_new_tokens: int = 1024
    temperature: float = 1.0
    top_p: float = 1.0
    val_temperature: float = 0.0
    max_batch_generate: int = 64
    rollout_backend: str = "transformers"
    rollout_cache: str = "auto"
    # the transformers backend's decoding loop: "auto" (the static rollout engine on CPU for Llama-family
    # models -- rows leave the batch when they stop, a slot KV cache, a lean forward -- transformers' loop
    # elsewhere), "static" (the engine, refused for a model it cannot run), "hf" (transformers' loop)
    rollout_engine: str = "auto"
    # weights and KV cache of the static engine's rollouts: "auto" (= dtype), "float32", "bfloat16" (half the
    # bytes per decode step; a rollout dtype other than dtype turns on the truncated importance correction)
    rollout_dtype: str = "auto"
    # cap C of the truncated importance weight min(pi_train_old / pi_rollout, C) applied per token when the
    # rollouts run in another dtype than the policy (TIS, as verl's rollout_is_threshold; docs/fidelity.md)
    rollout_is_cap: float = 2.0
    vllm_server_url: str | None = None
    # optimisation
    total_steps: int = 200
    lr: float = 1e-6
    warmup_steps: int = 5
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    epochs: int = 1
    mini_batch_size: int = 128
    micro_batch_size: int = 4
    share_prompt: bool = True  # run each micro-batch's shared prompts once (agents/prefix.py); same maths
    kl_coef: float = 0.01
    # leave sequences whose advantages are all 0 (a group whose rollouts all scored alike) out of the update:
    # DAPO's dynamic-sampling filter without resampling. Saves their forward/backward (most of a CPU step
    # early in RL); the remaining sequences carry the mean, and the dropped ones lose their KL term.
    skip_zero_advantage: bool = False
    clip_low: float = 0.2
    clip_high: float = 0.28
    adv_eps: float = 1e-6
    adv_std_ddof: int = 0  # GRPO group std: 0 population (default), 1 sample (verl / TRL); the papers do not say
    # Solver group advantage: "grpo" (R - mean) / (std + eps) (kg-paths-wcr Eq. 3/10); "grpo_centred" R - mean,
    # no division by the std (SSP Eq. 4)
    solver_advantage: str = "grpo"
    # Proposer REINFORCE baseline: "none" (SSP Eq. 5: the advantage is the reward), "verified" (mean over the
    # verified questions, invalid ones get 0: kg-paths-wcr Eq. 9's b), "all" (batch mean), "hop_group" (EVE's
    # HRPO: standardised within each hop count)
    proposer_baseline: str = "verified"
    # how a sequence's token losses combine: "token_mean" (GRPO's 1/|tau| sum, SSP Eq. 4) or "token_sum"
    # (REINFORCE's sum of log-probs, SSP Eq. 5 / kg-paths-wcr Eq. 9)
    solver_loss_aggregation: str = "token_mean"
    proposer_loss_aggregation: str = "token_mean"
    # the named recipe these settings started from (searchgym.training.recipes; null: none), and its size
    recipe: str | None = None
    recipe_size: str | None = None
    train_solver: bool = True
    train_proposer: bool = True
    # bookkeeping
    seed: int = 0
    output_dir: str = "runs/ssp"
    save_every: int = 10
    keep_checkpoints: int = 2
    log_every: int = 1
    val_every: int = 10
    val_size: int = 64
    val_tasks: str | None = None
    eval_every: int = 0  # run `searchgym eval` on eval_tasks every n steps (and at step 0); 0 = never
    eval_tasks: str = "builtin"
    eval_limit: int | None = None
    tensorboard: bool = True
    progress: bool = True

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the bad field and what it accepts."""
        from ..envs.registration import check_env_id
        from ..llm.registry import backend_names, get_backend
        from ..wrappers.registry import reward_plan

        check_env_id(self.env_id)  # before anything loads: a typo must not cost a model load

        try:  # a registered name, a stack "dynasearcher,wcr" or "package.module:Wrapper"
            reward_plan(self.reward)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"reward={self.reward!r}: {exc}") from None
        backend = get_backend(self.rollout_backend, purpose="train", key="rollout_backend")  # the LLM registry
        if not backend.lora and self.lora:
            raise InvalidArgumentError(
                f"rollout_backend={self.rollout_backend} with lora=true is not supported; use full "
                f"fine-tuning or {' or '.join(backend_names(trains=True, lora=True))} rollouts"
            )
        if (backend.needs == "server") != bool(self.vllm_server_url):
            served = " or ".join(backend_names(trains=True, needs="server"))
            raise InvalidArgumentError(
                f"rollout_backend={self.rollout_backend} needs vllm_server_url=http://HOST:PORT (a `vllm serve` "
                f"endpoint), and vllm_server_url is only used with rollout_backend={served}"
                if backend.needs == "server"
                else f"vllm_server_url is only used with rollout_backend={served}"
            )
        if self.rollout_cache not in CACHES:
            raise InvalidArgumentError(f"rollout_cache={self.rollout_cache!r}: use one of {', '.join(CACHES)}")
        if self.rollout_engine not in ROLLOUT_ENGINES:
            raise InvalidArgumentError(
                f"rollout_engine={self.rollout_engine!r}: use one of {', '.join(ROLLOUT_ENGINES)}"
            )
        if self.rollout_dtype not in ROLLOUT_DTYPES:
            raise InvalidArgumentError(f"rollout_dtype={self.rollout_dtype!r}: use one of {', '.join(ROLLOUT_DTYPES)}")
        if self.rollout_dtype not in ("auto", self.dtype) and (
            self.rollout_engine == "hf" or not backend.engine_options
        ):
            raise InvalidArgumentError(
                f"rollout_dtype={self.rollout_dtype} runs in the static rollout engine of the transformers backend; "
                f"set rollout_engine=auto or static (and rollout_backend=transformers), or rollout_dtype=auto"
            )
        if not self.rollout_is_cap > 0:
            raise InvalidArgumentError(f"rollout_is_cap={self.rollout_is_cap} must be > 0 (2.0: verl's TIS default)")
        if self.dtype not in DTYPES:
            raise InvalidArgumentError(f"dtype={self.dtype!r}: use one of {', '.join(DTYPES)}")
        positive = (
            "batch_size",
            "group_size",
            "max_turns",
            "max_new_tokens",
            "mini_batch_size",
            "micro_batch_size",
            "epochs",
            "max_batch_generate",
            "max_prompt_tokens",
            "max_response_tokens",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"{name}={getattr(self, name)} must be >= 1")
        for name in (
            "lr",
            "kl_coef",
            "clip_low",
            "clip_high",
            "temperature",
            "val_temperature",
            "warmup_steps",
            "total_steps",
            "weight_decay",
            "eval_every",
        ):
            if getattr(self, name) < 0:
                raise InvalidArgumentError(f"{name}={getattr(self, name)} must be >= 0")
        if self.adv_std_ddof not in STD_DDOFS:
            raise InvalidArgumentError(
                f"adv_std_ddof={self.adv_std_ddof!r}: use 0 (population std) or 1 (sample std, as verl/TRL)"
            )
        if self.proposer_baseline not in PROPOSER_BASELINES:
            raise InvalidArgumentError(
                f"proposer_baseline={self.proposer_baseline!r}: use one of {', '.join(PROPOSER_BASELINES)} "
                "(none = SSP Eq. 5; verified = mean over verified questions, invalid ones get advantage 0)"
            )
        if self.solver_advantage not in SOLVER_ADVANTAGES:
            raise InvalidArgumentError(
                f"solver_advantage={self.solver_advantage!r}: use one of {', '.join(SOLVER_ADVANTAGES)} "
                "(grpo divides by the group std; grpo_centred is SSP Eq. 4, r - mean)"
            )
        for name in ("solver_loss_aggregation", "proposer_loss_aggregation"):
            if getattr(self, name) not in LOSS_AGGREGATIONS:
                raise InvalidArgumentError(f"{name}={getattr(self, name)!r}: use one of {', '.join(LOSS_AGGREGATIONS)}")
        if not 0 < self.top_p <= 1:
            raise InvalidArgumentError(f"top_p={self.top_p} must be in (0, 1]")
        if self.replay_reset_steps < 0:
            raise InvalidArgumentError(f"replay_reset_steps={self.replay_reset_steps} must be >= 0 (0 = never clear)")
        self._check_env_kwargs()

    def _check_env_kwargs(self) -> None:
        """A key that is both a config field and an env kwarg resolves one way: the config field, which
        the trainer passes to every env it builds; an ``env_kwargs`` copy must agree with it."""
        if not isinstance(self.env_kwargs, dict):
            raise InvalidArgumentError(
                f"env_kwargs expects a mapping like env_kwargs={{order: shuffle}}, got {self.env_kwargs!r}"
            )
        for key in sorted(set(self.env_kwargs) & {f.name for f in fields(self)}):
            if self.env_kwargs[key] != getattr(self, key):
                raise InvalidArgumentError(
                    f"env_kwargs sets {key}={self.env_kwargs[key]!r} but the config has {key}={getattr(self, key)!r}; "
                    f"{key} is a config field the trainer passes to every env: set it once with --set {key}=... "
                    f"and drop it from env_kwargs"
                )
        if "replay_reset_every" in self.env_kwargs:
            raise InvalidArgumentError(
                "env_kwargs sets replay_reset_every (one env's game count), but the trainer shares one replay buffer "
                "across the batch and clears it by training step: set replay_reset_steps=N instead (0 = never)"
            )


__getattr__ = moved_getattr(__name__)  # a moved name (ROLLOUT_BACKENDS) raises naming its new home
