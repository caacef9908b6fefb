"""SFT throughput: tokens/s of ``searchgym sft`` steps, full fine-tuning vs LoRA, in the same run.

Data: Solver demonstrations made by the scripted path-following Solver on ``KGSolver-v0`` (default
world, real BM25 searches and ``<information>``), cut to ``--tokens`` tokens (default 300). Each mode
runs ``--steps`` optimizer steps of ``--batch`` sequences (micro-batch = batch) through
:class:`searchgym.training.sft_trainer.SFTRun`; the first step is a warm-up and is not timed. tokens/s counts
every token of the sequences (forward + backward); agent tokens/s only the tokens that carry loss.

    .venv/bin/python benchmarks/bench_sft.py                    # SmolLM2-135M on CPU
    .venv/bin/python benchmarks/bench_sft.py --model tiny --steps 3

Prints a markdown table and writes benchmarks/results/sft.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import machine_info, machine_line  # noqa: E402


def demonstrations(path: Path, n: int) -> Path:
    """``n`` scripted Solver games on the default world, exported as trajectory JSONL."""
    import gymnasium as gym

    import searchgym.envs  # noqa: F401
    from searchgym.agents.scripted import PathFollowingSolver
    from searchgym.evaluation.games import play_games

    env = gym.make("KGSolver-v0", max_turns=4)
    play_games(env, PathFollowingSolver(), n, export_path=path, seed=0)
    return path


def measure(
    model_name: str, data: Path, *, lora: bool, steps: int, batch: int, tokens: int, threads: int, device: str
) -> dict:
    """Median tokens/s over ``steps - 1`` timed steps of one mode."""
    from searchgym.training.sft_data import load_demonstrations
    from searchgym.training.sft_trainer import SFTConfig, SFTRun

    cfg = SFTConfig(
        model=model_name,
        data=[str(data)],
        lora=lora,
        batch_size=batch,
        micro_batch_size=batch,
        max_tokens=tokens,
        device=device,
        threads=threads,
        lr=1e-5,
        val_fraction=0.0,
        output_dir=tempfile.mkdtemp(prefix="bench_sft_"),
        progress=False,
    )
    train, _ = load_demonstrations(cfg.data)
    run = SFTRun(cfg, train, [])
    recs = [run.train_step() for _ in range(steps)]
    timed = recs[1:] or recs
    seq = statistics.mean(r["sft/tokens"] / batch for r in timed)
    tps = statistics.median(r["sft/tokens_per_s"] for r in timed)
    agent = statistics.median(r["sft/agent_tokens"] / r["sft/tokens"] * r["sft/tokens_per_s"] for r in timed)
    trainable = sum(p.numel() for p in run.policy.parameters() if p.requires_grad)
    return {
        "mode": "LoRA" if lora else "full",
        "tokens_per_s": tps,
        "agent_tokens_per_s": agent,
        "step_s": batch * seq / tps,
        "mean_seq_tokens": seq,
        "trainable_params": trainable,
    }


def main(argv=None) -> int:
    """Run both modes and print/write the results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2", help="'smollm2', 'tiny' (random 4-layer Llama) or a model folder")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sft.json"))
    args = ap.parse_args(argv)
    model = args.model
    if model == "tiny":
        from searchgym.llm.tiny_models import tiny_policy

        policy, tok = tiny_policy("tiny", seed=0)  # a random 4-layer, 256-wide Llama
        model = str(Path(tempfile.mkdtemp()) / "tiny")
        policy.save_pretrained(model)
        tok.save_pretrained(model)
    data = demonstrations(Path(tempfile.mkdtemp()) / "demos.jsonl", 16)
    load_before = os.getloadavg()[0]
    rows = [
        measure(
            model,
            data,
            lora=lora,
            steps=args.steps,
            batch=args.batch,
            tokens=args.tokens,
            threads=args.threads,
            device=args.device,
        )
        for lora in (False, True)
    ]
    print(f"SFT throughput, {args.model}, {args.device}, {args.threads} torch threads, {machine_line()}")
    print("| mode | trainable params | seq tokens | tokens/s | agent tokens/s | step (batch %d) |" % args.batch)
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['mode']} | {r['trainable_params']:,} | {r['mean_seq_tokens']:.0f} | {r['tokens_per_s']:.0f} | "
            f"{r['agent_tokens_per_s']:.0f} | {r['step_s']:.1f} s |"
        )
    print(f"1-min load average before / after: {load_before:.1f} / {os.getloadavg()[0]:.1f} (the machine is shared)")
    print(f"LoRA / full: {rows[1]['tokens_per_s'] / rows[0]['tokens_per_s']:.2f}x")
    out = {
        "model": args.model,
        "device": args.device,
        "threads": args.threads,
        "batch": args.batch,
        "max_tokens": args.tokens,
        "steps": args.steps,
        "machine": machine_info(),
        "rows": rows,
        "loadavg_1min": {"before": load_before, "after": os.getloadavg()[0]},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
