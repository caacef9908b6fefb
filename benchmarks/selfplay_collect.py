"""The self-play benchmark's collection (``bench_selfplay.py --collect``): every finished run of a workdir read
into one results dict -- training curves, the held-out Solver and Proposer cells paired with the cold start, the
issue's targets -- and drawn as one PNG."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from bench_learning import (
    HOPS,
    eval_dir,
    heldout_records,
    paired_counts,
    paired_flips,
    rl_gain,
    stopped_short,
)
from selfplay_setup import (
    ARMS,
    BUDGET,
    COLD,
    DONE,
    SAMPLED_CELL,
    SAMPLED_TEMPERATURE,
    SIZES,
    Arm,
    BenchError,
    format_pool_hops,
    run_name,
)
from selfplay_stages import STEP_STAGE, checkpoint_stage

from searchgym.core.atomic_writes import write_file

#: curve name -> the trainer's metrics.jsonl key
CURVES = {
    "valid_rate": "proposer/valid_rate",
    "proposer_reward": "proposer/reward",
    "solver_reward": "solver/reward",
    "solver_correct": "solver/correct",
    "solver_on_proposed": "solver/on_proposed",
    "solver_proposed_reward": "solver/proposed_reward",
    "solver_proposed_correct": "solver/proposed_correct",
    "groups_with_signal": "solver/groups_with_signal",
    "question_hops": "proposer/hops",
    "question_words": "proposer/question_words",
    "proposer_searches": "proposer/searches",
    "proposer_searched_short": "proposer/searched_short",
    "solver_searches": "solver/searches",
    "solver_search_discounted": "solver/search_discounted",
    "solver_short_search_discounted": "solver/short_search_discounted",
    "solver_entropy": "solver/entropy",
    "proposer_entropy": "proposer/entropy",
    "solver_skipped_no_signal": "solver/skipped_no_signal",
    "proposer_skipped_no_signal": "proposer/skipped_no_signal",
    "games": "games",
    "rollout_s": "perf/rollout_s",
    "env_s": "perf/env_s",
    "update_s": "perf/update_s",
    "step_s": "perf/step_s",
}


def _finite(x: Any) -> Any:
    """``x`` with NaN/inf as None (JSON has no NaN)."""
    return None if isinstance(x, float) and not math.isfinite(x) else x


def train_curve(
    run: Path, world: Any = None, pool: Optional[Mapping[str, Any]] = None, until: Optional[int] = None
) -> dict:
    """One run's per-step curves from its ``metrics.jsonl`` (the last record of a step wins; with ``until``, the
    steps up to it: a run stopped there that had trained on), rejection reasons as per-step shares, and the
    questions of its first and last step (all of them stay in metrics.jsonl). Given the ``world`` and the ``pool``
    (subgraph id -> subgraph), also why its invalid questions were invalid, per step and over the run
    (``invalid_kinds``: ``searchgym.evaluation.proposer_errors``; a question logged before records named their
    ``target`` counts as its rejection reason)."""
    from searchgym.training.metrics import read_metrics

    logged = read_metrics(run / "metrics.jsonl")
    rows = list({m["step"]: m for m in logged if "games" in m and (until is None or m["step"] <= until)}.values())
    rows.sort(key=lambda m: m["step"])
    curve: dict[str, Any] = {"step": [m["step"] for m in rows]}
    curve.update({name: [_finite(m.get(key)) for m in rows] for name, key in CURVES.items()})
    prefix = "proposer/rejected/"
    reasons = sorted({k[len(prefix) :] for m in rows for k in m if k.startswith(prefix)})
    curve["rejected"] = {r: [_finite(m.get(prefix + r, 0.0)) for m in rows] for r in reasons}
    curve["valid_by_hops"] = valid_by_hops(rows)
    if world is not None and pool is not None:
        from searchgym.evaluation.proposer_errors import count_invalid_kinds

        steps = [
            Counter(count_invalid_kinds(world, pool, m.get("proposer/questions") or [], key="target")) for m in rows
        ]
        curve["invalid_kinds"] = {
            "total": dict(sum(steps, Counter()).most_common()),
            "steps": [dict(c.most_common()) for c in steps],
        }
    curve["questions_first_step"] = rows[0].get("proposer/questions", []) if rows else []
    curve["questions_last_step"] = rows[-1].get("proposer/questions", []) if rows else []
    return curve


def tally_valid(cells: dict, hops: Any, valid: bool, searches: Optional[int] = None) -> None:
    """Count one question (or target) of ``hops`` hops in ``cells`` (hop count as a string -> ``{"valid", "n"}``);
    with the Proposer's ``searches`` for it, also their total (``searches_total``), how many questions it wrote
    after fewer searches than the path has hops (``short``: a question written one hop short of a 3-hop target
    asks for the intermediate entity, which the verifier then answers -- the way the KG Proposer forgot 3-hop
    questions in the ``cpu`` runs) or after more (``long``: a 3-hop habit on a 2-hop target), and how many of
    those written after exactly as many searches as hops were valid (``matched_valid`` of ``matched``): whether
    a Proposer's valid rate moved because it searched the path's length more often or wrote better questions once
    it did."""
    cell = cells.setdefault(str(hops), {"valid": 0, "n": 0})
    cell["valid"] += int(bool(valid))
    cell["n"] += 1
    if searches is not None and isinstance(hops, int):
        for key, count in (
            ("searches_total", searches),
            ("short", int(searches < hops)),
            ("long", int(searches > hops)),
            ("matched", int(searches == hops)),
            ("matched_valid", int(searches == hops and bool(valid))),
        ):
            cell[key] = cell.get(key, 0) + count


def valid_by_hops(rows: Sequence[Mapping]) -> dict:
    """The Proposer's questions while training, per hop count of their subgraphs: the valid count and the number
    written (``{"valid", "n"}``, as :func:`proposer_cells` counts the held-out targets), over the whole run
    (``total``) and per step (``steps``). Its training signal by hop count: SSP's REINFORCE pushes only on valid
    questions, so a hop count that is seldom valid while training is one the Proposer is not taught (and may forget)."""
    total: dict[str, dict] = {}
    steps = []
    for m in rows:
        step: dict[str, dict] = {}
        for q in m.get("proposer/questions") or []:
            for cells in (step, total):
                tally_valid(cells, q.get("hops", "?"), q.get("valid"), q.get("searches"))
        steps.append(dict(sorted(step.items())))
    return {"total": dict(sorted(total.items())), "steps": steps}


@dataclass(frozen=True)
class TargetFacts:
    """What the collection knows about the held-out Proposer targets: each one's hop count (``hops``: target id ->
    hops), the ids of those whose path has a single answer in the world (``single``, from
    ``searchgym.construction.path_answers``), and, to say why a question on one was invalid, each one's subgraph
    (``subgraphs``) and the world they are in."""

    hops: Mapping[str, int]
    single: frozenset
    subgraphs: Mapping[str, Any] = field(default_factory=dict)
    world: Any = None
    #: the held-out Solver questions' task id -> the names of the nodes each one's path passes through between
    #: its seed and its answer (``Subgraph.bridge_names``), to count answers that stopped short
    #: (``bench_learning.stopped_short``)
    intermediates: Mapping[str, Sequence[str]] = field(default_factory=dict)


def proposer_cells(work: Path, name: str, modes: Sequence[str], facts: TargetFacts) -> dict:
    """Per Proposer mode, the valid rate on the held-out targets with its 95 % bootstrap interval, and per hop
    count of the targets the valid count out of the targets, the searches made and the questions written short
    of the path (:func:`tally_valid`): a Proposer that learns 2-hop questions while forgetting 3-hop ones shows
    it here, not in the overall rate; the valid count on the single-answer targets (``single_answer``; the
    others admit no verifiable question); and, for the KG prompt, why the invalid questions were invalid
    (``invalid_kinds``: ``searchgym.evaluation.proposer_errors``, kind -> count)."""
    out = {}
    for m in modes:
        records = proposer_records(work, name, m)
        if records:  # an answer-only question is written on no path: no invalid kinds
            out[m] = records_cell(records, facts, kinds=m == "kg")
    return out


def records_cell(records: Mapping[str, Sequence[Mapping]], facts: TargetFacts, *, kinds: bool) -> dict:
    """One Proposer cell from a stage's held-out ``records`` (target id -> its rollouts: one greedy, or several
    sampled): the valid share of all rollouts with a 95 % bootstrap interval over targets (a target's rollouts
    resampled together), and counting rollouts ``by_hops`` (:func:`tally_valid`), ``single_answer`` and, with
    ``kinds`` and the world known, the invalid ones' ``invalid_kinds``."""
    from searchgym.evaluation.metrics import bootstrap_ci
    from searchgym.evaluation.proposer_errors import count_invalid_kinds

    by_hops: dict[str, dict] = {}
    for task, rs in sorted(records.items(), key=lambda kv: facts.hops.get(kv[0], 0)):
        for r in rs:
            searches = len(r["queries"]) if isinstance(r.get("queries"), list) else None
            tally_valid(by_hops, facts.hops.get(task, "?"), bool(r["valid"]), searches)
    cell: dict[str, Any] = {**bootstrap_ci(valid_shares(records).values()), "by_hops": by_hops}
    kept = [bool(r["valid"]) for task, rs in records.items() if task in facts.single for r in rs]
    cell["single_answer"] = {"valid": sum(kept), "n": len(kept)}
    if kinds and facts.world is not None:
        rows = [r for rs in records.values() for r in rs]
        cell["invalid_kinds"] = count_invalid_kinds(facts.world, facts.subgraphs, rows)
    return cell


