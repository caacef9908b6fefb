"""The self-play update: advantages per role, then a PPO-clip + KL step of the policy per role.

:func:`selfplay_advantages` turns a rollout phase's :class:`~searchgym.training.selfplay_samples.Sample` list
into per-step advantage tables (GRPO or SAPO for Solver groups, REINFORCE with the configured baseline for
Proposers). :class:`PolicyUpdate` (built by :func:`build_policy_update`) owns the policy, its frozen
reference, the optimizer and the schedule, and runs the loss over mini- and micro-batches
(:meth:`PolicyUpdate.optimise`); the trainer calls :meth:`PolicyUpdate.update` once per training step.
"""

from __future__ import annotations

import copy
import logging
import math
import random
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from ..core.path_errors import not_there
from ..core.types import Trajectory
from ..errors import InvalidArgumentError, MissingFileError
from ..llm.role_adapters import add_role_adapter, role_adapter, role_adapter_parameters, use_role_adapter
from ..llm.sequences import EncodedTrajectory, collate, collate_rollout_logprobs, encode_trajectory
from ..llm.shared_prefix import can_share, pack_shared, shared_token_logprobs, worth_sharing
from ..wrappers.registry import reward_plan
from .demo_scoring import demonstration_logprobs
from .losses import group_advantages, policy_loss, proposer_advantages, token_logprobs, truncated_is_weights
from .model_loading import apply_lora, autocast_to, load_start_policy, resolve_mixed_precision
from .selfplay_config import TrainConfig
from .selfplay_samples import Sample, written_on
from .sft_data import load_demonstrations
from .torch_rng import seeded_torch

logger = logging.getLogger(__name__)

__all__ = ["PolicyUpdate", "build_policy_update", "load_anchor", "selfplay_advantages"]


def selfplay_advantages(samples: Sequence[Sample], config: TrainConfig) -> list[list[float]]:
    """Per-sample step-advantage tables: GRPO / SAPO for Solver groups (group std with
    ``adv_std_ddof``), REINFORCE for Proposers with the ``proposer_baseline`` of the config
    (default: the mean over verified questions; invalid ones get 0, see :func:`proposer_advantages`)."""
    out: list[list[float]] = [[0.0] for _ in samples]
    _solver_advantages(samples, config, out)
    prop = [i for i, s in enumerate(samples) if s.role == "proposer"]
    verified = [bool(samples[i].components.get("valid", 1)) and samples[i].trajectory.valid for i in prop]
    hops = [samples[i].trajectory.task.hops or 0 for i in prop]
    values = proposer_advantages(
        [samples[i].reward for i in prop],
        verified,
        config.proposer_baseline,
        hops=hops,
        targets=[_target_key(samples[i]) for i in prop],
        eps=config.adv_eps,
        ddof=config.adv_std_ddof,
    )
    for i, a in zip(prop, values):
        out[i] = [a]
    return out


def _target_key(sample: Sample) -> Any:
    """What a Proposer question was written on: its subgraph's id, else its task's id (the ``target`` baseline's
    group)."""
    subgraph_id = written_on(sample)
    return ("subgraph", subgraph_id) if subgraph_id is not None else ("task", sample.trajectory.task.id)


def _solver_advantages(samples: Sequence[Sample], config: TrainConfig, out: list[list[float]]) -> None:
    """Fill ``out`` for the Solver samples: SAPO step advantages for groups whose every sample carries step
    rewards (when the reward is a step reward), GRPO for the rest."""
    eps, ddof = config.adv_eps, config.adv_std_ddof
    groups: dict[Any, list[int]] = {}
    for i, s in enumerate(samples):
        if s.role == "solver":
            groups.setdefault(s.group, []).append(i)
    use_sapo = reward_plan(config.reward).advantage == "step"  # per-step rewards: SAPO
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
        normalise=config.solver_advantage == "grpo",
    )
    for i, a in zip(plain, grpo):
        out[i] = [a]


