"""Dense retrieval speed on one device: MiniLM encoding + FAISS flat vs IVF over the default world's documents.

Both sides (``flat`` exact, ``ivf`` approximate) share one bundled all-MiniLM-L6-v2 encoder on
``--device`` (FAISS itself searches on the CPU in both). Reported per side: index build (encode +
FAISS) in documents/s, single-query latency p50/p95 (encode + search), batch queries/s, and for IVF
its recall@k against flat.

    .venv/bin/python benchmarks/bench_dense.py [--device cuda] [--docs 2000]

Prints a markdown table and writes benchmarks/results/dense_<device>.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import add_device_argument, device_info, write_result  # noqa: E402


def main(argv=None) -> dict:
    """Run the benchmark; returns the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(ap)
    ap.add_argument("--docs", type=int, default=2000, help="documents of the default world to index")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import torch

    from searchgym.retrieval.dense import DenseRetriever, MiniLMEncoder
    from searchgym.world.synthetic import default_world

    info = device_info(args.device)
    torch.set_num_threads(args.threads)
    world = default_world()
    n = min(args.docs, world.num_documents)
    ids, titles, texts = world.doc_ids[:n], world.doc_titles[:n], world.doc_texts[:n]
    queries = [f"{titles[i]} {texts[i].split('.')[0]}" for i in range(0, n, max(1, n // args.queries))][: args.queries]
    encoder = MiniLMEncoder(device=args.device)
    encoder.encode(["warm-up"])
    rows, flat_hits = [], None
    print(f"Device: {info}; {n} documents, {len(queries)} queries, k={args.k}\n")
    print(
        "| index | build docs/s | p50 / p95 query ms | batch queries/s | recall@k vs flat |\n|---|---:|---:|---:|---:|"
    )
    for index_type in ("flat", "ivf"):
        t0 = time.perf_counter()
        r = DenseRetriever(ids, titles, texts, encoder=encoder, index_type=index_type)
        build = time.perf_counter() - t0
        lat = []
        for q in queries:
            t0 = time.perf_counter()
            r.search(q, k=args.k)
            lat.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        hits = r.batch_search(queries, k=args.k)
        batch_qps = len(queries) / (time.perf_counter() - t0)
        ranked = [[h.doc_id for h in hs] for hs in hits]
        if flat_hits is None:
            flat_hits = ranked
        recall = statistics.mean(len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(ranked, flat_hits))
        lat.sort()
        row = {
            "index": index_type,
            "docs": n,
            "build_s": round(build, 2),
            "build_docs_per_s": round(n / build, 1),
            "p50_ms": round(lat[len(lat) // 2], 2),
            "p95_ms": round(lat[int(len(lat) * 0.95) - 1], 2),
            "batch_queries_per_s": round(batch_qps, 1),
            "recall_vs_flat": round(recall, 3),
        }
        rows.append(row)
        print(
            f"| {index_type} | {row['build_docs_per_s']:,.0f} | {row['p50_ms']} / {row['p95_ms']} | "
            f"{row['batch_queries_per_s']:,.0f} | {row['recall_vs_flat']:.3f} |",
            flush=True,
        )
    result = {
        "benchmark": "bench_dense",
        "device": info,
        "threads": args.threads,
        "k": args.k,
        "rows": rows,
        "note": "encoder on the stated device for both sides; FAISS on CPU; shared machine, timings noisy",
    }
    write_result(result, args.out, f"dense_{args.device}.json")
    return result


if __name__ == "__main__":
    main()