def valid_shares(records: Mapping[str, Sequence[Mapping]]) -> dict:
    """target id -> the share of its rollouts in ``records`` (target id -> rollouts) that wrote a valid question."""
    return {task: sum(bool(r["valid"]) for r in rs) / len(rs) for task, rs in records.items()}


def sampled_cell(work: Path, name: str, facts: TargetFacts) -> Optional[dict]:
    """The stage's sampled held-out KG Proposer rate as :func:`records_cell` reports it, with ``samples`` a target
    (None if not scored)."""
    records = proposer_records(work, name, "kg", sampled=True)
    if not records:
        return None
    return {**records_cell(records, facts, kinds=True), "samples": max(len(rs) for rs in records.values())}


def proposer_records(work: Path, name: str, mode: str, *, sampled: bool = False) -> dict[str, list]:
    """target id -> the stage's held-out Proposer rollouts on it (prompt ``mode``: question, queries, valid, reason;
    one greedy, or with ``sampled`` those of :func:`stage_sampled`), {} if not scored."""
    from searchgym.training.learning_checks import proposer_records_name

    path = eval_dir(work, name) / proposer_records_name(mode, sampled=sampled)
    if not path.is_file():
        return {}
    out: dict[str, list] = {}
    for r in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
        out.setdefault(r["task"], []).append(r)
    return out


