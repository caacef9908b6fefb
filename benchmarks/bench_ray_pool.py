"""Pool building over Ray vs the local path: subgraphs/s on the default world.

Builds ``--n`` subgraphs (default 50k, heuristic selector, seed 0) three ways, interleaved over
``--rounds`` (local, Ray 1, Ray 2, local, ...): the local sequential path (``build_pool(workers=1)``),
Ray with 1 actor and Ray with 2 actors (``build_pool(ray=RayConfig(workers=k))``) on a local Ray
instance started once before the timings (its start-up time is reported on its own; each Ray build
starts its own actors, inside the timing). Every Ray pool is checked equal to the local one.
Reports subgraphs/s (median over rounds), Ray 2 workers over Ray 1 worker (target >= 1.6x), the Ray
1-worker time over the local time (overhead, target <= 1.2x), the driver's own CPU per subgraph
(main thread), and the load averages (1/5/15 min, as ``uptime`` shows them) before the first
and after every build; writes ``benchmarks/results/ray_pool.json``. Needs the ``ray`` extra and two
free cores to mean anything: on a machine shared with other jobs the load averages say how free.

    .venv/bin/python benchmarks/bench_ray_pool.py            # 50k subgraphs, 3 rounds
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from machine import machine_info  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=50_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--chunk", type=int, default=1000)
    p.add_argument("--out", default=str(HERE / "results" / "ray_pool.json"))
    a = p.parse_args(argv)
    import ray

    from searchgym.construction.pool import build_pool
    from searchgym.core.ray_support import RayConfig
    from searchgym.world.synthetic import default_world

    world = default_world()
    t = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    startup = time.perf_counter() - t
    configs = {
        "local (workers=1)": None,
        "ray, 1 worker": RayConfig(workers=1, chunk=a.chunk),
        "ray, 2 workers": RayConfig(workers=2, chunk=a.chunk),
    }
    times: dict[str, list[float]] = {k: [] for k in configs}
    driver_cpu: dict[str, list[float]] = {k: [] for k in configs}
    loads: list[dict] = [{"before": "start", "load_avg": _load()}]
    reference = None
    for r in range(a.rounds):
        for name, cfg in configs.items():
            t, cpu = time.perf_counter(), time.thread_time()
            res = build_pool(world, a.n, seed=0, progress=False, ray=cfg)
            times[name].append(time.perf_counter() - t)
            driver_cpu[name].append(time.thread_time() - cpu)
            loads.append({"after": f"round {r + 1} {name}", "load_avg": _load()})
            pool = [sg.id for sg in res.subgraphs]
            reference = reference or pool
            if pool != reference:
                raise SystemExit(f"{name} built a different pool than the local path")
            print(
                f"round {r + 1} {name}: {times[name][-1]:.1f} s, {a.n / times[name][-1]:.0f} subgraphs/s",
                file=sys.stderr,
                flush=True,
            )
    ray.shutdown()
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = {
        k: {
            "seconds": round(med[k], 2),
            "subgraphs_per_s": round(a.n / med[k], 1),
            "all_seconds": [round(x, 2) for x in times[k]],
            "driver_cpu_ms_per_subgraph": round(statistics.median(driver_cpu[k]) / a.n * 1e3, 4),
        }
        for k in configs
    }
    speedup = med["ray, 1 worker"] / med["ray, 2 workers"]
    overhead = med["ray, 1 worker"] / med["local (workers=1)"]
    info, load = machine_info(), _load()
    out = {
        "machine": info,
        "load_avg_at_end": load,
        "load_avg_per_build": loads,
        "n": a.n,
        "rounds": a.rounds,
        "chunk": a.chunk,
        "ray_startup_s": round(startup, 2),
        "rows": rows,
        "ray2_over_ray1": round(speedup, 2),
        "ray1_over_local": round(overhead, 2),
        "note": "shared machine: load averages above 2 mean other jobs ran on the same 2 cores during the run",
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=2))
    print(
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB; load average at start "
        f"{loads[0]['load_avg']}, at end {load}; "
        f"Ray start-up {startup:.1f} s (not timed below)\n"
    )
    print(f"| path | {a.n} subgraphs | subgraphs/s | driver CPU / subgraph |\n|---|---:|---:|---:|")
    for k, r in rows.items():
        print(f"| {k} | {r['seconds']} s | {r['subgraphs_per_s']} | {r['driver_cpu_ms_per_subgraph']} ms |")
    print(
        f"\nRay 2 workers / 1 worker: {speedup:.2f}x (target >= 1.6x); Ray 1 worker / local: {overhead:.2f}x "
        f"(target <= 1.2x)\nwritten to {a.out}"
    )
    return 0


def _load() -> list[float]:
    """The 1, 5 and 15 minute load averages (what ``uptime`` prints), rounded."""
    return [round(x, 2) for x in os.getloadavg()]


if __name__ == "__main__":
    sys.exit(main())
