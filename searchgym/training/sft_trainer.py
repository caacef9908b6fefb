"""Supervised fine-tuning (cold start) of a policy on trajectories, with the loss masked exactly as in RL.

:class:`SFTRun` (run by :func:`searchgym.training.sft.run_sft`) fine-tunes any supported model (``smollm2``,
a Hugging Face folder, one of our outputs: see :mod:`searchgym.llm.pretrained`), fully or with LoRA, on CPU or
GPU:

* **Data** (:mod:`searchgym.training.sft_data`): demonstration/trajectory JSONL or env export JSONL,
  filtered by role and reward; or ``source="self"``: rejection sampling of the current model
  (:mod:`searchgym.training.rejection_sampling`).
* **Loss** -- token-mean negative log-likelihood over the *agent* tokens of the batch; trajectories are
  tokenised by :func:`searchgym.llm.sequences.encode_trajectory`, the same function RL uses, so
  prompt and ``<information>`` tokens never carry gradient. Gradient accumulation over micro-batches
  gives the exact batch loss; AdamW with linear warm-up, then constant or cosine lr.
* **Held-out loss** on a validation split (``val_fraction`` of the tasks, seeded, or ``val_data``) every
  ``eval_every`` steps, with the mean entropy of the predictive distribution at agent positions.
  Early stopping (``patience``) by held-out loss; the best weights become the final model.
* **Checkpoint / resume** every ``save_every`` steps (:class:`~searchgym.training.checkpoints.CheckpointManager`,
  atomic): weights or adapter as safetensors, optimizer, scheduler, early-stopping state. The data
  order and the dropout draws are pure functions of ``(seed, step)``, so a run killed at any moment
  resumes from its latest checkpoint and ends with exactly the weights of an uninterrupted run. Nothing
  is pickled: the state is read back with ``torch.load(weights_only=True)``.
* **Output** -- ``<output_dir>/final/`` is an ordinary model folder (LoRA merged by default, or only the
  adapter with ``save_adapter``, its base model recorded in ``searchgym_model.json``), ``metrics.jsonl``
  for ``searchgym plot``, a progress line with s/step, ETA and tokens/s.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import time
from pathlib import Path
from typing import Optional, Sequence

from ..core.moved import moved_getattr
from ..core.path_errors import not_there
from ..errors import InvalidArgumentError, MissingFileError
from ..llm.shared_prefix import can_share
from .demo_scoring import demonstration_logprobs, shared_prefix_len
from .sft_config import SFTConfig, SFTResult
from .sft_data import DataReport, Demonstration, load_demonstrations
from .torch_rng import seeded_torch

logger = logging.getLogger(__name__)

__all__ = ["SFTConfig", "SFTResult", "SFTRun", "load_demonstrations", "split_validation", "CHATML_TEMPLATE"]

CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# ==================================================================== data helpers
def split_validation(demos: Sequence[Demonstration], fraction: float, seed: int) -> tuple[list, list]:
    """Seeded split of ``demos`` into (train, val) by task id, so one task's trajectories stay on one side."""
    if fraction <= 0:
        return list(demos), []
    by_task: dict = {}
    for d in demos:
        by_task.setdefault(d.trajectory.task.id, []).append(d)
    ids = sorted(by_task)
    if len(ids) < 2:
        logger.warning("held-out split skipped: all %d trajectories share one task", len(demos))
        return list(demos), []
    random.Random(f"sft-val:{seed}").shuffle(ids)
    n_val = min(len(ids) - 1, max(1, round(fraction * len(ids))))
    val_ids = set(ids[:n_val])
    return (
        [d for d in demos if d.trajectory.task.id not in val_ids],
        [d for d in demos if d.trajectory.task.id in val_ids],
    )


def ensure_chat_template(tokenizer, option: Optional[str], model_name: str) -> None:
    """Give ``tokenizer`` the template ``option`` if it has none; a clear error when neither exists.

    searchgym's agent renders every prompt as a chat (``TransformersGenerator.render``), so a model
    trained on raw text would be used in a format it never saw: refuse rather than fall back silently.
    """
    check_chat_template(option)
    if getattr(tokenizer, "chat_template", None):
        return
    if not option:
        raise InvalidArgumentError(
            f"model {model_name!r} has no chat template, and searchgym's agent renders every prompt with one "
            f"(RL rollouts and evaluation would fail). Pass --chat-template chatml (or a Jinja template file) to "
            f"give it one; it is saved with the fine-tuned model so RL uses the same format"
        )
    if option == "chatml":
        tokenizer.chat_template = CHATML_TEMPLATE
    else:
        tokenizer.chat_template = Path(option).read_text()


