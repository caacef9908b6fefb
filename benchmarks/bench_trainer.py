"""Trainer step time: searchgym's GRPO step vs TRL's ``GRPOTrainer``, same model, task, settings and device.

Task: a single-turn version of the Solver task -- ``KGSolverGroup-v0`` with ``max_turns=1`` on
template questions from the default world's subgraph pool (exact-match reward). TRL gets the same
prompts (the Solver prompt as a chat user message) and the same exact-match reward on
``<answer>…</answer>``. Every setting is matched: B questions × G completions per step, at most N
new tokens, temperature 1, top-p 1, generation stops at EOS only on both sides (TRL's generate
cannot take stop strings, so searchgym's ``</search>``/``</answer>`` stops are switched off),
gradient checkpointing off on both (TRL's default is on), PPO-clip 0.2/0.28, KL coef 0.01 to a
frozen reference, one optimizer step per training step, the same lr, fp32, the same torch threads
and the same ``--device``.

Steps are interleaved: TRL's training loop drives, and after each of its steps (timed by callbacks)
one searchgym step runs. A second searchgym trainer with prompt sharing off (``share_prompt=False``,
the pre-#18 update path) updates on the *same* samples, so the update A/B compares identical
token sequences. The first ``--warmup`` steps are not timed; the rest are reported as median and
min-max.

    .venv/bin/python benchmarks/bench_trainer.py                       # SmolLM2-135M (bundled)
    .venv/bin/python benchmarks/bench_trainer.py --model tiny --steps 8 --device cpu

Prints a markdown table and writes benchmarks/results/trainer[_<model>][_<device>].json.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from machine import machine_line as machine


def model_dir(model_name: str) -> str:
    """A local HF folder for the model (TRL needs a path to build its reference model)."""
    if model_name == "tiny":
        from searchgym.llm.tiny_models import tiny_policy

        model, tok = tiny_policy("tiny", seed=0)  # a random 4-layer, 256-wide Llama
        path = Path(tempfile.mkdtemp()) / "tiny"
        model.save_pretrained(path)
        tok.save_pretrained(path)
        return str(path)
    from searchgym.llm.bundled_model import resolve_model_path

    return resolve_model_path(model_name)


def tasks_for(world, n: int):
    import gymnasium as gym

    import searchgym  # noqa: F401

    env = gym.make("KGSolver-v0", world=world, max_turns=1)
    src = env.unwrapped.tasks
    return [src[i] for i in range(min(n, len(src)))]


def ours_trainer(model, tok, world, tasks, args, *, share: bool):
    """A searchgym trainer on the bench task with every setting matched to TRL's (see the module docstring)."""
    import gymnasium as gym

    from searchgym.training.selfplay_config import TrainConfig
    from searchgym.training.selfplay_trainer import SelfPlayTrainer

    envs = [
        gym.make("KGSolverGroup-v0", world=world, tasks=tasks, group_size=args.group, max_turns=1)
        for _ in range(args.batch)
    ]
    bg = args.batch * args.group
    cfg = TrainConfig(
        device=args.device,
        batch_size=args.batch,
        group_size=args.group,
        max_turns=1,
        max_new_tokens=args.max_new_tokens,
        lr=1e-6,
        warmup_steps=0,
        kl_coef=0.01,
        mini_batch_size=bg,
        micro_batch_size=bg,
        total_steps=args.warmup + args.steps + 1,
        output_dir=tempfile.mkdtemp(),
        tensorboard=False,
        progress=False,
        save_every=0,
        val_every=0,
        train_proposer=False,
        gradient_checkpointing=False,
        share_prompt=share,
        temperature=1.0,
        top_p=1.0,
    )
    tr = SelfPlayTrainer(cfg, envs=envs, model=model, tokenizer=tok)
    tr.agent.config.stop = ()  # EOS only, as TRL
    return tr


def ours_step(tr, baseline) -> dict:
    """One searchgym step (rollout + update), then ``baseline``'s update on the same samples."""
    sync = _sync(tr)
    t0 = time.perf_counter()
    batch = tr.collect()
    t1 = time.perf_counter()
    stats = tr.update(batch.samples)
    tr._sync_generator()
    sync()
    t2 = time.perf_counter()
    baseline.update(batch.samples)
    sync()
    t3 = time.perf_counter()
    tr.step += 1
    return {
        "step_s": t2 - t0,
        "rollout_s": batch.rollout_s,
        "env_s": batch.env_s,
        "update_s": t2 - t1,
        "update_unshared_s": t3 - t2,
        "sampled_tokens": batch.new_tokens,
        "trained_tokens": stats.get("solver/tokens", 0) * stats.get("solver/sequences", 0),
    }


def _sync(tr):
    import torch

    return torch.cuda.synchronize if tr.device.type == "cuda" else (lambda: None)


