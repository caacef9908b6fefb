"""Pool statistics like the paper's Fig. 5: path lengths, answer types, relations, node counts.

:func:`pool_stats` computes a JSON-serialisable dict, :func:`format_stats` renders it as text
(``searchgym subgraphs stats``), :func:`plot_stats` draws the four Fig. 5 panels into a PNG.
"""

from __future__ import annotations

import logging
import statistics
from collections import Counter
from pathlib import Path
from typing import Sequence

from ..core.artefacts import write_report
from ..core.subgraph import ANSWER_TYPES, Subgraph

logger = logging.getLogger(__name__)

__all__ = ["pool_stats", "plan_stats", "format_stats", "plot_stats"]


def _summary(values: Sequence[int]) -> dict:
    if not values:
        return {"histogram": {}, "mean": 0.0, "std": 0.0, "min": 0, "max": 0}
    hist = Counter(values)
    return {
        "histogram": {int(k): hist[k] for k in sorted(hist)},
        "mean": round(statistics.fmean(values), 4),
        "std": round(statistics.pstdev(values), 4),
        "min": min(values),
        "max": max(values),
    }


def pool_stats(subgraphs: Sequence[Subgraph], *, top: int = 15) -> dict:
    """Statistics of a pool.

    Keys: ``count``; ``path_length``, ``node_count``, ``distractors``, ``relations_per_subgraph``
    (distinct relation types per subgraph, target path and distractors) — each with
    ``histogram``/``mean``/``std``/``min``/``max``; ``answer_types`` (count per type, every type
    listed); ``top_relations`` (``[label, count]`` over all edges, ``top`` most frequent);
    ``unique_relations``; ``edges``; ``plan``: planned vs realised path length and distractor count
    (:func:`plan_stats`).
    """
    rel_counts: Counter = Counter()
    per_sg: list[int] = []
    answer_types: Counter = Counter()
    for sg in subgraphs:
        labels = list(sg.relations) + [lab for br in sg.distractors for lab in br.relations]
        rel_counts.update(labels)
        per_sg.append(len(set(labels)))
        answer_types[sg.answer_type] += 1
    types = {t: answer_types.get(t, 0) for t in ANSWER_TYPES}
    types.update({t: c for t, c in answer_types.items() if t not in types})
    return {
        "count": len(subgraphs),
        "path_length": _summary([sg.hops for sg in subgraphs]),
        "answer_types": types,
        "top_relations": [[lab, c] for lab, c in rel_counts.most_common(top)],
        "unique_relations": len(rel_counts),
        "edges": sum(rel_counts.values()),
        "relations_per_subgraph": _summary(per_sg),
        "node_count": _summary([sg.node_count for sg in subgraphs]),
        "distractors": _summary([len(sg.distractors) for sg in subgraphs]),
        "plan": plan_stats(subgraphs),
    }


def plan_stats(subgraphs: Sequence[Subgraph]) -> dict:
    """Planned vs realised construction: for ``path_length`` (the selector's planned length,
    ``metadata["hops_planned"]``; only subgraphs whose selector planned one) and ``distractors``
    (``metadata["distractors_planned"]``): ``planned`` and ``realised`` summaries over those
    subgraphs and ``short`` (how many fell short of their plan)."""
    out = {}
    for key, planned_key, realised in (
        ("path_length", "hops_planned", lambda sg: sg.hops),
        ("distractors", "distractors_planned", lambda sg: len(sg.distractors)),
    ):
        pairs = [
            (int(sg.metadata[planned_key]), realised(sg))
            for sg in subgraphs
            if sg.metadata.get(planned_key) is not None
        ]
        out[key] = {
            "count": len(pairs),
            "planned": _summary([p for p, _ in pairs]),
            "realised": _summary([r for _, r in pairs]),
            "short": sum(r < p for p, r in pairs),
        }
    return out


def _hist_line(summary: dict, total: int) -> str:
    return "  ".join(f"{k}: {v} ({100 * v / total:.1f}%)" for k, v in summary["histogram"].items()) if total else "-"


