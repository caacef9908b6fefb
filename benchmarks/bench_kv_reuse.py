"""Prefix KV reuse across turns: held-out evaluation time with and without it, same answers.

Scores the bundled SmolLM2-135M (as shipped, and with the shipped cold-start adapter) on the same
held-out questions twice in one run: once prefilling every turn's whole context (``prefix_cache_mb=0``)
and once reusing the keys/values of the previous turn and of the shared system prompt (the default).
Reports seconds, the speed-up, the share of prompt tokens whose prefill was skipped and the share of
questions whose prediction is identical (the maths is the same up to float rounding).

    python benchmarks/bench_kv_reuse.py [--hops 1:16,2:16] [--models base,cold]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from machine import machine_info

RESULTS = Path(__file__).parent / "results"


def run_eval(model, tok, world, per_hop: dict, prefix_cache_mb: int, output_dir: Path) -> dict:
    """One held-out evaluation; its seconds, accuracy, per-question predictions and reuse counters."""
    from searchgym.agents.eval_agents import LLMEvalAgent
    from searchgym.core.llm import GenerationConfig
    from searchgym.llm.decoding import DecodingConfig
    from searchgym.llm.transformers_backend import TransformersGenerator
    from searchgym.training.learning_checks import heldout_report

    gen = TransformersGenerator(
        model, tok, seed=0, decoding=DecodingConfig(cache="dynamic", prefix_cache_mb=prefix_cache_mb)
    )
    agent = LLMEvalAgent(gen, f"reuse{prefix_cache_mb}", GenerationConfig(max_new_tokens=48, temperature=0.0))
    t0 = time.perf_counter()
    report = heldout_report(agent, world, per_hop=per_hop, output_dir=output_dir)
    seconds = time.perf_counter() - t0
    preds = {}
    for line in (output_dir / "eval.jsonl").read_text().splitlines():
        rec = json.loads(line)
        preds[rec["question"]] = rec["prediction"]
    stats = gen.prefix_cache.stats if gen.prefix_cache is not None else None
    return {
        "seconds": round(seconds, 1),
        "em": report["solver"]["overall"]["mean"],
        "searches": report["solver"]["searches"],
        "predictions": preds,
        "reuse_rate": round(stats.reuse_rate, 3) if stats else 0.0,
        "prompt_tokens": stats.prompt_tokens if stats else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hops", default="1:16,2:16", help="questions per hop count, e.g. 1:16,2:16")
    ap.add_argument("--models", default="base,cold", help="base (as shipped) and/or cold (shipped cold-start adapter)")
    ap.add_argument("--workdir", default="runs/bench_kv_reuse")
    ap.add_argument("--out", default=str(RESULTS / "kv_reuse.json"))
    args = ap.parse_args()
    import torch

    from searchgym.llm.bundled_model import ensure_smollm2
    from searchgym.llm.pretrained import open_model
    from searchgym.training.cold_start import SHIPPED_ADAPTER
    from searchgym.world.synthetic import default_world

    per_hop = {int(h): int(n) for h, n in (x.split(":") for x in args.hops.split(","))}
    world = default_world()
    paths = {"base": str(ensure_smollm2()), "cold": str(SHIPPED_ADAPTER)}
    results = {"machine": machine_info(), "torch_threads": torch.get_num_threads(), "hops": per_hop, "models": {}}
    for name in args.models.split(","):
        model, tok = open_model(paths[name])
        runs = {}
        for label, mb in (("full_prefill", 0), ("prefix_reuse", 1024)):
            output_dir = Path(args.workdir) / f"{name}_{label}"
            if output_dir.exists():
                import shutil

                shutil.rmtree(output_dir)
            runs[label] = run_eval(model, tok, world, per_hop, mb, output_dir)
            print(
                f"{name:5s} {label:13s} {runs[label]['seconds']:7.1f} s  EM {runs[label]['em']:.3f}  "
                f"reuse {runs[label]['reuse_rate']:.2f}",
                flush=True,
            )
        a, b = runs["full_prefill"]["predictions"], runs["prefix_reuse"]["predictions"]
        same = sum(a[k] == b.get(k) for k in a) / len(a) if a else float("nan")
        results["models"][name] = {
            **{k: {x: v for x, v in r.items() if x != "predictions"} for k, r in runs.items()},
            "speedup": round(runs["full_prefill"]["seconds"] / runs["prefix_reuse"]["seconds"], 2),
            "same_predictions": round(same, 3),
            "questions": len(a),
        }
        print(f"{name}: speed-up {results['models'][name]['speedup']}x, same predictions {same:.3f} of {len(a)}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
