"""The self-play trainer: one shared policy, a GRPO update for the Solver and a REINFORCE update for the Proposer.

One training step (search-self-play §3, docs/game.md, optimisation):

1. **Rollout** -- play ``batch_size`` games of the (reward-wrapped) env with the current policy
   (:class:`~searchgym.agents.llm_agent.LLMAgent`; all pending rollouts of all parallel envs are
   generated in one batched call by the :class:`~searchgym.evaluation.batch_runner.BatchRunner`, which owns the
   env clones). Self-play envs share the runner's replay buffer, cleared every ``replay_reset_steps`` steps,
   and verify questions with noise from the batch's other Proposer trajectories. Rewards are read from the
   ``info["rewards"]`` events of whatever wrapped env the trainer is given, so binary, WCR, GDCR or any user
   wrapper plug in unchanged.
2. **Solver update** -- GRPO: ``A_i = (R_i − mean_g R) / (std_g R + ε)`` within each question's G
   rollouts (``solver_advantage="grpo_centred"``: ``R_i − mean_g R``, SSP Eq. 4; SAPO step advantages
   when the events carry GDCR step rewards), PPO-clip with asymmetric ε, token-mean per sequence
   (``solver_loss_aggregation``), k3 KL to the frozen reference.
3. **Proposer update** -- REINFORCE with the ``proposer_baseline`` of the config: ``none`` (SSP Eq. 5),
   ``verified`` (the verified questions' mean; invalid ones get advantage 0), ``all``, ``hop_group``
   (EVE's HRPO) or ``target`` (the mean over the questions on the same subgraph, each played by
   ``proposer_group_size`` games of the step); same loss and KL, log-probs summed or averaged per sequence
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

The trainer keeps the scheduling (rollout, update, validation, evaluation, checkpoints); the pieces live in
their modules: the envs (:mod:`~searchgym.training.selfplay_envs`), the rollout backend
(:mod:`~searchgym.training.rollout_backend`), the samples and their metrics
(:mod:`~searchgym.training.selfplay_samples`), the update (:mod:`~searchgym.training.selfplay_update`) and
the model loading (:mod:`~searchgym.training.model_loading`).
"""

from __future__ import annotations

import logging
import random
import re
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from ..agents.llm_agent import AgentConfig, LLMAgent
from ..core.llm import GenerationConfig, TextGenerator
from ..core.moved import moved_getattr
from ..core.rng_state import random_state_from_data
from ..core.types import Task, Trajectory
from ..errors import InvalidArgumentError
from ..evaluation.batch_runner import BatchRunner, EpisodeStart
from ..wrappers.registry import reward_plan
from .checkpoints import POLICY_DIR, CheckpointManager
from .metrics import MetricsLogger
from .model_loading import load_weights, resolve_device
from .rollout_backend import make_rollout_generator, sync_weights
from .selfplay_config import TrainConfig
from .selfplay_envs import check_rewards_applied, env_state, load_env_state, make_envs, validation_env
from .selfplay_samples import RolloutBatch, Sample, mean, rollout_metrics
from .selfplay_update import build_policy_update, selfplay_advantages

logger = logging.getLogger(__name__)

