"""Per-seed table rows of a self-play benchmark result, in the form docs/selfplay_runs.md's tables print.

``bench_selfplay.py`` collects finished runs into one large JSON, and ``bench_selfplay_rescore.py`` scores the same
runs on 100 held-out Solver questions a hop. The docs compare settings seed by seed on the same few columns: the
held-out Proposer (greedy, sampled, paired per target against the cold start), the held-out Solver's paired
gained/lost (on the benchmark's own questions and on the rescore's 100), how often it searched once on a 2-hop
question, and two training drifts (the Solvers' searches a game and the Proposer's 3-hop rollouts that searched
fewer times than the hops, the first 8 steps against the last 8). This script prints those rows from the committed
JSON files, so every figure in such a table can be checked against its results file:

    python benchmarks/selfplay_rows.py \\
        benchmarks/results/selfplay_cpu_one_hop_pool_32_solver_half_lr_bf16_solver_kl_anchor1_stacked_filter_all.json \\
        --rescored benchmarks/results/selfplay_cpu_solver_rescored_100_stacked_filter_all.json

A rescore is matched to each run by workdir and run folder (``--workdir`` names the rescore's workdir where the
results' model paths name another: a folder renamed between the two). Each row starts with its stage (``cold start``
or ``<arm>, seed <n>``); the cells after it are the docs' columns.
Only the standard library is imported: the script reads JSON and prints text.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

#: the columns after the stage, as the docs' search-count tables head them
COLUMNS = (
    "training",
    "KG Proposer greedy (of n; 2- / 3-hop; 3-hop searched short)",
    "sampled (95 %)",
    "paired per target: up / down, mean difference (95 %)",
    "sampled valid on 2- / 3-hop targets (of n; 3-hop searched short)",
    "Solver 1-hop / 2-hop gained/lost",
    "the same of the rescore's set",
    "held-out 2-hop rollouts that searched once",
    "Solver searches a game, first 8 steps → last 8",
    "Proposer's training 3-hop rollouts searched short, first 8 → last 8",
)
WINDOW = 8  # steps at each end of a run that the drift columns compare
DASH = "—"
MINUS = "−"  # the docs print a minus sign, not a hyphen


class RowsError(ValueError):
    """A results file this script cannot read; the message names the file and the problem."""


def signed(x: float, digits: int = 1) -> str:
    """``x`` with its sign, the docs' minus sign for negatives: ``+9.0``, ``−1.2``."""
    text = f"{x:+.{digits}f}"
    return text.replace("-", MINUS)


def flips(cell: Mapping[str, Any]) -> str:
    """A paired gained/lost cell: ``+0/−4``."""
    return f"+{cell['gained']}/{MINUS}{cell['lost']}"


def hop_flips(by_hops: Mapping[str, Any], hops: Sequence[str] = ("1", "2")) -> str:
    """Gained/lost on each of ``hops``, comma-separated: ``+0/−4, +0/−2``."""
    return ", ".join(flips(by_hops[h]) for h in hops)


def greedy_cell(cells: Mapping[str, Any]) -> str:
    """The greedy KG Proposer: valid of all targets, then valid on 2- and 3-hop targets and 3-hop written short."""
    kg = cells["kg"]
    by = kg["by_hops"]
    valid = round(kg["mean"] * kg["n"])
    return f"{valid} ({by['2']['valid']} / {by['3']['valid']}; {by['3']['short']})"


def sampled_valid_cell(cells: Mapping[str, Any]) -> str:
    """The sampled KG Proposer's valid rollouts on 2- and 3-hop targets, and its 3-hop rollouts written short."""
    by = cells["kg_sampled"]["by_hops"]
    return f"{by['2']['valid']} / {by['3']['valid']} ({by['3']['short']})"


def interval(cell: Mapping[str, Any]) -> str:
    """A rate with its 95 % interval: ``0.27 (0.20–0.34)``."""
    return f"{cell['mean']:.2f} ({cell['lo']:.2f}–{cell['hi']:.2f})"


