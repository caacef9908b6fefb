"""The self-play update's step time in float32 against bf16 autocast (``mixed_precision``), in the same run.

Sequences: the shipped cold start's recipe of Solver demonstrations (``searchgym demos``, default world, the hop
counts below, default seed), played by the scripted expert through the real envs: 1- to 3-hop games with their
retrieved passages, as long as the Solver's games in the self-play benchmark. Two updates are built as the
``kg-wcr`` recipe's ``cpu`` size builds them (the shipped cold start merged, a LoRA adapter of r 16, micro-batches
of 2), with the anchored benchmark runs' Solver KL term (``kl_coef`` 0.1: the base model scores each micro-batch
as the reference); one with ``mixed_precision=none``, one with ``bfloat16``. Step ``k`` of each optimises the same
``--batch`` sequences (a seeded draw) with advantages of alternating sign: old log-probs, forward, reference,
backward and an optimizer step, as a training step's Solver update runs them. Steps alternate between the two, the
first ``--warmup`` of each untimed. The first step's loss, KL and entropy are compared (both start from the same
weights); after it the two runs' weights part, as two runs would.

    .venv/bin/python benchmarks/bench_update_precision.py              # SmolLM2-135M, one torch thread

bf16 pays only where the CPU multiplies bf16 in hardware (AVX-512 BF16 or AMX); elsewhere autocast emulates it
and the script says so before it runs. Prints a markdown table and writes
benchmarks/results/update_precision_cpu.json.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import machine_info, machine_line, write_result  # noqa: E402
from update_inputs import cpu_size_update, solver_demos_file  # noqa: E402

SOLVER_DEMOS = {1: 20, 2: 20, 3: 20}  # a sample of the cold start's Solver demonstration recipe (200 / 160 / 60)
PRECISIONS = ("none", "bfloat16")


def build_update(precision: str, micro: int, kl_coef: float):
    """A :class:`~searchgym.training.selfplay_update.PolicyUpdate` of the ``kg-wcr`` recipe's ``cpu`` size (the shipped
    cold start, LoRA) with ``mixed_precision`` as given."""
    return cpu_size_update(micro_batch_size=micro, kl_coef=kl_coef, mixed_precision=precision)


def update_step(update, trajectories, k: int) -> tuple[float, dict]:
    """Seconds and statistics of step ``k``: ``update.optimise`` on ``trajectories``, advantages +1 / -1 in turn."""
    advantages = [[1.0 if (i + k) % 2 == 0 else -1.0] for i in range(len(trajectories))]
    t0 = time.perf_counter()
    stats = update.optimise(trajectories, advantages)
    return time.perf_counter() - t0, stats


def main(argv=None) -> int:
    """Time both precisions step by step and print/write the results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6, help="timed steps of each precision")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps of each precision first")
    ap.add_argument("--batch", type=int, default=8, help="sequences a step (the cpu size's mini-batch of 8)")
    ap.add_argument("--micro", type=int, default=2, help="micro_batch_size (the cpu size's 2)")
    ap.add_argument("--kl-coef", type=float, default=0.1, help="the KL term's weight (the anchored runs' Solver 0.1)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (one: the learning runs' setting)")
    ap.add_argument("--out", help="the result JSON (default benchmarks/results/update_precision_cpu.json)")
    args = ap.parse_args(argv)
    import torch

    from searchgym.llm.bf16_hardware import native_bfloat16
    from searchgym.training.sft_data import load_demonstrations

    torch.set_num_threads(args.threads)
    native = native_bfloat16("cpu")
    if not native:
        print("this CPU has no bf16 hardware (AVX-512 BF16 or AMX): autocast emulates bf16, expect a slowdown")
    data = solver_demos_file(SOLVER_DEMOS)
    pool = [d.trajectory for d in load_demonstrations(data)[0]]
    updates = {p: build_update(p, args.micro, args.kl_coef) for p in PRECISIONS}
    cfg = updates["none"].config
    load_before = os.getloadavg()[0]
    times: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    first: dict[str, dict] = {}
    tokens: list[int] = []
    for k in range(args.warmup + args.steps):
        batch = random.Random(f"update-precision:{k}").sample(pool, min(args.batch, len(pool)))
        for p in PRECISIONS:
            dt, stats = update_step(updates[p], batch, k)
            if k == 0:
                first[p] = stats
            if k >= args.warmup:
                times[p].append(dt)
        if k >= args.warmup:
            encoded, _ = updates["none"].encode(batch, [[0.0]] * len(batch))
            tokens.append(sum(len(e.input_ids) for e in encoded))
    rows = {p: {"median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts)} for p, ts in times.items()}
    speedup = rows["none"]["median_s"] / rows["bfloat16"]["median_s"]
    gaps = {
        key: abs(first["bfloat16"][key] - first["none"][key])
        for key in ("loss", "kl", "entropy")
        if key in first["none"] and key in first["bfloat16"]
    }
    mean_tokens = statistics.mean(tokens) / args.batch
    print(
        f"self-play update step, {cfg.model} + LoRA r {cfg.lora_r}, cpu, {args.threads} torch thread(s), "
        f"{machine_line()}"
    )
    print(
        f"{args.batch} Solver games a step ({mean_tokens:.0f} tokens each on average), micro-batches of {args.micro}, "
        f"KL {args.kl_coef}; bf16 hardware: {'yes' if native else 'no'}"
    )
    print("| mixed_precision | median | min-max |")
    print("|---|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['median_s']:.2f} s | {r['min_s']:.2f}-{r['max_s']:.2f} s |")
    print(f"bfloat16 / none: {speedup:.2f}x faster")
    print("first step, |bfloat16 - none|: " + ", ".join(f"{k} {v:.2e}" for k, v in gaps.items()))
    print(f"1-min load average before / after: {load_before:.1f} / {os.getloadavg()[0]:.1f} (the machine is shared)")
    out = {
        "benchmark": "update_precision",
        "model": f"{cfg.model} + {cfg.init}, LoRA r {cfg.lora_r}",
        "threads": args.threads,
        "batch": args.batch,
        "micro_batch": args.micro,
        "kl_coef": args.kl_coef,
        "steps": args.steps,
        "warmup": args.warmup,
        "sequences": len(pool),
        "mean_tokens": mean_tokens,
        "bf16_hardware": native,
        "rows": rows,
        "speedup": speedup,
        "first_step": {p: {k: first[p].get(k) for k in ("loss", "kl", "entropy")} for p in PRECISIONS},
        "first_step_abs_gap": gaps,
        "machine": machine_info(),
        "loadavg_1min": {"before": load_before, "after": os.getloadavg()[0]},
    }
    print(f"wrote {write_result(out, args.out, 'update_precision_cpu.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
