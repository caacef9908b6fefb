"""``searchgym eval`` throughput (issue 11 targets), measured in one run.

- ``scripted``: the path-following scripted Solver on the whole built-in benchmark of the default
  world (BM25, up to 10 turns): questions/s including retrieval, env and scoring;
- ``endpoint``: an OpenAI-compatible agent against searchgym's OpenAI-compatible server on loopback
  (``scripted_endpoint.py``: a scripted model behind the real server) that answers every request
  after 200 ms (two requests per question: one search, one answer), at
  ``--concurrency 1`` (baseline) and ``--concurrency 16`` (target: >= 10x the baseline's questions/s).

Prints a markdown table and writes ``benchmarks/results/eval.json``.

    .venv/bin/python benchmarks/bench_eval.py [--delay 0.2] [--n1 12] [--n16 160]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from searchgym.agents import AgentSpec, make_agent  # noqa: E402
from searchgym.evaluation import EvalConfig, evaluate  # noqa: E402
from searchgym.tasks import load_tasksets  # noqa: E402
from searchgym.tasks.tasksets import TaskSet  # noqa: E402
from searchgym.world.synthetic import default_world  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine_info, machine_line  # noqa: E402
from scripted_endpoint import scripted_endpoint  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "eval.json"


def endpoint_reply(messages) -> str:
    """A stand-in 'model': search the question once, then answer."""
    question = messages[0]["content"].rsplit("Question:", 1)[1].strip()
    if len(messages) == 1:
        return f"<think>Let me search.</think>\n<search>{question}</search>"
    return "<think>I read the documents.</think>\n<answer>unknown</answer>"


def bench_scripted(world, tasks: TaskSet) -> dict:
    agent = make_agent(AgentSpec("scripted"), world=world)
    evaluate(agent, [TaskSet(tasks.name, tasks.tasks[:8])], world=world, config=EvalConfig(progress=False))  # warm-up
    t0 = time.perf_counter()
    res = evaluate(agent, [tasks], world=world, config=EvalConfig(progress=False))
    dt = time.perf_counter() - t0
    d = res.summary["datasets"][tasks.name]
    return {
        "n": d["n"],
        "seconds": dt,
        "questions_per_s": d["n"] / dt,
        "em": d["em"]["mean"],
        "by_hops_em": {k: v["em"]["mean"] for k, v in d.get("by_hops", {}).items()},
    }


def bench_endpoint(world, tasks: TaskSet, delay: float, concurrency: int, n: int) -> dict:
    with scripted_endpoint(endpoint_reply, delay=delay, concurrency=max(16, concurrency)) as srv:
        agent = make_agent(AgentSpec("openai", endpoint=srv.url, concurrency=concurrency, timeout=30))
        sub = TaskSet(tasks.name, tasks.tasks[:n])
        t0 = time.perf_counter()
        res = evaluate(agent, [sub], world=world, config=EvalConfig(concurrency=concurrency, progress=False))
        dt = time.perf_counter() - t0
        agent.close()
        requests = srv.requests
    n_done = res.summary["datasets"][tasks.name]["n"]
    return {
        "concurrency": concurrency,
        "n": n_done,
        "requests": requests,
        "seconds": dt,
        "questions_per_s": n_done / dt,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", type=float, default=0.2, help="seconds the loopback endpoint takes per request")
    ap.add_argument("--n1", type=int, default=12, help="questions at concurrency 1")
    ap.add_argument("--n16", type=int, default=160, help="questions at concurrency 16")
    ap.add_argument("--tasks", default="builtin", help="task set (default: the built-in benchmark)")
    ap.add_argument("--out", default=str(RESULTS), help=f"result JSON (default {RESULTS})")
    args = ap.parse_args()

    world = default_world()
    (builtin,) = load_tasksets(args.tasks, world=world)
    scripted = bench_scripted(world, builtin)
    c1 = bench_endpoint(world, builtin, args.delay, 1, args.n1)
    c16 = bench_endpoint(world, builtin, args.delay, 16, args.n16)
    speedup = c16["questions_per_s"] / c1["questions_per_s"]
    machine = f"{machine_line()} (shared with other jobs running concurrently; timings are noisy)"
    print(f"Machine: {machine}\n")
    print("| workload | questions | time | questions/s | vs baseline/target |")
    print("|---|---:|---:|---:|---|")
    print(
        f"| scripted Solver, {args.tasks} | {scripted['n']} | {scripted['seconds']:.2f} s | "
        f"{scripted['questions_per_s']:.1f} | EM {100 * scripted['em']:.1f} % |"
    )
    for r, note in ((c1, "baseline"), (c16, f"{speedup:.1f}x (target >= 10x)")):
        print(
            f"| endpoint {args.delay * 1000:.0f} ms/request, concurrency {r['concurrency']} | {r['n']} | "
            f"{r['seconds']:.2f} s | {r['questions_per_s']:.2f} | {note} |"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "machine": machine_info(),
                "note": machine,
                "scripted": scripted,
                "endpoint": {"delay_s": args.delay, "concurrency_1": c1, "concurrency_16": c16, "speedup": speedup},
                "targets": {"endpoint_speedup": 10},
            },
            indent=2,
        )
    )
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
