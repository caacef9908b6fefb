"""Retrieval server under 64 concurrent rollouts: today's server vs several worker processes.

Each configuration serves BM25 over the default world from its own process tree on loopback:
``1 process`` is today's ``RetrievalServer`` (a thread pool whose concurrent requests are searched
together in one ``batch_search``); ``N processes`` is ``MultiProcessRetrievalServer`` (``searchgym
serve --processes N``: forked workers sharing the port and the index, each batching its own
concurrent requests). Clients are rollouts as searchgym's ``RemoteRetriever`` makes them: one
keep-alive connection per thread, one query per request (one ``<search>`` per turn). First one client
alone (its queries/s), then ``--clients`` threads over ``--client-procs`` processes, all starting
together. Configurations alternate ``--rounds`` times. Reports p50/p99 latency and queries/s, the
64-client q/s over the 1-client q/s of the same configuration, and over today's server; prints a
markdown table and writes ``benchmarks/results/server_scale.json``. Clients and servers share the
machine's cores.

    .venv/bin/python benchmarks/bench_server_scale.py --processes 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from machine import machine_info  # noqa: E402

SERVER = """
import sys
from searchgym.retrieval import BM25Retriever, RetrievalServer
from searchgym.retrieval.multiproc import MultiProcessRetrievalServer
from searchgym.world.synthetic import default_world
procs = int(sys.argv[1])
r = BM25Retriever.from_world(default_world())
srv = RetrievalServer(r, port=0) if procs == 1 else MultiProcessRetrievalServer(r, port=0, processes=procs)
srv.start()
print(srv.port, flush=True)
sys.stdin.read()
srv.stop()
"""

CLIENT = """
import json, sys, threading, time
from searchgym.retrieval import RemoteRetriever
port, threads, requests, start = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
queries = json.loads(sys.stdin.read())
lat, errors = [], []
def client(c):
    r = RemoteRetriever(f"http://127.0.0.1:{port}", timeout=30.0, retries=0)
    r.batch_search([queries[c % len(queries)]], 3)  # connect before the clock starts
    barrier.wait()
    for i in range(requests):
        q = queries[(c * requests + i) % len(queries)]
        t = time.perf_counter()
        try:
            r.batch_search([q], 3)
            lat.append((time.perf_counter() - t) * 1000)
        except Exception as exc:
            errors.append(str(exc)[:200])
barrier = threading.Barrier(threads + 1)
ts = [threading.Thread(target=client, args=(c,)) for c in range(threads)]
for t in ts: t.start()
time.sleep(max(0.0, start - time.time()))
barrier.wait()
t0 = time.perf_counter()
for t in ts: t.join()
print(json.dumps({"latencies_ms": lat, "errors": errors, "wall_s": time.perf_counter() - t0}))
"""


def run_load(port: int, queries: list[str], clients: int, requests: int, procs: int, env: dict) -> dict:
    """``clients`` threads over ``procs`` processes, ``requests`` each; latencies and queries/s."""
    start = time.time() + 3.0
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
    lat, errors, walls = [], [], []
    for kid in kids:
        out = json.loads(kid.communicate(json.dumps(queries), timeout=900)[0])
        lat += out["latencies_ms"]
        errors += out["errors"]
        walls.append(out["wall_s"])
    return {"latencies_ms": lat, "errors": errors, "qps": len(lat) / max(walls)}


def one_config(processes: int, queries, a, env) -> dict:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(processes)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        port = int(server.stdout.readline())
        single = run_load(port, queries, 1, a.single_requests, 1, env)
        many = run_load(port, queries, a.clients, a.requests, a.client_procs, env)
        return {"single": single, "many": many}
    finally:
        server.stdin.close()
        server.wait(timeout=60)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))] if xs else float("nan")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--requests", type=int, default=40, help="requests per client and round")
    p.add_argument("--single-requests", type=int, default=400, help="requests of the lone client per round")
    p.add_argument("--processes", type=int, default=2, help="worker processes of the new configuration")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--client-procs", type=int, default=4)
    p.add_argument("--out", default=str(HERE / "results" / "server_scale.json"))
    a = p.parse_args(argv)
    from searchgym.world.synthetic import default_world

    titles = default_world().doc_titles
    queries = [f"{t} born capital" for t in titles]
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "OMP_NUM_THREADS": "1"}
    configs = {"1 process (today)": 1, f"{a.processes} processes": a.processes}
    runs: dict[str, list[dict]] = {name: [] for name in configs}
    for r in range(a.rounds):
        for name, procs in configs.items():
            res = one_config(procs, queries, a, env)
            runs[name].append(res)
            print(
                f"round {r + 1} {name}: 1 client {res['single']['qps']:.0f} q/s, {a.clients} clients "
                f"{res['many']['qps']:.0f} q/s, errors {len(res['many']['errors'])}",
                file=sys.stderr,
                flush=True,
            )
    rows = {}
    for name, res in runs.items():
        lat = [x for r in res for x in r["many"]["latencies_ms"]]
        single_lat = [x for r in res for x in r["single"]["latencies_ms"]]
        rows[name] = {
            "single_qps": round(statistics.median(r["single"]["qps"] for r in res), 1),
            "single_p50_ms": round(pct(single_lat, 50), 2),
            "many_qps": round(statistics.median(r["many"]["qps"] for r in res), 1),
            "many_p50_ms": round(pct(lat, 50), 2),
            "many_p99_ms": round(pct(lat, 99), 2),
            "many_max_ms": round(max(lat, default=float("nan")), 2),
            "errors": sum(len(r["many"]["errors"]) for r in res),
            "qps_per_round": [round(r["many"]["qps"], 1) for r in res],
        }
    base = rows["1 process (today)"]
    for row in rows.values():
        row["many_over_single"] = round(row["many_qps"] / row["single_qps"], 2)
        row["many_qps_over_today"] = round(row["many_qps"] / base["many_qps"], 2)
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
        "note": "servers and clients on the same cores, loopback; shared machine: other jobs ran concurrently",
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=2))
    print(f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB; load average at end {load[0]:.1f}\n")
    print("| server | 1 client q/s (p50) | 64 clients q/s | p50 | p99 | max | errors | 64 / 1 client | q/s vs today |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['single_qps']} ({r['single_p50_ms']} ms) | {r['many_qps']} | {r['many_p50_ms']} ms | "
            f"{r['many_p99_ms']} ms | {r['many_max_ms']} ms | {r['errors']} | {r['many_over_single']}x | "
            f"{r['many_qps_over_today']}x |"
        )
    print(f"\nwritten to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