def trl_trainer(path, tok, tasks, args, between):
    """TRL's GRPOTrainer on the same task; ``between()`` runs after each of its (timed) steps."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from searchgym.core.prompts import render_solver
    from searchgym.scoring.judge import exact_match

    golds = {t.question: t.answers for t in tasks}
    pat = re.compile(r"<answer>(.*?)</answer>", re.S)

    def reward(prompts, completions, question, **kw):
        out = []
        for comp, q in zip(completions, question):
            text = comp[0]["content"] if isinstance(comp, list) else comp
            m = pat.findall(text)
            out.append(1.0 if m and exact_match(m[-1], golds[q]) else 0.0)
        return out

    total = args.warmup + args.steps
    n_rows = args.batch * (total + 1)
    rows = [
        {"prompt": [{"role": "user", "content": render_solver(t.question)}], "question": t.question}
        for t in (tasks * (n_rows // max(1, len(tasks)) + 1))[:n_rows]
    ]
    record: dict = {"times": [], "lengths": []}

    class Interleave(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            _cuda_sync(args.device)
            self.t0 = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            _cuda_sync(args.device)
            record["times"].append(time.perf_counter() - self.t0)
            between()

        def on_log(self, a, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                record["lengths"].append(logs["completions/mean_length"])

    bg = args.batch * args.group
    cfg = GRPOConfig(
        output_dir=tempfile.mkdtemp(),
        per_device_train_batch_size=bg,
        num_generations=args.group,
        max_completion_length=args.max_new_tokens,
        beta=0.01,
        epsilon=0.2,
        epsilon_high=0.28,
        loss_type="grpo",
        learning_rate=1e-6,
        lr_scheduler_type="constant",
        max_steps=total,
        use_cpu=args.device == "cpu",
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        temperature=1.0,
        top_p=1.0,
        gradient_checkpointing=False,
        shuffle_dataset=False,
        bf16=False,
        fp16=False,
        disable_tqdm=True,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=path,
        reward_funcs=[reward],
        args=cfg,
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
        callbacks=[Interleave()],
    )
    return trainer, record


def _cuda_sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def summary(xs: list[float]) -> dict:
    """Median and spread of timed values."""
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs), "values": xs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model", default="smollm2", help="'smollm2' (bundled), 'tiny' (random 4-layer Llama) or a local HF dir"
    )
    ap.add_argument("--steps", type=int, default=5, help="timed steps per trainer (>= 5 for a median with a spread)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    ap.add_argument("--batch", type=int, default=2, help="questions per step (B)")
    ap.add_argument("--group", type=int, default=4, help="completions per question (G)")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="runs BOTH trainers on this device")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads for BOTH trainers (1 is fastest on a small, busy 2-core machine)",
    )
    ap.add_argument(
        "--out", default=None, help="result JSON (default benchmarks/results/trainer_<model>_<device>.json)"
    )
    args = ap.parse_args()

    import logging

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but CUDA is not available here")
    torch.set_num_threads(args.threads)
    logging.disable(logging.WARNING)
    from searchgym.llm.bundled_model import load_policy
    from searchgym.world.synthetic import default_world

    world = default_world()
    path = model_dir(args.model)
    model, tok = load_policy(path)
    tasks = tasks_for(world, 64)
    ours = ours_trainer(model, tok, world, tasks, args, share=True)
    unshared = ours_trainer(copy.deepcopy(model), tok, world, tasks, args, share=False)
    rows: list[dict] = []
    trl, trl_rec = trl_trainer(path, tok, tasks, args, between=lambda: rows.append(ours_step(ours, unshared)))
    trl.train()
    timed = rows[args.warmup :]
    trl_times = trl_rec["times"][args.warmup :]
    keys = ("step_s", "rollout_s", "env_s", "update_s", "update_unshared_s", "sampled_tokens", "trained_tokens")
    mine = {k: summary([r[k] for r in timed]) for k in keys}
    lengths = trl_rec["lengths"][args.warmup :]
    theirs = {
        "step_s": summary(trl_times),
        "completion_tokens": summary([x * args.batch * args.group for x in lengths]) if lengths else None,
    }
    ratio = mine["step_s"]["median"] / theirs["step_s"]["median"]
    share_speedup = statistics.median(r["update_unshared_s"] / r["update_s"] for r in timed)
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else None
    result = {
        "machine": machine(),
        "device": args.device,
        "gpu": gpu,
        "model": args.model,
        "batch": args.batch,
        "group": args.group,
        "max_new_tokens": args.max_new_tokens,
        "threads": args.threads,
        "warmup_steps": args.warmup,
        "timed_steps": args.steps,
        "searchgym": mine,
        "trl": theirs,
        "ratio_ours_over_trl": ratio,
        "update_speedup_from_prompt_sharing": share_speedup,
        "settings": "matched: EOS-only stop, gradient checkpointing off, fp32, temperature 1, top-p 1, "
        "clip 0.2/0.28, beta 0.01, lr 1e-6, one optimizer step per step; steps interleaved",
        "note": "CPU shared with other jobs during the run" if args.device == "cpu" else "",
    }
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"trainer_{args.model}_{args.device}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    fmt = lambda d, p=2: f"{d['median']:.{p}f} ({d['min']:.{p}f}-{d['max']:.{p}f})"  # noqa: E731
    where = gpu or machine()
    print(
        f"device: {args.device} ({where}); model {args.model}; B={args.batch} G={args.group} "
        f"max_new_tokens={args.max_new_tokens}; torch threads {args.threads}; interleaved, median (min-max) of "
        f"{args.steps} steps after {args.warmup} warm-up\n"
    )
    print("| trainer | step (s) | rollout (s) | env+reward (s) | update (s) | sampled / trained tokens per step |")
    print("|---|---|---|---|---|---|")
    print(
        f"| searchgym | {fmt(mine['step_s'])} | {fmt(mine['rollout_s'])} | {fmt(mine['env_s'], 4)} | "
        f"{fmt(mine['update_s'])} | {mine['sampled_tokens']['median']:.0f} / {mine['trained_tokens']['median']:.0f} |"
    )
    print(f"| searchgym, prompt sharing off (same samples) | | | | {fmt(mine['update_unshared_s'])} | |")
    ct = theirs["completion_tokens"]
    print(
        f"| TRL GRPOTrainer | {fmt(theirs['step_s'])} | | | | {ct['median']:.0f} |"
        if ct
        else f"| TRL GRPOTrainer | {fmt(theirs['step_s'])} | | | | |"
    )
    print(f"\nsearchgym / TRL step time: {ratio:.2f}x; update speed-up from prompt sharing: {share_speedup:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
