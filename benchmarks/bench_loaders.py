"""Loader and atlas build times: Wikidata dump streaming (plain / .gz / .bz2) and the atlas world.

Writes a synthetic dump in the real ``latest-all.json`` shape (one entity per line, claims with
item, time, quantity, external-id and commonsMedia values), streams it through
:func:`load_wikidata_dump`, and builds the atlas world in a fresh process. Prints a markdown table
and writes ``benchmarks/results/loaders.json``.

    .venv/bin/python benchmarks/bench_loaders.py [--entities 100000]
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "loaders.json"


from machine import machine_line as _machine


def _snak(pid: str, datatype: str, value: dict, vtype: str) -> dict:
    return {
        "mainsnak": {
            "snaktype": "value",
            "property": pid,
            "datatype": datatype,
            "datavalue": {"value": value, "type": vtype},
        },
        "type": "statement",
        "rank": "normal",
    }


def write_dump(path: Path, n: int, seed: int = 0) -> None:
    """A dump of ``n`` items with ~8 claims each, in the exact JSON-dump line format."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        f.write("[\n")
        for i in range(1, n + 1):
            qid = f"Q{i}"
            claims = {
                "P31": [
                    _snak(
                        "P31",
                        "wikibase-item",
                        {"entity-type": "item", "id": rng.choice(["Q5", "Q515", "Q43229"])},
                        "wikibase-entityid",
                    )
                ],
                "P17": [
                    _snak(
                        "P17",
                        "wikibase-item",
                        {"entity-type": "item", "id": f"Q{rng.randint(1, n)}"},
                        "wikibase-entityid",
                    )
                ],
                "P47": [
                    _snak(
                        "P47",
                        "wikibase-item",
                        {"entity-type": "item", "id": f"Q{rng.randint(1, n)}"},
                        "wikibase-entityid",
                    )
                    for _ in range(2)
                ],
                "P569": [
                    _snak(
                        "P569",
                        "time",
                        {
                            "time": f"+{rng.randint(1500, 2000)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T00:00:00Z",
                            "precision": 11,
                            "timezone": 0,
                            "before": 0,
                            "after": 0,
                            "calendarmodel": "http://www.wikidata.org/entity/Q1985727",
                        },
                        "time",
                    )
                ],
                "P1082": [_snak("P1082", "quantity", {"amount": f"+{rng.randint(1, 10**7)}", "unit": "1"}, "quantity")],
                "P214": [_snak("P214", "external-id", str(rng.randint(10**6, 10**8)), "string")],
                "P18": [_snak("P18", "commonsMedia", f"Image {i}.jpg", "string")],
            }
            ent = {
                "type": "item",
                "id": qid,
                "labels": {"en": {"language": "en", "value": f"Entity {i}"}},
                "descriptions": {"en": {"language": "en", "value": f"benchmark entity number {i}"}},
                "aliases": {"en": [{"language": "en", "value": f"E{i}"}]},
                "claims": claims,
            }
            f.write(json.dumps(ent) + ("," if i < n else "") + "\n")
        f.write("]\n")


def _load(path: str) -> dict:
    """Run in a child process: load the dump, report time and peak RSS."""
    from searchgym.world.loaders import load_wikidata_dump

    t0 = time.perf_counter()
    w = load_wikidata_dump(path)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": dt, "entities": w.num_entities, "triples": w.num_triples, "peak_rss_mb": peak}


def _atlas() -> dict:
    t0 = time.perf_counter()
    from searchgym.world.atlas import build_atlas

    w = build_atlas()
    dt = time.perf_counter() - t0
    return {
        "seconds": dt,
        "entities": w.num_entities,
        "triples": w.num_triples,
        "documents": w.num_documents,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _child(kind: str, arg: str = "") -> dict:
    code = (
        "import json, sys; sys.path.insert(0, %r); from bench_loaders import _load, _atlas; "
        "print(json.dumps(%s))" % (str(Path(__file__).parent), f"_load({arg!r})" if kind == "load" else "_atlas()")
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    """Measure and report."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entities", type=int, default=100_000)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "latest-all.json"
        write_dump(plain, args.entities)
        variants = {"json": plain}
        for suffix, opener in ((".gz", gzip.open), (".bz2", bz2.open)):
            p = Path(str(plain) + suffix)
            with open(plain, "rb") as src, opener(p, "wb") as dst:
                shutil.copyfileobj(src, dst)
            variants["json" + suffix] = p
        for name, p in variants.items():
            r = _child("load", str(p))
            rows.append(
                {
                    "job": f"wikidata dump ({name}, {p.stat().st_size / 2**20:.0f} MiB)",
                    **r,
                    "rate": f"{r['entities'] / r['seconds']:,.0f} entities/s",
                }
            )
    r = _child("atlas")
    rows.append(
        {
            "job": "atlas (default: 3000 cities + capitals, with summaries)",
            **r,
            "rate": f"{r['entities']:,} entities, {r['documents']:,} docs",
        }
    )
    machine = _machine()
    print(f"Machine: {machine} (other jobs may have run concurrently)\n")
    print("| job | seconds | peak RSS (MiB) | entities | triples | throughput |")
    print("|---|---:|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['job']} | {r['seconds']:.2f} | {r['peak_rss_mb']:.0f} | {r['entities']:,} | {r['triples']:,} "
            f"| {r['rate']} |"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": machine, "entities": args.entities, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
