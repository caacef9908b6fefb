"""Rescore finished self-play benchmark runs on a larger held-out Solver set: are one-question losses real?

``bench_selfplay.py --size cpu`` scores 32 / 32 / 16 held-out Solver questions a hop, so its Solver target (no net
loss on any hop count) turns on one question, about 3 points. This script scores the cold start and the final
policy of each run folder it is given (``<workdir>/<size>/<arm>_s<seed>``, each with its ``final/`` adapter) on the
first ``--hops`` questions a hop of the same built-in benchmark, greedy, in the benchmark's wording and reworded,
and reports per run and hop count the accuracy and the paired gained/lost against the cold start with the 95 %
bootstrap interval of the paired difference. The first 32 / 32 / 16 questions are the ones ``bench_selfplay``
scored (``heldout_solver_tasks`` takes a prefix of a fixed order), so the report also checks itself: on those
questions it counts how many answers match the run's own benchmark records (greedy decoding in another batch
composition may flip a near-tie) and gives the paired counts there, beside the larger set's.
It also lists, per wording and hop count, the questions the cold start answered right and the runs lost, with how
many runs lost each and their commonest wrong answer (``lost_questions``): the same few questions lost by every
setting is a shared shift, losses spread thin are noise.
With ``--trajectories`` the records keep every rollout's trajectory (stages cached apart, in ``<hops>_trajectories``)
and the collection adds ``answer_moves``: per wording and hop count, of the questions each run lost, kept and gained
against the cold start, how many it searched with another first query, planned more steps for, or searched more
often (:func:`answer_moves`): which of the three a lost answer comes with, against how often they come with an
answer kept.

Every model's scoring is a cached stage under ``--cache/<hops>/`` (``eval_<stage>.json`` and its per-question
records, resumable), keyed by the run's workdir and name, and the cold start's by its weights' fingerprint, so a
rerun skips what is scored, two processes may score different runs side by side (one thread each), and every
invocation ends by collecting all given runs that are scored (``--collect``: only collect). All runs must start
from the same weights (each workdir's ``start.json``); where that start's folder is gone, ``--start`` names one
with the same weights. ``--cold-start-only`` scores the cold start alone and collects nothing; the runs named need
only their workdir's ``start.json``, so it runs beside a run still training and the run's rescore later finds it.

    python benchmarks/bench_selfplay_rescore.py runs/half32_bf16_kl/cpu/c_s0 runs/half32_bf16_kl/cpu/c_s1 \\
        --out benchmarks/results/selfplay_cpu_solver_rescored_100.json
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import re
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

from bench_learning import evaluate_model, heldout_records, paired_flips
from bench_selfplay import run_reporting_errors
from machine import machine_info
from selfplay_setup import COLD, BenchError, format_pool_hops, parse_pool_hops, wait_lock
from selfplay_stages import open_trained

from searchgym.core.atomic_writes import write_text

#: the built-in benchmark v1's 1- to 3-hop questions, all of them (``searchgym.tasks.heldout.BENCHMARK_SIZES``)
DEFAULT_HOPS = "1=100,2=100,3=100"
#: the run settings a report names (from each run's ``config.yaml``)
SETTINGS = (
    "seed",
    "total_steps",
    "lr",
    "proposer_lr_scale",
    "kl_coef",
    "proposer_kl_scale",
    "anchor_coef",
    "rollout_dtype",
    "batch_size",
    "group_size",
)
WORDINGS = {"solver": False, "solver_reworded": True}  # report key -> heldout_records(reworded=...)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("runs", nargs="+", help="finished bench_selfplay run folders (<workdir>/<size>/<arm>_s<seed>)")
    ap.add_argument(
        "--hops",
        default=DEFAULT_HOPS,
        help=f"held-out Solver questions a hop count, the benchmark's first ones (default {DEFAULT_HOPS}: all of v1)",
    )
    ap.add_argument("--cache", default="runs/bench_selfplay_rescore", help="scored stages are cached in <cache>/<hops>")
    ap.add_argument("--start", help="a folder with the runs' start weights, where their start.json's folder is gone")
    ap.add_argument("--out", help="the results JSON (default: only print the table)")
    ap.add_argument("--collect", action="store_true", help="score nothing; collect the runs already scored")
    ap.add_argument(
        "--cold-start-only",
        action="store_true",
        help="score only the cold start, collecting nothing: the runs need only their workdir's start.json, so it "
        "can run beside a run still training (bench_selfplay.py's flag of the same name)",
    )
    ap.add_argument("--max-new-tokens", type=int, default=128, help="tokens a turn (bench_selfplay's cpu size: 128)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--threads", type=int, default=1, help="torch threads on CPU (two processes side by side: 1 each)")
    ap.add_argument(
        "--trajectories",
        action="store_true",
        help="keep each rollout's trajectory (stages cached apart) and report answer_moves: the first query, plan "
        "and searches of each lost, kept and gained answer against the cold start's",
    )
    ap.add_argument("--debug", action="store_true", help="tracebacks on errors")
    args = ap.parse_args(argv)
    if args.cold_start_only and args.collect:
        ap.error("--cold-start-only scores the cold start and --collect only collects: give one of them")
    try:
        args.hop_counts = parse_pool_hops(args.hops)
    except BenchError as exc:
        ap.error(f"--hops: {exc}")
    return args


def run_start(run: Path, override: Optional[dict]) -> dict:
    """What ``run`` started from: its workdir's ``start.json`` (``start`` folder and weights ``fingerprint``), the
    folder replaced by ``override`` (``--start`` as the same ``start`` / ``fingerprint`` record, fingerprinted once
    for all runs) when given (refused unless its weights are the same) or when the recorded one is gone (refused
    then without ``override``)."""
    path = run.parent / "start.json"
    if not path.is_file():
        raise BenchError(f"{run}: {path} is missing; give a bench_selfplay run folder (<workdir>/<size>/<run>)")
    record = json.loads(path.read_text())
    if override is None:
        if not Path(record["start"]).exists():
            raise BenchError(
                f"{run} started from {record['start']}, which is gone; give --start with a folder of the same "
                f"weights (fingerprint {record['fingerprint']})"
            )
        return record
    if override["fingerprint"] != record["fingerprint"]:
        raise BenchError(
            f"--start {override['start']} has weights {override['fingerprint']}, but {run} started from "
            f"{record['start']} (weights {record['fingerprint']}): give the folder the run started from"
        )
    return override


def stage_name(run: Path) -> str:
    """A run's cached stage: its workdir's name and its own (``half32_bf16_kl_c_s0``); :func:`scored` refuses a stage
    that another run of the same names was scored into."""
    return f"{run.parent.parent.name}_{run.name}"


def cold_stage(fingerprint: str) -> str:
    """The cold start's cached stage, keyed by its weights (two starts never share one)."""
    return f"cold_start_{fingerprint}"


