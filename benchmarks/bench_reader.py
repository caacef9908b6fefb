"""Accuracy and speed of the offline ExtractiveReader used for RAG verification.

For ``--n`` subgraphs of the default world's pool, the question is the template question of the
target path (``searchgym.construction.question_templates.path_question``) and the materials are the documents of
the path nodes v0 … v(K-1) in Search-R1 format (what a proposer that searched every hop has
retrieved), plus ``--noise`` documents of other subgraphs' paths. Prints a markdown table and
writes ``benchmarks/results/reader.json``.

    .venv/bin/python benchmarks/bench_reader.py [--n 200] [--noise 4]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from machine import cpu_model as _cpu


def main(argv=None) -> dict:
    """Run the benchmark; returns the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="questions (default 200)")
    ap.add_argument("--noise", type=int, default=4, help="noise materials per question (default 4)")
    ap.add_argument("--seed", type=int, default=1, help="pool and noise seed (default 1)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "reader.json"))
    args = ap.parse_args(argv)

    from searchgym.construction.pool import build_pool
    from searchgym.construction.question_templates import path_question
    from searchgym.retrieval.base import Hit, format_hits
    from searchgym.scoring.extractive_reader import ExtractiveReader
    from searchgym.scoring.judge import exact_match
    from searchgym.world.synthetic import default_world

    world = default_world()
    subgraphs = build_pool(world, args.n, seed=args.seed, progress=False).subgraphs
    reader = ExtractiveReader(world)
    t0 = time.perf_counter()
    reader.answer("warm-up", ['Doc 1 (Title: "x") x'])  # builds the name automaton
    build_s = time.perf_counter() - t0

    def materials(sg):
        return [
            format_hits([Hit(d.id, d.title, d.text, 1.0) for d in world.documents_of(n)[:1]], max_chars=1000)
            for n in sg.path[:-1]
        ]

    rng = random.Random(args.seed)
    all_mats = [materials(sg) for sg in subgraphs]
    correct = correct_noisy = 0
    t0 = time.perf_counter()
    for i, sg in enumerate(subgraphs):
        q = path_question(sg)
        correct += exact_match(reader.answer(q, all_mats[i]), sg.answer_aliases)
        others = [m for j, ms in enumerate(all_mats) if j != i for m in ms]
        mats = all_mats[i] + rng.sample(others, min(args.noise, len(others)))
        rng.shuffle(mats)
        correct_noisy += exact_match(reader.answer(q, mats), sg.answer_aliases)
    per_q_ms = (time.perf_counter() - t0) / (2 * len(subgraphs)) * 1000
    figures = {
        "machine": f"{_cpu()}, 2 cores (shared; other jobs ran concurrently)",
        "questions": len(subgraphs),
        "accuracy_own_materials": round(correct / len(subgraphs), 3),
        f"accuracy_with_{args.noise}_noise": round(correct_noisy / len(subgraphs), 3),
        "ms_per_question": round(per_q_ms, 2),
        "automaton_build_s": round(build_s, 2),
        "world_entities": world.num_entities,
    }
    print("| materials | exact-match accuracy |\n|---|---|")
    print(f"| own path documents | {figures['accuracy_own_materials']:.3f} |")
    print(f"| + {args.noise} noise materials | {figures[f'accuracy_with_{args.noise}_noise']:.3f} |")
    print(f"\n{per_q_ms:.1f} ms per question; name automaton built in {build_s:.2f} s ({figures['machine']})")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
