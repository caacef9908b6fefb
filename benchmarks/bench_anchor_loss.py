"""The self-play update's anchor loss (``anchor_coef``): its step time with the demonstrations' shared instructions
run once (``share_prompt``, the default) against the plain forward, in the same run, on the same draws.

Demonstrations: the shipped cold start's own recipe of Solver demonstrations (``searchgym demos``, default world,
``--solver`` hop counts below, default seed), encoded as the trainer encodes them. Two updates are built as the
``kg-wcr`` recipe's ``cpu`` size builds them (the shipped cold start merged, a LoRA adapter of r 16, micro-batches
of 2), one with ``share_prompt`` on and one off; step ``k`` of each draws the same ``anchor_batch_size``
demonstrations (the draw is a function of the seed, the role and ``k``), runs forward and backward, and drops the
gradient (no optimizer step, so both score the same weights and their NLLs must agree).
Steps alternate between the two, the first ``--warmup`` of each untimed.

    .venv/bin/python benchmarks/bench_anchor_loss.py                    # SmolLM2-135M, one torch thread

Prints a markdown table and writes benchmarks/results/anchor_loss_cpu.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import machine_info, machine_line, write_result  # noqa: E402
from update_inputs import cpu_size_update, solver_demos_file  # noqa: E402

SOLVER_DEMOS = {1: 200, 2: 160, 3: 60}  # the cold start's first-stage Solver demonstrations (cold_start.RECIPE_DEMOS)


def build_update(data: Path, share: bool, batch: int, micro: int):
    """A :class:`~searchgym.training.selfplay_update.PolicyUpdate` of the ``kg-wcr`` recipe's ``cpu`` size (the shipped
    cold start, LoRA) with the anchor on, ``share_prompt`` as given."""
    return cpu_size_update(
        micro_batch_size=micro, share_prompt=share, anchor_coef=1.0, anchor_batch_size=batch, anchor_data=str(data)
    )


def anchor_step(update, k: int) -> tuple[float, float]:
    """Seconds and the anchor NLL of step ``k`` of ``update``'s anchor loss (forward and backward), grads dropped."""
    from searchgym.training.selfplay_update import _Mean, _Pass

    run = _Pass([], [], None, [], "token", 0.0, _Mean(), anchor=update.anchor["solver"], anchor_key="solver")
    run.optimizer_steps = k
    t0 = time.perf_counter()
    update._anchor_loss(run)
    dt = time.perf_counter() - t0
    update.optimizer.zero_grad(set_to_none=True)
    return dt, run.stats.means()["anchor_nll"]


def main(argv=None) -> int:
    """Time both paths step by step and print/write the results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12, help="timed steps of each path")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps of each path first")
    ap.add_argument("--batch", type=int, default=4, help="anchor_batch_size (the anchored runs' 4)")
    ap.add_argument("--micro", type=int, default=2, help="micro_batch_size (the cpu size's 2)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (one: the learning runs' setting)")
    ap.add_argument("--out", help="the result JSON (default benchmarks/results/anchor_loss_cpu.json)")
    args = ap.parse_args(argv)
    import torch

    from searchgym.training.demo_scoring import shared_prefix_len

    torch.set_num_threads(args.threads)
    data = solver_demos_file(SOLVER_DEMOS)
    updates = {share: build_update(data, share, args.batch, args.micro) for share in (False, True)}
    demos = updates[True].anchor["solver"]
    cfg = updates[True].config
    load_before = os.getloadavg()[0]
    times: dict[bool, list[float]] = {False: [], True: []}
    worst_gap = 0.0
    for k in range(args.warmup + args.steps):
        nll = {}
        for share in (False, True):
            dt, nll[share] = anchor_step(updates[share], k)
            if k >= args.warmup:
                times[share].append(dt)
        worst_gap = max(worst_gap, abs(nll[True] - nll[False]) / abs(nll[False]))
    pairs = [demos[i : i + args.micro] for i in range(0, min(len(demos), 64), args.micro)]
    shared = [shared_prefix_len(p) for p in pairs]
    rows = {
        ("shared" if share else "plain"): {
            "median_s": statistics.median(ts),
            "min_s": min(ts),
            "max_s": max(ts),
        }
        for share, ts in times.items()
    }
    speedup = rows["plain"]["median_s"] / rows["shared"]["median_s"]
    mean_tokens = statistics.mean(len(e.input_ids) for e in demos)
    print(f"anchor loss step, {cfg.model} + LoRA r {cfg.lora_r}, cpu, {args.threads} torch thread(s), {machine_line()}")
    print(
        f"{len(demos)} Solver demonstrations, {mean_tokens:.0f} tokens each on average; {args.batch} a step, "
        f"micro-batches of {args.micro}"
    )
    print("| path | median | min-max |")
    print("|---|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['median_s']:.2f} s | {r['min_s']:.2f}-{r['max_s']:.2f} s |")
    print(f"shared / plain: {speedup:.2f}x faster; shared prefix {statistics.mean(shared):.0f} tokens a micro-batch")
    print(f"anchor NLL, largest relative gap between the paths: {worst_gap:.1e}")
    print(f"1-min load average before / after: {load_before:.1f} / {os.getloadavg()[0]:.1f} (the machine is shared)")
    out = {
        "benchmark": "anchor_loss",
        "model": f"{cfg.model} + {cfg.init}, LoRA r {cfg.lora_r}",
        "threads": args.threads,
        "batch": args.batch,
        "micro_batch": args.micro,
        "steps": args.steps,
        "warmup": args.warmup,
        "demonstrations": len(demos),
        "mean_tokens": mean_tokens,
        "mean_shared_prefix_tokens": statistics.mean(shared),
        "rows": rows,
        "speedup": speedup,
        "nll_max_relative_gap": worst_gap,
        "machine": machine_info(),
        "loadavg_1min": {"before": load_before, "after": os.getloadavg()[0]},
    }
    print(f"wrote {write_result(out, args.out, 'anchor_loss_cpu.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
