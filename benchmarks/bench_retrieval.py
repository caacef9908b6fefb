"""BM25 retrieval benchmark: searchgym's BM25Retriever (bm25s index) vs rank-bm25, same run.

For each corpus size (default 10k, 100k, 1M documents of a seeded Zipfian synthetic corpus, see
``corpus_gen.py``) a fresh subprocess generates the corpus, builds the index and measures:

* single-query latency (p50 / p95, ``search(q, k=3)``), interleaved query by query with the
  pre-#18 single-query path (the same query through one sparse product, ``_score_chunk``), and
  batch throughput (queries/s of ``batch_search`` over 1,000 queries, inline and with 2 threads);
* the same single-query latency through bm25s's own ``BM25.retrieve`` on the same index
  (numpy backend, the library default without numba), for reference;
* rank-bm25 (``BM25Okapi``) build time and single-query latency on the same corpus and queries,
  interleaved with ours on the very same queries (fewer queries: it is slow; skipped at sizes above
  ``--rank-max`` because building it needs a Python dict per document);
* index build time, peak memory (RSS) and index size, save and load time.

Prints a markdown table and writes ``benchmarks/results/bench_retrieval.json``. Run it under
``flock /tmp/searchgym-heavy.lock`` on shared machines; timings are noisy when other jobs run.

    .venv/bin/python benchmarks/bench_retrieval.py                 # 10k, 50k, 100k, 1M
    .venv/bin/python benchmarks/bench_retrieval.py --sizes 10000   # quick
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


def rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def latencies(fn, queries) -> np.ndarray:
    out = np.empty(len(queries))
    for i, q in enumerate(queries):
        t = time.perf_counter()
        fn(q)
        out[i] = time.perf_counter() - t
    return out * 1e3


def sparse_search(r, q: str):
    """``r.search(q, k=3)`` through the pre-#18 path: every query in one scipy sparse product."""
    from searchgym.retrieval import bm25

    small, bm25._SMALL_BATCH = bm25._SMALL_BATCH, 0
    try:
        return r.search(q, k=3)
    finally:
        bm25._SMALL_BATCH = small


def interleaved(fns: dict, queries) -> dict:
    """Latency (ms) of every function on every query, the functions alternating query by query (the
    one that goes first rotates), so load changes on a shared machine hit all sides alike."""
    names = list(fns)
    out = {n: np.empty(len(queries)) for n in names}
    for i, q in enumerate(queries):
        for j in range(len(names)):
            name = names[(i + j) % len(names)]
            t = time.perf_counter()
            fns[name](q)
            out[name][i] = time.perf_counter() - t
    return {n: v * 1e3 for n, v in out.items()}


def measure(size: int, n_single: int, n_batch: int, n_rank: int, rank_max: int) -> dict:
    """Everything for one corpus size (run in its own process so peak RSS is per size)."""
    from corpus_gen import make_corpus, make_queries

    from searchgym.retrieval import BM25Retriever, RankBM25Retriever

    res: dict = {"docs": size}
    t = time.perf_counter()
    ids, titles, texts, _ = make_corpus(size, seed=0)
    res["corpus_gen_s"] = time.perf_counter() - t
    res["corpus_tokens"] = int(sum(t.count(" ") + 1 for t in texts))
    queries = make_queries(texts, max(n_single, n_batch), seed=1)
    rss0 = rss_mb()
    t = time.perf_counter()
    r = BM25Retriever(ids, titles, texts)
    res["build_s"] = time.perf_counter() - t
    res["build_peak_rss_mb"] = rss_mb()
    res["rss_before_build_mb"] = rss0
    res["index_mb"] = sum(a.nbytes for a in (r._matrix.data, r._matrix.indices, r._matrix.indptr)) / 2**20
    res["vocab"] = r.vocab_size

    r.search(queries[0], k=3)  # warm-up
    ours = functools.partial(r.search, k=3)  # keeps the index alive for the rank-bm25 comparison below
    sparse = functools.partial(sparse_search, r)
    assert all(ours(q) == sparse(q) for q in queries[:n_single])
    lat = interleaved({"ours": ours, "sparse": sparse}, queries[:n_single])
    res["bm25_p50_ms"], res["bm25_p95_ms"] = (
        float(np.percentile(lat["ours"], 50)),
        float(np.percentile(lat["ours"], 95)),
    )
    res["sparse_p50_ms"] = float(np.percentile(lat["sparse"], 50))
    res["single_speedup_vs_sparse_p50"] = res["sparse_p50_ms"] / res["bm25_p50_ms"]
    res["single_speedup_vs_sparse_median_pair"] = float(np.median(lat["sparse"] / lat["ours"]))
    batch = queries[:n_batch]
    t = time.perf_counter()
    r.batch_search(batch, k=3)
    res["bm25_batch_qps"] = len(batch) / (time.perf_counter() - t)
    r.threads = 2
    t = time.perf_counter()
    r.batch_search(batch, k=3)
    res["bm25_batch_qps_2threads"] = len(batch) / (time.perf_counter() - t)
    r.threads = 0

    model = r._model
    lat = latencies(
        lambda q: model.retrieve([r.query_terms(q) or [0]], k=3, show_progress=False, backend_selection="numpy"),
        queries[: min(n_single, 200)],
    )
    res["bm25s_retrieve_p50_ms"] = float(np.percentile(lat, 50))

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        t = time.perf_counter()
        r.save(Path(tmp) / "idx")
        res["save_s"] = time.perf_counter() - t
        res["disk_mb"] = sum(f.stat().st_size for f in (Path(tmp) / "idx").rglob("*") if f.is_file()) / 2**20
        r = model = None  # free the index before the next backend loads
        t = time.perf_counter()
        loaded = BM25Retriever.load(Path(tmp) / "idx")
        res["load_s"] = time.perf_counter() - t
        del loaded

    if size <= rank_max:
        t = time.perf_counter()
        rb = RankBM25Retriever(ids, titles, texts)
        res["rank_build_s"] = time.perf_counter() - t
        lat = interleaved({"ours": ours, "rank": lambda q: rb.search(q, k=3)}, queries[:n_rank])
        res["rank_p50_ms"], res["rank_p95_ms"] = (
            float(np.percentile(lat["rank"], 50)),
            float(np.percentile(lat["rank"], 95)),
        )
        res["rank_queries"] = n_rank
        res["ours_p50_on_rank_queries_ms"] = float(np.percentile(lat["ours"], 50))
        res["speedup_p50"] = res["rank_p50_ms"] / res["ours_p50_on_rank_queries_ms"]
        res["rank_peak_rss_mb"] = rss_mb()
    return res


