"""A bounded burst of HTTP clients that each open a new connection per request (how Search-R1's
``requests.post`` client calls a retrieval server), for ``bench_server.py`` and the server's load test.

Standard library only, importable as ``http_load`` by the benchmarks (their folder is on ``sys.path``
when run as ``python benchmarks/bench_x.py`` from anywhere) and as ``benchmarks.http_load`` by the tests."""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field


@dataclass
class LoadResult:
    """Per-request latencies (ms, connect to last byte), error descriptions and answers by client."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    answers: dict[int, list] = field(default_factory=dict)

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile latency (nearest rank), in ms."""
        xs = sorted(self.latencies_ms)
        return xs[min(len(xs) - 1, max(0, round(q / 100 * len(xs)) - 1))] if xs else float("nan")


def new_connection_load(
    host: str,
    port: int,
    queries: list[str],
    *,
    clients: int = 64,
    requests_per_client: int = 10,
    connect_timeout: float = 0.9,
    read_timeout: float = 30.0,
) -> LoadResult:
    """``clients`` threads start together; each sends ``requests_per_client`` ``POST /retrieve``
    requests, every one on a new connection. A connection not accepted within ``connect_timeout``
    seconds (a dropped SYN is retried by the kernel only after 1 s) counts as an error. Stops by
    itself: every thread makes a fixed number of requests with timeouts."""
    result = LoadResult()
    lock = threading.Lock()
    start = threading.Barrier(clients)

    def client(c: int) -> None:
        answers = []
        start.wait()
        for i in range(requests_per_client):
            q = queries[(c * requests_per_client + i) % len(queries)]
            body = json.dumps({"queries": [q], "topk": 3}).encode()
            t = time.perf_counter()
            conn = http.client.HTTPConnection(host, port, timeout=connect_timeout)
            try:
                conn.connect()
                conn.sock.settimeout(read_timeout)
                conn.request("POST", "/retrieve", body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                raw = resp.read()
                ms = (time.perf_counter() - t) * 1e3
                if resp.status != 200:
                    raise RuntimeError(f"status {resp.status}: {raw[:200]!r}")
                answers.append((q, json.loads(raw)["result"][0]))
                with lock:
                    result.latencies_ms.append(ms)
            except (OSError, http.client.HTTPException, RuntimeError, ValueError) as exc:
                with lock:
                    result.errors.append(f"client {c} request {i}: {type(exc).__name__}: {exc}")
            finally:
                conn.close()
        with lock:
            result.answers[c] = answers

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return result