def run_settings(run: Path) -> dict:
    """The :data:`SETTINGS` of ``run`` (its ``config.yaml``)."""
    import yaml

    config = yaml.safe_load((run / "config.yaml").read_text())
    return {key: config.get(key) for key in SETTINGS}


def score(
    name: str, load, work: Path, args: argparse.Namespace, label: str, *, block: bool, same_label: bool = True
) -> bool:
    """Score one model (a cached stage, recorded as ``label``); False, without waiting unless ``block``, while another
    process scores it (two processes given the same runs share the work instead of one idling on the other's lock).
    A cached stage must carry the same label unless ``same_label`` is off: the cold start's stage is keyed by its
    weights, so any folder of them may find it (scored from a moved copy, then from the original)."""
    from searchgym.core.output_lock import OutputLock, OutputLockedError
    from searchgym.world.synthetic import default_world

    if scored(work, name, label if same_label else None) is not None:
        return True
    lock = OutputLock(work / f"{name}.stage", what="--cache")
    try:
        lock.acquire()
    except OutputLockedError:
        if not block:
            return False
        with wait_lock(work / f"{name}.stage"):  # the other process's result, once it is written
            pass
        return score(name, load, work, args, label, block=True, same_label=same_label)
    try:
        evaluate_model(
            name,
            load,
            default_world(),
            work,
            args.device,
            hops=args.hop_counts,
            proposer=0,
            max_new_tokens=args.max_new_tokens,
            model_label=label,
            trajectories=args.trajectories,
        )
    finally:
        lock.release()
    return True


def scored(work: Path, name: str, model: Optional[str] = None) -> Optional[dict]:
    """A stage's held-out results, ``None`` while it is not scored; refused when ``model`` is given and the stage
    scored another one (a run of the same workdir and run names elsewhere)."""
    path = work / f"eval_{name}.json"
    if not path.is_file():
        return None
    result = json.loads(path.read_text())
    if model is not None and result["model"] != model:
        raise BenchError(
            f"{work} scored {result['model']} as stage {name}, not {model} (a workdir of the same name elsewhere): "
            "give another --cache"
        )
    return result


