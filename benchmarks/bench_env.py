"""Environment overhead benchmark: what one ``env.step`` costs besides the policy.

What is timed: ``KGSolver-v0.step(action)`` with pre-recorded actions, i.e. parsing, retrieval
(BM25 top-3), formatting the ``<information>`` block, trajectory bookkeeping and — on the final
step — judging. The actions are recorded beforehand from the scripted path-following solver (one
search per hop, then an answer) mixed with malformed turns, so no policy time is included.

* default world: BM25 over the embedded synthetic world (target p50 < 2 ms);
* 1M documents: the world's documents plus seeded documents recombined from the world's own
  sentences (real vocabulary, so every searched word has a long posting list) to 1,000,000
  documents, indexed with BM25 under ``flock /tmp/searchgym-heavy.lock`` (target p50 < 15 ms);
* baseline, same run: the raw ``retriever.search(query, 3)`` latency for the same queries, so the
  ratio shows what the env adds on top of retrieval;
* ``KGSelfPlay-v0`` full games per second driven by ``ScriptedSelfPlayAgent`` (agent time included).

Usage: ``.venv/bin/python benchmarks/bench_env.py [--docs 1000000] [--episodes 60] [--games 30]``
Prints a markdown table and writes ``benchmarks/results/bench_env.json``.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))

import gymnasium as gym  # noqa: E402

import searchgym  # noqa: E402,F401
from searchgym.agents.scripted import MalformedAgent, PathFollowingSolver, ScriptedSelfPlayAgent  # noqa: E402
from searchgym.envs.solver import KGSolverEnv  # noqa: E402
from searchgym.world.synthetic import default_world  # noqa: E402

LOCK = "/tmp/searchgym-heavy.lock"


from machine import cpu_model


@contextmanager
def heavy_lock():
    """Hold the machine-wide lock for memory/CPU-heavy work (one heavy job at a time)."""
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def pct(xs: list[float], q: float) -> float:
    """The q-quantile (0..1) of xs, nearest rank."""
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def record_actions(env: KGSolverEnv, episodes: int) -> list[list[str]]:
    """Action sequences per seed: the path-following solver, with a malformed turn every third
    episode (so invalid-action handling is part of the mix)."""
    pf, bad = PathFollowingSolver(), MalformedAgent(size=20_000)
    out = []
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        acts, done, i = [], False, 0
        while not done:
            agent = bad if (seed % 3 == 2 and i == 0) else pf
            a = agent.act(obs, info)
            acts.append(a)
            obs, r, term, trunc, info = env.step(a)
            done, i = term or trunc, i + 1
        out.append(acts)
    return out


def time_steps(env: KGSolverEnv, actions: list[list[str]], repeat: int = 3) -> dict:
    """Per-step latency (ms) of env.step over the recorded actions; search steps reported apart."""
    all_ms, search_ms, queries = [], [], []
    for _ in range(repeat):
        for seed, acts in enumerate(actions):
            env.reset(seed=seed)
            for a in acts:
                t0 = time.perf_counter()
                obs, r, term, trunc, info = env.step(a)
                dt = (time.perf_counter() - t0) * 1e3
                all_ms.append(dt)
                if info["turn"].searches:
                    search_ms.append(dt)
                    queries.extend(s.query for s in info["turn"].searches)
                if term or trunc:
                    break
    return {"all": all_ms, "search": search_ms, "queries": queries}


def time_raw_search(retriever, queries: list[str]) -> list[float]:
    """Baseline: retriever.search(query, 3) alone, per query (ms)."""
    out = []
    for q in queries:
        t0 = time.perf_counter()
        retriever.search(q, 3)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def summarize(name: str, t: dict, raw: list[float], n_docs: int) -> dict:
    """Row of the results table."""
    row = {
        "setting": name,
        "documents": n_docs,
        "steps": len(t["all"]),
        "step_p50_ms": statistics.median(t["all"]),
        "step_p90_ms": pct(t["all"], 0.9),
        "step_p99_ms": pct(t["all"], 0.99),
        "search_step_p50_ms": statistics.median(t["search"]),
        "search_step_p99_ms": pct(t["search"], 0.99),
        "raw_search_p50_ms": statistics.median(raw),
    }
    row["search_step_over_raw_search_p50"] = row["search_step_p50_ms"] / row["raw_search_p50_ms"]
    return row


def recombined_corpus(world, n_extra: int, seed: int = 0) -> tuple[list[str], list[str], list[str]]:
    """``n_extra`` documents of 5-12 sentences drawn from the world's own articles (seeded).

    The vocabulary is the world's real English and names, so the words the scripted agent searches
    for ("born", "capital", entity names) have posting lists hundreds of times longer than in the
    world itself: a harder, more realistic 1M-document case than a random-word corpus.
    """
    import re

    import numpy as np

    rng = np.random.default_rng(seed)
    sentences = [s for text in world.doc_texts for s in re.split(r"(?<=[.!?])\s+", text) if s]
    titles_src = list(world.doc_titles)
    lengths = rng.integers(5, 13, n_extra)
    picks = rng.integers(0, len(sentences), int(lengths.sum()))
    ptr = np.concatenate([[0], np.cumsum(lengths)])
    texts = [" ".join(sentences[j] for j in picks[ptr[i] : ptr[i + 1]]) for i in range(n_extra)]
    tsel = rng.integers(0, len(titles_src), n_extra)
    titles = [f"{titles_src[t]} ({i})" for i, t in enumerate(tsel)]
    ids = [f"x{i}" for i in range(n_extra)]
    return ids, titles, texts


def big_retriever(world, n_docs: int):
    """BM25 over the world's documents plus recombined documents up to ``n_docs`` (call under the heavy lock)."""
    from searchgym.retrieval.bm25 import BM25Retriever

    ids, titles, texts = recombined_corpus(world, n_docs - world.num_documents)
    ids = list(world.doc_ids) + ids
    titles = list(world.doc_titles) + titles
    texts = list(world.doc_texts) + texts
    t0 = time.perf_counter()
    r = BM25Retriever(ids, titles, texts)
    return r, time.perf_counter() - t0