class _Mean:
    """Weighted running means of named statistics (non-finite values are left out)."""

    def __init__(self) -> None:
        self.sums: dict = {}
        self.weights: dict = {}

    def add(self, key: str, value: float, weight: float) -> None:
        """Add ``value`` with ``weight`` to ``key``'s mean."""
        if math.isfinite(value):
            self.sums[key] = self.sums.get(key, 0.0) + value * weight
            self.weights[key] = self.weights.get(key, 0.0) + weight

    def means(self) -> dict:
        """Every key's weighted mean."""
        return {k: self.sums[k] / self.weights[k] for k in self.sums if self.weights[k] > 0}


@dataclass
class _Pass:
    """What every mini-batch of one :meth:`PolicyUpdate.optimise` call reads: the encoded sequences, their
    advantages, their log-probs before the update (``None``: on-policy, taken from the forward pass itself),
    the sampler's log-probs, the loss aggregation, the KL term's weight, the statistics gathered, and the
    demonstrations of the anchor loss (empty: none) with the key its draws are seeded from."""

    enc: list[EncodedTrajectory]
    adv: list
    old: Optional[list]
    rollout_lp: list
    aggregation: str
    kl_coef: float
    stats: _Mean
    anchor: Sequence[EncodedTrajectory] = ()
    anchor_key: str = ""
    optimizer_steps: int = 0


def _chunks(xs: list, size: int) -> Iterator[list]:
    for i in range(0, len(xs), size):
        yield xs[i : i + size]


