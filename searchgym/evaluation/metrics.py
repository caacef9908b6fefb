"""Per-question scores, per-group means with 95 % bootstrap intervals, and paired differences.

A question's answer scores come from :mod:`searchgym.core.answers` (the one definition of correct
that the envs' judge and the trainer's validation share): ``em``, ``f1``, ``cover_em``, and
optionally ``llm_judge`` (the strict :class:`~searchgym.scoring.judge.LLMJudge`, failing closed).
A rollout that gave no answer, or an invalid one (too many ``<answer>`` tags), scores 0 on all.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

import numpy as np

from ..core.answers import cover_exact_match, exact_match, token_f1
from ..core.comma_lists import comma_items
from ..errors import InvalidArgumentError

__all__ = [
    "METRICS",
    "DEFAULT_METRICS",
    "STATS",
    "check_metrics",
    "check_record",
    "answer_scores",
    "bootstrap_ci",
    "paired_diff_ci",
    "summarize",
    "group_records",
]

METRICS = ("em", "f1", "cover_em", "llm_judge")
DEFAULT_METRICS = ("em", "f1", "cover_em")
STATS = ("searches", "turns", "tokens", "invalid_format")  # per-question counts averaged per group
N_BOOT = 1000
_BATCH = 200  # resamples drawn per batch: bounds memory at 200 x n floats


def check_metrics(names: str | Sequence[str]) -> tuple[str, ...]:
    """Validated metric names (comma-separated string or list); an unknown one lists the valid ones."""
    choose = f"choose from {', '.join(METRICS)}"
    items = comma_items(
        names,
        none=f"no metric given; {choose}",
        gap=f"metrics {names!r} hold an empty name between commas; drop the extra comma",
    )
    bad = [n for n in items if n not in METRICS]
    if bad:
        raise InvalidArgumentError(f"unknown metric(s) {bad}; {choose}")
    return tuple(dict.fromkeys(items))


def check_record(path, lineno: int, record: dict) -> None:
    """Refuse a per-question record (line ``lineno`` of ``path``) whose score or count is not a number, naming
    file, line and field: summing ``"em": "high"`` would otherwise fail deep inside numpy."""
    for name in (*METRICS, *STATS):
        value = record.get(name)
        if value is not None and not isinstance(value, (int, float)):
            raise InvalidArgumentError(
                f"{path}: line {lineno}: {name!r} is {value!r}, not a number; fix or delete that line"
            )


def answer_scores(prediction: Optional[str], golds: Sequence[str], *, valid: bool = True) -> dict:
    """``{"em", "f1", "cover_em"}`` of one prediction (0 for no answer or an invalid rollout)."""
    if not valid or prediction is None:
        return {"em": 0.0, "f1": 0.0, "cover_em": 0.0}
    return {
        "em": float(exact_match(prediction, golds)),
        "f1": float(token_f1(prediction, golds)),
        "cover_em": float(cover_exact_match(prediction, golds)),
    }


def bootstrap_ci(values: Iterable[float], *, n_boot: int = N_BOOT, seed: int = 0, level: float = 0.95) -> dict:
    """``{"mean", "lo", "hi", "n"}``: the mean and its percentile bootstrap interval.

    ``scipy.stats.bootstrap(method="percentile")`` over ``n_boot`` resamples drawn from
    ``numpy.random.default_rng(seed)``, 200 at a time (the same draws, and to the last bit or two the
    same interval, as searchgym's earlier hand-written resampler: docs/evaluation.md). One value gives
    the degenerate interval ``[x, x]``."""
    x = np.asarray(list(values), dtype=float)
    if x.size == 0:
        return {"mean": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": 0}
    if n_boot < 1 or not 0.0 < level < 1.0:
        raise InvalidArgumentError(f"need n_boot >= 1 and 0 < level < 1, got {n_boot} and {level}")
    mean = float(x.mean())
    if x.size == 1:  # scipy needs two observations; every resample of one value is that value
        return {"mean": mean, "lo": mean, "hi": mean, "n": 1}
    from scipy.stats import bootstrap  # imported here: scipy.stats takes about a second to import

    res = bootstrap(
        (x,),
        np.mean,
        n_resamples=n_boot,
        batch=_BATCH,
        confidence_level=level,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return {
        "mean": mean,
        "lo": float(res.confidence_interval.low),
        "hi": float(res.confidence_interval.high),
        "n": int(x.size),
    }


def paired_diff_ci(
    a: Sequence[float], b: Sequence[float], *, n_boot: int = N_BOOT, seed: int = 0, level: float = 0.95
) -> dict:
    """Mean of ``b - a`` over paired questions with its bootstrap interval (questions resampled jointly)."""
    if len(a) != len(b):
        raise InvalidArgumentError("paired values need the same length")
    return bootstrap_ci(np.asarray(b, dtype=float) - np.asarray(a, dtype=float), n_boot=n_boot, seed=seed, level=level)


def group_records(records: Sequence[dict], key: str) -> dict:
    """Records bucketed by ``record[key]`` (records without the key are left out), keys sorted."""
    groups: dict = {}
    for r in records:
        if r.get(key) is not None:
            groups.setdefault(r[key], []).append(r)
    return dict(sorted(groups.items(), key=lambda kv: (str(type(kv[0])), kv[0])))


def summarize(records: Sequence[dict], metrics: Sequence[str], *, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """Means with bootstrap intervals of every metric, plus mean searches / turns / tokens and the
    invalid-format rate, and the number of LLM-judge errors, over ``records``."""
    out: dict = {"n": len(records)}
    for m in metrics:
        out[m] = bootstrap_ci([r.get(m, 0.0) for r in records], n_boot=n_boot, seed=seed)
    for s in STATS:
        vals = [float(r[s]) for r in records if r.get(s) is not None]
        out[s] = float(np.mean(vals)) if vals else None
    if "llm_judge" in metrics:
        out["llm_judge_errors"] = sum(1 for r in records if r.get("llm_judge_error"))
    return out
