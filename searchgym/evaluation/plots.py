"""Drawing helpers the evaluation reports and the benchmarks share (matplotlib is the caller's import).

:func:`arm_curves` draws per-step training curves, a colour per arm and a line per run.

:func:`interval_bars` draws held-out rates as grouped bars with their uncertainty: one run's 95 %
bootstrap interval, or the seeds' spread when a stage has several runs. Cells are either mappings
``{"mean", "lo", "hi"}`` (a benchmark's JSON) or objects with those attributes
(:class:`~searchgym.evaluation.selfplay_results.HeldOutCell`).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping
from typing import Any, Optional, Sequence

__all__ = ["arm_curves", "hop_bars", "interval_bars", "legend_label"]

#: legend entries are wrapped to this many characters: an ablation's label ("(b) KG Proposer, binary, all baseline,
#: filter.searches_at_least_required=true, ...") would otherwise run across the neighbouring panels
LEGEND_WIDTH = 40


def legend_label(label: str, width: int = LEGEND_WIDTH) -> str:
    """``label`` broken into lines of at most ``width`` characters (at spaces) for a legend."""
    return "\n".join(textwrap.wrap(label, width)) or label


def _value(cell: Any, key: str) -> Optional[float]:
    """``cell[key]`` of a mapping or ``cell.key`` of an object; None when absent or not a number."""
    value = cell.get(key) if isinstance(cell, Mapping) else getattr(cell, key, None)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def interval_bars(
    ax,
    stages: Mapping[str, Sequence[Mapping[Any, Any]]],
    keys: Sequence[Any],
    names: Optional[Sequence[str]] = None,
    *,
    ylabel: Optional[str] = None,
) -> None:
    """Grouped bars on ``ax``: per stage (a colour each, in order) and key, the mean over the stage's runs of
    ``run[key]``; the error bar is one run's 95 % interval (its ``lo``/``hi``, the mean where absent), or the
    seeds' min-max when there are several. A key a run did not score gets no bar. ``names``: the x labels
    (default: the keys)."""
    width = 0.8 / max(1, len(stages))
    for i, (stage, runs) in enumerate(stages.items()):
        xs: list[float] = []
        means: list[float] = []
        errs: tuple[list[float], list[float]] = ([], [])
        for j, key in enumerate(keys):
            scored = [(run[key], m) for run in runs if key in run and (m := _value(run[key], "mean")) is not None]
            if not scored:
                continue
            vals = [m for _, m in scored]
            mean = sum(vals) / len(vals)
            if len(scored) == 1:
                lo_, hi_ = _value(scored[0][0], "lo"), _value(scored[0][0], "hi")
                lo, hi = mean if lo_ is None else lo_, mean if hi_ is None else hi_
            else:
                lo, hi = min(vals), max(vals)
            xs.append(j + i * width)
            means.append(mean)
            errs[0].append(max(0.0, mean - lo))
            errs[1].append(max(0.0, hi - mean))
        ax.bar(xs, means, width, yerr=[errs[0], errs[1]], label=legend_label(stage), capsize=3, color=f"C{i}")
    ax.set_xticks([j + width * (len(stages) - 1) / 2 for j in range(len(keys))], [str(n) for n in (names or keys)])
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)


def hop_bars(
    ax, stages: Mapping[str, Sequence[Mapping[Any, Any]]], hops: Sequence[Any], *, ylabel: Optional[str] = None
) -> None:
    """:func:`interval_bars` of held-out accuracy by hop count: each run maps a hop count (spelt as a string, as
    the results JSON keys it) to its cell; the bars are labelled ``1-hop``, ``2-hop``, ..."""
    interval_bars(ax, stages, [str(h) for h in hops], [f"{h}-hop" for h in hops], ylabel=ylabel)


def arm_curves(
    panels: Sequence[tuple[Any, str, str]],
    arms: Sequence[tuple[str, Sequence[Mapping[str, Sequence[Any]]]]],
    *,
    dashed: Optional[tuple[Any, str]] = None,
) -> None:
    """Per-step training curves of several arms: ``panels`` are ``(ax, curve name, title)``, ``arms`` are
    ``(arm name, runs)`` and each run maps ``"step"`` and every curve name to equally long sequences (None for a
    step without a value: drawn as a gap). Arm i is colour ``C{i + 1}`` (C0 is the cold start's bar colour in
    the figures beside), its first run carries the legend entry; ``dashed`` = ``(ax, curve name)`` adds that
    curve of every run as a dashed line (the Solvers' reward on the model's own questions). Each panel gets its
    title, integer steps on x and a 0-1 y range, as every self-play figure draws them."""
    from matplotlib.ticker import MaxNLocator

    def values(run: Mapping[str, Sequence[Any]], name: str) -> list[float]:
        return [math.nan if y is None else y for y in run[name]]

    for i, (arm_name, runs) in enumerate(arms):
        colour = f"C{i + 1}"
        for j, run in enumerate(runs):
            for ax, name, _ in panels:
                label = legend_label(arm_name) if j == 0 else None
                ax.plot(run["step"], values(run, name), color=colour, alpha=0.8, marker=".", label=label)
            if dashed is not None:
                dashed[0].plot(run["step"], values(run, dashed[1]), color=colour, alpha=0.6, linestyle="--", marker=".")
    for ax, _, title in panels:
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("training step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=7)