def proposer_valid(work: Path, name: str, mode: str, *, sampled: bool = False) -> dict:
    """target id -> the share of the stage's Proposer rollouts on it (prompt ``mode``; greedy: one, so 1.0 or 0.0)
    that wrote a valid question ({} if not scored)."""
    return valid_shares(proposer_records(work, name, mode, sampled=sampled))


def finished_runs(work: Path) -> dict:
    """arm key -> sorted seeds whose training and evaluation are both finished in ``work``."""
    out: dict[str, list[int]] = {}
    for arm in ARMS:
        for done in sorted(work.glob(f"{arm}_s*/final/{DONE}")):
            seed = int(json.loads(done.read_text())["seed"])
            if (work / f"eval_{run_name(arm, seed)}.json").is_file():
                out.setdefault(arm, []).append(seed)
    return {a: sorted(s) for a, s in out.items()}


def seeds_note(runs_done: dict) -> str:
    """The seeds each arm finished (arms may differ: a CPU run may add a seed to some arms only), with the caveat
    that one run's difference inside its bootstrap interval is not evidence when an arm has a single seed."""
    per_arm = "; ".join(f"({k}) {', '.join(map(str, s))}" for k, s in sorted(runs_done.items()))
    note = f"seeds per arm: {per_arm}"
    if any(len(s) < 2 for s in runs_done.values()):
        note += "; one seed is allowed on CPU: a difference inside one run's bootstrap interval is not evidence"
    return note


def scored_stage(work: Path, name: str, modes: Sequence[str], facts: TargetFacts) -> dict:
    """A scored stage's held-out results with its Proposer cells and its paired flips against the cold start."""
    ev = with_stopped_short(json.loads((work / f"eval_{name}.json").read_text()), work, name, facts)
    ev["proposer_cells"] = with_sampled(proposer_cells(work, name, modes, facts), work, name, facts)
    ev["vs_cold_start"] = {
        "solver": paired_flips(work, COLD, name),
        "solver_reworded": paired_flips(work, COLD, name, reworded=True),
        **{f"proposer_{m}": paired_counts(proposer_valid(work, COLD, m), proposer_valid(work, name, m)) for m in modes},
    }
    before, after = proposer_valid(work, COLD, "kg", sampled=True), proposer_valid(work, name, "kg", sampled=True)
    if before and after:  # per target, the share of its sampled rollouts that were valid
        ev["vs_cold_start"][f"proposer_{SAMPLED_CELL}"] = paired_counts(before, after)
    return ev