def format_stats(stats: dict) -> str:
    """Human-readable report of :func:`pool_stats` output."""
    n = stats["count"]
    lines = [f"subgraphs: {n}"]
    for key, title in (
        ("path_length", "path length (hops)"),
        ("node_count", "nodes per subgraph"),
        ("distractors", "distractor branches"),
        ("relations_per_subgraph", "distinct relations per subgraph"),
    ):
        s = stats[key]
        lines.append(f"{title}: mean {s['mean']:.2f}, std {s['std']:.2f}, range {s['min']}-{s['max']}")
        if key != "node_count":
            lines.append(f"  {_hist_line(s, n)}")
    lines.append(
        "answer types: "
        + ", ".join(f"{t} {c} ({100 * c / n:.1f}%)" if n else f"{t} 0" for t, c in stats["answer_types"].items())
    )
    for key, title in (("path_length", "path length"), ("distractors", "distractor branches")):
        p = stats.get("plan", {}).get(key)
        if p and p["count"]:
            lines.append(
                f"planned vs realised {title} ({p['count']} subgraphs with a plan): mean "
                f"{p['planned']['mean']:.2f} planned, {p['realised']['mean']:.2f} realised; "
                f"{p['short']} ({100 * p['short'] / p['count']:.1f}%) short of plan"
            )
            lines.append(f"  planned:  {_hist_line(p['planned'], p['count'])}")
    lines.append(f"relations: {stats['unique_relations']} distinct over {stats['edges']} edges; top:")
    for lab, c in stats["top_relations"]:
        share = 100 * c / stats["edges"] if stats["edges"] else 0.0
        lines.append(f"  {c:>7}  {share:5.1f}%  {lab}")
    return "\n".join(lines)


def plot_stats(stats: dict, png_path, *, title: str | None = None) -> Path:
    """Draw the four Fig. 5 panels (path length, answer types, top relations, relations per
    subgraph) into ``png_path``; returns the path written. Uses the Agg canvas directly; never touches
    pyplot state. The PNG is written whole and never over another kind of file (:func:`write_report`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 8.5), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2)
    n = max(1, stats["count"])

    def bars(ax, hist: dict, label: str, letter: str, color: str) -> None:
        keys = [int(k) for k in hist]
        vals = [100 * hist[k] / n for k in hist]
        ax.bar(keys, vals, color=color, edgecolor="black", linewidth=0.5)
        ax.set_xticks(keys)
        ax.set_xlabel(label)
        ax.set_ylabel("% of subgraphs")
        ax.set_title(f"({letter}) {label}")

    pl = stats["path_length"]
    bars(axes[0][0], pl["histogram"], "path length (hops)", "a", "#4C72B0")
    axes[0][0].text(
        0.98,
        0.95,
        f"mean={pl['mean']:.2f}, std={pl['std']:.2f}",
        transform=axes[0][0].transAxes,
        ha="right",
        va="top",
        fontsize=9,
    )
    types = [(t, c) for t, c in stats["answer_types"].items()]
    ax = axes[0][1]
    ax.bar([t for t, _ in types], [100 * c / n for _, c in types], color="#55A868", edgecolor="black", linewidth=0.5)
    ax.set_ylabel("% of subgraphs")
    ax.set_title("(b) answer type")
    ax.tick_params(axis="x", labelrotation=20)
    ax = axes[1][0]
    top = stats["top_relations"][::-1]
    edges = max(1, stats["edges"])
    ax.barh(
        [lab for lab, _ in top], [100 * c / edges for _, c in top], color="#C44E52", edgecolor="black", linewidth=0.5
    )
    ax.set_xlabel("% of all edges")
    ax.set_title(f"(c) top-{len(top)} relations ({stats['unique_relations']} distinct)")
    ax.tick_params(axis="y", labelsize=8)
    rp = stats["relations_per_subgraph"]
    bars(axes[1][1], rp["histogram"], "distinct relations per subgraph", "d", "#8172B2")
    axes[1][1].text(
        0.98, 0.95, f"mean={rp['mean']:.2f}", transform=axes[1][1].transAxes, ha="right", va="top", fontsize=9
    )
    fig.suptitle(title or f"Subgraph pool statistics ({stats['count']} subgraphs)")
    fig.tight_layout()
    return write_report(png_path, "PNG figure", lambda tmp: fig.savefig(tmp, format="png"))