def bench_check(own_work: Path, own_name: str, work: Path, cold: str, name: str, reworded: bool) -> Optional[dict]:
    """On the questions a model's own benchmark stage (``own_name`` in ``own_work``) scored: how many of this
    rescore's answers (stage ``name`` in ``work``) match its records (``same_answer``, ``same_em`` of ``n``), and the
    paired counts against the cold start there (``vs_cold_start``; not for the cold start itself)."""
    if not (own_work / f"eval_{own_name}").is_dir():
        return None
    own = heldout_records(own_work, own_name, reworded=reworded)
    mine = heldout_records(work, name, reworded=reworded)
    keys = {k for k in own if k in mine}
    out = {
        "n": len(keys),
        "same_answer": sum(own[k].get("prediction") == mine[k].get("prediction") for k in keys),
        "same_em": sum(own[k]["em"] == mine[k]["em"] for k in keys),
    }
    if name != cold:
        out["vs_cold_start"] = paired_flips(work, cold, name, reworded=reworded, keys=keys)
    return out


def collect(runs: Sequence[Path], work: Path, cold: str, start: dict, args: argparse.Namespace) -> dict:
    """The results of every scored run (the cold start first); runs not scored yet are listed as ``pending``."""
    cold_result = scored(work, cold)
    if cold_result is None:
        raise BenchError(f"the cold start is not scored in {work} yet: run without --collect first")
    out: dict = {
        "benchmark": "selfplay_rescore",
        "machine": machine_info(),
        "hops": {str(h): n for h, n in args.hop_counts.items()},
        "max_new_tokens": args.max_new_tokens,
        "start": start,
        "cold_start": {w: cold_result[w] for w in WORDINGS},
        "cold_start_bench_questions": {  # each workdir's own cold-start evaluation, on its questions
            own.parent.name: {w: bench_check(own, COLD, work, cold, cold, rw) for w, rw in WORDINGS.items()}
            for own in sorted({run.parent for run in runs})
        },
        "runs": [],
        "pending": [],
    }
    names = []  # the scored runs' stages
    for run in runs:
        name = stage_name(run)
        result = scored(work, name, str(run))
        if result is None:
            out["pending"].append(str(run))
            continue
        names.append(name)
        entry: dict = {
            "run": f"{run.parent.parent.name}/{run.name}",
            "path": str(run),
            "settings": run_settings(run),
            "seconds": result["seconds"],
        }
        for wording, reworded in WORDINGS.items():
            entry[wording] = result[wording]
            entry.setdefault("vs_cold_start", {})[wording] = paired_flips(work, cold, name, reworded=reworded)
            check = bench_check(run.parent, run.name, work, cold, name, reworded)
            if check is not None:
                entry.setdefault("bench_questions", {})[wording] = check
        out["runs"].append(entry)
    out["settings"] = net_by_setting(out["runs"])
    out["lost_questions"] = {w: lost_questions(work, cold, names, reworded=rw) for w, rw in WORDINGS.items()}
    if args.trajectories:
        out["answer_moves"] = {w: answer_moves(work, cold, names, reworded=rw) for w, rw in WORDINGS.items()}
    return out


def paired_records(work: Path, cold: str, names: Sequence[str], *, reworded: bool):
    """Each run's (stages ``names``) held-out record beside the cold start's on the same question, in one wording:
    ``(key, cold start's record, run's record)``."""
    before = heldout_records(work, cold, reworded=reworded)
    for name in names:
        for key, r in heldout_records(work, name, reworded=reworded).items():
            c = before.get(key)
            if c is not None:
                yield key, c, r


