"""Trainer configuration: one dataclass with the SSP paper's defaults, YAML load/save, CLI overrides.

Defaults follow search-self-play Table 4 / docs/game.md, optimisation (lr 1e-6, 5 warm-up steps, batch 256, G 5,
10 turns, prompt 4096 / response 8192 tokens, temperature 1.0 / 0.0, 1 epoch, KL 0.01, clip
0.2 / 0.28). They are the paper's numbers; scale them down yourself for a laptop run
(``--set batch_size=4 --set max_new_tokens=128``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..core.advantages import SUBGRAPH_BASELINES
from ..core.config_io import ConfigIO
from ..core.moved import moved_getattr
from ..errors import InvalidArgumentError
from ..llm.decoding import CACHES
from ..llm.role_adapters import ROLE_ADAPTER_MODES
from .config_checks import check_shared_fields
from .losses import LOSS_AGGREGATIONS, PROPOSER_BASELINES, SOLVER_ADVANTAGES, STD_DDOFS
from .model_config import DTYPES, MIXED_PRECISION, ModelOptions

# Fields that may change between a checkpoint and its resume (they do not alter the training state).
RESUME_MUTABLE = frozenset(
    {
        "total_steps",
        "output_dir",
        "save_every",
        "keep_checkpoints",
        "keep_checkpoint_every",
        "log_every",
        "val_every",
        "tensorboard",
        "progress",
        "device",
        "threads",
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
#: updates that add the demonstrations' anchor loss (``anchor_roles``)
ANCHOR_ROLES = ("solver", "proposer", "both")


@dataclass
class TrainConfig(ModelOptions, ConfigIO):
    """Every knob of :class:`searchgym.training.selfplay_trainer.SelfPlayTrainer`, with the paper's defaults."""

    RESUME_MUTABLE = RESUME_MUTABLE

    # model: the ModelOptions fields, then
    init: str | None = field(
        default=None,
        metadata={
            "help": (
                "Start RL from this `searchgym sft` output, adapter or checkpoint (same model family as `model`); "
                "null: from `model`'s own weights."
            )
        },
    )
    # environment
    env_id: str = field(
        default="KGSelfPlay-v0",
        metadata={"help": "Gymnasium id of the env the policy plays (a searchgym self-play or group env)."},
    )
    env_kwargs: dict = field(
        default_factory=dict,
        metadata={"help": "Extra keyword arguments of every env the trainer builds, e.g. {order: shuffle}."},
    )
    reward: str = field(
        default="binary",
        metadata={
            "help": (
                "Reward shaping: a registered name (binary, wcr, ...), a stack 'dynasearcher,wcr', or "
                "'package.module:Wrapper'."
            )
        },
    )
    reward_options: dict = field(
        default_factory=dict,
        metadata={
            "help": (
                "Keyword arguments of the reward wrappers, by reward name: {wcr: {waypoint_answer_credit: false}} "
                "(set one with --set reward_options.wcr.waypoint_answer_credit=false); each name must be in the "
                "reward stack and each option a parameter of its wrapper."
            )
        },
    )
    # rollout
    batch_size: int = field(
        default=256,
        metadata={
            "help": "Self-play games (Proposer questions) per training step; each has group_size Solver rollouts."
        },
    )
    replay_reset_steps: int = field(
        default=10,
        metadata={"help": "Clear the shared replay buffer of verified questions every N training steps (0: never)."},
    )
    group_size: int = field(
        default=5,
        metadata={
            "help": "Solver rollouts per question (G of GRPO): the group the Solver advantage is normalised over."
        },
    )
    max_turns: int = field(default=10, metadata={"help": "Most agent turns in one rollout before the env cuts it off."})
    max_prompt_tokens: int = field(
        default=4096,
        metadata={"help": "Most tokens of a rollout's prompt (system prompt and env text); longer rollouts are cut."},
    )
    max_response_tokens: int = field(
        default=8192, metadata={"help": "Most agent-generated tokens in one rollout, summed over its turns."}
    )
    max_new_tokens: int = field(default=1024, metadata={"help": "Most tokens the policy generates in one turn."})
    temperature: float = field(
        default=1.0,
        metadata={"help": "Sampling temperature of training rollouts (1.0: the policy's own distribution)."},
    )
    top_p: float = field(
        default=1.0, metadata={"help": "Nucleus sampling mass of training rollouts, in (0, 1] (1.0: off)."}
    )
    val_temperature: float = field(
        default=0.0, metadata={"help": "Sampling temperature of validation rollouts (0: greedy)."}
    )
    max_batch_generate: int = field(
        default=64,
        metadata={
            "help": (
                "Most rollouts generated together in one batch (also the vLLM server's requests in flight); lower it "
                "when memory runs out."
            )
        },
    )
    rollout_backend: str = field(
        default="transformers",
        metadata={
            "help": (
                "What generates rollouts: transformers (in process), vllm (in-process vLLM) or vllm-server (a `vllm "
                "serve` endpoint)."
            )
        },
    )
    rollout_cache: str = field(
        default="auto",
        metadata={
            "help": "KV cache of transformers rollouts: auto (static on CUDA, dynamic elsewhere), dynamic or static."
        },
    )
    rollout_engine: str = field(
        default="auto",
        metadata={
            "help": (
                "Decoding loop of the transformers backend: auto (the static rollout engine on CPU and CUDA for "
                "Llama-family models, transformers' loop elsewhere), static (the engine) or hf (transformers' loop)."
            )
        },
    )
    rollout_dtype: str = field(
        default="auto",
        metadata={
            "help": (
                "Weights and KV cache of the static engine's rollouts: auto (= dtype), float32 or bfloat16 (half the "
                "bytes per decode step; turns on the truncated importance correction)."
            )
        },
    )
    rollout_is_cap: float = field(
        default=2.0,
        metadata={
            "help": (
                "Cap C of the per-token truncated importance weight min(pi_train / pi_rollout, C) when rollouts run "
                "in another dtype (TIS, verl's rollout_is_threshold)."
            )
        },
    )
    vllm_server_url: str | None = field(
        default=None,
        metadata={
            "help": (
                "URL http://HOST:PORT of a `vllm serve` endpoint; needed by (and only used with) "
                "rollout_backend=vllm-server."
            )
        },
    )
    # optimisation
    total_steps: int = field(
        default=200, metadata={"help": "Training steps to run (a resumed run continues up to this count)."}
    )
    lr: float = field(default=1e-6, metadata={"help": "Peak learning rate of AdamW."})
    warmup_steps: int = field(
        default=5, metadata={"help": "Optimizer steps of linear learning-rate warm-up from 0 to lr."}
    )
    proposer_lr_scale: float = field(
        default=1.0,
        metadata={
            "help": (
                "Multiplies lr for the Proposer's update (the roles share one AdamW; the Solver's update uses lr). The "
                "papers use one rate for both roles (1.0); the Proposer gets a few sequences per step against the "
                "Solvers' group, so a larger scale lets it move as fast."
            )
        },
    )
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay."})
    max_grad_norm: float = field(
        default=1.0, metadata={"help": "Clip the gradient's global norm to this value before each optimizer step."}
    )
    mixed_precision: str = field(
        default="none",
        metadata={
            "help": (
                "The update's forwards (its old, new and reference log-probs and the anchor's NLL): bfloat16 runs "
                "their matmuls under torch.autocast, weights, gradients and optimizer state staying in dtype (faster "
                "on a CPU with AVX-512 BF16 or AMX, several times slower on one without, docs/trainer.md); auto: "
                "bfloat16 where the device multiplies bf16 in hardware, else none; none: plain dtype."
            )
        },
    )
    epochs: int = field(default=1, metadata={"help": "Passes over one step's rollouts (PPO epochs); 1 is on-policy."})
    mini_batch_size: int = field(default=128, metadata={"help": "Sequences per optimizer step within a training step."})
    micro_batch_size: int = field(
        default=4,
        metadata={
            "help": (
                "Sequences per forward/backward pass (gradient accumulation up to mini_batch_size); lower it when "
                "memory runs out."
            )
        },
    )
    share_prompt: bool = field(
        default=True,
        metadata={
            "help": "Run each micro-batch's shared prompt once (llm/shared_prefix.py): same maths, less compute."
        },
    )
    kl_coef: float = field(
        default=0.01,
        metadata={"help": "Weight of the KL penalty to the reference (initial) policy; 0 skips the reference model."},
    )
    proposer_kl_scale: float = field(
        default=1.0,
        metadata={
            "help": (
                "Multiplies kl_coef for the Proposer's update (the Solver's uses kl_coef). The papers use one KL weight"
                " for both roles (1.0); 0 holds the Solver near the reference while the Proposer moves freely, and its"
                " update then skips the reference forward."
            )
        },
    )
    anchor_coef: float = field(
        default=0.0,
        metadata={
            "help": (
                "Weight of an auxiliary SFT loss (token-mean NLL of demonstrations' agent tokens) added to every "
                "optimizer step of the anchor_roles' updates: InstructGPT's PPO-ptx (Ouyang et al. 2022, Eq. 2, "
                "gamma), with the cold start's demonstrations in place of pre-training data. It holds the tokens the "
                "demonstrations decide (a templated first query, one search on a 1-hop question) where a KL to the "
                "reference averaged over whole rollouts does not. 0 (the papers): off."
            )
        },
    )
    anchor_data: str = field(
        default="",
        metadata={
            "help": (
                "Demonstration JSONL (``searchgym demos`` / trajectory export) the anchor loss trains on; needed when "
                "anchor_coef > 0. Each role's update draws that role's demonstrations only."
            )
        },
    )
    anchor_batch_size: int = field(
        default=8,
        metadata={"help": "Demonstrations drawn (from seed, step and role) for each optimizer step's anchor loss."},
    )
    anchor_roles: str = field(
        default="solver",
        metadata={"help": "Updates that add the anchor loss: solver, proposer or both."},
    )
    proposer_adapter: bool = field(
        default=False,
        metadata={
            "help": (
                "Give the Proposer a LoRA adapter of its own (needs lora=true): a copy of the starting adapter, "
                "named 'proposer', that its rollouts generate with and its update trains, so the Proposer's updates "
                "leave the Solver's weights alone and the other way round. The Solver, the RAG verifier and the KL "
                "reference (the adapters switched off) are as with one adapter. false (the papers): one shared policy."
            )
        },
    )
    proposer_adapter_mode: str = field(
        default="copy",
        metadata={
            "help": (
                "How proposer_adapter makes the Proposer's adapter: copy (a copy of the starting adapter, played "
                "instead of it: neither role's update reaches the other) or stacked (a zero-initialised adapter "
                "'proposer_on_default' played on top of the shared one, which only the Solvers' updates train: "
                "their updates reach the Proposer, the Proposer's never reach the Solvers)."
            )
        },
    )
    skip_zero_advantage: bool = field(
        default=False,
        metadata={
            "help": (
                "Leave sequences whose advantages are all 0 out of the update (DAPO's dynamic-sampling filter without"
                " resampling): saves most of an early CPU step."
            )
        },
    )
    clip_low: float = field(
        default=0.2, metadata={"help": "Lower PPO clip range: the ratio is clipped at 1 - clip_low."}
    )
    clip_high: float = field(
        default=0.28,
        metadata={"help": "Upper PPO clip range: the ratio is clipped at 1 + clip_high (DAPO's clip-higher)."},
    )
    adv_eps: float = field(
        default=1e-6, metadata={"help": "Epsilon added to the group std in the GRPO advantage's denominator."}
    )
    adv_std_ddof: int = field(
        default=0,
        metadata={"help": "Degrees of freedom of the GRPO group std: 0 population (default), 1 sample (verl, TRL)."},
    )
    solver_advantage: str = field(
        default="grpo",
        metadata={
            "help": "Solver group advantage: grpo (R - mean) / (std + eps), or grpo_centred R - mean (SSP Eq. 4)."
        },
    )
    proposer_baseline: str = field(
        default="verified",
        metadata={
            "help": (
                "Proposer REINFORCE baseline: none (SSP Eq. 5), verified (mean over verified questions), all (batch "
                "mean), hop_group (EVE's HRPO), target (mean over the questions on the same subgraph; needs "
                "proposer_group_size > 1) or target_or_all (target, and the batch mean for a subgraph whose "
                "questions all got the same reward)."
            )
        },
    )
    proposer_group_size: int = field(
        default=1,
        metadata={
            "help": (
                "Games per pool subgraph in a step: each subgraph is proposed on by this many games in a row (each "
                "its own seed), so batch_size must be a multiple. 1 (the papers): one question per subgraph; with "
                "proposer_baseline target or target_or_all, >1 lets wordings of one path be compared."
            )
        },
    )
    solver_loss_aggregation: str = field(
        default="token_mean",
        metadata={
            "help": (
                "How a Solver sequence's token losses combine: token_mean (GRPO, SSP Eq. 4) or token_sum (REINFORCE)."
            )
        },
    )
    proposer_loss_aggregation: str = field(
        default="token_mean",
        metadata={
            "help": "How a Proposer sequence's token losses combine: token_mean or token_sum (REINFORCE, SSP Eq. 5)."
        },
    )
    recipe: str | None = field(
        default=None,
        metadata={
            "help": (
                "Name of the recipe these settings started from (searchgym.training.recipes); a label, its values are"
                " the other fields."
            )
        },
    )
    recipe_size: str | None = field(
        default=None, metadata={"help": "Size of that recipe (cpu, gpu, paper); a label like recipe."}
    )
    train_solver: bool = field(
        default=True, metadata={"help": "Update the policy on the Solver's rollouts (false: the Solver only plays)."}
    )
    train_proposer: bool = field(
        default=True,
        metadata={"help": "Update the policy on the Proposer's rollouts (false: the Proposer only plays)."},
    )
    # bookkeeping
    seed: int = field(default=0, metadata={"help": "Seed of every random draw of the run (tasks, sampling, shuffles)."})
    output_dir: str = field(
        default="runs/ssp",
        metadata={"help": "Run folder: metrics.jsonl, checkpoints/, TensorBoard logs and eval results."},
    )
    save_every: int = field(
        default=10, metadata={"help": "Write a checkpoint every N training steps and at the end (0: never)."}
    )
    keep_checkpoints: int = field(
        default=2, metadata={"help": "Most checkpoints kept in output_dir/checkpoints; older ones are deleted."}
    )
    keep_checkpoint_every: int = field(
        default=0,
        metadata={
            "help": (
                "Also keep every checkpoint whose step is a multiple of N, beyond keep_checkpoints (0: none): "
                "milestones to score later, e.g. held-out accuracy half-way through a run. A multiple of save_every."
            )
        },
    )
    log_every: int = field(default=1, metadata={"help": "Append a metrics line every N training steps."})
    val_every: int = field(
        default=10, metadata={"help": "Validate the Solver on val_tasks every N training steps (0: never)."}
    )
    val_size: int = field(default=64, metadata={"help": "Most validation tasks scored each time."})
    val_tasks: str | None = field(
        default=None, metadata={"help": "JSONL file of held-out validation tasks (null: no validation)."}
    )
    eval_every: int = field(
        default=0,
        metadata={"help": "Run `searchgym eval` on eval_tasks every N training steps and at step 0 (0: never)."},
    )
    eval_tasks: str = field(
        default="builtin", metadata={"help": "Task sets of those evaluations, as `searchgym eval --tasks` takes them."}
    )
    eval_limit: int | None = field(
        default=None, metadata={"help": "Seeded sample of at most N questions per eval task set (null: all)."}
    )
    tensorboard: bool = field(default=True, metadata={"help": "Also write TensorBoard event files to output_dir."})
    progress: bool = field(default=True, metadata={"help": "Show progress lines on stderr."})

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the bad field and what it accepts."""
        from ..envs.registration import check_env_id
        from ..llm.registry import backend_names, get_backend
        from ..wrappers.registry import reward_plan

        check_env_id(self.env_id)  # before anything loads: a typo must not cost a model load
        check_shared_fields(self)  # finite numbers, the device, env_kwargs the env takes
        try:  # a registered name, a stack "dynasearcher,wcr" or "package.module:Wrapper"
            reward_plan(self.reward).check_options(self.reward_options)
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
        if self.mixed_precision not in MIXED_PRECISION:
            raise InvalidArgumentError(
                f"mixed_precision={self.mixed_precision!r}: use one of {', '.join(MIXED_PRECISION)}"
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
            "proposer_lr_scale",
            "kl_coef",
            "proposer_kl_scale",
            "anchor_coef",
            "clip_low",
            "clip_high",
            "temperature",
            "val_temperature",
            "warmup_steps",
            "total_steps",
            "weight_decay",
            "eval_every",
            "keep_checkpoint_every",
        ):
            if getattr(self, name) < 0:
                raise InvalidArgumentError(f"{name}={getattr(self, name)} must be >= 0")
        if self.anchor_roles not in ANCHOR_ROLES:
            raise InvalidArgumentError(f"anchor_roles={self.anchor_roles!r}: use one of {', '.join(ANCHOR_ROLES)}")
        if self.proposer_adapter_mode not in ROLE_ADAPTER_MODES:
            raise InvalidArgumentError(
                f"proposer_adapter_mode={self.proposer_adapter_mode!r}: use one of {', '.join(ROLE_ADAPTER_MODES)}"
            )
        if self.proposer_adapter and not self.lora:
            raise InvalidArgumentError(
                "proposer_adapter=true gives the Proposer a LoRA adapter of its own; set lora=true, or "
                "proposer_adapter=false"
            )
        if self.anchor_batch_size < 1:
            raise InvalidArgumentError(f"anchor_batch_size={self.anchor_batch_size} must be >= 1")
        if self.anchor_coef > 0 and not self.anchor_data:
            raise InvalidArgumentError(
                f"anchor_coef={self.anchor_coef} needs demonstrations: set anchor_data to a JSONL of "
                "`searchgym demos`, or anchor_coef=0"
            )
        if self.adv_std_ddof not in STD_DDOFS:
            raise InvalidArgumentError(
                f"adv_std_ddof={self.adv_std_ddof!r}: use 0 (population std) or 1 (sample std, as verl/TRL)"
            )
        if self.proposer_baseline not in PROPOSER_BASELINES:
            raise InvalidArgumentError(
                f"proposer_baseline={self.proposer_baseline!r}: use one of {', '.join(PROPOSER_BASELINES)} "
                "(none = SSP Eq. 5; verified = mean over verified questions, invalid ones get advantage 0)"
            )
        if self.proposer_group_size < 1 or self.batch_size % self.proposer_group_size:
            raise InvalidArgumentError(
                f"proposer_group_size={self.proposer_group_size} must be >= 1 and divide batch_size={self.batch_size}"
            )
        if self.proposer_baseline in SUBGRAPH_BASELINES and self.proposer_group_size < 2:
            raise InvalidArgumentError(
                f"proposer_baseline={self.proposer_baseline} compares questions on the same subgraph, but "
                "proposer_group_size=1 plays each subgraph once, so no two questions share one; set "
                "proposer_group_size to 2 or more"
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
        if self.keep_checkpoint_every and (not self.save_every or self.keep_checkpoint_every % self.save_every):
            raise InvalidArgumentError(
                f"keep_checkpoint_every={self.keep_checkpoint_every} keeps checkpoints that are never written: use a "
                f"multiple of save_every={self.save_every} (or 0)"
            )
        self._check_env_kwargs()

    def _check_env_kwargs(self) -> None:
        """A key that is both a config field and an env kwarg resolves one way: the config field, which
        the trainer passes to every env it builds; an ``env_kwargs`` copy must agree with it."""
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
