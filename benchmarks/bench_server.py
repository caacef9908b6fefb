"""Retrieval server under a burst of new connections: Search-R1's client opens one per request.

A ``searchgym`` retrieval server (BM25 over the default world) runs in its own process; 64 client
threads (spread over ``--client-procs`` processes, as rollouts are) start together and each sends
``--requests`` ``POST /retrieve`` requests back to back, every one on a new connection (connect timeout 0.9 s, so a
connection attempt the server's listen
queue dropped — which the kernel retries only after 1 s — counts as an error). The same burst runs
against a server with Python's default listen backlog of 5 (the baseline: the old behaviour) and
against the default server (backlog 1024, a pool of 256 workers), alternating, ``--rounds`` times
each. Reports p50 / p95 / p99 / max latency (connect to last byte) of the answered requests, the
errors, and p99 counting each dropped connection as the 1 s its retry costs a real client; prints
a markdown table and writes ``benchmarks/results/bench_server.json``. Clients and server share the
machine's cores: on a small machine the figures are bounded by its throughput, not the backlog.

    .venv/bin/python benchmarks/bench_server.py                  # 64 clients x 20 requests, 3 rounds
    .venv/bin/python benchmarks/bench_server.py --clients 8 --requests 100
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from http_load import LoadResult, new_connection_load  # noqa: E402
from machine import machine_info  # noqa: E402

SERVER = """
import sys
from searchgym.retrieval import BM25Retriever, RetrievalServer
from searchgym.world.synthetic import default_world
srv = RetrievalServer(BM25Retriever.from_world(default_world()), port=0, backlog=int(sys.argv[1]))
srv.start()
print(srv.port, flush=True)
sys.stdin.read()  # serve until the benchmark closes our stdin
srv.stop()
"""


CLIENT = """
import json, sys, time
from http_load import new_connection_load
port, threads, requests, start = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
queries = json.loads(sys.stdin.read())
time.sleep(max(0.0, start - time.time()))  # every client process starts at the same moment
r = new_connection_load("127.0.0.1", port, queries, clients=threads, requests_per_client=requests)
print(json.dumps({"latencies_ms": r.latencies_ms, "errors": r.errors}))
"""


def run_burst(backlog: int, queries: list[str], clients: int, requests: int, procs: int) -> LoadResult:
    """Start a server with ``backlog`` in a child process, run one burst of ``clients`` threads over
    ``procs`` client processes against it, stop it."""
    # the children import searchgym (the checkout) and http_load (this folder), wherever the benchmark runs from
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent)]), "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(backlog)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        port = int(server.stdout.readline())
        new_connection_load("127.0.0.1", port, queries[:8], clients=4, requests_per_client=2)  # warm-up
        start = time.time() + 2.0
        kids = [
            subprocess.Popen(
                [sys.executable, "-c", CLIENT, str(port), str(clients // procs), str(requests), str(start)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            for _ in range(procs)
        ]
        merged = LoadResult()
        for kid in kids:
            out = json.loads(kid.communicate(json.dumps(queries), timeout=600)[0])
            merged.latencies_ms += out["latencies_ms"]
            merged.errors += out["errors"]
        return merged
    finally:
        server.stdin.close()
        server.wait(timeout=60)


def summary(results: list[LoadResult]) -> dict:
    """Latency percentiles and error counts over every round of one configuration."""
    merged = LoadResult()
    for r in results:
        merged.latencies_ms += r.latencies_ms
        merged.errors += r.errors
    return {
        "requests": len(merged.latencies_ms) + len(merged.errors),
        "errors": len(merged.errors),
        "p50_ms": round(merged.percentile(50), 2),
        "p95_ms": round(merged.percentile(95), 2),
        "p99_ms": round(merged.percentile(99), 2),
        "max_ms": round(max(merged.latencies_ms, default=float("nan")), 2),
        "over_900ms": sum(x > 900 for x in merged.latencies_ms),
        "first_errors": merged.errors[:3],
        "p99_ms_drops_as_1s": round(LoadResult(merged.latencies_ms + [1000.0] * len(merged.errors)).percentile(99), 2),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--requests", type=int, default=20, help="requests per client and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--client-procs", type=int, default=4, help="client processes the clients are spread over")
    p.add_argument("--out", default=str(HERE / "results" / "bench_server.json"))
    a = p.parse_args(argv)
    from searchgym.world.synthetic import default_world

    titles = default_world().doc_titles
    queries = [f"{t} born capital" for t in titles[: a.clients * a.requests]]
    configs = {"backlog 5 (Python default, before)": 5, "backlog 1024 + 256 workers (now)": 1024}
    runs: dict[str, list[LoadResult]] = {name: [] for name in configs}
    for r in range(a.rounds):
        for name, backlog in configs.items():
            runs[name].append(run_burst(backlog, queries, a.clients, a.requests, a.client_procs))
            print(f"round {r + 1} {name}: {json.dumps(summary(runs[name][-1:]))}", file=sys.stderr, flush=True)
    rows = {name: summary(res) for name, res in runs.items()}
    info = machine_info()
    load = os.getloadavg()
    out = {
        "machine": info,
        "load_avg_at_end": load,
        "clients": a.clients,
        "requests_per_client": a.requests,
        "rounds": a.rounds,
        "client_procs": a.client_procs,
        "rows": rows,
        "note": "server in its own process, clients in threads of --client-procs others, all on the same cores; "
        "shared machine: other jobs ran concurrently, timings are noisy",
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=2))
    print(f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB; load average at end {load[0]:.1f}\n")
    print(
        f"{a.clients} clients ({a.client_procs} processes) x {a.requests} requests x {a.rounds} rounds, "
        "a new connection per request\n"
    )
    print("| server | requests | dropped connections | p50 | p95 | p99 | max | p99, a drop = 1 s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['requests']} | {r['errors']} | {r['p50_ms']} ms | {r['p95_ms']} ms | {r['p99_ms']} ms "
            f"| {r['max_ms']} ms | {r['p99_ms_drops_as_1s']} ms |"
        )
    print(f"\nwritten to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
