"""The WCR paper's analysis (kg-paths-wcr §4.4, App. E.2) over exported trajectories.

:func:`compute_diagnostics` takes :class:`~searchgym.core.types.Trajectory` objects, exported
:class:`~searchgym.envs.export.GameRecord` s, or the path of a JSONL export
(:func:`searchgym.envs.export.read_trajectories`) and returns:

- ``spearman``: per batch, Spearman ρ (and p) between raw waypoint coverage g_i and correctness c_i
  of the solver rollouts (Fig. 4b). A batch where either variable is constant has no defined
  correlation: ρ = p = NaN there (and in ``spearman_overall``), never a made-up 0;
- ``accuracy_by_coverage``: accuracy per coverage bin (Fig. 4c); bins are ``[e0, e1), …, [e_{n-1}, e_n]``;
- ``valid_question_rate``: share of proposer rollouts whose question was valid (the game's
  validation verdict for exported games, else ``Trajectory.valid``; Fig. 4a);
- ``search_turns``: mean number of turns with ≥ 1 search per solver rollout (Fig. 9c);
- ``information_utilisation``: mean over think blocks written after ≥ 1 retrieval of the share of
  the block's tokens (lower-cased word tokens) that occur in the text retrieved so far (Fig. 9a).

A bare trajectory's batch is ``metadata["batch"]`` (else ``metadata["step"]``, else 0), or what
``batch_of`` returns; the rollouts of exported game g are in batch ``g // games_per_batch``. Rollouts whose task
has no waypoints are left out of the coverage statistics (counted in
``solver_without_waypoints``). :func:`plot_diagnostics` draws the four panels to a PNG.
"""

from __future__ import annotations

import logging
import math
import numbers
import os
import re
from typing import Callable, Hashable, Iterable, Optional, Sequence, Union

from ..core.arg_checks import check_count
from ..core.types import Trajectory
from ..errors import InvalidArgumentError, InvalidTypeError
from .waypoint_coverage_reward import trajectory_coverage

logger = logging.getLogger(__name__)

DEFAULT_BINS = (0.0, 0.25, 0.5, 0.75, 1.0)
_TOKEN = re.compile(r"\w+")


def _default_batch(t: Trajectory) -> Hashable:
    return t.metadata.get("batch", t.metadata.get("step", 0))


def _load(source, games_per_batch: int, batch_of) -> list[tuple[Trajectory, Hashable, Optional[bool]]]:
    """(trajectory, batch, validation verdict or None) for every rollout of ``source``."""
    if isinstance(source, (str, os.PathLike)):
        from ..envs.export import read_trajectories

        source = read_trajectories(source)
    out: list[tuple[Trajectory, Hashable, Optional[bool]]] = []
    for item in source:
        if isinstance(item, Trajectory):
            out.append((item, batch_of(item), None))
        elif hasattr(item, "solvers") and hasattr(item, "game"):  # an exported GameRecord
            batch = int(item.game) // games_per_batch
            if item.proposer is not None:
                verdict = item.validation.valid if item.validation is not None else None
                out.append((item.proposer, batch, verdict))
            out.extend((t, batch, None) for t in item.solvers)
        else:
            raise InvalidTypeError(
                f"expected Trajectory objects, GameRecords or a JSONL export path, got {type(item).__name__}"
            )
    return out


def information_utilisation(trajectory: Trajectory) -> Optional[float]:
    """Mean share of think tokens found in the text retrieved before them (None: no such block)."""
    seen: set[str] = set()
    shares = []
    for turn in trajectory.turns:
        tokens = _TOKEN.findall(turn.think.lower())
        if seen and tokens:
            shares.append(sum(tok in seen for tok in tokens) / len(tokens))
        seen.update(_TOKEN.findall(turn.information.lower()))
    return sum(shares) / len(shares) if shares else None


def search_turns(trajectory: Trajectory) -> int:
    """Turns of the rollout that issued at least one search."""
    return sum(1 for t in trajectory.turns if t.searches)


