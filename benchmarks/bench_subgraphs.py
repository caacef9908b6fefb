"""Subgraph extraction throughput (issue 3 targets), measured in one run.

- ``heuristic``: :func:`build_pool` with the default :class:`HeuristicSelector` on the default
  synthetic world — subgraphs/s for a 5k pool (target >= 1,000/s; also with ``plan_retries=0``, the
  same run's baseline without re-drawing paths short of the selector's plan), and the wall time of a 50k
  pool written to JSONL (the paper needed ~5 h for 50k with an LLM selector and 10 threads);
- ``llm``: :class:`LLMSelector` through :class:`OpenAICompatibleGenerator` against searchgym's
  OpenAI-compatible server on loopback (``scripted_endpoint.py``: a scripted model behind the real
  server) that answers every request after 200 ms; throughput at
  ``workers=1`` (baseline) and ``workers=10`` (target: >= 8x the baseline).

Prints a markdown table and writes ``benchmarks/results/subgraphs.json``.

    .venv/bin/python benchmarks/bench_subgraphs.py [--n-heuristic 5000] [--n-large 50000] [--delay 0.2]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from searchgym.construction import ExtractionConfig, LLMSelector, build_pool, pool_stats  # noqa: E402
from searchgym.llm.openai_client import OpenAICompatibleGenerator  # noqa: E402
from searchgym.world.synthetic import default_world  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_model  # noqa: E402
from scripted_endpoint import scripted_endpoint  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "subgraphs.json"


def selector_reply(messages) -> str:
    """A deterministic stand-in 'model': first entity candidate, stop after 4 hops."""
    prompt = messages[-1]["content"]
    path = prompt.split("Path so far:\n", 1)[1].split("\n\nCurrent node:", 1)[0]
    if not path.startswith("(empty") and len(path.splitlines()) >= 4:
        return '{"answer": 0}'
    block = prompt.split("Candidate edges:\n", 1)[1].split("\n\n", 1)[0]
    cands = re.findall(r"^\d+\. (.*)$", block, flags=re.M)
    pick = next((i for i, c in enumerate(cands, 1) if not re.search(r"-> [\d.,-]+$", c)), 1)
    return json.dumps({"answer": pick})


def bench_heuristic(world, n: int, n_large: int) -> dict:
    build_pool(world, 10, progress=False)  # builds the per-world extraction index once
    t0 = time.perf_counter()
    res = build_pool(world, n, progress=False)
    dt = time.perf_counter() - t0
    no_plan = ExtractionConfig(plan_retries=0)
    build_pool(world, 10, config=no_plan, progress=False)
    t0 = time.perf_counter()
    build_pool(world, n, config=no_plan, progress=False)
    dt_no_plan = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        big = build_pool(world, n_large, out=Path(d) / "pool.jsonl", progress=False)
        dt_large = time.perf_counter() - t0
        size = (Path(d) / "pool.jsonl").stat().st_size
    st = pool_stats(big.subgraphs)
    st_small = pool_stats(res.subgraphs)
    return {
        "n": n,
        "seconds": dt,
        "subgraphs_per_s": n / dt,
        "seeds_tried": res.attempted,
        "subgraphs_per_s_no_plan_retries": n / dt_no_plan,
        "plan": st_small["plan"],
        "n_large": n_large,
        "seconds_large": dt_large,
        "subgraphs_per_s_large": n_large / dt_large,
        "jsonl_bytes_large": size,
        "rejections_large": dict(big.rejections),
        "path_length_hist": st["path_length"]["histogram"],
        "mean_hops": st["path_length"]["mean"],
        "mean_nodes": st["node_count"]["mean"],
    }


def bench_llm(world, delay: float, n1: int, n10: int) -> dict:
    out = {}
    with scripted_endpoint(selector_reply, delay=delay, concurrency=16) as server:
        for workers, n in ((1, n1), (10, n10)):
            gen = OpenAICompatibleGenerator(server.url, "scripted", timeout=30, max_retries=0, concurrency=workers)
            sel = LLMSelector(gen)
            before = server.requests
            t0 = time.perf_counter()
            res = build_pool(world, n, selector=sel, concurrency=workers, progress=False, seed=1)
            dt = time.perf_counter() - t0
            gen.close()
            calls = server.requests - before
            out[workers] = {
                "n": n,
                "seconds": dt,
                "subgraphs_per_s": n / dt,
                "calls": calls,
                "calls_per_s": calls / dt,
                "seeds_tried": res.attempted,
                "failures": sel.failures,
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-heuristic", type=int, default=5000)
    ap.add_argument("--n-large", type=int, default=50000)
    ap.add_argument("--delay", type=float, default=0.2, help="seconds the loopback endpoint takes per request")
    ap.add_argument(
        "--n-llm-1", type=int, default=50, help="subgraphs for the 1-worker baseline (same seeds as 10 workers)"
    )
    ap.add_argument("--n-llm-10", type=int, default=50)
    ap.add_argument("--out", default=str(RESULTS), help=f"result JSON (default {RESULTS})")
    args = ap.parse_args()

    t0 = time.perf_counter()
    world = default_world()
    world_s = time.perf_counter() - t0
    h = bench_heuristic(world, args.n_heuristic, args.n_large)
    llm = bench_llm(world, args.delay, args.n_llm_1, args.n_llm_10)
    speedup = llm[10]["subgraphs_per_s"] / llm[1]["subgraphs_per_s"]
    call_speedup = llm[10]["calls_per_s"] / llm[1]["calls_per_s"]
    paper_50k_s = 5 * 3600.0

    machine = f"{cpu_model()}, 2 cores (shared with other jobs running concurrently; timings are noisy)"
    rows = [
        (
            "heuristic, default world",
            f"{h['n']} subgraphs",
            f"{h['seconds']:.2f} s",
            f"{h['subgraphs_per_s']:,.0f} subgraphs/s",
            f"{h['subgraphs_per_s'] / 1000:.1f}x the 1,000/s target",
        ),
        (
            "heuristic, plan_retries=0 (no re-drawn paths)",
            f"{h['n']} subgraphs",
            "",
            f"{h['subgraphs_per_s_no_plan_retries']:,.0f} subgraphs/s",
            f"plan re-draws cost {h['subgraphs_per_s_no_plan_retries'] / h['subgraphs_per_s']:.2f}x",
        ),
        (
            "heuristic, 50k pool to JSONL",
            f"{h['n_large']} subgraphs",
            f"{h['seconds_large']:.1f} s",
            f"{h['subgraphs_per_s_large']:,.0f} subgraphs/s",
            f"{paper_50k_s / h['seconds_large']:,.0f}x faster than the paper's ~5 h (LLM selector)",
        ),
        (
            f"LLM selector, {args.delay * 1000:.0f} ms endpoint, 1 worker",
            f"{llm[1]['n']} subgraphs",
            f"{llm[1]['seconds']:.2f} s",
            f"{llm[1]['subgraphs_per_s']:.2f} subgraphs/s ({llm[1]['calls_per_s']:.1f} calls/s)",
            "baseline",
        ),
        (
            f"LLM selector, {args.delay * 1000:.0f} ms endpoint, 10 workers",
            f"{llm[10]['n']} subgraphs",
            f"{llm[10]['seconds']:.2f} s",
            f"{llm[10]['subgraphs_per_s']:.2f} subgraphs/s ({llm[10]['calls_per_s']:.1f} calls/s)",
            f"{speedup:.1f}x subgraphs/s, {call_speedup:.1f}x calls/s (target >= 8x)",
        ),
    ]
    print(f"Machine: {machine}. Default world: {world!r} (built in {world_s:.1f} s).\n")
    print("| workload | size | time | throughput | vs baseline/target |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(
        f"\n50k pool: mean {h['mean_hops']:.2f} hops, {h['mean_nodes']:.2f} nodes; path lengths "
        f"{h['path_length_hist']}; rejections {h['rejections_large']}; {h['jsonl_bytes_large'] / 1e6:.1f} MB JSONL"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "machine": machine,
                "python": platform.python_version(),
                "world": repr(world),
                "world_build_s": world_s,
                "heuristic": h,
                "llm": {
                    "delay_s": args.delay,
                    "workers_1": llm[1],
                    "workers_10": llm[10],
                    "speedup_subgraphs": speedup,
                    "speedup_calls": call_speedup,
                },
                "targets": {"heuristic_per_s": 1000, "llm_speedup": 8, "paper_50k_llm_s": paper_50k_s},
            },
            indent=2,
            default=str,
        )
    )
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
