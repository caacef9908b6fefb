"""``searchgym diagnose``: the WCR paper's analysis of an exported trajectory file, as text, JSON and PNG.

Examples::

    searchgym play --games 16 --reward wcr --export runs/games.jsonl
    searchgym diagnose runs/games.jsonl --out diag.png --json diag.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from ..core.artefacts import check_report_output, write_report
from ..core.path_errors import not_there
from ..errors import MissingFileError
from .number_checks import refuse_bad_numbers


def register(subparsers) -> None:
    """Add the ``diagnose`` sub-command."""
    p = subparsers.add_parser(
        "diagnose",
        help="coverage/correctness Spearman, accuracy by coverage bin and rates of exported trajectories",
        description="Compute the WCR diagnostics (searchgym.wrappers.compute_diagnostics) of a JSONL export "
        "written by `searchgym play --export`, `searchgym demo` or an env made with export_path=.",
    )
    p.add_argument("trajectories", help="JSONL export of games or trajectories")
    p.add_argument("--out", default=None, help="save the diagnostic panels to this PNG")
    p.add_argument("--json", default=None, help="write the full diagnostics dict to this JSON file")
    p.add_argument("--games-per-batch", type=int, default=8, help="exported games per batch (default 8)")
    p.add_argument("--case-insensitive", action="store_true", help="match waypoints case-insensitively")
    p.set_defaults(func=run_diagnose)


def _fmt(x: float) -> str:
    return "n/a" if isinstance(x, float) and math.isnan(x) else f"{x:.3f}"


def run_diagnose(args: argparse.Namespace) -> int:
    """Print a summary of the diagnostics; optionally save them as JSON and PNG. Returns 0. The outputs are
    checked before any work and written whole, never over the export or another kind of file."""
    from ..wrappers.diagnostics import compute_diagnostics, plot_diagnostics

    refuse_bad_numbers(args, least={"games_per_batch": 1})
    path = Path(args.trajectories)
    if not path.is_file():
        problem = f"no trajectory export at {path}" if not path.exists() else f"{path} {not_there(path)}"
        raise MissingFileError(f"{problem}; write one with `searchgym play --export {path}`")
    _check_outputs(args)
    diag = compute_diagnostics(path, games_per_batch=args.games_per_batch, case_insensitive=args.case_insensitive)
    overall = diag["spearman_overall"]
    print(
        f"solver rollouts: {diag['solver_rollouts']}  proposer rollouts: {diag['proposer_rollouts']}  "
        f"without waypoints: {diag['solver_without_waypoints']}"
    )
    print(
        f"accuracy: {_fmt(diag['accuracy'])}  mean coverage: {_fmt(diag['mean_coverage'])}  "
        f"valid question rate: {_fmt(diag['valid_question_rate'])}"
    )
    print(
        f"search turns per rollout: {_fmt(diag['search_turns'])}  "
        f"information utilisation: {_fmt(diag['information_utilisation'])}"
    )
    print(
        f"Spearman(coverage, correct) over {overall['n']} rollouts: rho {_fmt(overall['rho'])}, p {_fmt(overall['p'])}"
    )
    print("accuracy by coverage bin:")
    for b in diag["accuracy_by_coverage"]:
        print(
            f"  [{b['low']:.2f}, {b['high']:.2f}{']' if b is diag['accuracy_by_coverage'][-1] else ')'}  "
            f"n={b['n']:<5d} accuracy {_fmt(b['accuracy'])}"
        )
    if args.json is not None:
        # NaN is not JSON: undefined statistics are written as null.
        text = json.dumps(_nan_to_none(diag), indent=2)
        written = write_report(args.json, "JSON report", lambda tmp: tmp.write_text(text, encoding="utf-8"))
        print(f"wrote {written}")
    if args.out is not None:
        print(f"wrote {write_report(args.out, 'PNG figure', lambda tmp: plot_diagnostics(diag, tmp))}")
    return 0


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse ``--json`` / ``--out`` paths that would lose something (the export itself, a world, another kind of
    file, each other) before the diagnostics are computed."""
    if args.json is not None:
        check_report_output(args.json, "JSON report", inputs=[args.trajectories])
    if args.out is not None:
        check_report_output(args.out, "PNG figure", inputs=[args.trajectories])


def _nan_to_none(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value
