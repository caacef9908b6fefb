"""The self-play benchmark's cached stages (``bench_selfplay.py``): a run's training, the start it trains from, and
the held-out evaluations of the cold start, a run and a run's checkpoint, greedy and sampled; each is skipped when
its output exists, so a killed command rerun as written resumes."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Optional, Sequence

from bench_learning import eval_dir, evaluate_model
from selfplay_setup import COLD, DONE, SAMPLED, SAMPLED_TEMPERATURE, Arm, BenchError, logger, run_name, wait_lock

from searchgym.core.atomic_writes import write_folder, write_text


def stage_train(
    arm: Arm,
    seed: int,
    cfg,
    start: str,
    work: Path,
    opts_overrides: Sequence[str] = (),
    stop_at: Optional[int] = None,
) -> Path:
    """Train one run (resuming from its last checkpoint) and save its ``final/`` policy: the LoRA adapter alone
    when the run trains one (merged over ``start`` to evaluate), else the whole model. Skipped when done (and
    refused when the finished run trained with other steps, baseline or ``--set`` overrides).

    ``stop_at`` (``--stop-at``) ends the run at that step of its ``total_steps`` schedule: trained on to it, or,
    when the run already went past it (a run killed later), its kept checkpoint there becomes the final policy;
    the record says ``stopped_at``."""
    from searchgym.training.selfplay_trainer import SelfPlayTrainer

    opts_overrides = list(opts_overrides)
    goal = cfg.total_steps if stop_at is None else stop_at

    final = work / run_name(arm.key, seed) / "final"
    if (final / DONE).is_file():
        record = json.loads((final / DONE).read_text())
        steps = record["steps"]
        if steps != goal or record.get("stopped_at") != stop_at:
            ended = f"stopped at step {steps} of {record.get('total_steps')}" if record.get("stopped_at") else None
            asked = f"stopped at step {stop_at}" if stop_at is not None else f"{goal} steps"
            raise BenchError(
                f"run {run_name(arm.key, seed)} in {work} {ended or f'finished at {steps} steps'}, not {asked}: its "
                "results are cached, so give another --workdir for another --steps or --stop-at"
            )
        overrides = record.get("overrides", [])  # runs from before it was recorded had none
        if overrides != opts_overrides:
            raise BenchError(
                f"run {run_name(arm.key, seed)} in {work} trained with --set {' '.join(overrides) or '(none)'}, not "
                f"{' '.join(opts_overrides) or '(none)'}: its results are cached, so give another --workdir"
            )
        baseline = record.get("proposer_baseline", cfg.proposer_baseline)  # runs from before it was recorded: as set
        if baseline != cfg.proposer_baseline:
            raise BenchError(
                f"run {run_name(arm.key, seed)} in {work} trained with proposer_baseline={baseline}, not "
                f"{cfg.proposer_baseline}: its results are cached, so give another --workdir for another "
                "--proposer-baseline"
            )
        return final
    past = stop_at is not None and trained_steps(work / run_name(arm.key, seed)) > stop_at
    if past:  # the run went on past the stop (killed later): its checkpoint there is the final policy
        kept = checkpoint_policy(work, run_name(arm.key, seed), stop_at)
        logger.info("arm %s seed %d: stopped at step %d, its checkpoint there (%s)", arm.key, seed, stop_at, kept)
        write_folder(final, lambda tmp: shutil.copytree(kept, tmp, dirs_exist_ok=True))
    else:
        logger.info("arm %s seed %d: training %d of %d steps (%s)", arm.key, seed, goal, cfg.total_steps, arm.recipe)
        trainer = SelfPlayTrainer(cfg, num_envs=cfg.batch_size)  # a step's games in one lock-step wave: batched turns
        trainer.train(resume=True, until=stop_at)
        final.mkdir(parents=True, exist_ok=True)
        trainer.policy.save_pretrained(final)
        if not cfg.lora:
            trainer.tokenizer.save_pretrained(final)
    done = {
        "arm": arm.key,
        "recipe": arm.recipe,
        "seed": seed,
        "start": start,
        "steps": goal,
        "total_steps": cfg.total_steps,
        "stopped_at": stop_at,
        "proposer_baseline": cfg.proposer_baseline,
        "overrides": opts_overrides,
    }
    write_text(final / DONE, json.dumps(done, indent=1))
    return final


def trained_steps(run: Path) -> int:
    """The step of run folder ``run``'s newest readable checkpoint (0 when it has none)."""
    from searchgym.training.checkpoints import CheckpointManager, read_meta

    latest = CheckpointManager.of_run(run).latest()
    return 0 if latest is None else int(read_meta(latest)["step"])