class PolicyUpdate:
    """The policy's optimisation: ``policy`` (trained in place), its frozen ``ref_model`` (``None``: LoRA's base
    with the adapter disabled, or no KL), the ``optimizer`` and ``scheduler``, the ``tokenizer`` that encodes
    trajectories, and the run's ``rng`` (mini-batch order). ``rollout_correction``: weight each token by the
    truncated importance ratio of the sampler's log-probs (rollouts in another dtype). ``anchor``: each role's
    encoded demonstrations for the anchor loss (``anchor_coef``; empty: none). Every forward of the update (old,
    new and reference log-probs, the anchor's NLL) runs under the config's ``mixed_precision``, so the PPO ratio
    compares log-probs of one precision."""

    def __init__(
        self,
        config: TrainConfig,
        *,
        policy: Any,
        ref_model: Any,
        tokenizer: Any,
        optimizer: Any,
        scheduler: Any,
        device: Any,
        rng: Any,
        rollout_correction: bool = False,
        anchor: Optional[dict[str, list[EncodedTrajectory]]] = None,
    ) -> None:
        self.config = config
        self.policy, self.ref_model, self.tokenizer = policy, ref_model, tokenizer
        self.optimizer, self.scheduler = optimizer, scheduler
        self.device, self.rng = device, rng
        self.rollout_correction = rollout_correction
        self.anchor = anchor or {}
        #: what ``mixed_precision`` means on this device (``auto`` resolved)
        self.mixed_precision = resolve_mixed_precision(config.mixed_precision, device)

    def update(self, samples: Sequence[Sample]) -> dict:
        """Solver GRPO update then Proposer REINFORCE update; returns loss statistics.

        A role whose advantages are all 0 is skipped (``<role>/skipped_no_signal``) when its update could
        not move the policy: no KL term for that role, or the policy still equal to its reference (no optimizer
        step yet). With a KL term and a policy that has moved, the KL pull is a real gradient and still runs."""
        c = self.config
        tables = selfplay_advantages(samples, c)
        aggregation = {"solver": c.solver_loss_aggregation, "proposer": c.proposer_loss_aggregation}
        lr_scale = {"solver": 1.0, "proposer": c.proposer_lr_scale}
        kl_coef = {"solver": c.kl_coef, "proposer": c.kl_coef * c.proposer_kl_scale}
        stats: dict = {}
        for role, enabled in (("solver", c.train_solver), ("proposer", c.train_proposer)):
            idx = [i for i, s in enumerate(samples) if s.role == role]
            if not (enabled and idx):
                continue
            with use_role_adapter(self.policy, role):  # proposer_adapter: the role's own adapter is the one trained
                if self._no_signal([tables[i] for i in idx], kl_coef[role]):
                    stats[f"{role}/skipped_no_signal"] = 1
                    continue
                result = self.optimise(
                    [samples[i].trajectory for i in idx],
                    [tables[i] for i in idx],
                    aggregation=aggregation[role],
                    lr_scale=lr_scale[role],
                    kl_coef=kl_coef[role],
                    anchor=self.anchor.get(role, ()),
                    anchor_key=f"{role}:{self.scheduler.last_epoch}",
                )
            stats.update({f"{role}/{k}": v for k, v in result.items()})
        return stats

    def _no_signal(self, tables: Sequence[Sequence[float]], kl_coef: float) -> bool:
        """True when every advantage is 0 and the KL term (of weight ``kl_coef``) has no gradient either (no
        KL, or no optimizer step taken yet on the weights the update trains -- with ``proposer_adapter``, the active
        role's adapter -- so policy and reference are the same)."""
        if any(a != 0.0 for t in tables for a in t):
            return False
        trained = [p for p in self.policy.parameters() if p.requires_grad]
        return kl_coef <= 0 or not any(p in self.optimizer.state for p in trained)

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
        lr_scale: float = 1.0,
        kl_coef: Optional[float] = None,
        anchor: Sequence[EncodedTrajectory] = (),
        anchor_key: str = "",
    ) -> dict:
        """PPO-clip + KL optimisation of the policy on ``trajectories`` with the given advantages.

        ``step_advantages[i]`` is a list of advantages per agent step (one value = sequence-level);
        ``aggregation``: how each sequence's token losses combine (``token_mean`` or ``token_sum``);
        ``lr_scale`` multiplies the scheduled learning rate for these optimizer steps only (``proposer_lr_scale``);
        ``kl_coef`` weighs the KL term to the reference for them (``None``: the config's; 0 skips the reference);
        ``anchor``: demonstrations whose NLL, weighed by ``anchor_coef``, joins every optimizer step (drawn
        ``anchor_batch_size`` at a time, seeded by the run's seed, ``anchor_key`` and the step's index, so the draws
        take nothing from ``rng``). Runs ``epochs`` passes of mini-batches of ``mini_batch_size`` sequences (one
        optimizer step each), accumulating gradients over micro-batches of ``micro_batch_size``; within a mini-batch
        sequences of the same prompt are placed together so their micro-batch shares the prompt.
        """
        c = self.config
        enc, adv = self.encode(trajectories, step_advantages)
        skipped = 0
        if c.skip_zero_advantage:
            keep = [i for i, a in enumerate(adv) if any(x != 0.0 for x in a)]
            skipped = len(enc) - len(keep)
            enc, adv = [enc[i] for i in keep], [adv[i] for i in keep]
        if not enc:
            return {"skipped_zero_advantage": skipped} if skipped else {}
        prompt_rank: dict = {}
        rank = [prompt_rank.setdefault(tuple(e.input_ids[: e.prompt_len]), len(prompt_rank)) for e in enc]
        reuse_old = c.epochs == 1 and len(enc) <= c.mini_batch_size  # on-policy: old log-probs = current, detached
        scheduled = [group["lr"] for group in self.optimizer.param_groups]
        for group in self.optimizer.param_groups:
            group["lr"] *= lr_scale
        try:  # torch's draws in the passes (dropout) come from the run's rng, which checkpoints carry
            with seeded_torch(self.rng.randrange(2**63), self.device):
                run = _Pass(
                    enc,
                    adv,
                    None if reuse_old else self._old_logprobs(enc, adv, rank),
                    self._rollout_logprobs(enc),
                    aggregation,
                    c.kl_coef if kl_coef is None else kl_coef,
                    _Mean(),
                    anchor if c.anchor_coef > 0 else (),
                    anchor_key,
                )
                for _ in range(c.epochs):
                    order = list(range(len(enc)))
                    self.rng.shuffle(order)
                    for mb in _chunks(order, c.mini_batch_size):
                        self._mini_batch(run, sorted(mb, key=rank.__getitem__))
        finally:  # the scheduler owns the rate between updates
            for group, lr in zip(self.optimizer.param_groups, scheduled):
                group["lr"] = lr
        out = run.stats.means()
        out["sequences"] = len(enc)
        if c.skip_zero_advantage:
            out["skipped_zero_advantage"] = skipped
        out["lr"] = self.scheduler.get_last_lr()[0] * lr_scale
        return out

    def _old_logprobs(self, enc: list[EncodedTrajectory], adv: list, rank: list[int]) -> list:
        """Each sequence's log-probs under the policy before this update (detached), in prompt order batches."""
        import torch

        old: list = [None] * len(enc)
        with torch.no_grad():
            for chunk in _chunks(sorted(range(len(enc)), key=rank.__getitem__), self.config.micro_batch_size):
                batch = [enc[i] for i in chunk]
                ids, attn, mask, _ = collate(batch, self.tokenizer.pad_token_id, [adv[i] for i in chunk], self.device)
                with self._precision():
                    lp = self._scorer(batch, ids, attn, mask)(self.policy)[0]
                for k, i in enumerate(chunk):
                    old[i] = lp[k, : len(enc[i].input_ids) - 1].detach()
        return old

    def _rollout_logprobs(self, enc: list[EncodedTrajectory]) -> list:
        """The sampler's log-probs of each sequence, shifted like the mask (``None`` where unknown, or for all
        without rollout correction)."""
        if not self.rollout_correction:
            return [None] * len(enc)
        out: list = []
        for e in enc:
            lp = collate_rollout_logprobs([e])
            out.append(None if lp is None else lp[0])
        return out

    def _mini_batch(self, run: "_Pass", mb: list[int]) -> None:
        """One optimizer step over the mini-batch ``mb`` (sorted by prompt), gradients accumulated per micro-batch."""
        import torch

        self.optimizer.zero_grad(set_to_none=True)
        for micro in _chunks(mb, self.config.micro_batch_size):
            self._micro_batch(run, micro, len(micro) / len(mb))
        if run.anchor:
            self._anchor_loss(run)
        run.optimizer_steps += 1
        params = [p for p in self.policy.parameters() if p.requires_grad]
        cap = self.config.max_grad_norm if self.config.max_grad_norm > 0 else float("inf")
        run.stats.add("grad_norm", float(torch.nn.utils.clip_grad_norm_(params, cap)), 1)
        self.optimizer.step()

    def _micro_batch(self, run: "_Pass", micro: list[int], share: float) -> None:
        """Forward, loss (scaled by the micro-batch's ``share`` of its mini-batch) and backward of one
        micro-batch, its statistics added to ``run.stats``."""
        import torch

        c = self.config
        batch = [run.enc[i] for i in micro]
        ids, attn, mask, a = collate(batch, self.tokenizer.pad_token_id, [run.adv[i] for i in micro], self.device)
        score = self._scorer(batch, ids, attn, mask)
        with self._precision():
            logp, ent = score(self.policy, with_entropy=True)
        if run.old is None:
            old_lp = logp.detach()
        else:
            old_lp = torch.zeros_like(logp)
            for k, i in enumerate(micro):
                old_lp[k, : run.old[i].shape[0]] = run.old[i]
        ref = self._ref_logp(score, run.kl_coef)
        weights = None
        if self.rollout_correction:
            weights = self._rollout_weights([run.rollout_lp[i] for i in micro], old_lp, mask, run.stats)
        loss, st = policy_loss(
            logp,
            old_lp,
            ref,
            a,
            mask,
            clip_low=c.clip_low,
            clip_high=c.clip_high,
            kl_coef=run.kl_coef,
            aggregation=run.aggregation,
            is_weights=weights,
        )
        (loss * share).backward()
        w = len(micro)
        for key in ("loss", "pg_loss", "kl", "clip_frac"):
            run.stats.add(key, getattr(st, key), w)
        run.stats.add("entropy", float(((ent * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()), w)
        run.stats.add("tokens", float(mask.sum()) / w, w)

    def _anchor_loss(self, run: "_Pass") -> None:
        """The anchor loss of one optimizer step: ``anchor_coef`` times the token-mean NLL of ``anchor_batch_size``
        demonstrations drawn without replacement (from the seed, ``run.anchor_key`` and the step's index), its
        gradient accumulated over micro-batches, the instruction prefix they share run once (``share_prompt``);
        logs the NLL as ``anchor_nll``."""
        c = self.config
        draw = random.Random(f"anchor:{c.seed}:{run.anchor_key}:{run.optimizer_steps}")
        picked = draw.sample(range(len(run.anchor)), min(c.anchor_batch_size, len(run.anchor)))
        batch = sorted((run.anchor[i] for i in picked), key=lambda e: len(e.input_ids))
        n_tokens = sum(e.num_agent_tokens for e in batch)
        total = 0.0
        for micro in _chunks(batch, c.micro_batch_size):
            with self._precision():
                logp, _, mask = demonstration_logprobs(
                    self.policy, micro, self.tokenizer.pad_token_id, self.device, share=self._sharing()
                )
            nll = -(logp * mask).sum()
            (c.anchor_coef * nll / n_tokens).backward()
            total += float(nll.detach())
        run.stats.add("anchor_nll", total / n_tokens, 1)

    def _precision(self):
        """The update's forwards' autocast (:func:`~searchgym.training.model_loading.autocast_to` of the resolved
        ``mixed_precision``): the backward pass runs outside it, as torch recommends."""
        return autocast_to(self.mixed_precision, self.device)

    def _ref_context(self):
        """LoRA with a KL term: the reference is the base model, the adapter switched off while it scores."""
        if self.config.lora and self.config.kl_coef > 0:
            return self.policy.disable_adapter()
        return nullcontext()

    def _sharing(self) -> bool:
        """Whether micro-batches may run a prompt they share once (:func:`~searchgym.llm.shared_prefix.can_share` of
        ``share_prompt``)."""
        return can_share(self.config.share_prompt, self.config.gradient_checkpointing)

    def _scorer(self, batch: Sequence[EncodedTrajectory], ids, attn, mask):
        """``score(model, with_entropy)`` for one micro-batch: shared-prompt scoring when it saves work
        (and gradient checkpointing is off), else the plain full-sequence forward; either way only the
        positions of ``mask`` (the agent tokens) go through the LM head when the model allows it."""
        seqs = [e.input_ids for e in batch]
        prompts = [e.prompt_len for e in batch]
        if self._sharing() and worth_sharing(seqs, prompts):
            packed = pack_shared(seqs, prompts, self.tokenizer.pad_token_id, self.device)
            return lambda model, with_entropy=False: shared_token_logprobs(
                model, packed, with_entropy=with_entropy, only=mask
            )
        start = min(e.first_agent_token for e in batch)
        return lambda model, with_entropy=False: token_logprobs(
            model, ids, attn, with_entropy=with_entropy, start=start, only=mask
        )

    def _ref_logp(self, score, kl_coef: float):
        """The reference model's log-probs of the micro-batch (``None`` when the KL term's weight is 0)."""
        import torch

        if kl_coef <= 0:
            return None
        with torch.no_grad(), self._ref_context(), self._precision():
            return score(self.ref_model if self.ref_model is not None else self.policy)[0]

    def _rollout_weights(self, rollout: Sequence, old_lp, mask, agg: _Mean):
        """The truncated importance weights ``min(exp(old − rollout), rollout_is_cap)`` of one micro-batch
        (``rollout[k]``: sequence k's sampler log-probs shifted like the mask, or ``None``; 1 where unknown),
        logging their mean, the share of tokens at the cap and the mean log-ratio over the known tokens."""
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


def build_policy_update(config: TrainConfig, model: Any, tokenizer: Any, *, device: Any, rng: Any) -> PolicyUpdate:
    """The update of a run: the policy (``model``, else the configured start model, on ``device``, in training
    mode, with LoRA applied (its initial weights drawn from ``config.seed``), or with a frozen copy as the KL
    reference), its AdamW optimizer over the trainable parameters and linear-warmup schedule; ``rng`` orders the
    mini-batches and seeds torch's draws in each update (dropout)."""
    import torch

    if model is None:
        model, tokenizer = load_start_policy(config)
    elif tokenizer is None:
        raise InvalidArgumentError("pass the tokenizer together with the model")
    elif config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.to(device)
    ref_model = None
    if config.lora:
        with seeded_torch(config.seed, device):  # PEFT draws the adapter's A matrices from torch's global RNG
            model = apply_lora(model, config)
            if config.proposer_adapter:
                add_role_adapter(model, "proposer", config.proposer_adapter_mode)
                logger.info(
                    "proposer_adapter: the Proposer trains a LoRA adapter of its own (%s, '%s')",
                    config.proposer_adapter_mode,
                    role_adapter(model, "proposer"),
                )
    elif config.kl_coef > 0:
        ref_model = copy.deepcopy(model).eval()
        for p in ref_model.parameters():
            p.requires_grad_(False)
    model.train()
    anchor = load_anchor(config, tokenizer) if config.anchor_coef > 0 else {}
    params = [p for p in model.parameters() if p.requires_grad]
    if config.proposer_adapter:  # frozen while 'default' is active; its role's update makes it the trained one
        params += role_adapter_parameters(model, "proposer")
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    warm = config.warmup_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warm) if warm > 0 else 1.0)
    return PolicyUpdate(
        config,
        policy=model,
        ref_model=ref_model,
        tokenizer=tokenizer,
        optimizer=optimizer,
        scheduler=scheduler,
        device=device,
        rng=rng,
        anchor=anchor,
    )