def bench_selfplay(games: int) -> dict:
    """Full KGSelfPlay-v0 games with the scripted agent; games/s (agent time included)."""
    env = gym.make("KGSelfPlay-v0")
    agent = ScriptedSelfPlayAgent(seed=0)
    env.reset(seed=0)
    steps, step_time, valid = 0, 0.0, 0
    t0 = time.perf_counter()
    for g in range(games):
        obs, info = env.reset(seed=g)
        done = False
        while not done:
            a = agent.act(obs, info)
            s0 = time.perf_counter()
            obs, r, term, trunc, info = env.step(a)
            step_time += time.perf_counter() - s0
            steps += 1
            done = term or trunc
        valid += bool(info["validation"]["valid"])
    dt = time.perf_counter() - t0
    return {
        "games": games,
        "seconds": dt,
        "games_per_s": games / dt,
        "steps": steps,
        "env_share_of_time": step_time / dt,
        "valid_questions": valid,
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1_000_000, help="size of the large corpus (0 skips it)")
    ap.add_argument("--episodes", type=int, default=60)
    ap.add_argument("--games", type=int, default=30)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_env.json"))
    args = ap.parse_args(argv)

    world = default_world()
    env = KGSolverEnv(world)
    actions = record_actions(env, args.episodes)
    rows = []
    t = time_steps(env, actions)
    rows.append(summarize("default world, BM25", t, time_raw_search(env.retriever, t["queries"]), world.num_documents))
    build_s = None
    if args.docs:
        with heavy_lock():
            big, build_s = big_retriever(world, args.docs)
            env_big = KGSolverEnv(world, env.tasks, retriever=big)
            t = time_steps(env_big, actions, repeat=1)
            rows.append(summarize(f"{args.docs:,} documents, BM25", t, time_raw_search(big, t["queries"]), args.docs))
            del env_big, big
    sp = bench_selfplay(args.games)

    machine = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "note": "shared 2-core machine; other jobs ran concurrently, timings are noisy",
    }
    print(f"Machine: {machine['cpu']}, {machine['cores']} cores ({machine['note']})\n")
    print(
        "| setting | steps | step p50 (ms) | step p90 | step p99 | search-step p50 | raw search p50 | search "
        "step / raw search |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['setting']} | {r['steps']} | {r['step_p50_ms']:.3f} | {r['step_p90_ms']:.3f} | "
            f"{r['step_p99_ms']:.3f} | "
            f"{r['search_step_p50_ms']:.3f} | {r['raw_search_p50_ms']:.3f} | "
            f"{r['search_step_over_raw_search_p50']:.2f}x |"
        )
    if build_s is not None:
        print(f"\n1M-document BM25 index built in {build_s:.0f} s (not part of the step time).")
    print(
        f"\nKGSelfPlay-v0, scripted agent: {sp['games']} games in {sp['seconds']:.2f} s = "
        f"**{sp['games_per_s']:.1f} games/s** "
        f"({sp['steps']} steps; env.step is {100 * sp['env_share_of_time']:.0f}% of the time; "
        f"{sp['valid_questions']}/{sp['games']} questions verified valid)"
    )
    result = {
        "machine": machine,
        "step_latency": rows,
        "bm25_1m_build_s": build_s,
        "selfplay": sp,
        "targets": {"default_world_step_p50_ms": 2.0, "1m_docs_step_p50_ms": 15.0},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