from machine import machine_info as machine


def fmt(x, spec=".2f", missing="—"):
    return missing if x is None else format(x, spec)


def table(rows: list[dict]) -> str:
    head = (
        "| docs | build (s) | peak RSS (MiB) | index (MiB) | bm25 p50 / p95 (ms) | sparse-product p50 (ms) "
        "| single-query speed-up | batch q/s (1 / 2 threads) "
        "| bm25s.retrieve p50 (ms) | rank-bm25 build (s) | rank-bm25 p50 (ms) | speed-up p50 |"
    )
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(
            f"| {r['docs']:,} | {r['build_s']:.1f} | {r['build_peak_rss_mb']:.0f} | {r['index_mb']:.0f} "
            f"| {r['bm25_p50_ms']:.2f} / {r['bm25_p95_ms']:.2f} | {r['sparse_p50_ms']:.2f} "
            f"| {r['single_speedup_vs_sparse_p50']:.1f}x | {r['bm25_batch_qps']:.0f} / "
            f"{r['bm25_batch_qps_2threads']:.0f} "
            f"| {r['bm25s_retrieve_p50_ms']:.2f} | {fmt(r.get('rank_build_s'), '.1f')} | {fmt(r.get('rank_p50_ms'))} "
            f"| {fmt(r.get('speedup_p50'), '.0f')}{'x' if r.get('speedup_p50') else ''} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000, 1_000_000])
    p.add_argument("--queries", type=int, default=500, help="single-query latency samples per size")
    p.add_argument("--batch", type=int, default=1000, help="queries in the throughput batch")
    p.add_argument("--rank-queries", type=int, default=30, help="rank-bm25 latency samples per size")
    p.add_argument("--rank-max", type=int, default=100_000, help="largest size rank-bm25 is run at")
    p.add_argument("--out", default=str(HERE / "results" / "bench_retrieval.json"))
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: measure one size, print JSON
    a = p.parse_args(argv)
    if a.one:
        print(json.dumps(measure(a.one, a.queries, a.batch, a.rank_queries, a.rank_max)))
        return 0
    rows = []
    for size in a.sizes:
        print(f"measuring {size:,} documents ...", file=sys.stderr, flush=True)
        cmd = [
            sys.executable,
            __file__,
            "--one",
            str(size),
            "--queries",
            str(a.queries),
            "--batch",
            str(a.batch),
            "--rank-queries",
            str(a.rank_queries),
            "--rank-max",
            str(a.rank_max),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return out.returncode
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    info = machine()
    load = os.getloadavg()
    result = {
        "machine": info,
        "load_avg_at_end": load,
        "k": 3,
        "rows": rows,
        "note": "shared machine: other jobs ran concurrently, timings are noisy",
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2))
    print(
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB; Python {info['python']}; "
        f"load average at end {load[0]:.1f} (other jobs running)\n"
    )
    print(table(rows))
    print(f"\nwritten to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