def load_anchor(config: TrainConfig, tokenizer: Any) -> dict[str, list[EncodedTrajectory]]:
    """The anchor loss's demonstrations of ``config.anchor_data``, encoded like the update's rollouts, per role of
    ``anchor_roles``; a role with none left is an error naming the fix."""
    if not Path(config.anchor_data).is_file():
        raise MissingFileError(
            f"anchor_data={config.anchor_data} {not_there(config.anchor_data)}; make demonstrations with "
            "`searchgym demos --out FILE --solver HOPS:N`"
        )
    roles = ("solver", "proposer") if config.anchor_roles == "both" else (config.anchor_roles,)
    limit = config.max_prompt_tokens + config.max_response_tokens
    demos, report = load_demonstrations(config.anchor_data, roles=roles)  # the file read once for every role
    out: dict[str, list[EncodedTrajectory]] = {}
    for role in roles:
        encoded = [
            encode_trajectory(tokenizer, d.trajectory, max_tokens=limit) for d in demos if d.trajectory.role == role
        ]
        out[role] = [e for e in encoded if e.num_agent_tokens > 0]
        if not out[role]:
            raise InvalidArgumentError(
                f"anchor_data={config.anchor_data} has no {role} demonstration ({report.summary()}); make them with "
                f"`searchgym demos --{role} HOPS:N` or set anchor_roles to the roles it holds"
            )
        logger.info("anchor loss: %d %s demonstrations from %s", len(out[role]), role, config.anchor_data)
    return out
