"""The self-play trainer: one shared policy, a GRPO update for the Solver and a REINFORCE update for the Proposer.

One training step (search-self-play §3, docs/game.md, optimisation):

1. **Rollout** -- play ``batch_size`` games of the (reward-wrapped) env with the current policy
   (:class:`~searchgym.agents.llm_agent.LLMAgent`; all pending rollouts of all parallel envs are
   generated in one batched call). Self-play envs share one replay buffer, cleared every
   ``replay_reset_steps`` steps, and verify questions with noise from the batch's other Proposer
   trajectories (:func:`share_batch_state`). Rewards are read from the ``info["rewards"]`` events of whatever
   wrapped env the trainer is given, so binary, WCR, GDCR or any user wrapper plug in unchanged.
2. **Solver update** -- GRPO: ``A_i = (R_i − mean_g R) / (std_g R + ε)`` within each question's G
   rollouts (``solver_advantage="grpo_centred"``: ``R_i − mean_g R``, SSP Eq. 4; SAPO step advantages
   when the events carry GDCR step rewards), PPO-clip with asymmetric ε, token-mean per sequence
   (``solver_loss_aggregation``), k3 KL to the frozen reference.
3. **Proposer update** -- REINFORCE with the ``proposer_baseline`` of the config: ``none`` (SSP Eq. 5),
   ``verified`` (the verified questions' mean; invalid ones get advantage 0), ``all`` or ``hop_group``
   (EVE's HRPO); same loss and KL, log-probs summed or averaged per sequence
   (``proposer_loss_aggregation``; the papers' REINFORCE sums them).

The named recipes of :mod:`searchgym.training.recipes` set these switches as each paper does. The
learning-rate schedule advances once per training step (the papers' warm-up counts steps), and a role
whose advantages are all 0 is not updated while nothing else could move the policy (no KL term, or the
policy still equal to its reference).

The update trains on the token ids the policy sampled, never a re-tokenisation of its text, and
env-inserted tokens never carry gradient (:mod:`searchgym.llm.sequences`). Completions of one
prompt sit in the same micro-batch and the prompt's forward pass runs once for the policy and the
reference (:mod:`searchgym.llm.shared_prefix`). Validation plays
held-out tasks at temperature 0 and reports binary accuracy. Checkpoints are atomic and a resumed
run continues in the same state (:mod:`searchgym.training.checkpoints`).
"""

from __future__ import annotations

import copy
import logging
import math
import random
import re
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..agents.llm_agent import AgentConfig, LLMAgent
from ..core.llm import GenerationConfig, TextGenerator
from ..core.moved import moved_getattr
from ..core.rng_state import numpy_generator_from_state, random_state_from_data
from ..core.types import Task, Trajectory
from ..envs.proposer import BatchNoise, ProposerValidation
from ..envs.replay import ReplayBuffer
from ..errors import InvalidArgumentError, MissingFileError
from ..llm.sequences import EncodedTrajectory, collate, collate_rollout_logprobs, encode_trajectory
from ..llm.shared_prefix import pack_shared, shared_token_logprobs, worth_sharing
from ..wrappers.registry import reward_plan
from .checkpoints import CheckpointManager
from .losses import group_advantages, policy_loss, proposer_advantages, token_logprobs, truncated_is_weights
from .metrics import MetricsLogger
from .selfplay_config import ModelOptions, TrainConfig

logger = logging.getLogger(__name__)


@dataclass
class Sample:
    """One finished rollout to train on: its role, trajectory, reward, GRPO group key and step rewards."""

    role: str
    trajectory: Trajectory
    reward: float
    components: dict = field(default_factory=dict)
    group: Any = None
    step_rewards: Optional[list] = None

    @classmethod
    def from_event(cls, event: dict, group: Any, step_rewards_key: Optional[str] = None) -> "Sample":
        """Build from an env reward event (``{"role", "slot", "reward", "components", "trajectory"}``);
        ``step_rewards_key``: the component holding per-step rewards (the reward's registry entry)."""
        comps = dict(event.get("components") or {})
        steps = comps.get(step_rewards_key) if step_rewards_key else None
        return cls(
            event["role"],
            event["trajectory"],
            float(event["reward"]),
            comps,
            group,
            list(steps) if isinstance(steps, (list, tuple)) else None,
        )


@dataclass
class RolloutBatch:
    """What one rollout phase produced, with its timings."""

    samples: list
    games: int
    rollout_s: float
    env_s: float
    new_tokens: int