def _spearman(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    if len(xs) < 2 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return math.nan, math.nan
    from scipy.stats import spearmanr

    res = spearmanr(xs, ys)
    return float(res.statistic), float(res.pvalue)


def _bin_index(g: float, bins: Sequence[float]) -> Optional[int]:
    for i in range(len(bins) - 1):
        last = i == len(bins) - 2
        if bins[i] <= g < bins[i + 1] or (last and g == bins[i + 1]):
            return i
    return None


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else math.nan


def compute_diagnostics(
    trajectories: Union[str, os.PathLike, Iterable[Trajectory]],
    *,
    bins: Sequence[float] = DEFAULT_BINS,
    batch_of: Callable[[Trajectory], Hashable] = _default_batch,
    games_per_batch: int = 8,
    case_insensitive: bool = False,
) -> dict:
    """Every diagnostic above as a JSON-serialisable dict (NaN where undefined)."""
    edges = list(bins) if isinstance(bins, Iterable) and not isinstance(bins, (str, bytes)) else []
    numeric = all(isinstance(b, numbers.Real) and not isinstance(b, bool) for b in edges)
    if not numeric or len(edges) < 2 or any(not b < c for b, c in zip(edges, edges[1:])):  # NaN is no edge
        raise InvalidArgumentError(f"bins must be at least two strictly increasing edges; got {bins!r}")
    games_per_batch = check_count("games_per_batch", games_per_batch)
    items = _load(trajectories, games_per_batch, batch_of)
    solvers = [(t, b) for t, b, _ in items if t.role == "solver"]
    proposer_valid = [bool(t.valid) if v is None else v for t, _, v in items if t.role == "proposer"]
    rows, missing = [], 0
    for t, b in solvers:
        if not t.task.waypoints:
            missing += 1
            continue
        g, _ = trajectory_coverage(t, case_insensitive=case_insensitive)
        rows.append((b, g, int(bool(t.correct))))
    batches: dict[Hashable, list[tuple[float, int]]] = {}
    for b, g, c in rows:
        batches.setdefault(b, []).append((g, c))
    spearman = []
    for b, pairs in batches.items():
        rho, p = _spearman([g for g, _ in pairs], [c for _, c in pairs])
        spearman.append({"batch": b, "n": len(pairs), "rho": rho, "p": p})
    rho_all, p_all = _spearman([g for _, g, _ in rows], [c for _, _, c in rows])
    by_bin = []
    for i in range(len(bins) - 1):
        cs = [c for _, g, c in rows if _bin_index(g, bins) == i]
        by_bin.append({"low": bins[i], "high": bins[i + 1], "n": len(cs), "accuracy": _mean(cs)})
    utils = [u for u in (information_utilisation(t) for t, _ in solvers) if u is not None]
    return {
        "solver_rollouts": len(solvers),
        "proposer_rollouts": len(proposer_valid),
        "solver_without_waypoints": missing,
        "accuracy": _mean(int(bool(t.correct)) for t, _ in solvers),
        "mean_coverage": _mean(g for _, g, _ in rows),
        "spearman": spearman,
        "spearman_overall": {"n": len(rows), "rho": rho_all, "p": p_all},
        "accuracy_by_coverage": by_bin,
        "valid_question_rate": _mean(int(v) for v in proposer_valid),
        "search_turns": _mean(search_turns(t) for t, _ in solvers),
        "information_utilisation": _mean(utils),
    }


def plot_diagnostics(diag: dict, png_path: Union[str, os.PathLike]) -> str:
    """Save three panels (Spearman per batch, accuracy by coverage bin, rates) as a PNG; returns the path."""
    from matplotlib.figure import Figure  # no pyplot: the user's global backend is left alone

    fig = Figure(figsize=(13, 3.6))
    axes = fig.subplots(1, 3)
    sp = diag["spearman"]
    axes[0].plot(range(len(sp)), [s["rho"] for s in sp], marker="o")
    axes[0].set_xticks(range(len(sp)), [str(s["batch"]) for s in sp])
    axes[0].set(title="Spearman(coverage, correct)", xlabel="batch", ylabel="rho")
    axes[0].axhline(0.0, color="grey", lw=0.8)
    bins = diag["accuracy_by_coverage"]
    labels = [f"{b['low']:.2f}-{b['high']:.2f}" for b in bins]
    axes[1].bar(labels, [0.0 if math.isnan(b["accuracy"]) else b["accuracy"] for b in bins])
    axes[1].set(title="Accuracy by coverage", xlabel="coverage bin", ylabel="accuracy", ylim=(0, 1))
    names = ["valid question rate", "information utilisation", "accuracy"]
    vals = [diag[k] for k in ("valid_question_rate", "information_utilisation", "accuracy")]
    axes[2].barh(names, [0.0 if math.isnan(v) else v for v in vals])
    axes[2].set(title=f"Rates (search turns/rollout: {diag['search_turns']:.2f})", xlim=(0, 1))
    fig.tight_layout()
    path = os.fspath(png_path)
    fig.savefig(path, dpi=100)
    return path
