"""Does the game itself learn? ``KGSelfPlay-v0`` trained end to end, the model in both roles, three recipes.

From the cold start, one policy plays Proposer and Solvers of the self-play game and both roles are updated
(``SelfPlayTrainer``, ``train_solver`` and ``train_proposer`` true), in three arms with equal rollout budgets:

* (a) **vanilla SSP** -- ``recipe_config("ssp", size)``: answer-only Proposer, binary reward, SSP Eq. 4/5;
* (b) **KG-grounded Proposer, binary** -- ``recipe_config("kg-ssp", size)``;
* (c) **KG-grounded Proposer + WCR** -- ``recipe_config("kg-wcr", size)``.

Every arm plays the same self-play pool (``pool.jsonl`` in the workdir: training-side 2- and 3-hop subgraphs --
the hop counts the cold start can already reach -- interleaved in proportion), the same number of steps, games
per step, Solvers per game, turns and tokens per turn; what differs is what each recipe sets (Proposer prompt,
reward, advantage estimators). Per step, from the trainer's ``metrics.jsonl``: the Proposer's valid rate and
its rejection reasons, its reward, the Solvers' reward (all games, and on the questions the model wrote),
groups with signal, question hops and length, the update's entropy and the time split. Before and after:
held-out Solver exact match by hop with 95 % bootstrap intervals and paired gained/lost questions against the
cold start, and the Proposer's valid-question rate on a fixed set of held-out KG targets (the KG prompt for
every model; the answer-only prompt too for the cold start and arm (a), which trains with it).

**Held out.** The held-out Solver questions are the built-in benchmark's (``heldout_solver_tasks``), the
Proposer's targets its 2-/3-hop subgraphs (``heldout_proposer_tasks``): every answer title is on the held-out
side of ``searchgym.tasks.heldout``, and the self-play pool holds only training-side subgraphs, whose answer
names (title and aliases) are never held out. Everything the Solvers train on comes from the pool (a question
the Proposer wrote for a pool subgraph, a replayed one, or the subgraph's own template question), so
:func:`check_disjoint` -- run on every invocation, recorded in the JSON, and tested -- checks the pool against
both held-out sets: no shared answer name, answer entity or question text.

Stages write into ``--workdir/<size>`` and are skipped when their output exists, so a killed run resumes (a
killed training run from its last checkpoint). ``--arms``/``--seeds`` run a subset; two processes may share a
workdir (the pool and the cold start's evaluation are made once, the second process waits for them). Every
invocation ends by collecting **all** finished runs of the workdir into ``benchmarks/results/selfplay_<size>.json``
and ``.png``; ``--collect`` only collects; ``--cold-start-only`` only evaluates the cold start (a process of its
own beside a training run, so both cores work while the run trains); ``--ship`` also writes the compact form that
``searchgym demo`` shows (:func:`searchgym.evaluation.selfplay_results.compact_results`) to
``searchgym/assets/selfplay_<size>.json``.
Sizes: ``cpu`` (2 cores, one torch thread per process, one seed), ``gpu`` (3 seeds, ``--device cuda``), ``toy``
(the GPU size's code path at toy scale on CPU, for the tests; needs ``--model DIR``). docs/selfplay_benchmark.md
has the commands. ``--proposer-baseline`` is an ablation: one Proposer baseline in every arm instead of each
recipe's own (``hop_group``: EVE's HRPO), recorded in the JSON (``proposer_baseline_override``). ``--set
KEY=VALUE`` is the general form: any training config field in every arm (``--set kl_coef=0.01``: the KL term
the ``cpu`` size turns off; ``--set filter.searches_at_least_required=true``: a rule filter of the Proposer's
questions), named in each arm's label and recorded in the JSON (``overrides``); the fields the benchmark itself
sets (model, start, seed, steps, pool, output) are refused. ``--eval-at 16`` also scores every run at training
step 16 (the run keeps that checkpoint: ``keep_checkpoint_every``), in the JSON as each run's ``checkpoints``.

This script is the command line. Its arms, sizes, pool, held-out sets and run configs are in ``selfplay_setup.py``,
its cached stages (training, evaluations) in ``selfplay_stages.py``, the collection, targets and plot in
``selfplay_collect.py``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import traceback
from functools import partial
from pathlib import Path
from typing import Optional, Sequence

from bench_learning import HOPS
from machine import device_info, machine_info
from selfplay_collect import TargetFacts, collect, plot
from selfplay_setup import (
    ARMS,
    SAMPLED_TEMPERATURE,
    SHIPPED_INIT,
    SIZES,
    BenchError,
    check_disjoint,
    heldout_sets,
    parse_overrides,
    parse_pool_hops,
    run_name,
    stage_pool,
    train_config,
)
from selfplay_stages import (
    checkpoint_policy,
    checkpoint_stage,
    open_trained,
    stage_cold,
    stage_eval,
    stage_sampled,
    stage_start,
    stage_train,
)

from searchgym.core.advantages import PROPOSER_BASELINES
from searchgym.core.atomic_writes import write_text

RESULTS = Path(__file__).parent / "results"
#: where ``--ship`` writes the compact results (in the repository's package tree: `searchgym demo` reads them)
ASSETS = Path(__file__).resolve().parent.parent / "searchgym" / "assets"


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line; bad values end in argparse's one-line error (exit 2)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="cpu")
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda for gpu, else cpu")
    ap.add_argument("--workdir", default="runs/bench_selfplay", help="stages are cached in <workdir>/<size>")
    ap.add_argument("--arms", default=",".join(ARMS), help="comma-separated subset of a,b,c to run")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds (default: the size's)")
    ap.add_argument("--steps", type=int, default=None, help="training steps per run (default: the size's)")
    ap.add_argument("--model", default=None, help="the base model (default smollm2; --size toy needs a folder)")
    ap.add_argument("--init", default=None, help=f"start from: {SHIPPED_INIT} (default), a model folder, or none")
    ap.add_argument(
        "--proposer-baseline",
        choices=PROPOSER_BASELINES,
        default=None,
        help="an ablation: this Proposer baseline in every arm instead of each recipe's own (e.g. hop_group, EVE's "
        "HRPO); runs are cached, so give it its own --workdir",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an ablation: this training config value in every arm (repeatable, e.g. kl_coef=0.01), or a rule filter "
        "of the Proposer's questions as filter.FIELD=VALUE (e.g. filter.searches_at_least_required=true); runs are "
        "cached, so give it its own --workdir",
    )
    ap.add_argument(
        "--pool-hops",
        default=None,
        metavar="H=N,...",
        help="an ablation: the self-play pool's subgraphs per hop count (e.g. 3=128; default: the size's), named in "
        "each arm's label; a workdir plays one pool, so give it its own --workdir",
    )
    ap.add_argument(
        "--eval-at",
        default=None,
        metavar="STEP,...",
        help="also score every run on the held-out sets at these training steps (each a multiple of the size's "
        "save_every and below the run's last step); the runs keep those checkpoints",
    )
    ap.add_argument(
        "--stop-at",
        type=int,
        default=None,
        metavar="STEP",
        help="end every run at this step of its schedule (a multiple of the size's save_every below the last step): "
        "a run trains on to it, or one that went past it (killed later) is scored at its checkpoint there; the "
        "learning-rate schedule and the pool stay the whole run's, and the arm's label names the stop. Runs are "
        "cached, so a stopped run needs its own --workdir",
    )
    ap.add_argument(
        "--proposer-samples",
        type=int,
        default=None,
        help="rollouts a held-out Proposer target for the sampled valid rate, at the rollouts' temperature "
        "(default: the size's; 0: greedy only)",
    )
    ap.add_argument("--out", default=None, help="results JSON (default benchmarks/results/selfplay_<size>.json)")
    ap.add_argument("--collect", action="store_true", help="only write the JSON/PNG from the finished runs")
    ap.add_argument(
        "--cold-start-only",
        action="store_true",
        help="only the cold start's evaluation (greedy, then sampled), cached in the workdir: run it in a process of "
        "its own beside one training run, rather than after the runs; --arms and --seeds are ignored",
    )
    ap.add_argument(
        "--ship",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="also write the compact results `searchgym demo` shows to PATH "
        "(default searchgym/assets/selfplay_<size>.json, shipped with the package)",
    )
    ap.add_argument("--debug", action="store_true", help="show the traceback of a bad-input error too")
    args = ap.parse_args(argv)
    size = SIZES[args.size]
    unknown = [a for a in args.arms.split(",") if a not in ARMS]
    if unknown or not args.arms:
        ap.error(f"--arms {args.arms!r}: use a comma-separated subset of {','.join(ARMS)}")
    try:
        args.seed_list = [int(x) for x in args.seeds.split(",")] if args.seeds else list(size["seeds"])
    except ValueError:
        ap.error(f"--seeds {args.seeds!r}: give comma-separated integers, e.g. 0,1,2")
    if args.cold_start_only and args.collect:
        ap.error("--cold-start-only evaluates the cold start and --collect only collects: give one of them")
    if args.steps is not None and args.steps < 1:
        ap.error(f"--steps must be at least 1; got {args.steps}")
    if args.proposer_samples is not None and args.proposer_samples < 0:
        ap.error(f"--proposer-samples must be 0 (greedy only) or more; got {args.proposer_samples}")
    args.samples = size["proposer_samples"] if args.proposer_samples is None else args.proposer_samples
    args.device = args.device or size["device"]
    steps, save_every = args.steps or size["train"]["total_steps"], size["train"]["save_every"]
    if args.stop_at is not None and not checkpointed_before(args.stop_at, save_every, steps):
        ap.error(
            f"--stop-at {args.stop_at}: stop at a checkpointed step before the last ({steps}); use a multiple of "
            f"save_every={save_every} below {steps}"
        )
    args.eval_steps = parse_eval_at(ap, args.eval_at, save_every, args.stop_at or steps)
    try:
        args.pool = parse_pool_hops(args.pool_hops) if args.pool_hops else dict(size["pool"])
    except ValueError as exc:
        ap.error(f"--pool-hops {args.pool_hops!r}: {exc.args[0]!r} is not HOPS=COUNT; give e.g. 2=40,3=88")
    if args.size == "toy" and not args.model:
        ap.error("--size toy needs --model DIR: a small model folder (searchgym.llm.tiny_models.save_tiny makes one)")
    args.model = args.model or "smollm2"
    init = args.init if args.init is not None else size["init"]
    args.init = None if init in (None, "none") else init
    if args.init not in (None, SHIPPED_INIT) and not Path(args.init).exists():
        ap.error(f"--init {args.init}: no such folder; give a cold-start folder, {SHIPPED_INIT} or none")
    return args


def checkpointed_before(step: int, save_every: int, last: int) -> bool:
    """Whether a run checkpoints at ``step`` (a multiple of ``save_every``) before its ``last`` step: the steps
    ``--eval-at`` may score and ``--stop-at`` may stop at."""
    return 1 <= step < last and step % save_every == 0


def parse_eval_at(ap: argparse.ArgumentParser, text: Optional[str], save_every: int, steps: int) -> list[int]:
    """``--eval-at`` as sorted steps, each a checkpointed step (a multiple of ``save_every``) before the last."""
    if not text:
        return []
    try:
        out = sorted({int(x) for x in text.split(",")})
    except ValueError:
        ap.error(f"--eval-at {text!r}: give comma-separated training steps, e.g. 8,16")
    bad = [k for k in out if not checkpointed_before(k, save_every, steps)]
    if bad:
        ap.error(
            f"--eval-at {text!r}: step {bad[0]} is not a checkpointed step before the last ({steps}); use multiples of "
            f"save_every={save_every} below {steps}"
        )
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run (or ``--collect``) the benchmark; 0 on success, 2 on bad input or an unusable workdir."""
    return run_reporting_errors("bench_selfplay", run, parse_args(argv))