def check_chat_template(option: Optional[str]) -> None:
    """Refuse a ``chat_template`` that is neither ``chatml`` nor an existing file, whether or not the model has a
    template of its own (a given path that does not exist was silently ignored then); cheap, so it runs before
    the model loads."""
    if option and option != "chatml" and not Path(option).is_file():
        raise MissingFileError(
            f"chat_template={option!r} {not_there(Path(option))}; use 'chatml' or the path of a Jinja template file"
        )


def lr_factor(step: int, *, warmup: int, total: int, schedule: str) -> float:
    """Multiplier of the base lr after ``step`` optimizer steps: linear warm-up, then constant or cosine to 0."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "cosine":
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return 1.0


# ==================================================================== the run
class SFTRun:
    """One supervised fine-tuning run on ``train`` (and held-out ``val``) demonstrations; see the module doc."""

    def __init__(
        self,
        config: SFTConfig,
        train: Sequence[Demonstration],
        val: Sequence[Demonstration],
        *,
        model=None,
        tokenizer=None,
        report: Optional[DataReport] = None,
    ) -> None:
        import torch

        from ..llm.pretrained import model_fingerprint, open_model
        from ..llm.sequences import encode_trajectory
        from .model_loading import apply_lora, load_lora_init, resolve_device, resolve_mixed_precision

        self.config = c = config
        self.device = resolve_device(c.device)
        #: what ``mixed_precision`` means on this device (``auto`` resolved)
        self.mixed_precision = resolve_mixed_precision(c.mixed_precision, self.device)
        if c.threads:
            torch.set_num_threads(c.threads)
        if model is None:
            model, tokenizer = open_model(
                c.model, dtype=c.dtype, cache_dir=c.model_cache_dir, gradient_checkpointing=c.gradient_checkpointing
            )
        elif tokenizer is None:
            raise InvalidArgumentError("pass the tokenizer together with the model")
        ensure_chat_template(tokenizer, c.chat_template, c.model)
        self.tokenizer = tokenizer
        self.fingerprint = model_fingerprint(model.config, tokenizer)
        model.to(self.device)
        if c.lora:
            with seeded_torch(c.seed, self.device):  # the adapter's initial weights come from the seed
                model = apply_lora(model, c)
            if c.lora_init:  # ... or from an adapter this run continues
                logger.info("LoRA adapter starts from %s", load_lora_init(model, c.lora_init, c, self.fingerprint))
            if c.gradient_checkpointing:
                model.enable_input_require_grads()
        elif c.trainable_modules:
            freeze_except_linear(model, c.trainable_modules)
        self.policy = model
        self.report = report or DataReport()
        self.truncated = 0
        self.train = self._encode([d.trajectory for d in train], encode_trajectory)
        # validation in length order: micro-batches of similar lengths carry little padding
        self.val = sorted(self._encode([d.trajectory for d in val], encode_trajectory), key=lambda e: len(e.input_ids))
        if not self.train:
            raise InvalidArgumentError(
                f"no training example has an agent token left ({self.report.summary()}); "
                f"check the data, the role filter and max_tokens={c.max_tokens}"
            )
        self.data_digest = _encoded_digest(self.train, self.val)
        n = len(self.train)
        self.total_steps = c.max_steps or max(1, math.ceil(c.epochs * n / c.batch_size))
        params = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=c.lr, weight_decay=c.weight_decay)
        total, warm, sched = self.total_steps, c.warmup_steps, c.lr_schedule
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: lr_factor(s, warmup=warm, total=total, schedule=sched)
        )
        self.out = Path(c.output_dir)
        from .checkpoints import CheckpointManager

        self.checkpoints = CheckpointManager.of_run(self.out, keep=c.keep_checkpoints)
        self.step = 0
        self.best_val: Optional[float] = None
        self.best_step: Optional[int] = None
        self.bad_evals = 0
        self.stopped = False
        self.elapsed = 0.0
        self.first_eval: dict = {}
        self.last_eval: dict = {}
        self._orders: dict = {}

    def _encode(self, trajectories, encode) -> list:
        out = []
        for t in trajectories:
            e = encode(self.tokenizer, t, max_tokens=self.config.max_tokens)
            self.truncated += int(e.truncated)
            if e.num_agent_tokens:
                out.append(e)
            else:
                self.report.filtered["without agent tokens after max_tokens"] += 1
        return out

    # ---------------------------------------------------------------- data order
    def _batch(self, step: int) -> list:
        """Examples of optimizer step ``step`` (0-based), shortest first: a pure function of (seed, step)."""
        n, b = len(self.train), self.config.batch_size
        out = []
        for g in range(step * b, (step + 1) * b):
            epoch, pos = divmod(g, n)
            if epoch not in self._orders:
                order = list(range(n))
                random.Random(f"sft-order:{self.config.seed}:{epoch}").shuffle(order)
                self._orders = {epoch: order}  # one epoch at a time is enough
            out.append(self.train[self._orders[epoch][pos]])
        # in length order, so each micro-batch pads little (the step's loss is a sum: order-free)
        return sorted(out, key=lambda e: len(e.input_ids))

    # ---------------------------------------------------------------- maths
    def _scores(self, batch):
        """``(logp, entropy, mask)`` of a micro-batch (:func:`~searchgym.training.demo_scoring.demonstration_logprobs`,
        the shared prefix run once with ``share_prefix``); entropy is computed without gradient."""
        return demonstration_logprobs(
            self.policy, batch, self.tokenizer.pad_token_id, self.device, share=self._sharing(), with_entropy=True
        )

    def _sharing(self) -> bool:
        """Whether micro-batches run their shared prefix once (:func:`~searchgym.llm.shared_prefix.can_share` of
        ``share_prefix``)."""
        return can_share(self.config.share_prefix, self.config.gradient_checkpointing)

    def _precision(self):
        """``torch.autocast`` to the resolved ``mixed_precision`` on the policy's device, or a no-op context when
        "none"."""
        from .model_loading import autocast_to

        return autocast_to(self.mixed_precision, self.device)

    def _shared_prefix(self, batch) -> int:
        """Tokens of the prefix all of ``batch`` shares, before its first agent token (0: not worth sharing)."""
        return shared_prefix_len(batch, enabled=self._sharing())

    def train_step(self) -> dict:
        """One optimizer step on batch ``self.step``; token-mean NLL over the batch's agent tokens."""
        import torch

        c = self.config
        batch = self._batch(self.step)
        n_agent = sum(e.num_agent_tokens for e in batch)
        t0 = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = ent_sum = 0.0
        for k in range(0, len(batch), c.micro_batch_size):
            micro = batch[k : k + c.micro_batch_size]
            with seeded_torch((c.seed * 1_000_003 + self.step) * 1_009 + k, self.device), self._precision():
                logp, ent, mask = self._scores(micro)  # dropout draws: (seed, step, micro) only
                nll = -(logp * mask).sum()
                (nll / n_agent).backward()
            loss_sum += float(nll.detach())
            ent_sum += float((ent * mask).sum())
        params = [p for p in self.policy.parameters() if p.requires_grad]
        grad_norm = torch.nn.utils.clip_grad_norm_(params, c.max_grad_norm if c.max_grad_norm > 0 else float("inf"))
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        dt = time.perf_counter() - t0
        tokens = sum(len(e.input_ids) for e in batch)
        return {
            "sft/loss": loss_sum / n_agent,
            "sft/train_entropy": ent_sum / n_agent,
            "sft/grad_norm": float(grad_norm),
            "lr": self.scheduler.get_last_lr()[0],
            "sft/tokens": tokens,
            "sft/agent_tokens": n_agent,
            "sft/tokens_per_s": tokens / dt if dt > 0 else 0.0,
        }

    def evaluate(self) -> dict:
        """Held-out token-mean NLL and mean predictive entropy over the agent tokens of ``val``."""
        import torch

        if not self.val:
            return {}
        self.policy.eval()
        loss_sum = ent_sum = count = 0.0
        try:
            with torch.no_grad():
                for k in range(0, len(self.val), self.config.micro_batch_size):
                    with self._precision():
                        logp, ent, mask = self._scores(self.val[k : k + self.config.micro_batch_size])
                    loss_sum += float(-(logp * mask).sum())
                    ent_sum += float((ent * mask).sum())
                    count += float(mask.sum())
        finally:
            self.policy.train()
        return {"sft/val_loss": loss_sum / count, "sft/entropy": ent_sum / count}

    # ---------------------------------------------------------------- early stopping
    def _after_eval(self, m: dict) -> None:
        val = m.get("sft/val_loss")
        if val is None:
            return
        if self.best_val is None or val < self.best_val - self.config.min_delta:
            self.best_val, self.best_step, self.bad_evals = val, self.step, 0
            self._save_model(self.out / "best", adapter=self.config.lora)
        else:
            self.bad_evals += 1
            if self.config.patience and self.bad_evals >= self.config.patience:
                self.stopped = True
                logger.info(
                    "early stop at step %d: held-out loss has not improved for %d evaluations (best %.4f at step %d)",
                    self.step,
                    self.bad_evals,
                    self.best_val,
                    self.best_step,
                )

    # ---------------------------------------------------------------- saving
    def _meta(self, adapter: bool) -> dict:
        return {
            "kind": "searchgym-sft",
            "base_model": self.config.model,
            "fingerprint": self.fingerprint,
            "adapter": adapter,
            "step": self.step,
            "best_step": self.best_step,
            "val_loss": self.best_val,
        }

    def _save_model(self, folder: Path, *, adapter: bool, model=None) -> None:
        """Write ``model`` (default: the policy; an adapter if it is one) to ``folder`` atomically."""
        from ..core.atomic_writes import write_folder
        from ..llm.pretrained import MODEL_META

        def write(tmp: Path) -> None:
            (model or self.policy).save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            (tmp / MODEL_META).write_text(json.dumps(self._meta(adapter), indent=1))

        write_folder(folder, write)

    def state_dict(self) -> dict:
        """Everything but the weights needed to continue exactly (plain data and tensors only)."""
        return {
            "step": self.step,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "best_val": self.best_val,
            "best_step": self.best_step,
            "bad_evals": self.bad_evals,
            "stopped": self.stopped,
            "elapsed": self.elapsed,
            "first_eval": self.first_eval,
            "last_eval": self.last_eval,
            "fingerprint": self.fingerprint,
            "data_digest": self.data_digest,
        }

    def save_checkpoint(self) -> Path:
        """Atomic checkpoint of the current step."""
        return self.checkpoints.save(
            self.step, model=self.policy, tokenizer=self.tokenizer, trainer_state=self.state_dict(), config=self.config
        )

    def load_checkpoint(self, path: Path) -> None:
        """Restore weights and state from ``path``; refused (with the reason) for another config or model."""
        from ..llm.pretrained import check_same_family
        from .checkpoints import POLICY_DIR, CheckpointManager
        from .model_loading import load_weights

        CheckpointManager.check_config(path, self.config)
        state = CheckpointManager.load_state(path)
        check_same_family(
            state["fingerprint"],
            self.fingerprint,
            what=f"the model of checkpoint {path}",
            against=f"model={self.config.model!r}",
        )
        if state["data_digest"] != self.data_digest:
            raise InvalidArgumentError(
                f"checkpoint {path} was trained on other data: the examples read from "
                f"{self.config.data} (and the held-out split) changed since; restore the files or "
                f"use a new output_dir"
            )
        load_weights(self.policy, path / POLICY_DIR, lora=self.config.lora)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = int(state["step"])
        self.best_val, self.best_step = state["best_val"], state["best_step"]
        self.bad_evals, self.stopped = int(state["bad_evals"]), bool(state["stopped"])
        self.elapsed = float(state["elapsed"])
        self.first_eval, self.last_eval = dict(state["first_eval"]), dict(state["last_eval"])
        logger.info("resumed SFT from %s at step %d", path, self.step)

    def _write_final(self) -> Path:
        from .model_loading import load_weights

        c = self.config
        if c.final_weights == "best" and self.best_step is not None and (self.out / "best").is_dir():
            if self.best_step == 0 and self.step > 0:  # a silent no-op otherwise: final/ is the start
                logger.warning(
                    "no step of %d lowered the held-out loss below the starting weights' %.4f: with "
                    "final_weights=best final/ holds the starting weights (set final_weights=last to keep the "
                    "trained ones)",
                    self.step,
                    self.best_val,
                )
            load_weights(self.policy, self.out / "best", lora=c.lora)  # the best held-out loss wins
        final = self.out / "final"
        if c.lora and not c.save_adapter:
            self.policy = self.policy.merge_and_unload()
            self._save_model(final, adapter=False)
        else:
            self._save_model(final, adapter=c.lora)
        return final

    # ---------------------------------------------------------------- loop
    def run(self, *, resume: bool = True) -> SFTResult:
        """Train until ``total_steps`` or early stop; write ``final/``; return the :class:`SFTResult`."""
        from .metrics import MetricsLogger

        c = self.config
        latest = self.checkpoints.latest() if resume else None
        if latest is not None:
            self.load_checkpoint(latest)
        self.out.mkdir(parents=True, exist_ok=True)
        c.save(self.out / "config.yaml")
        metrics = MetricsLogger(self.out / "metrics.jsonl", resume_step=self.step if latest is not None else None)
        from ..core.progress import Progress

        bar = Progress(
            self.total_steps,
            "sft",
            unit="step",
            initial=self.step,
            enabled=c.progress,
            resume_hint="rerun the same command to resume from the last checkpoint",
        )
        last: dict = {}
        try:
            if self.step == 0 and latest is None:
                self.first_eval = self.last_eval = self.evaluate()
                if self.first_eval:
                    metrics.log(0, {**self.first_eval, "elapsed_s": 0.0})
                    self._after_eval(self.first_eval)
            while self.step < self.total_steps and not self.stopped:
                t0 = time.perf_counter()
                last = self.train_step()
                if self.step % c.eval_every == 0 or self.step == self.total_steps:
                    self.last_eval = self.evaluate()
                    last.update(self.last_eval)
                    self._after_eval(self.last_eval)
                self.elapsed += time.perf_counter() - t0
                last["elapsed_s"] = self.elapsed
                if self.step % c.log_every == 0 or "sft/val_loss" in last:
                    metrics.log(self.step, last)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(
                        loss=f"{last['sft/loss']:.3f}",
                        val=f"{self.best_val or float('nan'):.3f}",
                        tok_s=f"{last['sft/tokens_per_s']:.0f}",
                    )
                done = self.step >= self.total_steps or self.stopped
                if (c.save_every and self.step % c.save_every == 0) or done:
                    self.save_checkpoint()
        finally:
            if bar is not None:
                bar.close()
            metrics.close()
        final = self._write_final()
        res = SFTResult(
            output_dir=str(self.out),
            final_dir=str(final),
            steps=self.step,
            best_step=self.best_step,
            stopped_early=self.stopped,
            train_loss=last.get("sft/loss"),
            val_loss_initial=self.first_eval.get("sft/val_loss"),
            val_loss_best=self.best_val,
            entropy_initial=self.first_eval.get("sft/entropy"),
            entropy_final=self.last_eval.get("sft/entropy"),
            train_examples=len(self.train),
            val_examples=len(self.val),
            truncated=self.truncated,
            tokens_per_s=last.get("sft/tokens_per_s"),
            elapsed_s=self.elapsed,
            data=self.report.to_dict(),
        )
        (self.out / "result.json").write_text(json.dumps(res.to_dict(), indent=1))
        return res


