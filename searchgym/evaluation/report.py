"""What ``searchgym eval`` writes and prints: the Markdown table, the PNG, and ``--compare``.

Table cells are ``mean ± half-width`` of the 95 % bootstrap interval, in percent for the answer
metrics. ``--compare A.json B.json`` pairs the two runs' questions by key (from the per-question
JSONL next to each summary) and prints B − A with its paired bootstrap interval.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Sequence

from ..core.jsonl import scan_jsonl
from ..core.path_errors import not_there
from ..errors import InvalidArgumentError, MissingFileError
from .metrics import N_BOOT, check_record, group_records, paired_diff_ci

__all__ = ["markdown_table", "write_reports", "plot_summary", "load_summary", "compare_runs", "LABELS"]

LABELS = {"em": "EM", "f1": "F1", "cover_em": "cover-EM", "llm_judge": "LLM judge"}


def _pct(ci: Optional[dict]) -> str:
    if not ci or ci.get("n", 0) == 0:
        return "–"
    half = (ci["hi"] - ci["lo"]) / 2
    return f"{100 * ci['mean']:.1f} ± {100 * half:.1f}"


def _num(x) -> str:
    return "–" if x is None else f"{x:.2f}"


def _row(label: str, s: dict, metrics: Sequence[str], skipped: str = "") -> str:
    cells = [
        label,
        str(s["n"]) + skipped,
        *(_pct(s.get(m)) for m in metrics),
        _num(s.get("searches")),
        _num(s.get("turns")),
        _num(s.get("tokens")),
        _num(100 * s["invalid_format"] if s.get("invalid_format") is not None else None),
    ]
    if "llm_judge" in metrics:
        cells.append(str(s.get("llm_judge_errors", 0)))
    return "| " + " | ".join(cells) + " |"


def _group_label(key: str, value) -> str:
    """``"1 hop"``, ``"3 hops"``, or the family name."""
    if key == "by_hops":
        return f"{value} hop" if str(value) == "1" else f"{value} hops"
    return str(value)


def markdown_table(summary: dict) -> str:
    """One row per dataset, then per hop count and per question family where the tasks have them,
    then overall."""
    metrics = summary["metrics"]
    head = ["dataset", "n", *(LABELS[m] for m in metrics), "searches", "turns", "tokens", "invalid fmt %"]
    if "llm_judge" in metrics:
        head.append("judge errors")
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|",
    ]
    for name, d in summary["datasets"].items():
        lines.append(_row(name, d, metrics, f" ({d['skipped']} skipped)" if d.get("skipped") else ""))
        for key in ("by_hops", "by_family"):
            for k, s in d.get(key, {}).items():
                lines.append(_row(f"  {name} · {_group_label(key, k)}", s, metrics))
    if len(summary["datasets"]) > 1:
        lines.append(_row("**overall**", summary["overall"], metrics))
    agent = summary.get("agent") or "agent"
    return f"**{agent}** (mean ± 95 % bootstrap interval, %)\n\n" + "\n".join(lines) + "\n"


def plot_summary(summary: dict, path: str | Path, metric: Optional[str] = None) -> Path:
    """A PNG of ``metric`` (default: the first one, EM) by hop count and by dataset, with 95 % intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = metric or summary["metrics"][0]
    hops: dict[str, dict] = {}
    for d in summary["datasets"].values():
        for k, s in d.get("by_hops", {}).items():
            hops.setdefault(k, s)  # one benchmark with hops is the usual case; the first wins
    panels = [("by hop count", sorted(hops.items(), key=lambda kv: int(kv[0])) if hops else [])]
    panels.append(("by dataset", list(summary["datasets"].items())))
    panels = [p for p in panels if p[1]]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    for ax, (title, items) in zip(axes[0], panels):
        labels = [str(k) for k, _ in items]
        cis = [s.get(metric) or {"mean": 0, "lo": 0, "hi": 0} for _, s in items]
        means = [100 * c["mean"] for c in cis]
        err = [[100 * (c["mean"] - c["lo"]) for c in cis], [100 * (c["hi"] - c["mean"]) for c in cis]]
        ax.bar(labels, means, yerr=err, capsize=3, color="#4477aa")
        ax.set_title(f"{LABELS.get(metric, metric)} {title}")
        ax.set_ylabel("%")
        ax.set_ylim(0, 100)
        ax.tick_params(axis="x", rotation=30 if len(labels) > 4 and title == "by dataset" else 0)
    fig.suptitle(summary.get("agent") or "", fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_reports(summary: dict, out: Path) -> dict:
    """Write ``summary.json``, ``summary.md`` and ``accuracy.png`` into ``out``; returns their paths."""
    files = {
        "records": out / summary["records"],
        "summary": out / "summary.json",
        "table": out / "summary.md",
        "plot": out / "accuracy.png",
    }
    files["summary"].write_text(json.dumps(summary, indent=1))
    files["table"].write_text(markdown_table(summary))
    plot_summary(summary, files["plot"])
    return files


def _read_summary(p: Path) -> dict:
    """The parsed ``summary.json`` at ``p``; one line naming the file and what to pass instead when it is not one
    (unreadable, not JSON -- e.g. the ``eval.jsonl`` next to it --, or JSON of another kind)."""
    hint = "pass the summary.json written by `searchgym eval --output-dir DIR`"
    try:
        summary = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(
            f"{p} is not a searchgym eval summary (not one JSON document: {exc}); {hint}"
        ) from None
    if not isinstance(summary, dict) or summary.get("searchgym_eval") != 1:
        raise InvalidArgumentError(f"{p} is not a searchgym eval summary (no 'searchgym_eval' field); {hint}")
    if not isinstance(summary.get("records"), str) or not isinstance(summary.get("datasets"), dict):
        raise InvalidArgumentError(f"{p} is a damaged eval summary (no 'records' or 'datasets'); {hint}")
    return summary


def load_summary(path: str | Path) -> tuple[dict, list[dict]]:
    """A summary JSON and the per-question records it points to (read as ``eval.jsonl`` is on resume: a bad line
    is named with its file and line)."""
    p = Path(path)
    if not p.is_file():
        raise MissingFileError(f"{p} {not_there(p)}; pass the summary.json written by `searchgym eval --out DIR`")
    summary = _read_summary(p)
    rec_path = p.parent / summary["records"]
    if not rec_path.is_file():
        raise MissingFileError(f"{rec_path} (the per-question records of {p}) is missing; --compare needs it")
    wanted = set(summary["datasets"])
    records = []
    for lineno, rec in scan_jsonl(rec_path, repair=False):
        check_record(rec_path, lineno, rec)
        if rec.get("dataset") in wanted:
            records.append(rec)
    return summary, records


def compare_runs(a_path: str | Path, b_path: str | Path, *, n_boot: int = N_BOOT, seed: int = 0) -> tuple[str, dict]:
    """B − A per dataset (and per hop) and metric on the questions both runs answered, with paired
    95 % bootstrap intervals; returns the Markdown table and the numbers."""
    (sa, ra), (sb, rb) = load_summary(a_path), load_summary(b_path)
    metrics = [m for m in sa["metrics"] if m in sb["metrics"]]
    a_by, b_by = {r["key"]: r for r in ra}, {r["key"]: r for r in rb}
    shared = [k for k in a_by if k in b_by]
    if not shared:
        raise InvalidArgumentError(f"{a_path} and {b_path} share no questions; compare runs on the same task sets")
    pairs = [(a_by[k], b_by[k]) for k in shared]
    result: dict = {}
    per_dataset = _bucket(pairs, "dataset")
    groups: dict = {}
    for ds, ps in per_dataset.items():
        groups[ds] = ps
        for h, hp in _bucket(ps, "hops").items():
            groups[f"{ds} · {_group_label('by_hops', h)}"] = hp
    if len(per_dataset) > 1:
        groups["overall"] = pairs
    lines = [
        f"**B − A**: B = {sb.get('agent')} ({b_path}), A = {sa.get('agent')} ({a_path}); "
        f"paired bootstrap, 95 % interval, points\n",
        "| group | n | " + " | ".join(f"{LABELS[m]} A | {LABELS[m]} B | Δ {LABELS[m]}" for m in metrics) + " |",
        "|---|---:|" + "---:|" * (3 * len(metrics)),
    ]
    for name, ps in groups.items():
        cells = [name, str(len(ps))]
        result[name] = {}
        for m in metrics:
            a = [float(p[0].get(m, 0.0)) for p in ps]
            b = [float(p[1].get(m, 0.0)) for p in ps]
            d = paired_diff_ci(a, b, n_boot=n_boot, seed=seed)
            result[name][m] = {"a": sum(a) / len(a), "b": sum(b) / len(b), "diff": d}
            cells += [
                f"{100 * sum(a) / len(a):.1f}",
                f"{100 * sum(b) / len(b):.1f}",
                f"{100 * d['mean']:+.1f} [{100 * d['lo']:+.1f}, {100 * d['hi']:+.1f}]",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    only = len(a_by) + len(b_by) - 2 * len(shared)
    note = f"\n{only} questions answered by only one run were left out.\n" if only else ""
    return "\n".join(lines) + "\n" + note, result


def _bucket(pairs: list, key: str) -> dict:
    """Pairs grouped by the A record's ``key`` field."""
    keyed = group_records([{**a, "_pair": (a, b)} for a, b in pairs], key)
    return {k: [r["_pair"] for r in v] for k, v in keyed.items()}