def lost_questions(work: Path, cold: str, names: Sequence[str], *, reworded: bool) -> dict:
    """Per hop count, the held-out questions the cold start answered right and runs (stages ``names``) got wrong:
    whether the runs' losses are the same few questions, one shift the settings share, or spread thin as noise. Per
    hop: ``lost`` (losses over all runs), ``questions`` (how many distinct), and each question (most often lost first)
    with ``runs`` that lost it, the commonest wrong ``prediction`` and how many of them gave it, and how many of them
    searched more than the cold start did (``searched_more``)."""
    per_key: dict = {}
    for key, c, r in paired_records(work, cold, names, reworded=reworded):
        if not c["em"] > r["em"]:
            continue
        cell = per_key.setdefault(key, {"cold": c, "runs": 0, "predictions": collections.Counter(), "searched_more": 0})
        cell["runs"] += 1
        cell["predictions"][r.get("prediction") or ""] += 1
        cell["searched_more"] += r["searches"] > c["searches"]
    out: dict = {}
    for key, cell in sorted(per_key.items(), key=lambda kv: (-kv[1]["runs"], kv[0])):
        c = cell["cold"]
        hop = out.setdefault(str(c.get("hops")), {"lost": 0, "questions": 0, "by_question": []})
        hop["lost"] += cell["runs"]
        hop["questions"] += 1
        prediction, count = cell["predictions"].most_common(1)[0]
        hop["by_question"].append(
            {
                "key": key,
                "question": c.get("question"),
                "gold": (c.get("golds") or [None])[0],
                "runs": cell["runs"],
                "prediction": prediction,
                "prediction_runs": count,
                "searched_more": cell["searched_more"],
            }
        )
    return out


#: how a run's answer to a question can differ from the cold start's, each read from both trajectories
MOVES = ("query_rewritten", "longer_plan", "more_searches")
_PLAN_ITEM = re.compile(r"(?<![\w.(])(\d{1,2})\)")  # "1) ...; 2) ...", not "(1964)" nor "2.1)"


def first_query(record: Mapping) -> Optional[str]:
    """The first search query of a record's trajectory, lower-cased with its whitespace collapsed (``None``: it
    never searched)."""
    for turn in record["trajectory"]["turns"]:
        for search in turn.get("searches") or ():
            return " ".join(str(search["query"]).lower().split())
    return None


def plan_steps(record: Mapping) -> int:
    """How many steps the first turn's reasoning plans: the numbered items (``Plan: 1) ...; 2) ...``) of its first
    ``<think>``, 0 without a numbered plan."""
    turns = record["trajectory"]["turns"]
    think = (turns[0].get("think") or "") if turns else ""
    return len(set(_PLAN_ITEM.findall(think)))


def answer_moves(work: Path, cold: str, names: Sequence[str], *, reworded: bool) -> dict:
    """Per hop count, the runs' (stages ``names``, scored with trajectories) answers against the cold start's on
    the same question, split into ``lost`` (the cold start right, the run wrong), ``kept`` (both right) and
    ``gained``: ``n`` each, and how many of them the run searched with another first query (``query_rewritten``),
    planned more steps for (``longer_plan``), searched more often (``more_searches``), or none of these (``none``: the
    same query and plan, no more searches, so the same first passages read otherwise). A move that comes with lost
    answers far more often than with kept ones is what the Solver's update changed where it lost."""
    out: dict = {}
    for _, c, r in paired_records(work, cold, names, reworded=reworded):
        kind = "lost" if c["em"] > r["em"] else "gained" if r["em"] > c["em"] else "kept" if r["em"] else None
        if kind is None:
            continue
        moves = {
            "query_rewritten": first_query(r) != first_query(c),
            "longer_plan": plan_steps(r) > plan_steps(c),
            "more_searches": r["searches"] > c["searches"],
        }
        hop = out.setdefault(str(c.get("hops")), {})
        cell = hop.setdefault(kind, {"n": 0, **{m: 0 for m in MOVES}, "none": 0})
        cell["n"] += 1
        for move, happened in moves.items():
            cell[move] += happened
        cell["none"] += not any(moves.values())
    return out


def net_by_setting(runs: Sequence[Mapping]) -> dict:
    """Per workdir (one setting, its seeds) and wording, each hop count's net questions (gained − lost against the
    cold start) per seed and their mean, and the seeds' pairs pooled: gained, lost and the exact two-sided sign-test
    p of that split (are losses and gains equally likely among the questions that changed?)."""
    out: dict = {}
    for r in runs:
        setting = out.setdefault(r["run"].split("/")[0], {"seeds": []})
        setting["seeds"].append(r["settings"]["seed"])
        for wording in WORDINGS:
            cells = setting.setdefault(wording, {})
            for h, c in r["vs_cold_start"][wording]["by_hops"].items():
                cell = cells.setdefault(h, {"net": [], "gained": 0, "lost": 0})
                cell["net"].append(c["gained"] - c["lost"])
                cell["gained"] += c["gained"]
                cell["lost"] += c["lost"]
    for setting in out.values():
        for wording in WORDINGS:
            for cell in setting[wording].values():
                cell["mean"] = sum(cell["net"]) / len(cell["net"])
                cell["sign_test_p"] = sign_test(cell["gained"], cell["lost"])
    return out