def _encoded_digest(train: Sequence, val: Sequence) -> str:
    """Hash of the encoded train and held-out examples (token ids and masks), to tie a checkpoint to its data."""
    h = hashlib.sha256()
    for part in (train, val):
        for e in part:
            h.update(json.dumps([e.input_ids, e.loss_mask]).encode())
        h.update(b"|")
    return h.hexdigest()[:16]


# ==================================================================== entry points
def load_training_data(config: SFTConfig) -> tuple[list, list, DataReport]:
    """(train, val, report) for ``config``: its data files, filtered, split or with ``val_data``."""
    if not config.data:
        raise InvalidArgumentError(
            "no training data: pass --data FILE (demonstration or trajectory JSONL), or --source self"
        )
    check_chat_template(config.chat_template)  # before the data is read and the model loaded
    demos, report = load_demonstrations(
        config.data, roles=config.roles or None, min_reward=config.min_reward, on_error=config.on_error
    )
    logger.info("training data: %s", report.summary())
    if not demos:
        raise InvalidArgumentError(f"no training trajectories left: {report.summary()}")
    if config.val_data:
        val, vreport = load_demonstrations(
            config.val_data, roles=config.roles or None, min_reward=config.min_reward, on_error=config.on_error
        )
        logger.info("held-out data: %s", vreport.summary())
        return demos, val, report
    train, val = split_validation(demos, config.val_fraction, config.seed)
    return train, val, report


def freeze_except_linear(model, names) -> int:
    """Freeze every parameter but the weights and biases of the linear layers whose last name is in ``names``
    (a full fine-tune that :func:`searchgym.training.lora_extract.extract_lora` can carry whole but its rank);
    returns the number of trainable parameters. Raises when no layer matches."""
    import torch

    wanted = set(names)
    keep = {
        id(p)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and name.rsplit(".", 1)[-1] in wanted
        for p in module.parameters(recurse=False)
    }
    if not keep:
        raise InvalidArgumentError(f"trainable_modules={sorted(wanted)}: no linear layer of the model has these names")
    for p in model.parameters():
        p.requires_grad_(id(p) in keep)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


__getattr__ = moved_getattr(__name__)