__all__ = ["SelfPlayTrainer", "Sample", "RolloutBatch", "rollout_metrics"]


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
        self.rng = random.Random(config.seed)
        self.policy_update = build_policy_update(config, model, tokenizer, device=self.device, rng=self.rng)
        self.tokenizer = self.policy_update.tokenizer
        backend = make_rollout_generator(config, self.policy, self.tokenizer)
        self.generator: TextGenerator = backend.generator
        self.policy_update.rollout_correction = backend.rollout_correction
        self.agent = LLMAgent(
            self.generator,
            config=AgentConfig(
                max_new_tokens=config.max_new_tokens,
                temperature=config.temperature,
                top_p=config.top_p,
                seed=config.seed,
            ),
        )
        self.envs = (
            list(envs)
            if envs is not None
            else make_envs(config, max(1, min(config.batch_size, num_envs)), answerer=self.generator)
        )
        if not self.envs:
            raise InvalidArgumentError("the trainer needs at least one env")
        if envs is not None:
            check_rewards_applied(self.envs, config.reward)
        #: plays the batches: owns the env clones, the shared replay buffer and the batch noise
        self.runner = BatchRunner(self.envs, share_batch_state=True)
        self._replay_cleared_at = 0
        self.games_played = 0
        self.pass_index = True  # envs take reset(options={"index": i}); set False for envs that do not
        self.val_tasks = list(val_tasks) if val_tasks is not None else _load_val_tasks(config)
        self.val_env_factory = val_env_factory
        self._val_envs: list = []
        self.step = 0
        self.out = Path(config.output_dir)
        self.checkpoints = CheckpointManager.of_run(
            self.out, keep=config.keep_checkpoints, keep_every=config.keep_checkpoint_every
        )
        self.metrics: Optional[MetricsLogger] = None
        #: the steps' progress line while :meth:`train` runs (None otherwise): :meth:`_show_phase` writes to it
        self._bar: Any = None

    # ================================================================ what the update owns
    @property
    def policy(self) -> Any:
        """The policy being trained."""
        return self.policy_update.policy

    @property
    def ref_model(self) -> Any:
        """The frozen KL reference (``None`` with LoRA, whose reference is the adapter switched off, or no KL)."""
        return self.policy_update.ref_model

    @property
    def optimizer(self) -> Any:
        """The AdamW optimizer."""
        return self.policy_update.optimizer

    @property
    def scheduler(self) -> Any:
        """The learning-rate schedule (advanced once per training step)."""
        return self.policy_update.scheduler

    @property
    def rollout_correction(self) -> bool:
        """True when rollouts sample in another dtype than the policy trains in (truncated importance weights)."""
        return self.policy_update.rollout_correction

    @property
    def replay(self) -> Any:
        """The batch's shared replay buffer (the runner's; ``None`` when no env has one)."""
        return self.runner.replay

    @property
    def batch_noise(self) -> Any:
        """The batch's verification-noise source (the runner's; ``None`` when no env validates questions)."""
        return self.runner.batch_noise

    # ================================================================ rollout
    def collect(self, n_games: Optional[int] = None, *, generation: Optional[GenerationConfig] = None) -> RolloutBatch:
        """Play ``n_games`` (default ``batch_size``) games in lock-step over the parallel envs.

        The games form one batch: RAG-verification noise comes from its other Proposer trajectories,
        and the shared replay buffer is cleared first when this step starts a new ``replay_reset_steps``
        period (SSP: every 10 training steps). The games are played in waves of one game per env; the trainer
        owns the pool position (the ``index`` option, consumed in the pool's curriculum order) and seeds every
        game from its RNG."""
        want = n_games if n_games is not None else self.config.batch_size
        self._begin_batch()
        agent = self.agent if generation is None else _SeededGeneration(self.agent, generation, self.rng)
        samples: list[Sample] = []
        t_gen = t_env = 0.0
        tokens0 = self.agent.stats.new_tokens
        played = 0
        while played < want:  # waves of one game per env, each wave played to its end
            k = min(len(self.envs), want - played)
            wave = self.runner.play(agent, self._starts(k, played), keep=False)
            samples.extend(Sample.from_event(r.event, r.key, self.reward_plan.step_rewards_key) for r in wave.events)
            t_gen, t_env = t_gen + wave.agent_s, t_env + wave.env_s
            played += k
        return RolloutBatch(samples, played, t_gen, t_env, self.agent.stats.new_tokens - tokens0)

    def _starts(self, k: int, played: int) -> Iterator[EpisodeStart]:
        """The next ``k`` games: game number ``games_played`` seeded from the trainer's RNG, keyed ``(step, game of the
        batch)`` (the GRPO group of its Solvers), on pool index ``games_played // proposer_group_size`` (each subgraph
        played that many times in a row). Drawn as each game starts."""
        per_target = self.config.proposer_group_size
        for j in range(k):
            options = {"index": self.games_played // per_target} if self.pass_index else None
            self.games_played += 1
            yield EpisodeStart(key=(self.step, played + j), seed=self.rng.randrange(2**31), options=options)

    def _begin_batch(self) -> None:
        """A new batch: fresh verification noise, and the replay buffer cleared when a reset period starts."""
        self.runner.begin_batch()
        period = self.config.replay_reset_steps
        if self.replay is not None and period and self.step % period == 0 and self.step > self._replay_cleared_at:
            self.runner.clear_replay()
            self._replay_cleared_at = self.step
            logger.debug("replay buffer cleared at step %d", self.step)

    # ================================================================ update
    def advantages(self, samples: Sequence[Sample]) -> list[list[float]]:
        """Per-sample step-advantage tables (:func:`~searchgym.training.selfplay_update.selfplay_advantages`)."""
        return selfplay_advantages(samples, self.config)

    def update(self, samples: Sequence[Sample]) -> dict:
        """Solver GRPO update then Proposer REINFORCE update (:meth:`PolicyUpdate.update`); loss statistics."""
        return self.policy_update.update(samples)

    def encode(self, trajectories: Sequence[Trajectory], step_advantages: Sequence[Sequence[float]]):
        """The sequences the update trains on (:meth:`PolicyUpdate.encode`)."""
        return self.policy_update.encode(trajectories, step_advantages)

    def optimise(
        self,
        trajectories: Sequence[Trajectory],
        step_advantages: Sequence[Sequence[float]],
        *,
        aggregation: str = "token_mean",
        lr_scale: float = 1.0,
    ) -> dict:
        """PPO-clip + KL optimisation of the policy on ``trajectories`` (:meth:`PolicyUpdate.optimise`)."""
        return self.policy_update.optimise(trajectories, step_advantages, aggregation=aggregation, lr_scale=lr_scale)

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
        from ..evaluation.runner import record_of
        from ..evaluation.task_rollouts import play_tasks

        agent = self._eval_agent()
        recs: list = []
        with Progress(len(tasks), "validation", unit="question", enabled=self.config.progress) as bar:

            def done(trajs) -> None:
                recs.extend(record_of(t, count_tokens=agent.count_tokens) for t in trajs)
                bar.update(len(trajs))

            play_tasks(agent, envs, tasks, done)
        return {
            "val/accuracy": mean(r["em"] for r in recs),
            "val/f1": mean(r["f1"] for r in recs),
            "val/cover_em": mean(r["cover_em"] for r in recs),
            "val/searches": mean(r["searches"] for r in recs),
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
            output_dir=self.out / "eval" / f"step_{self.step:08d}",
            restart=True,
            config=EvalConfig(
                max_turns=c.max_turns, concurrency=c.max_batch_generate, seed=c.seed, progress=c.progress
            ),
        )
        return {f"eval/{ds}/{m}": d[m]["mean"] for ds, d in res.summary["datasets"].items() for m in ("em", "f1")}

    def _val_env(self):
        """A validation env: ``val_env_factory``'s, else ``KGSolver-v0`` with the run's env settings."""
        if self.val_env_factory is not None:
            return self.val_env_factory()
        return validation_env(self.config)

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
            "runner": self.runner.state_dict(),
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
        load_weights(self.policy, path / POLICY_DIR, lora=self.config.lora)
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
        self.runner.load_state_dict(state.get("runner") or _runner_state_of_old_checkpoint(state))
        self.games_played = int(state["games_played"])
        self.step = int(state["step"])
        logger.info("resumed from %s at step %d", path, self.step)

    def _sync_generator(self) -> None:
        """Out-of-model backends (vLLM) get the policy's current weights."""
        sync_weights(self.generator, self.policy)

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
        self._show_phase("rollouts")
        batch = self.collect()
        t1 = time.perf_counter()
        self._show_phase("update")
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

    def train(self, *, resume: bool = True, progress: Optional[bool] = None, until: Optional[int] = None) -> list[dict]:
        """Run until ``total_steps`` (or stop after step ``until``, checkpointed there when the run saves any: the
        learning-rate schedule stays the whole run's, so a run stopped early is the full run's first steps); logs
        metrics, validates and checkpoints on schedule. The run folder is locked for the whole run: a second run
        into the same ``output_dir`` fails at once, before it reads a checkpoint or writes ``config.yaml``."""
        from ..core.output_lock import OutputLock

        if until is not None and not 1 <= until <= self.config.total_steps:
            raise InvalidArgumentError(f"until={until}: stop at a step from 1 to total_steps={self.config.total_steps}")
        with OutputLock(self.out, what="--output-dir").acquire():
            return self._train(resume=resume, progress=progress, until=until)

    def _train(self, *, resume: bool, progress: Optional[bool], until: Optional[int] = None) -> list[dict]:
        c = self.config
        last = c.total_steps if until is None else until
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
        bar = self._bar = _progress(
            c.total_steps, self.step, c.progress if progress is None else progress, bool(c.save_every)
        )
        try:
            while self.step < last:
                m = self.train_step()
                if c.val_every and self.val_tasks and self.step % c.val_every == 0:
                    self._show_phase("validation")
                    m.update(self.validate())
                if c.eval_every and self.step % c.eval_every == 0:
                    self._show_phase("eval")
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
            self._bar = None
            if bar is not None:
                bar.close()
            self.metrics.close()
        return history

    def _show_phase(self, phase: str) -> None:
        """Name the part of a step that is running (``now=rollouts``, ``now=update``) on the progress line, beside
        the last step's rewards: a step takes minutes on a CPU, and the first one has no rate or ETA to show yet."""
        if self._bar is not None:
            self._bar.set_postfix(**{**self._bar.postfix, "now": phase})


class _SeededGeneration:
    """An agent whose every batched call samples with ``generation`` and a fresh seed from ``rng``."""

    def __init__(self, agent: Any, generation: GenerationConfig, rng: random.Random) -> None:
        self.agent, self.generation, self.rng = agent, generation, rng

    def act_batch(self, turns: list) -> list:
        """The agent's actions for ``turns``, sampled with the next seed."""
        return self.agent.act_batch(turns, config=self.generation.with_(seed=self.rng.randrange(2**31)))


def _runner_state_of_old_checkpoint(state: dict) -> dict:
    """The shared replay buffer of a checkpoint written before the runner owned it: every env held the same
    buffer then, so the first env's is the batch's."""
    envs = state.get("envs") or [{}]
    return {"replay": (envs[0].get("state_dict") or {}).get("replay")}


def _progress(total: int, start: int, enabled: bool, checkpoints: bool):
    """The steps' progress line (rate in s/step and ETA; counted even when not shown, for the Ctrl-C message)."""
    from ..core.progress import Progress

    hint = "rerun the same command to resume from the last checkpoint" if checkpoints else "no checkpoint is saved"
    return Progress(total, "train", unit="step", initial=start, enabled=enabled, resume_hint=hint)


def _load_val_tasks(config: TrainConfig) -> list:
    if not config.val_tasks:
        return []
    from ..tasks.sources import JsonlTaskSource

    src = JsonlTaskSource(config.val_tasks)
    return [src[i] for i in range(len(src))]


__getattr__ = moved_getattr(__name__)
