"""Rollouts of a LoRA policy in the static rollout engine: adapters folded into the base weights (``fold_lora``, the
default) against LoRA layers called as modules (``fold_lora=False``, the engine before), in the same run.

The policy is the one the ``kg-wcr`` recipe's ``cpu`` size trains: the shipped cold start merged, a rank-16 LoRA
adapter on q/k/v/o (its B matrices drawn from a seed, as a trained adapter's are non-zero; speed does not depend on
the values). The prompts are ``KGSolver-v0``'s on the default world, as the trainer's agent encodes them; each call
samples ``--rows`` rollouts of one turn at temperature 1 (seeded), as a training step's Solver turn does. Calls
alternate between the two engines, the first of each untimed; reported: new tokens per second and the share of the
greedy (temperature 0) tokens the two agree on (other float rounding, the same function).

    .venv/bin/python benchmarks/bench_lora_fold.py                      # SmolLM2-135M, one torch thread

Prints a markdown table and writes benchmarks/results/lora_fold_cpu.json.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import machine_info, machine_line, write_result  # noqa: E402


def lora_policy(seed: int):
    """``(model, tokenizer, config)``: the kg-wcr cpu recipe's policy (the shipped cold start, LoRA r 16), its
    adapter's B matrices drawn from ``seed``."""
    import torch

    from searchgym.training.recipes import recipe_config
    from searchgym.training.selfplay_update import build_policy_update

    cfg = recipe_config("kg-wcr", "cpu", device="cpu", output_dir=tempfile.mkdtemp(), progress=False)
    update = build_policy_update(cfg, None, None, device="cpu", rng=random.Random(seed))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in update.policy.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 1e-3)
    return update.policy.eval(), update.tokenizer, cfg


def solver_prompts(tokenizer, n: int) -> list:
    """``n`` first-turn prompts of ``KGSolver-v0`` (default world, one question each), as token ids."""
    import gymnasium as gym

    import searchgym  # noqa: F401
    from searchgym.llm.sequences import encode_trajectory

    env = gym.make("KGSolver-v0")
    out = []
    for k in range(n):
        _, info = env.reset(seed=k)
        out.append(encode_trajectory(tokenizer, info["trajectory"], for_generation=True).input_ids)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=16, help="rollouts a call (a cpu-size step's Solver rows: 16)")
    ap.add_argument("--new-tokens", type=int, default=96, help="most new tokens a row (the cpu size's turn: 96)")
    ap.add_argument("--calls", type=int, default=4, help="timed calls per engine and dtype")
    ap.add_argument("--dtypes", default="bfloat16,float32", help="rollout dtypes to time")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="results JSON (default benchmarks/results/lora_fold_cpu.json)")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from searchgym.core.llm import GenerationConfig
    from searchgym.llm.rollout_engine import EngineConfig
    from searchgym.llm.transformers_backend import TransformersGenerator

    model, tok, cfg = lora_policy(args.seed)
    prompts = solver_prompts(tok, args.rows)
    rows = []
    for dtype in args.dtypes.split(","):
        gens = {
            fold: TransformersGenerator(
                model, tok, engine="static", engine_config=EngineConfig(dtype=dtype, fold_lora=fold, prefix_cache_mb=0)
            )
            for fold in (True, False)
        }
        greedy = GenerationConfig(max_new_tokens=args.new_tokens, temperature=0.0)
        ids = {fold: g.generate_with_stats(prompts, greedy).token_ids for fold, g in gens.items()}  # also the warm-up
        same = sum(a == b for x, y in zip(ids[True], ids[False]) for a, b in zip(x, y))
        total = sum(min(len(x), len(y)) for x, y in zip(ids[True], ids[False]))
        rates: dict = {True: [], False: []}
        for k in range(args.calls):
            for fold in (True, False) if k % 2 == 0 else (False, True):
                sample = GenerationConfig(max_new_tokens=args.new_tokens, temperature=1.0, seed=args.seed * 1000 + k)
                t0 = time.perf_counter()
                res = gens[fold].generate_with_stats(prompts, sample)
                rates[fold].append(res.new_tokens / (time.perf_counter() - t0))
        row = {
            "rollout_dtype": dtype,
            "folded_tokens_per_s": round(statistics.median(rates[True]), 1),
            "modules_tokens_per_s": round(statistics.median(rates[False]), 1),
            "speedup": round(statistics.median(rates[True]) / statistics.median(rates[False]), 2),
            "greedy_tokens_agreeing": round(same / max(1, total), 3),
            "calls": {"folded": [round(r, 1) for r in rates[True]], "modules": [round(r, 1) for r in rates[False]]},
        }
        rows.append(row)
        print(
            f"{dtype}: folded {row['folded_tokens_per_s']} tok/s, modules {row['modules_tokens_per_s']} tok/s "
            f"({row['speedup']}x); greedy tokens agreeing {row['greedy_tokens_agreeing']}",
            flush=True,
        )
    result = {
        "benchmark": "lora_fold",
        "machine": machine_info(),
        "torch_threads": torch.get_num_threads(),
        "model": f"{cfg.model} + {cfg.init} merged, LoRA r {cfg.lora_r} on {', '.join(cfg.lora_target_modules)}",
        "rows": args.rows,
        "new_tokens": args.new_tokens,
        "results": rows,
    }
    print(f"\n{machine_line()}, {torch.get_num_threads()} thread(s); {args.rows} rows x {args.new_tokens} new tokens\n")
    print("| rollout dtype | folded tok/s | as modules tok/s | speed-up | greedy tokens agreeing |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['rollout_dtype']} | {r['folded_tokens_per_s']} | {r['modules_tokens_per_s']} | {r['speedup']}x | "
            f"{r['greedy_tokens_agreeing']} |"
        )
    print(f"wrote {write_result(result, args.out, 'lora_fold_cpu.json')}")


if __name__ == "__main__":
    main()