def with_stopped_short(ev: dict, work: Path, name: str, facts: TargetFacts) -> dict:
    """``ev`` (a stage's held-out results) with, in each wording's Solver cell, the answers per hop count that
    stopped at a node short of the answer and the rollouts that searched fewer times than the hops
    (``stopped_short_by_hops``), where the questions' paths are known."""
    if not facts.intermediates:
        return ev
    for key, reworded in (("solver", False), ("solver_reworded", True)):
        if key in ev:
            ev[key]["stopped_short_by_hops"] = stopped_short(
                heldout_records(work, name, reworded=reworded), facts.intermediates
            )
    return ev


def with_sampled(cells: dict, work: Path, name: str, facts: TargetFacts) -> dict:
    """``cells`` with the stage's sampled KG Proposer rate as the :data:`SAMPLED_CELL` mode, where it was scored."""
    cell = sampled_cell(work, name, facts)
    return cells if cell is None else {**cells, SAMPLED_CELL: cell}


def scored_checkpoints(work: Path, name: str) -> list[int]:
    """The training steps at which run ``name`` was also scored (``--eval-at``), ascending."""
    prefix = f"eval_{name}{STEP_STAGE}"
    steps = (p.name[len(prefix) : -len(".json")] for p in work.glob(f"{prefix}*.json"))
    return sorted(int(x) for x in steps if x.isdigit())


def collect(work: Path, size_name: str, header: dict, facts: TargetFacts, pool: Sequence[Any] = ()) -> dict:
    """Every finished run of ``work`` against the cold start: curves, held-out results, paired flips, gains and
    the issue's targets (met or not, reported either way), with the seeds each arm finished; ``header``: what the
    invocation records about itself (size, machine, start, pool, held-out sets); ``facts``: the held-out
    Proposer targets' hop counts and single-answer ids; ``pool``: the workdir's pool subgraphs, to read the KG
    arms' training questions against the paths they were written on."""
    cold_path = work / f"eval_{COLD}.json"
    runs_done = finished_runs(work)
    if not cold_path.is_file() or not runs_done:
        raise BenchError(
            f"{work} has no finished run to collect (a trained and evaluated arm and the cold start's evaluation); "
            "run the benchmark without --collect first"
        )
    from searchgym.training.selfplay_config import TrainConfig

    cold = with_stopped_short(json.loads(cold_path.read_text()), work, COLD, facts)
    cold["proposer_cells"] = with_sampled(proposer_cells(work, COLD, ("kg", "vanilla"), facts), work, COLD, facts)
    configs = {
        (k, s): TrainConfig.load(work / run_name(k, s) / "config.yaml") for k, ss in runs_done.items() for s in ss
    }
    records = {ks: json.loads((work / run_name(*ks) / "final" / DONE).read_text()) for ks in configs}
    budgets = {  # a run stopped early (--stop-at) played that many steps of its schedule
        run_name(*ks): {**{f: getattr(c, f) for f in BUDGET}, "stopped_at": records[ks].get("stopped_at")}
        for ks, c in configs.items()
    }
    if len({json.dumps(b, sort_keys=True) for b in budgets.values()}) != 1:
        raise BenchError(
            f"the finished runs in {work} have different rollout budgets ({budgets}); an arm comparison needs equal "
            "ones: give each budget its own --workdir"
        )
    budget = next(iter(budgets.values()))
    results: dict[str, Any] = {
        **header,
        "seeds": sorted({s for seeds in runs_done.values() for s in seeds}),
        "seeds_note": seeds_note(runs_done),
        "budget": {**budget, "games_per_run": budget["batch_size"] * (budget["stopped_at"] or budget["total_steps"])},
        "budget_equal": True,
        "cold_start": cold,
        "arms": {},
    }
    stages: dict[str, list] = {"cold start": [cold]}
    pool_by_id = {sg.id: sg for sg in pool}
    for key, seeds in runs_done.items():
        arm = ARMS[key]
        modes = sorted({"kg", arm.proposer_mode})
        runs = []
        for seed in seeds:
            name = run_name(key, seed)
            # an answer-only question is written on no path: only the KG Proposer's are read against theirs
            stopped_at = records[(key, seed)].get("stopped_at")
            curve = train_curve(
                work / name, facts.world, pool_by_id if arm.proposer_mode == "kg" else None, until=stopped_at
            )
            runs.append(
                {
                    **scored_stage(work, name, modes, facts),
                    "seed": seed,
                    "stopped_at": stopped_at,
                    "train": curve,
                    "train_s": round(sum(x or 0.0 for x in curve["step_s"]), 1),
                    "games": sum(x or 0 for x in curve["games"]),
                    "adapter": str(work / name / "final"),
                    "checkpoints": [
                        {"step": step, **scored_stage(work, checkpoint_stage(name, step), modes, facts)}
                        for step in scored_checkpoints(work, name)
                    ],
                }
            )
        config = configs[(key, seeds[0])].to_dict()
        config.pop("seed")
        overrides = records[(key, seeds[0])].get("overrides", [])
        label = arm_label(
            arm, config["proposer_baseline"], size_name, overrides, header["pool"]["hops"], budget["stopped_at"]
        )
        results["arms"][key] = {
            "label": label,
            "recipe": arm.recipe,
            "proposer_mode": arm.proposer_mode,
            "config": config,
            "overrides": overrides,
            "runs": runs,
        }
        stages[label] = runs
    labels = [results["arms"][k]["label"] for k in runs_done]
    results["solver_gain"] = rl_gain(stages, labels)
    results["proposer_gain"] = proposer_gain(cold, results["arms"])
    results["targets"] = targets(size_name, results)
    return results


