"""Rejection-sampling fine-tuning (``searchgym sft --source self``): sample, keep the good rollouts, fine-tune.

Each round samples the current model with :class:`~searchgym.agents.llm_agent.LLMAgent` through the
ordinary play loop (:func:`~searchgym.evaluation.games.play_games`) on ``num_tasks`` tasks of ``env_id``,
``samples_per_task`` rollouts each (a single-role env is wrapped in :class:`RepeatTask`; a group env
gets ``group_size = samples_per_task``), writes them to ``round_<r>/samples.jsonl`` and fine-tunes on
those with reward >= ``reward_threshold`` (:class:`searchgym.training.sft_trainer.SFTRun` on that file, plus the
config's ``data`` files when it names any: demonstrations replayed in every round, so the skills the sampled env
does not exercise are kept). The next round starts from this round's ``final/``; ``<output_dir>/final`` is the last
round's model. With ``lora_init`` (``lora=true``) round 0 samples that adapter and trains it on; every round saves
its adapter and the next continues it, so the result stays one adapter of the same rank.
A finished sample file or round is reused on resume, and each round's SFT resumes from its checkpoints.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import replace
from pathlib import Path

import gymnasium as gym

from ..errors import InvalidArgumentError
from .model_loading import resolve_init
from .sft_config import SFTConfig, SFTResult
from .sft_trainer import SFTRun, ensure_chat_template, load_training_data

logger = logging.getLogger(__name__)


class RepeatTask(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Play each task of a single-role env ``times`` times in a row (G samples per task).

    Every ``times``-th reset draws the next task from the wrapped env as usual; the resets in between
    pass ``options={"task": task}`` to replay the same one.
    """

    def __init__(self, env, times: int) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, times=times)  # gym.make(env.spec) rebuilds it
        super().__init__(env)
        if times < 1:
            raise InvalidArgumentError(f"times={times} must be >= 1")
        self.times = int(times)
        self._count = 0
        self._task = None

    def reset(self, *, seed=None, options=None):
        """Next task every ``times`` resets, else the current task again."""
        if self._count % self.times == 0 or self._task is None:
            obs, info = super().reset(seed=seed, options=options)
            self._task = info["task"]
        else:
            obs, info = super().reset(seed=seed, options={**(options or {}), "task": self._task})
        self._count += 1
        return obs, info


def sample_rollouts(config: SFTConfig, model_name: str, out_path: Path, round_index: int) -> Path:
    """Play the current model on the env and write every finished trajectory to ``out_path`` (atomically)."""
    import torch

    import searchgym.envs  # noqa: F401  (registration)

    from ..agents.llm_agent import AgentConfig, LLMAgent
    from ..envs.registration import env_spec
    from ..evaluation.games import play_games
    from ..llm.pretrained import open_model
    from ..llm.transformers_backend import TransformersGenerator
    from .model_loading import resolve_device

    if config.threads:  # sampling is most of a round: it keeps the thread budget too
        torch.set_num_threads(config.threads)
    device = resolve_device(config.device)
    model, tok = open_model(model_name, dtype=config.dtype, cache_dir=config.model_cache_dir)
    ensure_chat_template(tok, config.chat_template, model_name)
    model.to(device).eval()
    seed = config.seed + 1000 * round_index
    generator = TransformersGenerator(
        model, tok, max_batch_size=config.max_batch_generate, seed=seed, engine=config.rollout_engine
    )
    agent = LLMAgent(
        generator, config=AgentConfig(max_new_tokens=config.max_new_tokens, temperature=config.temperature, seed=seed)
    )
    kwargs = {"max_turns": config.max_turns, **config.env_kwargs}
    if env_spec(config.env_id).group:
        kwargs.setdefault("group_size", config.samples_per_task)
        env, games = gym.make(config.env_id, **kwargs), config.num_tasks
    else:
        env, games = (
            RepeatTask(gym.make(config.env_id, **kwargs), config.samples_per_task),
            config.num_tasks * config.samples_per_task,
        )
    tmp = out_path.with_name(out_path.name + ".tmp")
    logger.info("round %d: sampling %d games of %s with %s", round_index, games, config.env_id, model_name)
    try:
        play_games(env, agent, games, export_path=tmp, seed=seed)
    finally:
        env.close()
    os.replace(tmp, out_path)
    return out_path


def round_config(config: SFTConfig, *, model: str, data: str, output_dir: str, last: bool) -> SFTConfig:
    """The data-source config of one rejection-sampling round: ``model`` is what the round starts from (the
    previous round's ``final/``; with ``lora_init``, the adapter it continues), ``data`` its sample file, trained
    on together with the config's own ``data`` files (replayed demonstrations)."""
    common = dict(source="data", data=[data, *config.data], output_dir=output_dir, min_reward=config.reward_threshold)
    if config.lora_init:  # the base stays; the adapter carries on, saved every round for the next to continue
        return replace(config, lora_init=model, save_adapter=config.save_adapter or not last, **common)
    return replace(config, model=model, save_adapter=config.save_adapter and last, **common)


def run_rejection_sampling(config: SFTConfig, *, resume: bool = True) -> SFTResult:
    """``config.rounds`` rounds of sample → keep reward >= threshold → fine-tune; returns the last round's result."""
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    current = resolve_init(config.lora_init) if config.lora_init else config.model  # what round 0 samples
    rounds: list = []
    result = None
    for r in range(config.rounds):
        rdir = out / f"round_{r}"
        rdir.mkdir(exist_ok=True)
        samples = rdir / "samples.jsonl"
        if not (resume and samples.is_file()):
            sample_rollouts(config, current, samples, r)
        sub = round_config(config, model=current, data=str(samples), output_dir=str(rdir), last=r == config.rounds - 1)
        try:
            train, val, report = load_training_data(sub)
        except ValueError as exc:
            raise InvalidArgumentError(
                f"round {r}: no rollout reached reward >= {config.reward_threshold:g} ({exc}); lower "
                f"reward_threshold, raise samples_per_task, or cold-start with demonstrations first"
            ) from None
        result = SFTRun(sub, train, val, report=report).run(resume=resume)
        rounds.append(
            {
                "round": r,
                "kept": report.kept,
                "sampled": report.lines,
                **{k: getattr(result, k) for k in ("steps", "val_loss_initial", "val_loss_best", "entropy_final")},
            }
        )
        logger.info("round %d: kept %d rollouts; %s", r, report.kept, rounds[-1])
        current = result.final_dir
    final = out / "final"
    tmp = out / ".final.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(current, tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    assert result is not None, "SFTConfig checks rounds >= 1"
    result.final_dir, result.output_dir, result.rounds = str(final), str(out), rounds
    return result
