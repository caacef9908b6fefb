"""Cost of the total per-request deadline (issue 17) on loopback retrieval requests.

Serves the default world's BM25 index with ``searchgym serve``'s :class:`RetrievalServer` on
127.0.0.1 and times ``--n`` single-query ``/retrieve`` requests three ways, interleaved so load
from other jobs hits all equally: a plain keep-alive ``http.client`` exchange (what the client did
before, no total deadline: the baseline), the same exchange through
:func:`searchgym.core.http_deadline.exchange`, and :class:`RemoteRetriever` end to end. Prints a table
and writes ``benchmarks/results/http_deadline.json``.

    .venv/bin/python benchmarks/bench_http_deadline.py [--n 2000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import time
from pathlib import Path

from machine import machine_info, machine_line


def _plain(conn: http.client.HTTPConnection, body: bytes) -> bytes:
    conn.request("POST", "/retrieve", body=body, headers={"Content-Type": "application/json"})
    return conn.getresponse().read()


def main(argv=None) -> dict:
    """Run the benchmark; returns the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="requests per variant (default 2000)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "http_deadline.json"))
    args = ap.parse_args(argv)

    from searchgym.core.http_deadline import exchange, open_connection
    from searchgym.retrieval import BM25Retriever, RemoteRetriever
    from searchgym.retrieval.server import RetrievalServer
    from searchgym.world.synthetic import default_world

    world = default_world()
    queries = [t for t in world.doc_titles[: args.n]]
    with RetrievalServer(BM25Retriever.from_world(world), port=0) as srv:
        plain_conn = open_connection(srv.url, 10.0)
        deadline_conn = open_connection(srv.url, 10.0)
        remote = RemoteRetriever(srv.url, timeout=10.0)
        times: dict[str, list[float]] = {
            "plain http.client (baseline)": [],
            "exchange with deadline": [],
            "RemoteRetriever": [],
        }
        for i in range(args.n):
            q = queries[i % len(queries)]
            body = json.dumps({"queries": [q], "topk": 3, "return_scores": True}).encode()
            for name, call in (
                ("plain http.client (baseline)", lambda: _plain(plain_conn, body)),
                (
                    "exchange with deadline",
                    lambda: exchange(
                        deadline_conn, "POST", "/retrieve", body, {"Content-Type": "application/json"}, 10.0
                    ),
                ),
                ("RemoteRetriever", lambda: remote.batch_search([q], 3)),
            ):
                t0 = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - t0)
        plain_conn.close()
        deadline_conn.close()
        remote.close()
    base = statistics.median(times["plain http.client (baseline)"])
    rows = {
        name: {
            "p50_ms": statistics.median(ts) * 1e3,
            "mean_ms": statistics.fmean(ts) * 1e3,
            "p99_ms": sorted(ts)[int(0.99 * (len(ts) - 1))] * 1e3,
            "p50_ratio": statistics.median(ts) / base,
        }
        for name, ts in times.items()
    }
    print(f"{args.n} single-query /retrieve requests on loopback ({machine_line()})")
    print("| client | p50 ms | mean ms | p99 ms | p50 vs baseline |\n|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['p50_ms']:.2f} | {r['mean_ms']:.2f} | {r['p99_ms']:.2f} | {r['p50_ratio']:.2f}x |")
    result = {"n": args.n, "machine": machine_info(), "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