def arm_label(
    arm: Arm,
    proposer_baseline: str,
    size_name: str,
    overrides: Sequence[str] = (),
    pool: Optional[Mapping] = None,
    stopped_at: Optional[int] = None,
) -> str:
    """The arm's label, naming the Proposer baseline when its runs trained with another than the recipe's own
    (``--proposer-baseline``), every ``--set`` override, a ``pool`` (hop count: subgraphs) other than the
    size's (``--pool-hops``) and a stop before the schedule's end (``--stop-at``), so an ablation's table and
    figure never pass for the arm itself."""
    from searchgym.training.recipes import recipe_values

    own = recipe_values(arm.recipe, SIZES[size_name]["recipe_size"])["proposer_baseline"]
    label = arm.label if proposer_baseline == own else f"{arm.label}, {proposer_baseline} baseline"
    if pool is not None and format_pool_hops(pool) != format_pool_hops(SIZES[size_name]["pool"]):
        overrides = [*overrides, f"pool {format_pool_hops(pool)}"]
    if stopped_at is not None:
        overrides = [*overrides, f"stopped at step {stopped_at}"]
    return ", ".join([label, *overrides])


def proposer_gain(cold: dict, arms: dict) -> dict:
    """Per arm and Proposer mode: the seeds' mean held-out valid rate minus the cold start's, with the spread."""
    out: dict = {}
    for key, arm in arms.items():
        for mode, cell in cold["proposer_cells"].items():
            vals = [r["proposer_cells"][mode]["mean"] for r in arm["runs"] if mode in r["proposer_cells"]]
            if vals:
                out.setdefault(key, {})[mode] = {
                    "cold_start": cell["mean"],
                    "mean": sum(vals) / len(vals),
                    "gain": sum(vals) / len(vals) - cell["mean"],
                    "min": min(vals) - cell["mean"],
                    "max": max(vals) - cell["mean"],
                    "seeds": len(vals),
                }
    return out


