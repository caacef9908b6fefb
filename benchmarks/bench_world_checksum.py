"""What verifying a world's checksums costs at load time (issue 33, item 8), cold and cached.

A fresh subprocess generates a synthetic world of ``--entities`` entities (default 1M, as
``bench_world.py`` does) and saves it (``save_world`` hashes every file it wrote and records the
checksums in the manifest). Then, ``--repeats`` times, a fresh subprocess measures:

- ``verify_cold_s``: every file hashed (SHA-256, streamed) and checked against ``files_sha256``,
  no verification cache (what the first load of a copied or downloaded world pays);
- ``verify_cached_s``: the same check with the cache the first one wrote (stat calls only);
- ``load_cold_s`` / ``load_cached_s``: a whole ``load_world`` without / with that cache.

The files are in the page cache (written just before; dropping it needs root), so "cold" means no
verification cache, not a cold disk: from a disk, reading the files costs the load as much as the
hashing does. Prints a markdown table and writes ``benchmarks/results/world_checksum.json``.

    .venv/bin/python benchmarks/bench_world_checksum.py                    # 1M entities, ~3 min
    .venv/bin/python benchmarks/bench_world_checksum.py --entities 100000  # quicker
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from machine import machine_info  # noqa: E402


def child_generate(n: int, seed: int, out: Path) -> dict:
    """Generate and save an ``n``-entity world; time the save and the hashing part of it."""
    from searchgym.core.checksums import sha256_file
    from searchgym.world import save_world
    from searchgym.world.synthetic import SyntheticConfig, generate_world

    t0 = time.perf_counter()
    world = generate_world(SyntheticConfig.for_entities(n), seed=seed)
    t1 = time.perf_counter()
    save_world(world, out)
    t2 = time.perf_counter()
    names = json.loads((out / "manifest.json").read_text())["files"]
    t3 = time.perf_counter()
    for name in names:
        sha256_file(out / name)
    t4 = time.perf_counter()
    return {
        "entities": world.num_entities,
        "documents": world.num_documents,
        "triples": world.num_triples,
        "generate_s": t1 - t0,
        "save_s": t2 - t1,
        "save_hashing_s": t4 - t3,
        "disk_mb": sum((out / name).stat().st_size for name in names) / 2**20,
        "files": len(names),
    }


def _verify(d: Path) -> float:
    """Seconds to check every file of ``d`` against its manifest, with whatever cache is there."""
    from searchgym.core.checksums import VerifiedCache, bytes_sha256

    raw = (d / "manifest.json").read_bytes()
    listed = json.loads(raw)["files_sha256"]
    t0 = time.perf_counter()
    cache = VerifiedCache(d, bytes_sha256(raw))
    assert all(cache.check(name, sha) for name, sha in sorted(listed.items())), "a file does not match"
    cache.save()
    return time.perf_counter() - t0


def child_measure(d: Path) -> dict:
    """Verification alone and whole loads, each without and then with the verification cache."""
    from searchgym.core.checksums import CACHE_NAME
    from searchgym.world import load_world

    cache = d / CACHE_NAME
    cache.unlink(missing_ok=True)
    verify_cold = _verify(d)
    verify_cached = _verify(d)
    load_world(d)  # warm-up (imports, allocator), untimed
    gc.collect()
    cache.unlink()
    t0 = time.perf_counter()
    world = load_world(d)
    load_cold = time.perf_counter() - t0
    del world
    gc.collect()
    t0 = time.perf_counter()
    world = load_world(d)
    load_cached = time.perf_counter() - t0
    return {
        "verify_cold_s": verify_cold,
        "verify_cached_s": verify_cached,
        "load_cold_s": load_cold,
        "load_cached_s": load_cached,
        "entities_loaded": world.num_entities,
    }


def _run_child(*args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, cwd=HERE.parent, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark step {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entities", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="fresh measuring processes")
    ap.add_argument("--workdir", type=Path, default=None, help="where the world is written (default: a temp dir)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "world_checksum.json")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        mode, *rest = args.child
        result = child_generate(int(rest[0]), int(rest[1]), Path(rest[2])) if mode == "generate" else {}
        if mode == "measure":
            result = child_measure(Path(rest[0]))
        print(json.dumps(result))
        return 0

    work = Path(tempfile.mkdtemp(prefix="bench_world_checksum_", dir=args.workdir))
    try:
        d = work / "world"
        print(f"generating and saving {args.entities:,} entities ...", file=sys.stderr, flush=True)
        built = _run_child("generate", str(args.entities), str(args.seed), str(d))
        runs = []
        for i in range(args.repeats):
            runs.append(_run_child("measure", str(d)))
            print(f"run {i + 1}: {json.dumps({k: round(v, 3) for k, v in runs[-1].items()})}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k.endswith("_s")}
    result = {
        "benchmark": "world_checksum",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine_info(),
        "load_avg_at_end": list(os.getloadavg()),
        "seed": args.seed,
        "world": built,
        "median": med,
        "hash_mb_per_s": built["disk_mb"] / med["verify_cold_s"],
        "runs": runs,
        "note": "files in the page cache (no root to drop it): cold = no verification cache, not a cold disk",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"\n{built['entities']:,} entities, {built['documents']:,} documents, {built['disk_mb']:.0f} MB in "
        f"{built['files']} files; save {built['save_s']:.1f} s (of which hashing ~{built['save_hashing_s']:.2f} s)"
    )
    print("| step | median s |\n|---|---:|")
    for k, v in med.items():
        print(f"| {k[:-2]} | {v:.4f} |")
    print(f"hashing: {result['hash_mb_per_s']:.0f} MB/s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