def paired_cell(pair: Mapping[str, Any]) -> str:
    """Targets the run turned valid / invalid against the cold start, and the mean difference in points."""
    d = pair["diff"]
    points = f"{signed(100 * d['mean'])} points ({signed(100 * d['lo'])} to {signed(100 * d['hi'])})"
    return f"{pair['gained']} / {pair['lost']}, {points}"


def ends(values: Sequence[Optional[float]]) -> tuple[list[float], list[float]]:
    """The first and last :data:`WINDOW` steps' values, the missing ones left out."""
    return [v for v in values[:WINDOW] if v is not None], [v for v in values[-WINDOW:] if v is not None]


def searches_drift(train: Mapping[str, Any]) -> str:
    """The Solvers' mean searches a game over the first 8 steps and over the last 8: ``1.84 → 1.84``."""
    first, last = ends(train.get("solver_searches", []))
    if not first or not last:
        return DASH
    return f"{sum(first) / len(first):.2f} → {sum(last) / len(last):.2f}"


def short_drift(train: Mapping[str, Any], hop: str = "3") -> str:
    """The Proposer's ``hop``-hop training rollouts that searched short, first 8 steps → last 8 (of how many)."""
    steps = train.get("valid_by_hops", {}).get("steps", [])
    if not steps:
        return DASH
    first, last = steps[:WINDOW], steps[-WINDOW:]
    count = lambda rows, key: sum(row.get(hop, {}).get(key, 0) for row in rows)  # noqa: E731
    (short_a, n_a), (short_b, n_b) = ((count(w, "short"), count(w, "n")) for w in (first, last))
    if n_a == n_b:  # a pool that plays as many 3-hop games in each window (the benchmark's does)
        return f"{short_a} → {short_b} (of {n_a})"
    return f"{short_a} of {n_a} → {short_b} of {n_b}"


def run_key(run: Mapping[str, Any], size: str, workdir: Optional[str] = None) -> str:
    """``<workdir>/<run folder>`` of a collected run, read from its model path (``<workdir>/<size>/c_s0/final``).

    ``workdir`` replaces the path's workdir name: a run collected from a folder renamed before its rescore."""
    parts = Path(run["model"]).parts
    sizes = [i for i in range(1, len(parts) - 1) if parts[i] == size]  # with a folder above and below
    if not sizes:
        raise RowsError(f"run {run['stage']}'s model path {run['model']} has no <workdir>/{size}/<run> folders")
    at = sizes[-1]  # the last one: the workdir is above it, the run folder below
    return f"{workdir or parts[at - 1]}/{parts[at + 1]}"


def matched_rescores(
    results: Mapping[str, Any], rescored: Optional[Mapping[str, Any]], workdir: Optional[str] = None
) -> dict[str, Mapping[str, Any]]:
    """Each run's rescore cells by stage, matched on workdir and run folder, never on the folder alone.

    A rescore file may hold several settings' runs of the same seed (``half32_bf16_kl/c_s1`` beside
    ``half32_bf16_solver_kl/c_s1``); a run missing from it prints a dash, and a rescore that holds none of the
    results' runs is an error (:class:`RowsError`) naming the workdirs it does hold."""
    if not (rescored and rescored["runs"]):  # no rescore, or one with no runs: every rescore cell a dash
        return {}
    again = {r["run"]: r["vs_cold_start"]["solver"]["by_hops"] for r in rescored["runs"]}  # by <workdir>/<run>
    runs = [run for entry in results["arms"].values() for run in entry["runs"]]
    keys = {run["stage"]: run_key(run, results["size"], workdir) for run in runs}
    found = {stage: again[key] for stage, key in keys.items() if key in again}
    if not found:
        held = sorted({key.split("/", 1)[0] for key in again})
        raise RowsError(
            f"the rescore holds none of these runs ({', '.join(sorted(keys.values()))}) but runs of "
            f"{', '.join(held)}; give the rescore of the same runs, or --workdir NAME where their folder was renamed"
        )
    return found