def sign_test(gained: int, lost: int) -> float:
    """The exact two-sided sign-test p of ``gained`` against ``lost`` changed questions (1.0 when none changed)."""
    n, k = gained + lost, min(gained, lost)
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def print_table(results: dict) -> None:
    """Per wording, run and hop count: gained/lost against the cold start on the whole set (the paired difference
    in points), and on the questions the run's own benchmark scored."""
    for wording in WORDINGS:
        print(f"held-out Solver ({wording}), n by hop {results['hops']}: gained/lost vs the cold start")
        for r in results["runs"]:
            cells = []
            own_hops = r.get("bench_questions", {}).get(wording, {}).get("vs_cold_start", {}).get("by_hops", {})
            for h, c in r["vs_cold_start"][wording]["by_hops"].items():
                own = own_hops.get(h)
                cell = f"{h}-hop +{c['gained']}/-{c['lost']} ({100 * c['diff']['mean']:+.1f})"
                cells.append(cell + (f" [own {own['n']}: +{own['gained']}/-{own['lost']}]" if own else ""))
            print(f"  {r['run']:<16} " + "  ".join(cells))
    for wording, hops in results.get("answer_moves", {}).items():
        print(
            f"answer moves ({wording}), all runs: of n, how many rewrote the first query / planned more / searched more"
        )
        for h, kinds in sorted(hops.items()):
            cells = [
                f"{kind} {c['n']}: {c['query_rewritten']} / {c['longer_plan']} / {c['more_searches']}"
                f" (none {c['none']})"
                for kind, c in sorted(kinds.items())
            ]
            print(f"  {h}-hop  " + "  ".join(cells))
    for p in results["pending"]:
        print(f"  {p}: not scored yet")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Score (unless ``--collect``) and collect; 0 on success, 2 on bad input."""
    return run_reporting_errors("bench_selfplay_rescore", rescore, parse_args(argv))


def rescore(args: argparse.Namespace) -> None:
    """The stages for ``args`` (the cold start, then each run), then the collection; with ``--cold-start-only`` the
    cold start's stage alone."""
    runs = [Path(r).resolve() for r in args.runs]
    trained = [] if args.cold_start_only else runs  # the runs whose final policy is scored
    for run in trained:
        if not (run / "final").is_dir():
            raise BenchError(f"{run} has no final/ policy: give a finished bench_selfplay run folder")
    override = None
    if args.start is not None:
        from searchgym.training.cold_start import weights_fingerprint

        override = {"start": args.start, "fingerprint": weights_fingerprint(args.start)}
    starts = [run_start(run, override) for run in runs]
    if len({s["fingerprint"] for s in starts}) > 1:
        raise BenchError("the runs start from different weights; rescore each start's runs in its own invocation")
    start = starts[0]
    work = Path(args.cache) / (
        format_pool_hops(args.hop_counts).replace("=", "-").replace(",", "_")
        + ("_trajectories" if args.trajectories else "")  # such records never resume (or pair with) ones without
    )
    work.mkdir(parents=True, exist_ok=True)
    cold = cold_stage(start["fingerprint"])
    if not args.collect:
        import torch

        from searchgym.llm.pretrained import open_model

        if args.device == "cpu" and args.threads:
            torch.set_num_threads(args.threads)
        # (stage, loader, label, whether a cached stage must carry the label): the cold start's is keyed by weights
        stages = [(cold, lambda: open_model(start["start"]), start["start"], False)]
        stages += [
            (stage_name(r), lambda r=r: open_trained(start["start"], r / "final"), str(r), True) for r in trained
        ]
        deferred = [s for s in stages if not score(*s[:2], work, args, s[2], block=False, same_label=s[3])]
        for name, load, label, same_label in deferred:  # scored by another process meanwhile, or wait for it
            score(name, load, work, args, label, block=True, same_label=same_label)
    if args.cold_start_only:
        print(f"the cold start is scored in {work / f'eval_{cold}.json'}; rescore the runs once they have finished")
        return
    results = collect(runs, work, cold, start, args)
    print_table(results)
    if args.out:
        write_text(Path(args.out), json.dumps(results, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
