"""Retrieval server under 1,000 slow clients (issue 33: slowloris): do normal clients still get answers?

The server (BM25 over the default world) runs in its own process on 127.0.0.1 only. Per server kind,
two phases:

1. ``baseline``: ``--clients`` normal clients (rollouts as ``RemoteRetriever`` makes them: one
   keep-alive connection per thread, one query per request) search for ``--window`` seconds alone.
2. ``slowloris``: ``--slow`` slow clients open their connections and each sends one byte of a request
   head that never ends per ``--slow-interval`` seconds (one process, non-blocking sockets, a bounded
   loop that stops by itself after the phase; a connection the server cuts is reopened), and while they
   trickle, the same normal clients search for ``--window`` seconds.

Normal clients give each request a ``--request-timeout`` total deadline and no retry; a request that
misses it is an error. Reported per phase: p50/p99 latency of the answered requests, queries/s,
errors; and for the slow clients how many connections the server cut (and with which status) and
how many were still open at the end. Server kinds: ``searchgym`` (``RetrievalServer``, standard
library, as ``searchgym serve`` runs it) and ``uvicorn`` (the same search and coalescer behind a
minimal ASGI app on uvicorn + h11, the alternative the issue asked to measure). Prints a markdown
table and writes ``benchmarks/results/server_slowloris.json``. Clients and server share the machine.

    .venv/bin/python benchmarks/bench_server_slowloris.py                  # both kinds, ~100 s
    .venv/bin/python benchmarks/bench_server_slowloris.py --servers searchgym --slow 300
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from machine import machine_info  # noqa: E402

SERVER = r"""
import json, sys, threading
from searchgym.retrieval import BM25Retriever, RetrievalServer
from searchgym.world.synthetic import default_world
kind = sys.argv[1]
retriever = BM25Retriever.from_world(default_world())
srv = RetrievalServer(retriever, host="127.0.0.1", port=0)
if kind == "searchgym":
    srv.start()
    print(srv.port, flush=True)
    sys.stdin.read()
    httpd = srv._httpd
    stats = dict(getattr(httpd, "stats", {})) if httpd is not None else {}
    srv.stop()
    print(json.dumps(stats), flush=True)
    sys.exit(0)

import asyncio, socket
from concurrent.futures import ThreadPoolExecutor
import uvicorn
from searchgym.retrieval.server import RequestError

pool = ThreadPoolExecutor(256)

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body, more = b"", True
    while more:
        msg = await receive()
        body += msg.get("body", b"")
        more = msg.get("more_body", False)
    status = 200
    if scope["path"] == "/retrieve" and scope["method"] == "POST":
        try:
            payload = await asyncio.get_running_loop().run_in_executor(pool, srv.handle_retrieve, body)
        except RequestError as exc:
            status, payload = exc.status, {"error": str(exc)}
    else:
        payload = srv.health()
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})

sock = socket.socket()
sock.bind(("127.0.0.1", 0))
config = uvicorn.Config(app, http="h11", loop="asyncio", lifespan="off", log_level="error", backlog=1024)
server = uvicorn.Server(config)
stats = {}

def stop_on_eof():
    sys.stdin.read()
    stats["open_connections_at_stop"] = len(server.server_state.connections)
    server.should_exit = True

print(sock.getsockname()[1], flush=True)
threading.Thread(target=stop_on_eof, daemon=True).start()
server.run(sockets=[sock])
print(json.dumps(stats), flush=True)
"""

SLOW = r"""
import json, resource, selectors, socket, sys, time
port, n, interval, duration = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = n + 256
if soft != resource.RLIM_INFINITY and soft < want:
    resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))
HEAD = b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Slow: "
sel = selectors.DefaultSelector()
sent = {}  # socket -> bytes of the endless head sent so far
stats = {"opened": 0, "connect_errors": 0, "cut_by_server": 0, "answers": {}, "max_open": 0}

