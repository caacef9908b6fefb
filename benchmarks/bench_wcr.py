"""WCR scoring speed: one group of G rollouts (long think texts) against a waypoint set.

Measures, in one run on the same texts:

- ``ours``: the full group scoring as the wrapper does it (cached matcher → coverage per rollout →
  group normalisation → Eq. 6), with the default ``auto`` strategy (``native`` when the C extension
  is built);
- ``naive``: a per-waypoint ``title in text`` loop per rollout (+ the same Eq. 6);
- ``native`` / ``scan`` / ``automaton``: our matcher forced to one strategy (``scan`` and
  ``automaton`` are the pure-Python fallback; their crossing places AUTOMATON_THRESHOLD);
- ``floor``: ``text.find("\\x00")`` over every rollout -- a character inside the string's range that
  never occurs, so CPython really scans every character (memchr on one-byte strings): the
  memory-scan floor. (A character above the string's widest one, e.g. ``"\\uffff"`` in ASCII
  text, is rejected without scanning and measures nothing.)

Texts are seeded samples of the default synthetic world's documents (English-like prose dense with
entity names); waypoints are random entity titles of that world, half of them inserted in each
text at random positions, the rest absent (a full scan each for ``in``). Two text sets: ``ascii``
(the prose folded to ASCII: one byte per character) and ``non-ascii`` (vowels of texts and titles
alike mapped to Greek letters, on top of the prose's own en-dashes: two bytes per character). Each case
runs with several seeds (``--seeds``): the table gives the median over seeds of the per-seed
medians, and the min-max over seeds of ours.
Prints a markdown table and writes ``benchmarks/results/bench_wcr.json``.

    .venv/bin/python benchmarks/bench_wcr.py [--group 5] [--tokens 8000] [--repeat 200] [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from searchgym.wrappers.waypoint_coverage_reward import (  # noqa: E402
    AUTOMATON_THRESHOLD,
    NATIVE_AVAILABLE,
    WaypointMatcher,
    get_matcher,
    wcr_rewards,
)

GREEK = str.maketrans("aeiouAEIOU", "αειουΑΕΙΟΥ")
TEXT_SETS = ("ascii", "non-ascii")


def make_case(num_waypoints: int, group: int, tokens: int, seed: int, text_set: str = "ascii"):
    """(texts, waypoints) from the default synthetic world: each text is ``tokens`` words of the
    world's documents (English-like prose full of entity names, like a solver's think text after
    reading retrieved documents), and contains half the waypoints (random entity titles).
    ``non-ascii`` maps vowels of texts and waypoints to Greek letters."""
    from searchgym.world.synthetic import default_world

    world = default_world()
    rng = random.Random(seed)
    docs = list(world.doc_texts)
    titles = sorted({world.entity(e).title for e in world.entity_ids})
    waypoints = rng.sample(titles, num_waypoints)
    texts = []
    for _ in range(group):
        words: list[str] = []
        while len(words) < tokens:
            words.extend(rng.choice(docs).split())
        words = words[:tokens]
        for w in rng.sample(waypoints, num_waypoints // 2):
            words.insert(rng.randrange(len(words)), w)
        texts.append(" ".join(words))
    if text_set == "non-ascii":
        return [t.translate(GREEK) for t in texts], [w.translate(GREEK) for w in waypoints]
    if text_set != "ascii":
        raise ValueError(f"unknown text set {text_set!r}; use one of {TEXT_SETS}")
    texts, waypoints = [to_ascii(t) for t in texts], [to_ascii(w) for w in waypoints]
    assert all(t.isascii() for t in texts)
    return texts, waypoints


def to_ascii(text: str) -> str:
    """The world's prose has en-dashes and accents (so CPython stores it 2 bytes per character):
    fold them to ASCII for the one-byte-per-character set."""
    import unicodedata

    folded = unicodedata.normalize("NFKD", text.replace("\u2013", "-").replace("\u2014", "-"))
    return folded.encode("ascii", "ignore").decode("ascii")


def timeit(fn, repeat: int) -> float:
    """Median seconds per call over ``repeat`` calls (after one warm-up)."""
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def run_case(num_waypoints: int, group: int, tokens: int, repeat: int, seed: int = 0, text_set: str = "ascii") -> dict:
    texts, waypoints = make_case(num_waypoints, group, tokens, seed, text_set)
    correct, valid = [False] * group, [True] * group
    scan = WaypointMatcher(waypoints, strategy="scan")
    auto = WaypointMatcher(waypoints, strategy="automaton")
    native = WaypointMatcher(waypoints, strategy="native") if NATIVE_AVAILABLE else None

    def ours():
        m = get_matcher(waypoints)
        return wcr_rewards(correct, valid, [m.coverage(t)[0] for t in texts])

    def naive():
        return wcr_rewards(correct, valid, [sum(w in t for w in waypoints) / len(waypoints) for t in texts])

    def forced(matcher):
        return lambda: [matcher.coverage(t)[0] for t in texts]

    def floor():
        return [t.find("\x00") for t in texts]

    assert ours() == naive(), "strategies disagree"
    assert all(i == -1 for i in floor()), "the floor's character occurs in the text"
    res = {
        "waypoints": num_waypoints,
        "text_set": text_set,
        "seed": seed,
        "group": group,
        "tokens": tokens,
        "chars_per_group": sum(map(len, texts)),
        "ours_ms": timeit(ours, repeat) * 1e3,
        "naive_ms": timeit(naive, repeat) * 1e3,
        "scan_ms": timeit(forced(scan), repeat) * 1e3,
        "automaton_ms": timeit(forced(auto), repeat) * 1e3,
        "floor_ms": timeit(floor, repeat) * 1e3,
        "strategy": get_matcher(waypoints).strategy,
        "native_ms": timeit(forced(native), repeat) * 1e3 if native else None,
    }
    res["naive_over_ours"] = res["naive_ms"] / res["ours_ms"]
    # What `auto` picks where the extension is missing (pure Python).
    res["fallback_ms"] = res["automaton_ms"] if num_waypoints >= AUTOMATON_THRESHOLD else res["scan_ms"]
    return res


from machine import cpu_model


def combine(runs: list[dict]) -> dict:
    """One row from the per-seed runs of a case: medians over seeds, ours' min-max, the seeds."""
    keys = ("ours_ms", "naive_ms", "scan_ms", "automaton_ms", "floor_ms", "native_ms", "fallback_ms", "naive_over_ours")
    row = {k: v for k, v in runs[0].items() if k not in keys and k != "seed"}
    for k in keys:
        vals = [r[k] for r in runs if r[k] is not None]
        row[k] = statistics.median(vals) if vals else None
    row["ours_min_ms"] = min(r["ours_ms"] for r in runs)
    row["ours_max_ms"] = max(r["ours_ms"] for r in runs)
    row["seeds"] = [r["seed"] for r in runs]
    row["per_seed"] = runs
    return row


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--group", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=8000)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--texts", default=",".join(TEXT_SETS), help="text sets: ascii, non-ascii")
    ap.add_argument("--sizes", default="1,2,4,6,8,12,16,24,32,48,64,100")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_wcr.json"))
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = [
        combine([run_case(n, args.group, args.tokens, args.repeat, seed, text_set) for seed in seeds])
        for text_set in args.texts.split(",")
        for n in sizes
    ]
    machine = {"cpu": cpu_model(), "python": platform.python_version(), "cores_note": "2 cores, shared with other jobs"}
    print(
        f"WCR group scoring: G={args.group} rollouts x {args.tokens} tokens; {machine['cpu']}; "
        f"median of {args.repeat} calls per seed, median over seeds {seeds}; native extension built: "
        f"{NATIVE_AVAILABLE}; "
        f"pure-Python AUTOMATON_THRESHOLD={AUTOMATON_THRESHOLD}\n"
    )
    print(
        "| text | waypoints | ours (ms) | ours min-max over seeds | strategy | naive `in` loop (ms) | naive/ours "
        "| pure-Python fallback (ms) | forced scan (ms) | forced automaton (ms) | memory-scan floor (ms) |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['text_set']} | {r['waypoints']} | {r['ours_ms']:.3f} | "
            f"{r['ours_min_ms']:.3f}-{r['ours_max_ms']:.3f} "
            f"| {r['strategy']} | {r['naive_ms']:.3f} | {r['naive_over_ours']:.2f}x "
            f"| {r['fallback_ms']:.3f} | {r['scan_ms']:.3f} | {r['automaton_ms']:.3f} | {r['floor_ms']:.3f} |"
        )
    result = {
        "benchmark": "bench_wcr",
        "machine": machine,
        "args": vars(args),
        "rows": rows,
        "automaton_threshold": AUTOMATON_THRESHOLD,
        "native_available": NATIVE_AVAILABLE,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {out}")
    return result


if __name__ == "__main__":
    main()