def run_row(arm: str, run: Mapping[str, Any], rescored: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One finished run's cells, its stage first."""
    cells, vs = run["proposer_cells"], run["vs_cold_start"]
    again = rescored.get(run["stage"])  # matched on workdir and run folder: matched_rescores
    return [
        f"{arm}, seed {run['seed']}",
        f"{run['train_s'] / 60:.0f} min",
        greedy_cell(cells),
        interval(cells["kg_sampled"]),
        paired_cell(vs["proposer_kg_sampled"]),
        sampled_valid_cell(cells),
        hop_flips(vs["solver"]["by_hops"]),
        hop_flips(again) if again is not None else DASH,
        str(run["solver"]["stopped_short_by_hops"]["2"]["searched_short"]),
        searches_drift(run["train"]),
        short_drift(run["train"]),
    ]


def cold_row(cold: Mapping[str, Any]) -> list[str]:
    """The cold start's cells: no training, no pairing."""
    cells = cold["proposer_cells"]
    return [
        "cold start",
        DASH,
        greedy_cell(cells),
        f"{cells['kg_sampled']['mean']:.2f}",
        DASH,
        sampled_valid_cell(cells),
        DASH,
        DASH,
        str(cold["solver"]["stopped_short_by_hops"]["2"]["searched_short"]),
        DASH,
        DASH,
    ]


def rows(
    results: Mapping[str, Any], rescored: Optional[Mapping[str, Any]] = None, workdir: Optional[str] = None
) -> list[list[str]]:
    """Every row of ``results``: the cold start, then each arm's runs by seed (``workdir``: :func:`run_key`)."""
    again = matched_rescores(results, rescored, workdir)
    out = [cold_row(results["cold_start"])]
    for arm, entry in results["arms"].items():
        out += [run_row(arm, run, again) for run in sorted(entry["runs"], key=lambda r: r["seed"])]
    return out


def markdown(table: Sequence[Sequence[str]]) -> str:
    """``table`` as markdown rows under the column heads."""
    head = ["stage", *COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in table]
    return "\n".join(lines)


def load(path: Path, kind: str) -> Mapping[str, Any]:
    """A results JSON, or :class:`RowsError` naming the file and what is wrong with it."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise RowsError(f"{path}: no such file; give a {kind} JSON from benchmarks/results/") from None
    except json.JSONDecodeError as e:
        raise RowsError(f"{path}: not JSON ({e.msg} at line {e.lineno}); give a {kind} JSON") from None
    keys = ("cold_start", "arms") if kind == "bench_selfplay" else ("runs",)
    if not isinstance(data, dict) or any(k not in data for k in keys):
        raise RowsError(f"{path}: not a {kind} result (it lacks {' or '.join(keys)}); give the {kind} JSON")
    return data


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Print the rows; exit 2 with one line on a file that cannot be read."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("results", type=Path, help="a bench_selfplay.py results JSON (benchmarks/results/selfplay_*.json)")
    ap.add_argument(
        "--rescored",
        type=Path,
        help="the bench_selfplay_rescore.py JSON of the same runs (fills the rescore column; without it: —)",
    )
    ap.add_argument(
        "--workdir",
        help="the runs' workdir name in the rescore, where it differs from the one in the results' model paths "
        "(a folder renamed between the collect and the rescore)",
    )
    args = ap.parse_args(argv)
    try:
        results = load(args.results, "bench_selfplay")
        rescored = load(args.rescored, "bench_selfplay_rescore") if args.rescored else None
        print(markdown(rows(results, rescored, args.workdir)))
    except (RowsError, KeyError) as e:
        what = str(e)
        if isinstance(e, KeyError):  # a file collected before the field existed
            what = f"the results lack the field {e}; collect them again with bench_selfplay.py --collect"
        print(f"selfplay_rows.py: {what}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