def targets(size_name: str, results: dict) -> dict:
    """The issue's targets for ``size_name``, each with the measured values and whether it is met.

    cpu: in the KG arms the Proposer's held-out valid rate (KG prompt) rises >= 10 points, greedy and, where
    scored, sampled as the game samples (``<arm>_proposer_sampled_valid_plus_10``), and no arm loses
    held-out Solver accuracy on any hop count. gpu (and toy, its scaled copy): arm (c) gains >= 5 points on
    held-out 2- and 3-hop questions, and the ordering (c) >= (b) >= (a) of mean held-out accuracy."""
    gain, pgain = results["solver_gain"], results["proposer_gain"]
    out: dict[str, Any] = {}
    if size_name == "cpu":
        for key in ("b", "c"):
            if key in pgain and "kg" in pgain[key]:
                g = pgain[key]["kg"]["gain"]
                out[f"{key}_proposer_valid_plus_10"] = {"gain": g, "met": g >= 0.10}
            if key in pgain and SAMPLED_CELL in pgain[key]:  # the same target on the rate the game samples
                g = pgain[key][SAMPLED_CELL]["gain"]
                out[f"{key}_proposer_sampled_valid_plus_10"] = {"gain": g, "met": g >= 0.10}
        for key, arm in results["arms"].items():
            by_hop = gain.get(arm["label"], {})
            out[f"{key}_no_net_loss_any_hop"] = {
                "gain_by_hop": {h: v["gain"] for h, v in by_hop.items()},
                "met": all(v["gain"] >= 0 for v in by_hop.values()),
            }
        return out
    c = gain.get(results["arms"]["c"]["label"], {}) if "c" in results["arms"] else {}
    for h in ("2", "3"):
        if h in c:
            out[f"c_{h}hop_plus_5"] = {"gain": c[h]["gain"], "seeds": c[h]["seeds"], "met": c[h]["gain"] >= 0.05}
    means = {}  # per arm, the seeds' mean of the 2- and 3-hop held-out EM (the hop counts of the target)
    for key, arm in results["arms"].items():
        vals = [(r["solver"]["by_hops"]["2"]["mean"] + r["solver"]["by_hops"]["3"]["mean"]) / 2 for r in arm["runs"]]
        means[key] = sum(vals) / len(vals)
    if len(means) == len(ARMS):
        out["ordering_c_ge_b_ge_a"] = {"mean_em_2_3_hop": means, "met": means["c"] >= means["b"] >= means["a"]}
    return out


def plot(results: dict, path: Path) -> None:
    """One figure: per step, the Proposer's valid rate, its reward, the Solvers' reward (dashed: on the model's
    questions) and groups with signal, a line per run and a colour per arm; then held-out Solver accuracy by hop
    and the Proposer's held-out valid rate, cold start and every arm (bars: one run's 95 % interval, or the
    seeds' min-max)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from searchgym.evaluation.plots import arm_curves, hop_bars, interval_bars
    from searchgym.evaluation.selfplay_results import shared_settings

    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    panels = [
        (axes[0][0], "valid_rate", "Proposer valid-question rate"),
        (axes[0][1], "proposer_reward", "Proposer reward"),
        (axes[0][2], "solver_reward", "Solver reward (dashed: on the model's questions)"),
        (axes[1][0], "groups_with_signal", "Solver groups with signal"),
    ]
    arms = list(results["arms"].values())
    names, shared = shared_settings([arm["label"] for arm in arms])
    arm_curves(
        panels,
        [(name, [run["train"] for run in arm["runs"]]) for arm, name in zip(arms, names)],
        dashed=(axes[0][2], "solver_proposed_reward"),
    )
    stages = {"cold start": [results["cold_start"]]}
    stages.update({arm_name: arm["runs"] for arm, arm_name in zip(arms, names)})
    hop_bars(
        axes[1][1],
        {st: [r["solver"]["by_hops"] for r in runs] for st, runs in stages.items()},
        HOPS,
        ylabel="held-out exact match",
    )
    axes[1][1].set_title("held-out Solver exact match", fontsize=10)
    axes[1][1].set_ylim(0, 1)
    modes = ("kg", SAMPLED_CELL, "vanilla")
    interval_bars(
        axes[1][2],
        {st: [r.get("proposer_cells", {}) for r in runs] for st, runs in stages.items()},
        modes,
        ["KG prompt, greedy", f"KG prompt, sampled (T = {SAMPLED_TEMPERATURE:g})", "answer-only prompt"],
        ylabel="held-out valid-question rate",
    )
    axes[1][2].set_title("Proposer on held-out targets", fontsize=10)
    axes[1][2].set_ylim(0, 1)
    seeds = sorted({r["seed"] for arm in results["arms"].values() for r in arm["runs"]})
    fig.suptitle(
        f"KGSelfPlay-v0 from the cold start, both roles trained ({results['size']} size, seeds {seeds})"
        + (f"\nevery arm with {shared}" if shared else "")
    )
    fig.tight_layout()
    try:
        write_file(path, lambda tmp: fig.savefig(tmp, dpi=110))
    finally:
        plt.close(fig)