def open_one():
    s = socket.socket()
    s.settimeout(5.0)
    try:
        s.connect(("127.0.0.1", port))  # loopback only
    except OSError:
        stats["connect_errors"] += 1
        s.close()
        return
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    sent[s] = 0
    stats["opened"] += 1

def cut(s, data=b""):
    stats["cut_by_server"] += 1
    status = data.split(b" ", 2)[1].decode("ascii", "replace") if data.startswith(b"HTTP/") else "closed"
    stats["answers"][status] = stats["answers"].get(status, 0) + 1
    sel.unregister(s)
    del sent[s]
    s.close()

start = time.monotonic()
end = start + duration
for _ in range(n):
    open_one()
print(json.dumps({"ready_after_s": time.monotonic() - start, "open": len(sent)}), flush=True)
next_tick = time.monotonic()
while time.monotonic() < end:  # bounded: stops by itself after `duration` seconds
    for key, _ in sel.select(timeout=max(0.0, next_tick - time.monotonic())):
        try:
            data = key.fileobj.recv(4096)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        cut(key.fileobj, data)
    if time.monotonic() >= next_tick:
        next_tick += interval
        for s in list(sent):
            i = sent[s]
            byte = HEAD[i:i + 1] or b"a"
            try:
                s.send(byte)
                sent[s] = i + 1
            except BlockingIOError:
                pass
            except OSError:
                cut(s)
        while len(sent) < n and time.monotonic() < end - 1:  # reopen what the server cut
            before = stats["opened"] + stats["connect_errors"]
            open_one()
            if stats["opened"] + stats["connect_errors"] == before:
                break
    stats["max_open"] = max(stats["max_open"], len(sent))
stats["open_at_end"] = len(sent)
for s in list(sent):
    s.close()
print(json.dumps(stats), flush=True)
"""

CLIENT = r"""
import json, logging, sys, threading, time
from searchgym.retrieval import RemoteRetriever
logging.getLogger("searchgym").setLevel(logging.ERROR)  # errors are counted, not logged one by one
port, threads = int(sys.argv[1]), int(sys.argv[2])
start, window, timeout = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
queries = json.loads(sys.stdin.read())
lat, errors = [], []
def client(c):
    r = RemoteRetriever(f"http://127.0.0.1:{port}", timeout=timeout, retries=0)
    time.sleep(max(0.0, start - time.time()))
    i = 0
    while time.time() < start + window:
        q = queries[(c * 997 + i) % len(queries)]
        i += 1
        t = time.perf_counter()
        try:
            r.batch_search([q], 3)
            lat.append((time.perf_counter() - t) * 1000)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {str(exc)[:160]}")
