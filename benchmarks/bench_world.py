"""World generation / save / load benchmark for the synthetic world (issue 2 scale target).

For each size (default 10k, 100k, 1M entities) a fresh subprocess generates the world, saves it,
and another fresh subprocess loads it, so each peak-memory figure (``ru_maxrss``) belongs to one
step only. As a baseline, measured in the same run (sizes up to ``--nx-max``), the same knowledge
graph is put into a ``networkx.MultiDiGraph`` and its memory and build time are compared with the
World's columnar arrays (what the World stores instead of a graph object). A second baseline,
also in the same run: the world's columns written and read with ``pickle`` (protocol 5), the
floor a columnar on-disk format should approach; ``--formats 1 2`` times both world format versions.

Usage::

    .venv/bin/python benchmarks/bench_world.py                      # 10k, 100k, 1M
    .venv/bin/python benchmarks/bench_world.py --sizes 10000 100000  # quicker

Prints a markdown table and writes ``benchmarks/results/world.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rss_now_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.iterdir()) / 2**20


def _columns(world) -> dict:
    """What a World is made of (the constructor's arguments)."""
    return dict(
        entity_ids=world._ent_ids,
        titles=world._titles,
        aliases=world._aliases,
        descriptions=world._descs,
        types=world._types,
        relation_ids=world._rel_ids,
        relation_labels=world._rel_labels,
        literal_values=world._lit_values,
        literal_kinds=world._lit_kinds,
        triples=world._triples,
        doc_ids=world._doc_ids,
        doc_titles=world._doc_titles,
        doc_texts=world._doc_texts,
        doc_entities=world._doc_ent,
    )


def child_pickle(path: Path) -> dict:
    """Baseline: read the same columns back with pickle and build the World from them."""
    from searchgym.world import World

    t0 = time.perf_counter()
    with open(path, "rb") as f:
        cols = pickle.load(f)
    World(name="pickled", **cols)
    return {"pickle_load_s": time.perf_counter() - t0}


def child_generate(n: int, seed: int, out: Path, version: int = 2) -> dict:
    """Generate an ``n``-entity world and save it to ``out``; report times, counts and peaks."""
    from searchgym.world.synthetic import SyntheticConfig, generate_world

    cfg = SyntheticConfig.for_entities(n)
    t0 = time.perf_counter()
    world = generate_world(cfg, seed=seed)
    t1 = time.perf_counter()
    peak_gen = _peak_mb()
    world.save(out, version=version)
    t2 = time.perf_counter()
    with open(out.parent / (out.name + ".pkl"), "wb") as f:
        pickle.dump(_columns(world), f, protocol=5)
    t3 = time.perf_counter()
    return {
        "pickle_save_s": t3 - t2,
        "format_version": version,
        "entities": world.num_entities,
        "triples": world.num_triples,
        "documents": world.num_documents,
        "relations": world.num_relations,
        "generate_s": t1 - t0,
        "entities_per_s": world.num_entities / (t1 - t0),
        "peak_rss_generate_mb": peak_gen,
        "save_s": t2 - t1,
        "peak_rss_save_mb": _peak_mb(),
        "disk_mb": _dir_mb(out),
        "doc_chars_mean": sum(map(len, world.doc_texts)) / world.num_documents,
    }


def child_load(path: Path) -> dict:
    """Load a saved world; report load time and peak memory; touch the lazy name index once."""
    from searchgym.world import load_world

    base = _rss_now_mb()
    t0 = time.perf_counter()
    world = load_world(path)
    t1 = time.perf_counter()
    hits = world.find_entities(world.entity_at(world.num_entities // 2).title)
    t2 = time.perf_counter()
    assert hits, "loaded world cannot find its own entity"
    return {
        "load_s": t1 - t0,
        "peak_rss_load_mb": _peak_mb(),
        "rss_world_mb": _rss_now_mb() - base,
        "first_lookup_s": t2 - t1,
    }


def child_networkx(path: Path) -> dict:
    """Baseline: the same KG as a networkx MultiDiGraph vs the World's columnar graph arrays."""
    from searchgym.world import World, load_world

    world = load_world(path)
    arrays = [world._triples, world._out_ptr, world._out_order, world._in_ptr, world._in_order]
    world_graph_mb = sum(a.nbytes for a in arrays) / 2**20
    t0 = time.perf_counter()
    World(
        name="rebuild",
        entity_ids=world._ent_ids,
        titles=world._titles,
        aliases=world._aliases,
        descriptions=world._descs,
        types=world._types,
        relation_ids=world._rel_ids,
        relation_labels=world._rel_labels,
        literal_values=world._lit_values,
        literal_kinds=world._lit_kinds,
        triples=world._triples,
        doc_ids=world._doc_ids,
        doc_titles=world._doc_titles,
        doc_texts=world._doc_texts,
        doc_entities=world._doc_ent,
    )
    t1 = time.perf_counter()
    before = _rss_now_mb()
    t2 = time.perf_counter()
    g = world.to_networkx()
    t3 = time.perf_counter()
    nx_mb = _rss_now_mb() - before
    return {
        "world_index_s": t1 - t0,
        "world_graph_mb": world_graph_mb,
        "networkx_build_s": t3 - t2,
        "networkx_mb": nx_mb,
        "networkx_edges": g.number_of_edges(),
    }


def _run_child(*args: str) -> dict:
    cmd = [sys.executable, __file__, "--child", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark step {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


from machine import machine_info as _machine


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--formats", type=int, nargs="+", default=[2], help="world format versions to time (1 and/or 2)")
    ap.add_argument("--nx-max", type=int, default=100_000, help="largest size for the networkx baseline")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "world.json")
    ap.add_argument("--workdir", type=Path, default=None, help="where worlds are written (default: a temp dir)")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        mode, *rest = args.child
        if mode == "generate":
            result = child_generate(int(rest[0]), int(rest[1]), Path(rest[2]), int(rest[3]))
        elif mode == "pickle":
            result = child_pickle(Path(rest[0]))
        elif mode == "load":
            result = child_load(Path(rest[0]))
        else:
            result = child_networkx(Path(rest[0]))
        print(json.dumps(result))
        return 0

    work = Path(tempfile.mkdtemp(prefix="bench_world_", dir=args.workdir))
    rows = []
    try:
        for n in args.sizes:
            for version in args.formats:
                d = work / f"w{n}_v{version}"
                print(
                    f"[bench_world] {n:,} entities, format {version}: generate + save ...", file=sys.stderr, flush=True
                )
                row = {"size": n, **_run_child("generate", str(n), str(args.seed), str(d), str(version))}
                print(f"[bench_world] {n:,} entities: load, pickle baseline ...", file=sys.stderr, flush=True)
                row.update(_run_child("load", str(d)))
                row.update(_run_child("pickle", str(d.parent / (d.name + ".pkl"))))
                if n <= args.nx_max and version == args.formats[-1]:
                    print(f"[bench_world] {n:,} entities: networkx baseline ...", file=sys.stderr, flush=True)
                    row.update(_run_child("networkx", str(d)))
                rows.append(row)
                shutil.rmtree(d)
                (d.parent / (d.name + ".pkl")).unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    machine = _machine()
    print(
        f"\nMachine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gb']} GB RAM; "
        "other jobs shared the machine, so times are noisy.\n"
    )
    print(
        "| entities | format | triples | documents | generate (s) | entities/s | peak RSS generate (GB) | save (s) "
        "| load (s) | pickle save / load (s) | peak RSS load (GB) | on disk (MB) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['entities']:,} | {r['format_version']} | {r['triples']:,} | {r['documents']:,} | "
            f"{r['generate_s']:.1f} | "
            f"{r['entities_per_s']:,.0f} | {r['peak_rss_generate_mb'] / 1024:.2f} | {r['save_s']:.2f} | "
            f"{r['load_s']:.2f} | {r['pickle_save_s']:.2f} / {r['pickle_load_s']:.2f} | "
            f"{r['peak_rss_load_mb'] / 1024:.2f} | {r['disk_mb']:,.0f} |"
        )
    nx_rows = [r for r in rows if "networkx_mb" in r]
    if nx_rows:
        print("\nBaseline (same run): the KG as a networkx MultiDiGraph vs the World's columnar arrays")
        print(
            "\n| entities | World graph arrays (MB) | networkx graph (MB) | memory ratio | World index build (s) "
            "| networkx build (s) | time ratio |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for r in nx_rows:
            print(
                f"| {r['entities']:,} | {r['world_graph_mb']:.1f} | {r['networkx_mb']:.0f} | "
                f"{r['networkx_mb'] / r['world_graph_mb']:.0f}x | {r['world_index_s']:.2f} | "
                f"{r['networkx_build_s']:.2f} | {r['networkx_build_s'] / r['world_index_s']:.0f}x |"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "world",
                "machine": machine,
                "seed": args.seed,
                "note": "each size in fresh subprocesses; other jobs ran concurrently on the machine",
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "results": rows,
            },
            indent=2,
        )
    )
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
