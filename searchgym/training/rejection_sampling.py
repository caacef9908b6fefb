"""Rejection-sampling fine-tuning (``searchgym sft --source self``): sample, keep the good rollouts, fine-tune.

Each round samples the current model with :class:`~searchgym.agents.llm_agent.LLMAgent` through the batch
runner on ``num_tasks`` tasks of ``env_id``, ``samples_per_task`` rollouts each (a single-role env plays them as
separate episodes, up to ``max_batch_generate`` in flight so each turn is one batched call; a group env gets
``group_size = samples_per_task`` and the ordinary play loop, :func:`~searchgym.evaluation.games.play_games`, on as
many clones as ``max_batch_generate`` holds groups, their turns batched the same way),
writes them to ``round_<r>/samples.jsonl`` and fine-tunes on those with reward >= ``reward_threshold``
(:class:`searchgym.training.sft_trainer.SFTRun` on that file, plus the config's ``data`` files when it names any:
demonstrations replayed in every round, so the skills the sampled env does not exercise are kept). The next round
starts from this round's ``final/``; ``<output_dir>/final`` is the last round's model. With ``lora_init``
(``lora=true``) round 0 samples that adapter and trains it on; every round saves its adapter and the next
continues it, so the result stays one adapter of the same rank.
A finished sample file or round is reused on resume, and each round's SFT resumes from its checkpoints.
"""

from __future__ import annotations

import logging
import random
import shutil
from dataclasses import replace
from pathlib import Path

from ..core.atomic_writes import write_file, write_folder
from ..errors import InvalidArgumentError
from .model_loading import resolve_init
from .sft_config import SFTConfig, SFTResult
from .sft_trainer import SFTRun, ensure_chat_template, load_training_data

logger = logging.getLogger(__name__)


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
    from .selfplay_envs import make_env_copies

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
    logger.info("round %d: sampling %s with %s", round_index, config.env_id, model_name)
    if not env_spec(config.env_id).group:
        desc = f"round {round_index}: sampling {config.env_id}"
        write_file(out_path, lambda tmp: _sample_batched(config, agent, kwargs, tmp, seed, desc))
        return out_path
    kwargs.setdefault("group_size", config.samples_per_task)  # a group env samples its G rollouts itself
    # as many groups at once as max_batch_generate holds rows (clone j's first task drawn with seed + j)
    clones = max(1, min(config.num_tasks, config.max_batch_generate // max(1, int(kwargs["group_size"]))))
    envs = make_env_copies(config.env_id, kwargs, clones)
    try:
        write_file(out_path, lambda tmp: play_games(envs, agent, config.num_tasks, export_path=tmp, seed=seed))
    finally:
        for env in envs:
            env.close()
    return out_path


def _sample_batched(config: SFTConfig, agent, kwargs: dict, path: Path, seed: int, desc: str) -> None:
    """A single-role env's samples: ``num_tasks`` tasks drawn with ``seed`` from its task source, each played
    ``samples_per_task`` times, with up to ``max_batch_generate`` episodes in flight (an env each) so that every
    pending turn goes to the model in one batch; each episode is reset with a seed made from ``seed``, its task
    and its sample number. The samples are a function of the config (``max_batch_generate`` included: it sets
    which rows share a sampling call). One trajectory per line, as ``play_games`` exports them."""
    from ..core.progress import Progress
    from ..evaluation.games import export_line
    from ..evaluation.task_rollouts import play_tasks
    from .selfplay_envs import make_env_copies

    runs = config.num_tasks * config.samples_per_task
    envs = make_env_copies(config.env_id, kwargs, min(config.max_batch_generate, runs))
    rng = random.Random(seed)
    source = envs[0].get_wrapper_attr("tasks")
    tasks = [source.sample(rng) for _ in range(config.num_tasks)]
    bar = Progress(runs, desc, unit="rollout", enabled=config.progress)
    try:
        with open(path, "w") as fh:

            def finished(trajectories) -> None:
                for traj in trajectories:
                    fh.write(export_line(traj, game=bar.count, reward=traj.reward, slot=None))
                    bar.update(1)

            play_tasks(agent, envs, tasks, finished, seed=seed, repeats=config.samples_per_task)
    finally:
        bar.close()
        for env in envs:
            env.close()


def round_config(config: SFTConfig, *, model: str, data: str, output_dir: str, last: bool) -> SFTConfig:
    """The data-source config of one rejection-sampling round: ``model`` is what the round starts from (the
    previous round's ``final/``; with ``lora_init``, the adapter it continues), ``data`` its sample file, trained
    on together with the config's own ``data`` files (replayed demonstrations)."""
    sft = replace(
        config, source="data", data=[data, *config.data], output_dir=output_dir, min_reward=config.reward_threshold
    )
    if config.lora_init:  # the base stays; the adapter carries on, saved every round for the next to continue
        return replace(sft, lora_init=model, save_adapter=config.save_adapter or not last)
    return replace(sft, model=model, save_adapter=config.save_adapter and last)


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
    final = write_folder(out / "final", lambda tmp: shutil.copytree(current, tmp, dirs_exist_ok=True))
    assert result is not None, "SFTConfig checks rounds >= 1"
    result.final_dir, result.output_dir, result.rounds = str(final), str(out), rounds
    return result