def resolve_device(name: str):
    """``auto`` → CUDA when available, else CPU; anything else as given."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidArgumentError(f"device={name!r} but CUDA is not available; use device=cpu or device=auto")
    return dev


def make_envs(config: TrainConfig, n: int, **context: Any) -> list:
    """``n`` envs of ``config.env_id`` sharing one world/retriever (via ``clone()`` where the env has it),
    each wrapped in ``config.reward``; ``context`` supplies what a reward needs besides the env (the
    trainer passes ``answerer=`` its generator for ``eve``)."""
    import gymnasium as gym

    from ..envs.registration import env_spec

    kwargs = {**config.env_kwargs, "max_turns": config.max_turns}  # the config validated that they agree
    if env_spec(config.env_id).group:
        kwargs["group_size"] = config.group_size
    first = gym.make(config.env_id, **kwargs)
    raw = [first]
    for _ in range(n - 1):
        clone = getattr(first.unwrapped, "clone", None)
        raw.append(clone() if callable(clone) else gym.make(config.env_id, **kwargs))
    plan = reward_plan(config.reward)
    return [plan.wrap(e, **context) for e in raw]


def check_rewards_applied(envs: Sequence, reward: str) -> None:
    """Refuse envs that do not apply the config's ``reward`` stack: a trainer given unwrapped envs with
    ``reward=dynasearcher`` would otherwise train on the binary reward while logging ``dynasearcher``.
    Objects that are not Gymnasium envs (a unit test's stand-in that is never stepped) are not checked."""
    import gymnasium as gym

    plan = reward_plan(reward)
    for j, env in enumerate(envs):
        missing = plan.missing_in(env) if isinstance(env, gym.Env) else []
        if missing:
            raise InvalidArgumentError(
                f"env {j} passed to the trainer does not apply reward {', '.join(missing)} of reward={reward!r}; "
                f"wrap it with searchgym.wrappers.registry.wrap_rewards(env, {reward!r}), or let the trainer "
                "build the envs (envs=None)"
            )


def share_batch_state(envs: Sequence) -> tuple[Optional[ReplayBuffer], Optional[BatchNoise]]:
    """SSP's batch-level self-play state over the env clones that play one batch.

    Every env with a replay buffer gets the first one's (one buffer for the batch; its per-game reset is
    switched off: the trainer clears it by training step), and every env with Proposer validation gets
    one :class:`~searchgym.envs.proposer.BatchNoise` (RAG noise from the batch's other Proposer
    trajectories). Returns ``(buffer, noise)``, ``None`` for what no env has.
    """
    bases = [getattr(e, "unwrapped", e) for e in envs]
    owners = [b for b in bases if isinstance(getattr(b, "replay", None), ReplayBuffer)]
    replay = owners[0].replay if owners else None
    if replay is not None:
        replay.reset_every = None
        for b in owners:
            b.replay = replay
    validations = [b.validation for b in bases if isinstance(getattr(b, "validation", None), ProposerValidation)]
    noise = BatchNoise() if validations else None
    for v in validations:
        v.batch = noise
    return replay, noise


def env_state(env) -> Any:
    """Plain-data (JSON) state of an env: its ``state_dict()`` (every searchgym env has one: RNGs,
    replay buffer, pool cursor, noise window), else the bit generator state of Gymnasium's seeded
    ``np_random`` for any other env (nothing for an object that has neither)."""
    base = getattr(env, "unwrapped", env)
    if callable(getattr(base, "state_dict", None)):
        return {"state_dict": base.state_dict()}
    rng = getattr(base, "np_random", None)
    return {"np_random": rng.bit_generator.state if rng is not None else None}


def load_env_state(env, state: Any) -> None:
    """Inverse of :func:`env_state`."""
    base = getattr(env, "unwrapped", env)
    if "state_dict" in state:
        base.load_state_dict(state["state_dict"])
    elif state.get("np_random") is not None:
        base.np_random = numpy_generator_from_state(state["np_random"])


class SelfPlayTrainer:
    """Train one shared policy on a searchgym env; see the module docstring for the algorithm.

    ``envs``: already-built (and reward-wrapped) envs to roll out in parallel, or ``None`` to build
    ``min(batch_size, num_envs)`` from the config. ``model`` / ``tokenizer``: an in-memory policy
    (default: :func:`~searchgym.llm.bundled_model.load_policy` of ``config.model``). ``val_tasks``:
    held-out :class:`Task` list for validation (default: ``config.val_tasks`` JSONL, if set);
    ``val_env_factory``: builds single-role Solver envs for validation (default ``KGSolver-v0``).
    """

    def __init__(
        self,
        config: TrainConfig,
        *,
        envs: Optional[Sequence] = None,
        model=None,
        tokenizer=None,
        val_tasks: Optional[Sequence[Task]] = None,
        val_env_factory: Optional[Callable[[], Any]] = None,
        num_envs: int = 16,
    ) -> None:
        self.config = config
        self.reward_plan = reward_plan(config.reward)  # wrappers, and outcome vs step (SAPO) advantages
        self.device = resolve_device(config.device)
        if config.threads:
            import torch

            # Process-wide, set only when asked: for small models on a busy CPU, 1-2 threads beat the
            # default by up to 10x (thread synchronisation dominates tiny matmuls).
            torch.set_num_threads(config.threads)
        self.policy, self.tokenizer, self.ref_model = self._open_policy(model, tokenizer)
        self.optimizer, self.scheduler = self._make_optimizer()
        #: True when rollouts sample in another dtype than the policy trains in: the update then weights each
        #: token by the truncated importance ratio (set by _make_generator)
        self.rollout_correction = False
        self.generator = self._make_generator()
        self.agent = LLMAgent(
            self.generator,
            config=AgentConfig(
                max_new_tokens=config.max_new_tokens,
                temperature=config.temperature,
                top_p=config.top_p,
                seed=config.seed,
            ),
        )
        self.rng = random.Random(config.seed)
        self.envs = (
            list(envs)
            if envs is not None
            else make_envs(config, max(1, min(config.batch_size, num_envs)), answerer=self.generator)
        )
        if not self.envs:
            raise InvalidArgumentError("the trainer needs at least one env")
        if envs is not None:
            check_rewards_applied(self.envs, config.reward)
        self.replay, self.batch_noise = share_batch_state(self.envs)
        self._replay_cleared_at = 0
        self.games_played = 0
        self.pass_index = True  # envs take reset(options={"index": i}); set False for envs that do not
        self.val_tasks = list(val_tasks) if val_tasks is not None else _load_val_tasks(config)
        self.val_env_factory = val_env_factory
        self._val_envs: list = []
        self.step = 0
        self.out = Path(config.output_dir)
        self.checkpoints = CheckpointManager(self.out / "checkpoints", keep=config.keep_checkpoints)
        self.metrics: Optional[MetricsLogger] = None

    def _open_policy(self, model: Any, tokenizer: Any) -> tuple[Any, Any, Any]:
        """``(policy, tokenizer, reference model or None)``: the given or configured start model on the
        device, in training mode, with LoRA applied, or with a frozen copy as the KL reference."""
        config = self.config
        if model is None:
            model, tokenizer = _load_start_policy(config)
        elif tokenizer is None:
            raise InvalidArgumentError("pass the tokenizer together with the model")
        elif config.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        model.to(self.device)
        ref_model = None
        if config.lora:
            model = apply_lora(model, config)
        elif config.kl_coef > 0:
            ref_model = copy.deepcopy(model).eval()
            for p in ref_model.parameters():
                p.requires_grad_(False)
        model.train()
        return model, tokenizer, ref_model

    def _make_optimizer(self) -> tuple[Any, Any]:
        """AdamW over the trainable parameters and its linear-warmup schedule."""
        import torch

        config = self.config
        params = [p for p in self.policy.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
        warm = config.warmup_steps
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min(1.0, (s + 1) / warm) if warm > 0 else 1.0
        )
        return optimizer, scheduler

    def _make_generator(self) -> TextGenerator:
        """The rollout backend of ``config.rollout_backend``, built by its factory in the LLM-backend registry
        (:mod:`searchgym.llm.registry`); one that holds its own weights starts from the policy's."""
        from ..llm.registry import BackendRequest, get_backend

        config = self.config
        backend = get_backend(config.rollout_backend, purpose="train", key="rollout_backend")
        generator = backend.make(
            BackendRequest(
                purpose="train",
                model=config.model,
                policy=self.policy,
                tokenizer=self.tokenizer,
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
            self._sync_generator(generator)  # it loaded other weights (its own checkpoint, or the base model)
        engine = getattr(generator, "engine", None)  # rollouts in another dtype than the policy's: correct them
        self.rollout_correction = engine is not None and bool(engine.config.logprobs)
        return generator

    # ================================================================ rollout
    def _reset(self, j: int):
        """Start game number ``games_played`` on env ``j``: the trainer owns the pool position (the
        index option, consumed in the pool's curriculum order) and seeds every game from its RNG."""
        options = {"index": self.games_played} if self.pass_index else None
        self.games_played += 1
        return self.envs[j].reset(seed=self.rng.randrange(2**31), options=options)

    def collect(self, n_games: Optional[int] = None, *, generation: Optional[GenerationConfig] = None) -> RolloutBatch:
        """Play ``n_games`` (default ``batch_size``) games in lock-step over the parallel envs.

        The games form one batch: RAG-verification noise comes from its other Proposer trajectories,
        and the shared replay buffer is cleared first when this step starts a new ``replay_reset_steps``
        period (SSP: every 10 training steps)."""
        want = n_games if n_games is not None else self.config.batch_size
        self._begin_batch()
        samples: list[Sample] = []
        t_gen = t_env = 0.0
        tokens0 = self.agent.stats.new_tokens
        played = 0
        while played < want:
            k = min(len(self.envs), want - played)
            live = []
            for j in range(k):
                t0 = time.perf_counter()
                obs, info = self._reset(j)
                t_env += time.perf_counter() - t0
                live.append({"j": j, "obs": obs, "info": info, "done": False, "game": (self.step, played + j)})
            while True:
                pend = [x for x in live if not x["done"]]
                if not pend:
                    break
                t0 = time.perf_counter()
                cfg = generation if generation is None else generation.with_(seed=self.rng.randrange(2**31))
                actions = self.agent.act_batch([(x["obs"], x["info"]) for x in pend], config=cfg)
                t_gen += time.perf_counter() - t0
                for x, action in zip(pend, actions):
                    t0 = time.perf_counter()
                    obs, _, term, trunc, info = self.envs[x["j"]].step(action)
                    t_env += time.perf_counter() - t0
                    for ev in info.get("rewards", []):
                        samples.append(Sample.from_event(ev, x["game"], self.reward_plan.step_rewards_key))
                    x.update(obs=obs, info=info, done=bool(term or trunc))
            played += k
        return RolloutBatch(samples, played, t_gen, t_env, self.agent.stats.new_tokens - tokens0)

    def _begin_batch(self) -> None:
        if self.batch_noise is not None:
            self.batch_noise.begin()
        period = self.config.replay_reset_steps
        if self.replay is not None and period and self.step % period == 0 and self.step > self._replay_cleared_at:
            self.replay.clear()
            self.replay.resets += 1
            self._replay_cleared_at = self.step
            logger.debug("replay buffer cleared at step %d", self.step)

    # ================================================================ update
    def advantages(self, samples: Sequence[Sample]) -> list[list[float]]:
        """Per-sample step-advantage tables: GRPO / SAPO for Solver groups (group std with
        ``adv_std_ddof``), REINFORCE for Proposers with the ``proposer_baseline`` of the config
        (default: the mean over verified questions; invalid ones get 0, see :func:`proposer_advantages`)."""
        out: list[list[float]] = [[0.0] for _ in samples]
        eps, ddof = self.config.adv_eps, self.config.adv_std_ddof
        solver = [i for i, s in enumerate(samples) if s.role == "solver"]
        groups: dict[Any, list[int]] = {}
        for i in solver:
            groups.setdefault(samples[i].group, []).append(i)
        use_sapo = reward_plan(self.config.reward).advantage == "step"  # per-step rewards: SAPO
        plain: list[int] = []  # solver samples of groups without step rewards: GRPO
        for idx in groups.values():
            steps = [r for i in idx if (r := samples[i].step_rewards) is not None]
            if use_sapo and len(steps) == len(idx):
                from ..core.advantages import sapo_group_advantages

                tables = sapo_group_advantages([samples[i].reward for i in idx], steps, eps=eps, ddof=ddof)
                for i, t in zip(idx, tables):
                    out[i] = list(t) or [0.0]
            else:
                plain.extend(idx)
        grpo = group_advantages(
            [samples[i].reward for i in plain],
            [samples[i].group for i in plain],
            eps,
            ddof,
            normalise=self.config.solver_advantage == "grpo",
        )
        for i, a in zip(plain, grpo):
            out[i] = [a]
        prop = [i for i, s in enumerate(samples) if s.role == "proposer"]
        verified = [bool(samples[i].components.get("valid", 1)) and samples[i].trajectory.valid for i in prop]
        hops = [samples[i].trajectory.task.hops or 0 for i in prop]
        for i, a in zip(
            prop,
            proposer_advantages(
                [samples[i].reward for i in prop],
                verified,
                self.config.proposer_baseline,
                hops=hops,
                eps=eps,
                ddof=ddof,
            ),
        ):
            out[i] = [a]
        return out

    def update(self, samples: Sequence[Sample]) -> dict:
        """Solver GRPO update then Proposer REINFORCE update; returns loss statistics.

        A role whose advantages are all 0 is skipped (``<role>/skipped_no_signal``) when its update could
        not move the policy: no KL term, or the policy still equal to its reference (no optimizer step
        yet). With a KL term and a policy that has moved, the KL pull is a real gradient and still runs."""
        tables = self.advantages(samples)
        aggregation = {
            "solver": self.config.solver_loss_aggregation,
            "proposer": self.config.proposer_loss_aggregation,
        }
        stats: dict = {}
        for role, enabled in (("solver", self.config.train_solver), ("proposer", self.config.train_proposer)):
            idx = [i for i, s in enumerate(samples) if s.role == role]
            if not (enabled and idx):
                continue
            if self._no_signal([tables[i] for i in idx]):
                stats[f"{role}/skipped_no_signal"] = 1
                continue
            result = self.optimise(
                [samples[i].trajectory for i in idx], [tables[i] for i in idx], aggregation=aggregation[role]
            )
            stats.update({f"{role}/{k}": v for k, v in result.items()})
        return stats

    def _no_signal(self, tables: Sequence[Sequence[float]]) -> bool:
        """True when every advantage is 0 and the KL term has no gradient either (no KL, or no optimizer
        step taken since the reference was made, so policy and reference are still the same model)."""
        if any(a != 0.0 for t in tables for a in t):
            return False
        return self.config.kl_coef <= 0 or not self.optimizer.state

    def _ref_context(self):
        if self.config.lora and self.config.kl_coef > 0:
            return self.policy.disable_adapter()
        return nullcontext()

    def _scorer(self, batch: Sequence[EncodedTrajectory], ids, attn, mask):
        """``score(model, with_entropy)`` for one micro-batch: shared-prompt scoring when it saves work
        (and gradient checkpointing is off), else the plain full-sequence forward; either way only the
        positions of ``mask`` (the agent tokens) go through the LM head when the model allows it."""
        c = self.config
        seqs = [e.input_ids for e in batch]
        prompts = [e.prompt_len for e in batch]
        if c.share_prompt and not c.gradient_checkpointing and worth_sharing(seqs, prompts):
            packed = pack_shared(seqs, prompts, self.tokenizer.pad_token_id, self.device)
            return lambda model, with_entropy=False: shared_token_logprobs(
                model, packed, with_entropy=with_entropy, only=mask
            )
        start = min(e.first_agent_token for e in batch)
        return lambda model, with_entropy=False: token_logprobs(
            model, ids, attn, with_entropy=with_entropy, start=start, only=mask
        )

    def _ref_logp(self, score):
        import torch

        if self.config.kl_coef <= 0:
            return None
        with torch.no_grad(), self._ref_context():
            return score(self.ref_model if self.ref_model is not None else self.policy)[0]

    def encode(self, trajectories: Sequence[Trajectory], step_advantages: Sequence[Sequence[float]]):
        """The sequences the update trains on: ``(encoded, advantages)`` of every trajectory with at
        least one agent token (sampled ids for agent turns, see :mod:`searchgym.llm.sequences`)."""
        limit = self.config.max_prompt_tokens + self.config.max_response_tokens
        enc, adv = [], []
        for t, a in zip(trajectories, step_advantages):
            e = encode_trajectory(self.tokenizer, t, max_tokens=limit)
            if e.num_agent_tokens > 0:
                enc.append(e)
                adv.append(list(a))
        retok = sum(e.retokenised for e in enc)
        if retok:
            logger.warning(
                "%d agent turns have no sampled token ids (a text-only backend); their text was "
                "re-tokenised for the update",
                retok,
            )
        return enc, adv

    def optimise(
        self,
        trajectories: Sequence[Trajectory],
        step_advantages: Sequence[Sequence[float]],
        *,
        aggregation: str = "token_mean",
    ) -> dict:
        """PPO-clip + KL optimisation of the policy on ``trajectories`` with the given advantages.

        ``step_advantages[i]`` is a list of advantages per agent step (one value = sequence-level);
        ``aggregation``: how each sequence's token losses combine (``token_mean`` or ``token_sum``).
        Runs ``epochs`` passes of mini-batches of ``mini_batch_size`` sequences (one optimizer step
        each), accumulating gradients over micro-batches of ``micro_batch_size``; within a mini-batch
        sequences of the same prompt are placed together so their micro-batch shares the prompt.
        """
        import torch

        c = self.config
        enc, adv = self.encode(trajectories, step_advantages)
        skipped = 0
        if c.skip_zero_advantage:
            keep = [i for i, a in enumerate(adv) if any(x != 0.0 for x in a)]
            skipped = len(enc) - len(keep)
            enc, adv = [enc[i] for i in keep], [adv[i] for i in keep]
        if not enc:
            return {"skipped_zero_advantage": skipped} if skipped else {}
        n = len(enc)
        pad = self.tokenizer.pad_token_id
        prompt_rank: dict = {}
        rank = [prompt_rank.setdefault(tuple(e.input_ids[: e.prompt_len]), len(prompt_rank)) for e in enc]
        reuse_old = c.epochs == 1 and n <= c.mini_batch_size  # on-policy: old log-probs = current, detached
        old: list = [None] * n
        if not reuse_old:
            with torch.no_grad():
                for chunk in _chunks(sorted(range(n), key=rank.__getitem__), c.micro_batch_size):
                    ids, attn, mask, _ = collate([enc[i] for i in chunk], pad, [adv[i] for i in chunk], self.device)
                    lp = self._scorer([enc[i] for i in chunk], ids, attn, mask)(self.policy)[0]
                    for k, i in enumerate(chunk):
                        old[i] = lp[k, : len(enc[i].input_ids) - 1].detach()
        rollout_lp: list = [None] * n  # the sampler's log-probs, shifted like the mask (importance correction)
        if self.rollout_correction:
            for i, e in enumerate(enc):
                lp_i = collate_rollout_logprobs([e])
                rollout_lp[i] = None if lp_i is None else lp_i[0]
        agg = _Mean()
        params = [p for p in self.policy.parameters() if p.requires_grad]
        for _ in range(c.epochs):
            order = list(range(n))
            self.rng.shuffle(order)
            for mb in _chunks(order, c.mini_batch_size):
                self.optimizer.zero_grad(set_to_none=True)
                for micro in _chunks(sorted(mb, key=rank.__getitem__), c.micro_batch_size):
                    batch = [enc[i] for i in micro]
                    ids, attn, mask, a = collate(batch, pad, [adv[i] for i in micro], self.device)
                    score = self._scorer(batch, ids, attn, mask)
                    logp, ent = score(self.policy, with_entropy=True)
                    if reuse_old:
                        old_lp = logp.detach()
                    else:
                        old_lp = torch.zeros_like(logp)
                        for k, i in enumerate(micro):
                            old_lp[k, : old[i].shape[0]] = old[i]
                    ref = self._ref_logp(score)
                    weights = None
                    if self.rollout_correction:
                        weights = self._rollout_weights([rollout_lp[i] for i in micro], old_lp, mask, agg)
                    loss, st = policy_loss(
                        logp,
                        old_lp,
                        ref,
                        a,
                        mask,
                        clip_low=c.clip_low,
                        clip_high=c.clip_high,
                        kl_coef=c.kl_coef,
                        aggregation=aggregation,
                        is_weights=weights,
                    )
                    (loss * (len(micro) / len(mb))).backward()
                    w = len(micro)
                    m = mask.sum(-1).clamp(min=1)
                    agg.add("loss", st.loss, w)
                    agg.add("pg_loss", st.pg_loss, w)
                    agg.add("kl", st.kl, w)
                    agg.add("clip_frac", st.clip_frac, w)
                    agg.add("entropy", float(((ent * mask).sum(-1) / m).mean()), w)
                    agg.add("tokens", float(mask.sum()) / w, w)
                grad_norm = torch.nn.utils.clip_grad_norm_(
                    params, c.max_grad_norm if c.max_grad_norm > 0 else float("inf")
                )
                agg.add("grad_norm", float(grad_norm), 1)
                self.optimizer.step()
        out = agg.means()
        out["sequences"] = n
        if c.skip_zero_advantage:
            out["skipped_zero_advantage"] = skipped
        out["lr"] = self.scheduler.get_last_lr()[0]
        return out

    def _rollout_weights(self, rollout: Sequence, old_lp, mask, agg: "_Mean"):
        """The truncated importance weights ``min(exp(old − rollout), rollout_is_cap)`` of one micro-batch
        (``rollout[k]``: sequence k's sampler log-probs shifted like the mask, or ``None``; 1 where unknown),
        logging their mean, the share of tokens at the cap and the mean log-ratio over the known tokens."""
        import math

        import torch

        roll = torch.full_like(old_lp, math.nan, dtype=torch.float32)
        for k, r in enumerate(rollout):
            if r is not None:
                width = min(r.shape[0], roll.shape[1])
                roll[k, :width] = r[:width].to(roll.device)
        cap = self.config.rollout_is_cap
        weights = truncated_is_weights(old_lp, roll, mask, cap)
        with torch.no_grad():
            known = (~torch.isnan(roll)) & (mask > 0)
            n_known = float(known.sum())
            if n_known:
                gap = torch.where(known, old_lp.detach().float() - roll, torch.zeros_like(roll))
                agg.add("rollout_is/weight", float(weights[known].float().mean()), n_known)
                agg.add("rollout_is/capped_frac", float((gap >= math.log(cap)).float()[known].mean()), n_known)
                agg.add("rollout_is/log_ratio", float(gap[known].mean()), n_known)
            agg.add("rollout_is/covered", n_known / max(1.0, float(mask.sum())), float(mask.sum()))
        return weights

    # ================================================================ validation
    def validate(self, tasks: Optional[Sequence[Task]] = None) -> dict:
        """Play held-out tasks with the Solver at ``val_temperature`` (greedy by default) through
        ``searchgym eval``'s rollout loop and answer metrics (one definition of correct): EM accuracy,
        F1, cover-EM and searches per question."""
        tasks = list(tasks if tasks is not None else self.val_tasks[: self.config.val_size])
        if not tasks:
            return {}
        n_par = max(1, min(len(tasks), len(self.envs) * max(1, self.config.group_size)))
        while len(self._val_envs) < n_par:  # built once, reused by every validation
            self._val_envs.append(self._val_env())
        envs = self._val_envs[:n_par]
        from ..core.progress import Progress
        from ..evaluation.runner import play_tasks, record_of

        agent = self._eval_agent()
        recs: list = []
        with Progress(len(tasks), "validation", unit="question", enabled=self.config.progress) as bar:

            def done(trajs) -> None:
                recs.extend(record_of(t, count_tokens=agent.count_tokens) for t in trajs)
                bar.update(len(trajs))

            play_tasks(agent, envs, tasks, done)
        return {
            "val/accuracy": _mean(r["em"] for r in recs),
            "val/f1": _mean(r["f1"] for r in recs),
            "val/cover_em": _mean(r["cover_em"] for r in recs),
            "val/searches": _mean(r["searches"] for r in recs),
            "val/n": len(recs),
        }

    def _eval_agent(self):
        """The policy as an evaluation agent, decoding at ``val_temperature`` with a fixed seed."""
        from ..agents.eval_agents import LLMEvalAgent

        cfg = GenerationConfig(
            max_new_tokens=self.config.max_new_tokens,
            temperature=self.config.val_temperature,
            top_p=1.0,
            stop=tuple(self.agent.config.stop),
            seed=self.config.seed,
        )
        return LLMEvalAgent(self.agent.generator, f"policy@step{self.step}", cfg, agent=self.agent)

    def run_eval(self) -> dict:
        """``searchgym eval`` of the current policy on ``config.eval_tasks`` (the built-in benchmark by
        default), written to ``output_dir/eval/step_<n>/``; returns ``eval/<dataset>/<metric>`` means."""
        from ..evaluation.runner import EvalConfig, evaluate
        from ..tasks.tasksets import load_tasksets

        c = self.config
        tasksets = load_tasksets(c.eval_tasks, limit=c.eval_limit, seed=c.seed)
        res = evaluate(
            self._eval_agent(),
            tasksets,
            out_dir=self.out / "eval" / f"step_{self.step:08d}",
            restart=True,
            config=EvalConfig(
                max_turns=c.max_turns, concurrency=c.max_batch_generate, seed=c.seed, progress=c.progress
            ),
        )
        return {f"eval/{ds}/{m}": d[m]["mean"] for ds, d in res.summary["datasets"].items() for m in ("em", "f1")}

    def _val_env(self):
        if self.val_env_factory is not None:
            return self.val_env_factory()
        import gymnasium as gym

        import searchgym.envs  # noqa: F401

        kwargs = {k: v for k, v in self.config.env_kwargs.items() if k != "group_size"}
        kwargs["max_turns"] = self.config.max_turns  # the config validated that an env_kwargs copy agrees
        return gym.make("KGSolver-v0", **kwargs)

    # ================================================================ checkpoints
    def state_dict(self) -> dict:
        """Everything except the weights needed to continue exactly where the run is: the tensor
        state (``optimizer``, ``scheduler``) and plain data for the rest (saved as JSON)."""
        return {
            "step": self.step,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": self.rng.getstate(),
            "agent_rng": self.agent.get_rng_state(),
            "generator_rng": self.generator.get_rng_state(),
            "games_played": self.games_played,
            "envs": [env_state(e) for e in self.envs],
        }

    def save_checkpoint(self) -> Path:
        """Write an atomic checkpoint of the current step."""
        return self.checkpoints.save(
            self.step, model=self.policy, tokenizer=self.tokenizer, trainer_state=self.state_dict(), config=self.config
        )

    def load_checkpoint(self, path: str | Path) -> None:
        """Restore weights, optimizer, scheduler, RNG and env state from ``path`` (config must match)."""
        path = Path(path)
        CheckpointManager.check_config(path, self.config)
        state = CheckpointManager.load_state(path)
        load_weights(self.policy, path / "policy", lora=self.config.lora)
        self._sync_generator()
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.rng.setstate(random_state_from_data(state["rng"]))
        self.agent.set_rng_state(state["agent_rng"])
        saved = state["generator_rng"]
        self.generator.set_rng_state(None if saved is None else random_state_from_data(saved))
        if len(state["envs"]) != len(self.envs):
            raise InvalidArgumentError(
                f"checkpoint has {len(state['envs'])} env states but the trainer runs {len(self.envs)} envs; "
                f"resume with the same number of parallel envs"
            )
        for env, st in zip(self.envs, state["envs"]):
            load_env_state(env, st)
        self.games_played = int(state["games_played"])
        self.step = int(state["step"])
        logger.info("resumed from %s at step %d", path, self.step)

    def _sync_generator(self, generator: Optional[TextGenerator] = None) -> None:
        """Out-of-model backends (vLLM) get the policy's current weights (``generator``: default the trainer's)."""
        sync = getattr(generator if generator is not None else self.generator, "load_weights", None)
        if callable(sync):
            sync(self.policy.state_dict())

    def resume(self) -> bool:
        """Load the newest checkpoint under ``output_dir`` if there is one; True if it did."""
        path = self.checkpoints.latest()
        if path is None:
            return False
        self.load_checkpoint(path)
        return True

    # ================================================================ loop
    def train_step(self) -> dict:
        """One rollout + the two updates; returns the step's metrics."""
        t0 = time.perf_counter()
        batch = self.collect()
        t1 = time.perf_counter()
        stats = self.update(batch.samples)
        with warnings.catch_warnings():  # a step whose update was skipped (no signal) still counts
            warnings.filterwarnings("ignore", message=re.escape("Detected call of `lr_scheduler.step()` before"))
            self.scheduler.step()  # the warm-up counts training steps (SSP Table 4: 5 steps), not optimizer steps
        self._sync_generator()
        t2 = time.perf_counter()
        self.step += 1
        m = rollout_metrics(batch.samples)
        m.update(stats)
        total = t2 - t0
        m.update(
            {
                "perf/rollout_s": batch.rollout_s,
                "perf/env_s": batch.env_s,
                "perf/update_s": t2 - t1,
                "perf/step_s": total,
                "perf/env_frac": batch.env_s / total if total > 0 else 0.0,
                "perf/tokens_per_s": batch.new_tokens / batch.rollout_s if batch.rollout_s > 0 else 0.0,
                "games": batch.games,
            }
        )
        for role in ("solver", "proposer"):
            for k in ("kl", "entropy"):
                if f"{role}/{k}" in m:
                    m.setdefault(f"update/{k}", m[f"{role}/{k}"])
        return m

    def train(self, *, resume: bool = True, progress: Optional[bool] = None) -> list[dict]:
        """Run until ``total_steps``; logs metrics, validates and checkpoints on schedule. The run folder is
        locked for the whole run: a second run into the same ``output_dir`` fails at once, before it reads a
        checkpoint or writes ``config.yaml``."""
        from ..core.output_lock import OutputLock

        with OutputLock(self.out, what="--output-dir").acquire():
            return self._train(resume=resume, progress=progress)

    def _train(self, *, resume: bool, progress: Optional[bool]) -> list[dict]:
        c = self.config
        resumed = self.resume() if resume else False
        self.out.mkdir(parents=True, exist_ok=True)
        c.save(self.out / "config.yaml")
        self.metrics = MetricsLogger(
            self.out / "metrics.jsonl",
            tb_dir=self.out / "tb" if c.tensorboard else None,
            resume_step=self.step if resumed else None,
        )
        history = []
        if not resumed and self.step == 0 and c.val_every and self.val_tasks:
            self.metrics.log(0, self.validate())  # the starting point of the validation curve
        if not resumed and self.step == 0 and c.eval_every:
            self.metrics.log(0, self.run_eval())
        bar = _progress(c.total_steps, self.step, c.progress if progress is None else progress, bool(c.save_every))
        try:
            while self.step < c.total_steps:
                m = self.train_step()
                if c.val_every and self.val_tasks and self.step % c.val_every == 0:
                    m.update(self.validate())
                if c.eval_every and self.step % c.eval_every == 0:
                    m.update(self.run_eval())
                if self.step % max(1, c.log_every) == 0:
                    self.metrics.log(self.step, m)
                history.append(m)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(
                        solver=f"{m.get('solver/reward', float('nan')):.3f}",
                        proposer=f"{m.get('proposer/reward', float('nan')):.3f}",
                    )
                if c.save_every and self.step % c.save_every == 0:
                    self.save_checkpoint()
            if c.save_every:
                latest = self.checkpoints.latest()
                if latest is None or latest.name != CheckpointManager.dir_name(self.step):
                    self.save_checkpoint()
        finally:
            if bar is not None:
                bar.close()
            self.metrics.close()
        return history


# ==================================================================== helpers
def rollout_metrics(samples: Sequence[Sample]) -> dict:
    """Per-role reward means, valid-question rate and rejection reasons, the step's questions (text, hops,
    verdict, reward), Solver groups with signal, the Solvers' reward on model-written questions (``solver/proposed_*``;
    task source ``proposer``, fresh or replayed, as opposed to the fallback task), WCR coverage, search turns."""
    m: dict = {}
    solver = [s for s in samples if s.role == "solver"]
    prop = [s for s in samples if s.role == "proposer"]
    if solver:
        m["solver/reward"] = _mean(s.reward for s in solver)
        m["solver/correct"] = _mean(float(bool(s.trajectory.correct)) for s in solver)
        m["solver/searches"] = _mean(s.trajectory.num_searches for s in solver)
        m["solver/turns"] = _mean(len(s.trajectory.turns) for s in solver)
        m["solver/n"] = len(solver)
        cov = [s.components.get("wcr_coverage", s.components.get("coverage")) for s in solver]
        cov = [float(x) for x in cov if isinstance(x, (int, float))]
        if cov:
            m["solver/wcr_coverage"] = _mean(cov)
        groups: dict[Any, list[float]] = {}
        for s in solver:
            groups.setdefault(s.group, []).append(s.reward)
        m["solver/groups_with_signal"] = _mean(float(len(set(r)) > 1) for r in groups.values())
        # the Solvers' share and score on questions the model wrote (this step's or replayed), not fallback tasks
        proposed = [s for s in solver if s.trajectory.task.source == "proposer"]
        m["solver/on_proposed"] = len(proposed) / len(solver)
        if proposed:
            m["solver/proposed_reward"] = _mean(s.reward for s in proposed)
            m["solver/proposed_correct"] = _mean(float(bool(s.trajectory.correct)) for s in proposed)
    if prop:
        m["proposer/reward"] = _mean(s.reward for s in prop)
        valid = [s.components.get("valid", 1.0 if s.trajectory.valid else 0.0) for s in prop]
        m["proposer/valid_rate"] = _mean(float(v) for v in valid)
        m["proposer/searches"] = _mean(s.trajectory.num_searches for s in prop)
        m["proposer/n"] = len(prop)
        questions = [question_record(s) for s in prop]
        for reason in sorted({q["reason"] for q in questions if not q["valid"]}):
            m[f"proposer/rejected/{reason}"] = _mean(float(not q["valid"] and q["reason"] == reason) for q in questions)
        words = [len(q["question"].split()) for q in questions if q["question"]]
        if words:
            m["proposer/question_words"] = _mean(words)
        m["proposer/hops"] = _mean(float(q["hops"] or 0) for q in questions)
        m["proposer/questions"] = questions
    return m


def question_record(sample: Sample) -> dict:
    """One Proposer rollout as the metrics log keeps it: the question, its target, hops, verdict and reward
    (``reason`` is the rule filter or verification stage that rejected it; ``no_question`` when none was
    written)."""
    traj = sample.trajectory
    verdict = traj.metadata.get("validation") or {}
    valid = bool(sample.components.get("valid", 1.0 if traj.valid else 0.0)) and bool(verdict.get("valid", True))
    reason = None if valid else (verdict.get("reason") or ("no_question" if not traj.question else "invalid"))
    return {
        "question": traj.question or "",
        "answer": traj.task.answer,
        "hops": traj.task.hops,
        "valid": valid,
        "reason": reason,
        "reward": sample.reward,
        "searches": traj.num_searches,
    }


def _mean(xs) -> float:
    xs = list(xs)
    return float(sum(xs) / len(xs)) if xs else float("nan")


class _Mean:
    def __init__(self) -> None:
        self.sums: dict = {}
        self.weights: dict = {}

    def add(self, key: str, value: float, weight: float) -> None:
        if math.isfinite(value):
            self.sums[key] = self.sums.get(key, 0.0) + value * weight
            self.weights[key] = self.weights.get(key, 0.0) + weight

    def means(self) -> dict:
        return {k: self.sums[k] / self.weights[k] for k in self.sums if self.weights[k] > 0}


def _chunks(xs: list, size: int):
    for i in range(0, len(xs), size):
        yield xs[i : i + size]


def _progress(total: int, start: int, enabled: bool, checkpoints: bool):
    """The steps' progress line (rate in s/step and ETA; counted even when not shown, for the Ctrl-C message)."""
    from ..core.progress import Progress

    hint = "rerun the same command to resume from the last checkpoint" if checkpoints else "no checkpoint is saved"
    return Progress(total, "train", unit="step", initial=start, enabled=enabled, resume_hint=hint)


def _load_start_policy(config: TrainConfig):
    """``(model, tokenizer)`` to start training from: ``config.init`` (checked to be of ``config.model``'s
    family) or ``config.model`` itself (a name, a model folder, an adapter folder or a checkpoint)."""
    from ..llm.pretrained import load_init, open_model

    kw: dict[str, Any] = dict(
        dtype=config.dtype, cache_dir=config.model_cache_dir, gradient_checkpointing=config.gradient_checkpointing
    )
    if config.init:
        return load_init(resolve_init(config.init), base=config.model, **kw)
    return open_model(config.model, **kw)


def resolve_init(init: str) -> str:
    """``init`` as a folder: the recipes' ``shipped-cold-start`` names the adapter shipped in
    ``searchgym/assets/`` (refused with the commands that make one when this install has none)."""
    from .recipes import SHIPPED_INIT

    if init != SHIPPED_INIT:
        return init
    from .cold_start import RECIPE, shipped_adapter

    folder = shipped_adapter()
    if folder is None:
        raise MissingFileError(
            f"init={SHIPPED_INIT!r} but this install ships no cold-start adapter; make one with: {' && '.join(RECIPE)}"
        )
    return str(folder)


def apply_lora(model, config: ModelOptions):
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ImportError("lora=true needs the 'peft' package: pip install 'searchgym[llm]'") from None
    layers = None
    if config.lora_last_layers is not None:
        total = model.config.num_hidden_layers
        if not 1 <= config.lora_last_layers <= total:
            raise InvalidArgumentError(
                f"lora_last_layers={config.lora_last_layers}: {config.model} has {total} decoder layers; "
                f"use 1..{total}, or null for all of them"
            )
        layers = list(range(total - config.lora_last_layers, total))
    cfg = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.lora_target_modules),
        layers_to_transform=layers,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, cfg)


def load_weights(model, folder: Path, *, lora: bool) -> None:
    """Load the weights saved by ``save_pretrained`` in ``folder`` into ``model`` in place."""
    from safetensors.torch import load_file

    if lora:
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, load_file(str(folder / "adapter_model.safetensors")))
        return
    files = sorted(folder.glob("model*.safetensors"))
    if not files:
        raise MissingFileError(f"{folder} holds no model*.safetensors; the checkpoint is damaged")
    state = {}
    for f in files:
        state.update(load_file(str(f)))
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {k for k in missing if "lm_head" in k}
    if set(missing) - tied or unexpected:
        raise InvalidArgumentError(
            f"checkpoint weights do not fit the model (missing {sorted(set(missing) - tied)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}); was it written for another model?"
        )
    if tied and hasattr(model, "tie_weights"):
        model.tie_weights()


def _load_val_tasks(config: TrainConfig) -> list:
    if not config.val_tasks:
        return []
    from ..tasks.sources import JsonlTaskSource

    src = JsonlTaskSource(config.val_tasks)
    return [src[i] for i in range(len(src))]


__getattr__ = moved_getattr(__name__)  # a moved name (GROUP_ENVS) raises naming its new home