ts = [threading.Thread(target=client, args=(c,)) for c in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps({"latencies_ms": lat, "errors": errors, "wall_s": time.time() - start}))
"""


def pct(xs: list[float], q: float) -> float | None:
    """The ``q``-th percentile (nearest rank) of ``xs``, None when empty."""
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))], 2) if xs else None


def normal_clients(port: int, queries: list[str], a, env: dict) -> dict:
    """``a.clients`` threads over ``a.client_procs`` processes searching for ``a.window`` seconds."""
    start = time.time() + 2.0
    kids = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                CLIENT,
                str(port),
                str(a.clients // a.client_procs),
                str(start),
                str(a.window),
                str(a.request_timeout),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(a.client_procs)
    ]
    lat: list[float] = []
    errors: list[str] = []
    for kid in kids:
        out = json.loads(kid.communicate(json.dumps(queries), timeout=a.window + a.request_timeout + 120)[0])
        lat += out["latencies_ms"]
        errors += out["errors"]
    kinds: dict[str, int] = {}
    for e in errors:
        kinds[e.split(":", 1)[0]] = kinds.get(e.split(":", 1)[0], 0) + 1
    return {
        "answered": len(lat),
        "qps": round(len(lat) / a.window, 1),
        "p50_ms": pct(lat, 50),
        "p99_ms": pct(lat, 99),
        "max_ms": round(max(lat), 2) if lat else None,
        "errors": len(errors),
        "error_kinds": kinds,
        "first_errors": errors[:3],
    }


def one_server(kind: str, queries: list[str], a, env: dict) -> dict:
    """Both phases against a fresh server of ``kind``."""
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        port = int(server.stdout.readline())
        baseline = normal_clients(port, queries, a, env)
        print(f"{kind} baseline: {baseline['qps']} q/s, errors {baseline['errors']}", file=sys.stderr, flush=True)
        slow_s = a.ramp + a.window + 4.0
        slow = subprocess.Popen(
            [sys.executable, "-c", SLOW, str(port), str(a.slow), str(a.slow_interval), str(slow_s)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        ready = json.loads(slow.stdout.readline())
        time.sleep(max(0.0, a.ramp - ready["ready_after_s"]))
        attacked = normal_clients(port, queries, a, env)
        slow_stats = json.loads(slow.communicate(timeout=slow_s + 60)[0].strip().splitlines()[-1])
        slow_stats["ready_after_s"] = round(ready["ready_after_s"], 2)
        slow_stats["open_when_ready"] = ready["open"]
        print(
            f"{kind} under {a.slow} slow clients: {attacked['qps']} q/s, errors {attacked['errors']}, "
            f"slow connections cut {slow_stats['cut_by_server']}",
            file=sys.stderr,
            flush=True,
        )
    finally:
        out, _ = server.communicate("", timeout=120)
    server_stats = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    return {"baseline": baseline, "slowloris": attacked, "slow_clients": slow_stats, "server_stats": server_stats}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="searchgym,uvicorn", help="comma-separated: searchgym, uvicorn")
    p.add_argument("--slow", type=int, default=1000, help="slow clients (default 1000)")
    p.add_argument("--slow-interval", type=float, default=1.0, help="seconds between a slow client's bytes")
    p.add_argument("--clients", type=int, default=64, help="normal clients (default 64)")
    p.add_argument("--client-procs", type=int, default=2)
    p.add_argument("--window", type=float, default=15.0, help="seconds the normal clients search per phase")
    p.add_argument("--ramp", type=float, default=3.0, help="seconds the slow clients trickle before measuring")
    p.add_argument("--request-timeout", type=float, default=10.0, help="a normal request's total deadline (s)")
    p.add_argument("--label", default="", help="a note stored with the result (e.g. which code was measured)")
    p.add_argument("--out", default=str(HERE / "results" / "server_slowloris.json"))
    a = p.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.slow + a.clients + 512  # the server holds every connection at once; the children inherit this
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))
    from searchgym.world.synthetic import default_world

    queries = [f"{t} born capital" for t in default_world().doc_titles]
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "OMP_NUM_THREADS": "1"}
    rows = {kind: one_server(kind, queries, a, env) for kind in a.servers.split(",")}
    result = {
        "benchmark": "server_slowloris",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine_info(),
        "load_avg_at_end": list(os.getloadavg()),
        "nofile_limit": [soft, hard],
        "label": a.label,
        "settings": {
            k: getattr(a, k)
            for k in ("slow", "slow_interval", "clients", "client_procs", "window", "ramp", "request_timeout")
        },
        "rows": rows,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{a.clients} normal clients, {a.slow} slow clients (1 byte / {a.slow_interval:g} s), {a.window:g} s each")
    print("| server | phase | q/s | p50 ms | p99 ms | errors | slow conns cut | slow open at end |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for kind, row in rows.items():
        for phase in ("baseline", "slowloris"):
            r = row[phase]
            cut = row["slow_clients"]["cut_by_server"] if phase == "slowloris" else ""
            still = row["slow_clients"]["open_at_end"] if phase == "slowloris" else ""
            print(
                f"| {kind} | {phase} | {r['qps']} | {r['p50_ms']} | {r['p99_ms']} | {r['errors']} | {cut} | {still} |"
            )
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