def stage_start(start: str, work: Path, *, record: bool = True) -> dict:
    """Record what the workdir's runs start from (``work/start.json``; not when ``record`` is false) and refuse
    another start: the cold start's evaluation and every arm must share it (a re-made cold-start adapter needs a
    fresh --workdir)."""
    from searchgym.training.cold_start import weights_fingerprint

    path = work / "start.json"
    with wait_lock(work / "start.stage"):
        mine = {"start": start, "fingerprint": weights_fingerprint(start)}
        if path.is_file():
            first = json.loads(path.read_text())
            if first["fingerprint"] != mine["fingerprint"]:
                raise BenchError(
                    f"{work} holds runs that start from {first['start']} (weights {first['fingerprint']}); this "
                    f"command starts from {start} (weights {mine['fingerprint']}): give another --workdir"
                )
            return first
        if record:
            write_text(path, json.dumps(mine, indent=1))
        return mine


def open_trained(start: str, final: Path):
    """``(model, tokenizer)`` of a finished run: ``start`` with the run's adapter merged in (its adapters, one per
    role, when it trained with ``proposer_adapter``), or its whole model."""
    from searchgym.llm.pretrained import open_model
    from searchgym.llm.role_adapters import attach_adapters

    if not (final / "adapter_config.json").is_file():
        return open_model(str(final))
    model, tok = open_model(start)
    return attach_adapters(model, final), tok


#: what joins a run's name and a training step in its ``--eval-at`` evaluation stages (``b_s0_step16``)
STEP_STAGE = "_step"


def checkpoint_stage(name: str, step: int) -> str:
    """The evaluation stage of run ``name`` at training step ``step`` (``--eval-at``)."""
    return f"{name}{STEP_STAGE}{step}"


def checkpoint_policy(work: Path, name: str, step: int) -> Path:
    """The policy (adapter) run ``name`` saved at ``step``; refused when the run did not keep that checkpoint."""
    from searchgym.training.checkpoints import CheckpointManager

    policy = CheckpointManager.of_run(work / name).policy_dir(step)
    if not policy.is_dir():
        raise BenchError(
            f"run {name} in {work} kept no checkpoint at step {step} (a run keeps its newest two and the steps "
            f"--eval-at names while it trains; it trained without --eval-at {step}): give another --workdir to score "
            "it there"
        )
    return policy


def stage_eval(name: str, load, modes: Sequence[str], world, size: dict, work: Path, device: str, label: str) -> dict:
    """Held-out Solver accuracy by hop and Proposer valid rate (in each of ``modes``) of one model (cached)."""
    return evaluate_model(
        name,
        load,
        world,
        work,
        device,
        hops=size["eval_hops"],
        proposer=size["eval_proposer"],
        max_new_tokens=size["max_new_tokens"],
        model_label=label,
        proposer_modes=modes,
    )


def stage_cold(start: str, world, size: dict, work: Path, device: str, samples: int) -> None:
    """The cold start's held-out evaluation (both Proposer prompts, then ``samples`` sampled rollouts a target),
    once per workdir: whichever process gets here first runs it, the others wait on its lock and find it cached."""
    from searchgym.llm.pretrained import open_model

    with wait_lock(work / f"{COLD}.stage"):
        stage_eval(COLD, lambda: open_model(start), ("kg", "vanilla"), world, size, work, device, start)
        if samples:
            stage_sampled(COLD, lambda: open_model(start), world, size, work, device, samples)


def stage_sampled(name: str, load, world, size: dict, work: Path, device: str, samples: int) -> dict:
    """The KG Proposer's valid rate on the held-out targets as the game plays it: ``samples`` rollouts a target at
    the rollouts' temperature (:data:`SAMPLED_TEMPERATURE`), seeded, records in the stage's eval folder (cached in
    :data:`SAMPLED`; a cached stage sampled another number of times is refused). The greedy rate scores the
    policy's mode, which the game never plays: self-play trains the distribution it samples questions from."""
    import torch

    from searchgym.training.learning_checks import heldout_proposer_tasks, llm_eval_agent, proposer_valid_rate

    meta = eval_dir(work, name) / SAMPLED
    if meta.is_file():
        done = json.loads(meta.read_text())
        if done.get("samples") != samples:
            raise BenchError(
                f"{meta} was sampled {done.get('samples')} times a target, this invocation asks {samples}: rerun "
                f"with --proposer-samples {done.get('samples')}, or give another --workdir"
            )
        return done
    model, tok = load()
    agent = llm_eval_agent(
        model,
        tok,
        name,
        max_new_tokens=size["max_new_tokens"],
        device=None if device == "cpu" else device,
        temperature=SAMPLED_TEMPERATURE,
        seed=0,
    )
    t0 = time.perf_counter()
    tasks = heldout_proposer_tasks(world, size["eval_proposer"])
    rate = proposer_valid_rate(
        agent, world, tasks, output_dir=eval_dir(work, name), mode="kg", progress=True, samples=samples, sampled=True
    )
    out = {
        **rate,
        "samples": samples,
        "temperature": SAMPLED_TEMPERATURE,
        "seconds": round(time.perf_counter() - t0, 1),
        "torch_threads": torch.get_num_threads(),
    }
    write_text(meta, json.dumps(out, indent=1) + "\n")
    return out