def run_reporting_errors(prog: str, job, args: argparse.Namespace) -> int:
    """``job(args)`` with logging on; 0 when it succeeds, 2 after one line ``<prog>: error: ...`` when it fails on bad
    input (:class:`BenchError` or searchgym's own errors; the traceback too with ``args.debug``)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from searchgym.errors import SearchGymError

    try:
        job(args)
    except (BenchError, SearchGymError) as exc:
        if args.debug:
            traceback.print_exc()
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


def run(args: argparse.Namespace) -> None:
    """The stages for ``args`` (pool, training, evaluation, cold start), then the collection of the workdir."""
    import torch

    from searchgym.construction import load_pool
    from searchgym.construction.path_answers import single_answer
    from searchgym.world.synthetic import default_world

    size = SIZES[args.size]
    if args.device == "cuda" and not torch.cuda.is_available():
        raise BenchError(f"--device cuda: torch {torch.__version__} sees no CUDA GPU here; use --device cpu")
    if size["threads"] and args.device == "cpu":
        torch.set_num_threads(size["threads"])  # one thread per process: two arms side by side on 2 cores
    work = Path(args.workdir) / args.size
    work.mkdir(parents=True, exist_ok=True)
    world = default_world()
    pool_path = stage_pool(world, args.pool, work)
    heldout = heldout_sets(world, size)
    pool = load_pool(pool_path)
    disjoint = check_disjoint(pool, heldout)
    single = frozenset(t.id for t in heldout["proposer"] if t.subgraph is not None and single_answer(world, t.subgraph))
    opts = {
        "model": args.model,
        "init": args.init,
        "device": args.device,
        "steps": args.steps,
        "proposer_baseline": args.proposer_baseline,
        "overrides": parse_overrides(args.set),
        "eval_at": args.eval_steps,
    }
    if args.init:
        from searchgym.training.model_loading import resolve_init

        start = resolve_init(args.init)
    else:
        start = args.model
    start_record = stage_start(start, work, record=not args.collect)
    t0 = time.perf_counter()
    if not args.collect:
        for seed in () if args.cold_start_only else args.seed_list:  # --cold-start-only: no run, the cold start only
            for key in args.arms.split(","):
                arm = ARMS[key]
                cfg = train_config(arm, seed, size, opts, pool_path, work)
                final = stage_train(arm, seed, cfg, start, work, opts["overrides"], args.stop_at)
                modes = sorted({"kg", arm.proposer_mode})
                load = partial(open_trained, start, final)
                stage_eval(
                    run_name(key, seed),
                    load,
                    modes,
                    world,
                    size,
                    work,
                    args.device,
                    str(final),
                )
                if args.samples:
                    stage_sampled(run_name(key, seed), load, world, size, work, args.device, args.samples)
                for step in opts["eval_at"]:
                    policy = checkpoint_policy(work, run_name(key, seed), step)
                    stage_eval(
                        checkpoint_stage(run_name(key, seed), step),
                        lambda policy=policy: open_trained(start, policy),
                        modes,
                        world,
                        size,
                        work,
                        args.device,
                        str(policy),
                    )
        stage_cold(start, world, size, work, args.device, args.samples)
    if args.cold_start_only:
        print(f"the cold start's evaluation is in {work}; collect once a run has finished there")
        return
    header = {
        "benchmark": "selfplay",
        "size": args.size,
        "device": device_info(args.device),
        "machine": machine_info(),
        "torch_threads": torch.get_num_threads(),
        "start": {"model": args.model, "init": args.init, **start_record},
        "pool": {
            "hops": {str(h): n for h, n in args.pool.items()},
            "order": "hop counts interleaved in proportion",
            "seed": 0,
        },
        "eval": {
            "solver_per_hop": {str(h): n for h, n in size["eval_hops"].items()},
            "proposer_targets": size["eval_proposer"],
            "proposer_single_answer_targets": len(single),
            "proposer_samples": args.samples,
            "proposer_sampled_temperature": SAMPLED_TEMPERATURE,
        },
        "disjointness": disjoint,
        "proposer_baseline_override": args.proposer_baseline,
        "overrides": opts["overrides"],
        "seconds_this_invocation": None,
    }
    targets = heldout["proposer"]
    intermediates = {t.id: t.subgraph.bridge_names for t in heldout["solver"] if t.subgraph is not None}
    facts = TargetFacts(
        {t.id: t.hops for t in targets}, single, {t.id: t.subgraph for t in targets}, world, intermediates
    )
    results = collect(work, args.size, header, facts, pool)
    results["seconds_this_invocation"] = round(time.perf_counter() - t0, 1)
    out = Path(args.out) if args.out else RESULTS / f"selfplay_{args.size}.json"
    write_text(out, json.dumps(results, indent=1, default=str) + "\n")
    plot(results, out.with_suffix(".png"))
    print_table(results)
    print(f"wrote {out} and {out.with_suffix('.png')}")
    if args.ship is not None:
        print(f"wrote {ship(results, Path(args.ship) if args.ship else ASSETS / f'selfplay_{args.size}.json')}")


def ship(results: dict, path: Path) -> Path:
    """Write the compact form of ``results`` (what ``searchgym demo`` shows) to ``path``, atomically; returns it."""
    from searchgym.evaluation.selfplay_results import compact_results

    write_text(path, json.dumps(compact_results(results), indent=1, allow_nan=False) + "\n")
    return path


def print_table(results: dict) -> None:
    """Held-out results per stage, one line each."""
    rows = [("cold start", results["cold_start"])]
    for a in results["arms"].values():
        for r in a["runs"]:
            rows += [(f"{a['label']} s{r['seed']} at step {c['step']}", c) for c in r.get("checkpoints", [])]
            rows.append((f"{a['label']} s{r['seed']}", r))
    for name, r in rows:
        by_hop = r["solver"]["by_hops"]
        hops = " ".join(f"{h}-hop {by_hop[str(h)]['mean']:.3f}" if str(h) in by_hop else f"{h}-hop   -  " for h in HOPS)
        cells = r.get("proposer_cells", {})
        prop = " ".join(f"{m} {c['mean']:.3f}" for m, c in cells.items())
        print(f"{name:32s} {hops}  proposer valid: {prop}")
        if "solver_reworded" in r:  # the same questions in held-out wordings
            by_hop = r["solver_reworded"]["by_hops"]
            print(
                f"{'  reworded':32s} "
                + " ".join(f"{h}-hop {by_hop[str(h)]['mean']:.3f}" for h in HOPS if str(h) in by_hop)
            )


if __name__ == "__main__":
    sys.exit(main())
