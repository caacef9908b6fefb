"""The self-play benchmark's committed results, in the compact form ``searchgym demo`` shows.

``benchmarks/bench_selfplay.py`` trains ``KGSelfPlay-v0`` from the cold start in three arms and collects every
finished run into one large JSON (curves of twenty metrics, questions, paired flips, gains, targets). The
benchmark folder is not part of the installed package, so ``bench_selfplay.py --ship`` also writes
:func:`compact_results` of that JSON to ``searchgym/assets/selfplay_<size>.json``: per arm its label and recipe
and, per run, the per-step curves the demo draws (Proposer valid rate, Proposer reward, Solver reward, Solver
reward on the model's own questions, groups with signal) and the held-out results before and after (Solver exact
match by hop count, Proposer valid-question rate with the KG prompt), with the size, machine, seeds and budget.

The demo reads it with :func:`load_selfplay_results`, prints :func:`format_selfplay_table` and draws
:func:`plot_selfplay_curves`; nothing is re-run. matplotlib is imported only when drawing.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from ..core.atomic_writes import write_file
from ..errors import InvalidArgumentError, MissingFileError
from .plots import arm_curves, hop_bars, interval_bars

__all__ = [
    "HeldOutCell",
    "HeldOut",
    "StepCurves",
    "SelfPlayRun",
    "SelfPlayArm",
    "SelfPlayResults",
    "compact_results",
    "load_selfplay_results",
    "format_selfplay_table",
    "plot_selfplay_curves",
    "shared_settings",
    "shipped_results_path",
    "MAKE_COMMAND",
]

#: the compact file's format marker and version (the key ``searchgym_selfplay_results``)
FORMAT_KEY = "searchgym_selfplay_results"
FORMAT_VERSION = 1
#: the command that makes (or remakes) the shipped asset from a finished ``cpu`` benchmark (``INIT``: its --init)
MAKE_COMMAND = "python benchmarks/bench_selfplay.py --size cpu --init INIT --collect --ship"
#: the per-step curves kept, as the benchmark names them
CURVES = ("valid_rate", "proposer_reward", "solver_reward", "solver_proposed_reward", "groups_with_signal")
_ASSETS = Path(__file__).resolve().parent.parent / "assets"


def shipped_results_path(size: str = "cpu") -> Path:
    """Where the compact results of the benchmark's ``size`` ship: ``searchgym/assets/selfplay_<size>.json``."""
    return _ASSETS / f"selfplay_{size}.json"


# ============================================================================ the compact form
def _num(x: Any) -> Optional[float]:
    """``x`` as a float, or None for a missing or non-finite value (JSON has no NaN)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class HeldOutCell:
    """One held-out rate: its mean over ``n`` items and 95 % bootstrap interval (None where nothing was scored)."""

    mean: Optional[float]
    lo: Optional[float]
    hi: Optional[float]
    n: int

    @classmethod
    def from_dict(cls, d: dict) -> HeldOutCell:
        """A cell from ``{"mean", "lo", "hi", "n"}`` (``lo``/``hi`` default to the mean)."""
        mean = _num(d["mean"])
        return cls(mean=mean, lo=_num(d.get("lo", mean)), hi=_num(d.get("hi", mean)), n=int(d.get("n", 0)))


@dataclass(frozen=True)
class HeldOut:
    """One model's held-out results: Solver exact match by hop count (``"1"``, ``"2"``, ...) and the Proposer's
    valid-question rate on the held-out KG targets with the KG prompt, greedy (``proposer_valid``) and sampled at
    the rollouts' temperature as the game plays it (``proposer_sampled``); None when not scored (files written
    before the sampled rate was measured have none)."""

    solver_by_hop: dict[str, HeldOutCell]
    proposer_valid: Optional[HeldOutCell]
    proposer_sampled: Optional[HeldOutCell] = None

    @classmethod
    def from_dict(cls, d: dict) -> HeldOut:
        """From the compact form (``solver_by_hop``, ``proposer_valid``, ``proposer_sampled``)."""
        return cls(
            solver_by_hop={str(h): HeldOutCell.from_dict(c) for h, c in sorted(d["solver_by_hop"].items())},
            proposer_valid=_cell(d.get("proposer_valid")),
            proposer_sampled=_cell(d.get("proposer_sampled")),
        )

    @classmethod
    def from_bench(cls, stage: dict) -> HeldOut:
        """From a stage of the benchmark's JSON (the cold start or a run: ``solver.by_hops``, ``proposer_cells``)."""
        cells = stage.get("proposer_cells", {})
        return cls(
            solver_by_hop={str(h): HeldOutCell.from_dict(c) for h, c in sorted(stage["solver"]["by_hops"].items())},
            proposer_valid=_cell(cells.get("kg")),
            proposer_sampled=_cell(cells.get("kg_sampled")),
        )


def _cell(d: Optional[dict]) -> Optional[HeldOutCell]:
    """A :class:`HeldOutCell` from its dict, None for None."""
    return None if d is None else HeldOutCell.from_dict(d)


@dataclass(frozen=True)
class StepCurves:
    """One run's per-step training curves (None where a step has no value, e.g. no question of the model's)."""

    step: tuple[int, ...]
    valid_rate: tuple[Optional[float], ...]
    proposer_reward: tuple[Optional[float], ...]
    solver_reward: tuple[Optional[float], ...]
    solver_proposed_reward: tuple[Optional[float], ...]
    groups_with_signal: tuple[Optional[float], ...]

    @classmethod
    def from_dict(cls, d: dict) -> StepCurves:
        """From a dict of equally long lists: the compact form, or a run's ``train`` curves in the benchmark's JSON
        (its other curves are dropped)."""
        steps = tuple(int(s) for s in d["step"])
        curves = {name: tuple(_num(v) for v in d[name]) for name in CURVES}
        for name, values in curves.items():
            if len(values) != len(steps):
                raise InvalidArgumentError(f"curve {name!r} has {len(values)} values for {len(steps)} steps")
        return cls(step=steps, **curves)


@dataclass(frozen=True)
class SelfPlayRun:
    """One trained run of an arm: its seed, games played, training seconds, curves and held-out results after."""

    seed: int
    games: int
    train_s: Optional[float]
    curves: StepCurves
    heldout: HeldOut

    @classmethod
    def from_dict(cls, d: dict) -> SelfPlayRun:
        """From the compact form."""
        return cls._from(d, StepCurves.from_dict(d["curves"]), HeldOut.from_dict(d["heldout"]))

    @classmethod
    def from_bench(cls, run: dict) -> SelfPlayRun:
        """From a run of the benchmark's JSON (its ``train`` curves, its held-out stage)."""
        return cls._from(run, StepCurves.from_dict(run["train"]), HeldOut.from_bench(run))

    @classmethod
    def _from(cls, d: dict, curves: StepCurves, heldout: HeldOut) -> SelfPlayRun:
        """The fields both forms spell alike (seed, games, training seconds), with ``curves`` and ``heldout``."""
        return cls(
            seed=int(d["seed"]), games=int(d["games"]), train_s=_num(d.get("train_s")), curves=curves, heldout=heldout
        )


@dataclass(frozen=True)
class SelfPlayArm:
    """One arm of the benchmark: its key (``a``/``b``/``c``), label, recipe and runs (one per seed)."""

    key: str
    label: str
    recipe: str
    runs: tuple[SelfPlayRun, ...]

    @classmethod
    def from_dict(cls, d: dict) -> SelfPlayArm:
        """From the compact form."""
        runs = tuple(SelfPlayRun.from_dict(r) for r in d["runs"])
        if not runs:
            raise InvalidArgumentError(f"arm {d['key']!r} has no runs")
        return cls(key=str(d["key"]), label=str(d["label"]), recipe=str(d["recipe"]), runs=runs)

    @property
    def steps(self) -> int:
        """Training steps per run (the longest run's, should they differ)."""
        return max(len(r.curves.step) for r in self.runs)


@dataclass(frozen=True)
class SelfPlayResults:
    """The benchmark's results in compact form: the size it ran at, on which machine, the seeds, the rollout
    budget every run shared (``steps``, ``games_per_step``, ``solvers_per_game``, ``max_turns``,
    ``max_new_tokens``, ``games_per_run``), the cold start's held-out results and the arms. ``start`` names the
    checkpoint every arm started from (the benchmark's ``--init`` and its weights' fingerprint; empty in files
    written before it was recorded)."""

    size: str
    machine: str
    seeds: tuple[int, ...]
    seeds_note: str
    budget: dict[str, int]
    cold_start: HeldOut
    arms: tuple[SelfPlayArm, ...]
    start: str = ""

    def to_dict(self) -> dict:
        """The compact JSON form (what :func:`compact_results` returns and :func:`load_selfplay_results` reads)."""
        return {FORMAT_KEY: FORMAT_VERSION, **_plain(dataclasses.asdict(self))}

    @classmethod
    def from_dict(cls, d: dict) -> SelfPlayResults:
        """From the compact JSON form; raises ``KeyError``/``TypeError``/``ValueError`` on a malformed one
        (:func:`load_selfplay_results` turns them into one clear error)."""
        if d.get(FORMAT_KEY) != FORMAT_VERSION:
            raise InvalidArgumentError(f"no {FORMAT_KEY!r}: {FORMAT_VERSION} marker")
        arms = tuple(SelfPlayArm.from_dict(a) for a in d["arms"])
        if not arms:
            raise InvalidArgumentError("no arms")
        return cls(
            size=str(d["size"]),
            machine=str(d["machine"]),
            seeds=tuple(int(s) for s in d["seeds"]),
            seeds_note=str(d.get("seeds_note", "")),
            budget={str(k): int(v) for k, v in d["budget"].items()},
            cold_start=HeldOut.from_dict(d["cold_start"]),
            arms=arms,
            start=str(d.get("start", "")),
        )


def _plain(x: Any) -> Any:
    """``x`` with every tuple as a list: the JSON types a file reads back as."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _machine(results: dict) -> str:
    """One line naming where the benchmark ran: CPU model and cores (and the GPU, on one), torch threads."""
    m = results.get("machine") or {}
    host = f"{m.get('cpu', 'unknown CPU')}, {m.get('cores', '?')} cores"
    dev = results.get("device") or {}
    line = f"{dev.get('name', 'a GPU')} on {host}" if dev.get("device") == "cuda" else host
    threads = results.get("torch_threads")
    if threads:
        line += f", {threads} torch thread{'s' if threads != 1 else ''} per process"
    return line


def _start(start: dict) -> str:
    """The start checkpoint of a benchmark's ``start`` record: its ``--init`` and weights' fingerprint."""
    init = start.get("init") or "the base model"
    return f"{init} (weights {start['fingerprint']})" if start.get("fingerprint") else str(init)


def compact_results(results: dict) -> dict:
    """The compact JSON form of ``benchmarks/bench_selfplay.py``'s collected results (the dict it writes to
    ``benchmarks/results/selfplay_<size>.json``): see :class:`SelfPlayResults`. Raises
    :class:`~searchgym.errors.InvalidArgumentError` when ``results`` is not such a dict."""
    try:
        if results.get("benchmark") != "selfplay":
            raise InvalidArgumentError("'benchmark' is not 'selfplay'")
        budget = results["budget"]
        arms = tuple(
            SelfPlayArm(
                key=str(key),
                label=str(arm["label"]),
                recipe=str(arm["recipe"]),
                runs=tuple(SelfPlayRun.from_bench(run) for run in arm["runs"]),
            )
            for key, arm in results["arms"].items()
        )
        compact = SelfPlayResults(
            size=str(results["size"]),
            machine=_machine(results),
            seeds=tuple(int(s) for s in results["seeds"]),
            seeds_note=str(results.get("seeds_note", "")),
            budget={
                "steps": int(budget["total_steps"]),
                "games_per_step": int(budget["batch_size"]),
                "solvers_per_game": int(budget["group_size"]),
                "max_turns": int(budget["max_turns"]),
                "max_new_tokens": int(budget["max_new_tokens"]),
                "games_per_run": int(budget["games_per_run"]),
            },
            cold_start=HeldOut.from_bench(results["cold_start"]),
            arms=arms,
            start=_start(results.get("start") or {}),
        )
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise InvalidArgumentError(
            f"not the collected results of benchmarks/bench_selfplay.py ({type(exc).__name__}: {exc})"
        ) from None
    return compact.to_dict()


def load_selfplay_results(path: Optional[str | Path] = None) -> SelfPlayResults:
    """The compact self-play results at ``path`` (default: the shipped ``searchgym/assets/selfplay_cpu.json``).

    Raises :class:`~searchgym.errors.MissingFileError` when the file does not exist and
    :class:`~searchgym.errors.InvalidArgumentError` when it is not a compact results file, each in one line
    that says how to make one."""
    p = Path(path) if path is not None else shipped_results_path()
    if not p.is_file():
        raise MissingFileError(f"no self-play benchmark results at {p}; make them with: {MAKE_COMMAND}")
    try:
        return SelfPlayResults.from_dict(json.loads(p.read_text(encoding="utf-8")))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise InvalidArgumentError(
            f"{p} is not a self-play results file ({reason}); remake it with: {MAKE_COMMAND}"
        ) from None


# ============================================================================ table
def _mean(values: Sequence[Optional[float]]) -> Optional[float]:
    """The mean of the values that are not None (None if there are none)."""
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def _fmt(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.2f}"


def _window(steps: int) -> int:
    """How many first and last steps :func:`format_selfplay_table` averages: a quarter of the run, at least one."""
    return max(1, steps // 4)


def _first_last(arm: SelfPlayArm, name: str) -> tuple[Optional[float], Optional[float]]:
    """Mean of curve ``name`` over the first and the last :func:`window` steps of every run of ``arm``."""
    k = _window(arm.steps)
    first: list[Optional[float]] = []
    last: list[Optional[float]] = []
    for run in arm.runs:
        values = getattr(run.curves, name)
        first += values[:k]
        last += values[-k:]
    return _mean(first), _mean(last)


def _after(arm: SelfPlayArm, hop: Optional[str], proposer: str = "proposer_valid") -> Optional[float]:
    """The seeds' mean held-out result after training: Solver exact match at ``hop``, or (None) the Proposer's valid
    rate (``proposer``: the :class:`HeldOut` field, greedy or sampled)."""
    if hop is None:
        cells = [getattr(r.heldout, proposer) for r in arm.runs]
    else:
        cells = [r.heldout.solver_by_hop.get(hop) for r in arm.runs]
    return _mean([_mean_of(c) for c in cells])


def _mean_of(cell: Optional[HeldOutCell]) -> Optional[float]:
    """The cell's mean, None for no cell."""
    return None if cell is None else cell.mean


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def shared_settings(labels: Sequence[str]) -> tuple[list[str], str]:
    """``(labels without the settings every one of them ends with, those settings)``: arm labels such as "(b) KG
    Proposer, binary, rollout_dtype=bfloat16, pool 2=160,3=96" name an ablation's settings in each arm, so a table or
    legend of three arms repeats them three times. The shared trailing ``", "``-separated parts are said once instead
    (``""`` when fewer than two labels share any, or when a label would be left empty)."""
    parts = [label.split(", ") for label in labels]
    if len(parts) < 2:
        return list(labels), ""
    n = 0
    while all(len(p) > n + 1 for p in parts) and len({tuple(p[len(p) - n - 1 :]) for p in parts}) == 1:
        n += 1
    if n == 0:
        return list(labels), ""
    return [", ".join(p[:-n]) for p in parts], ", ".join(parts[0][-n:])


def format_selfplay_table(results: SelfPlayResults) -> str:
    """A few lines: the seeds, machine and budget, then a row per arm: its steps x games per step, the mean
    Proposer valid rate and Solver reward over the first vs the last quarter of the training steps, held-out
    Solver exact match by hop and the Proposer's held-out valid rate (KG prompt; greedy, and sampled where the file
    has it), cold start -> after training (with several seeds, the seeds' mean)."""
    b = results.budget
    seeds = ", ".join(map(str, results.seeds))
    k = _window(max(arm.steps for arm in results.arms))
    cold = results.cold_start
    hops = sorted(
        {h for h in cold.solver_by_hop} | {h for a in results.arms for r in a.runs for h in r.heldout.solver_by_hop},
        key=int,
    )
    solver_head = [f"Solver {h}-hop" for h in hops]
    sampled = cold.proposer_sampled is not None or any(r.heldout.proposer_sampled for a in results.arms for r in a.runs)
    proposer_head = ["Proposer (KG)", *(["Proposer (KG, sampled)"] if sampled else [])]
    head = ["arm", "steps x games", "Proposer valid", "Solver reward", *solver_head, *proposer_head]
    rows = []
    names, shared = shared_settings([arm.label for arm in results.arms])
    for arm, name in zip(results.arms, names):
        v0, v1 = _first_last(arm, "valid_rate")
        s0, s1 = _first_last(arm, "solver_reward")
        games = round(sum(r.games for r in arm.runs) / len(arm.runs) / max(1, arm.steps))
        solver = [
            f"{_fmt(cold.solver_by_hop[h].mean if h in cold.solver_by_hop else None)} -> {_fmt(_after(arm, h))}"
            for h in hops
        ]
        fields = ["proposer_valid", *(["proposer_sampled"] if sampled else [])]
        proposer = [f"{_fmt(_mean_of(getattr(cold, f)))} -> {_fmt(_after(arm, None, f))}" for f in fields]
        rows.append(
            [
                name,
                f"{arm.steps} x {games}",
                f"{_fmt(v0)} -> {_fmt(v1)}",
                f"{_fmt(s0)} -> {_fmt(s1)}",
                *solver,
                *proposer,
            ]
        )
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    train_w = sum(widths[1:4]) + 4  # the training columns and the two-space gaps between them
    groups = (
        " " * (widths[0] + 2) + f"training, first -> last {k} steps".ljust(train_w) + "  held-out, cold start -> after"
    )
    lines = [
        f"{results.size} size, {_plural(len(results.seeds), 'seed')} ({seeds}), on {results.machine}",
        f"every run: {b['steps']} steps x {_plural(b['games_per_step'], 'game')} x {b['solvers_per_game']} Solvers, "
        f"{b['max_turns']} turns x {b['max_new_tokens']} tokens ({_plural(b['games_per_run'], 'game')})",
        *([f"every arm started from {results.start}"] if results.start else []),
        *([f"every arm with {shared}"] if shared else []),
        groups.rstrip(),
        *("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [head, *rows]),
    ]
    if results.seeds_note:
        lines.append(f"({results.seeds_note})")
    return "\n".join(lines)


# ============================================================================ picture
def plot_selfplay_curves(results: SelfPlayResults, path: str | Path) -> Path:
    """Draw ``results`` to the PNG ``path`` (matplotlib's Agg backend, imported here): per arm (a colour) and
    run, the Proposer's valid rate and the Solvers' reward over the training steps (dashed: on the model's own
    questions), then held-out Solver exact match by hop and the Proposer's held-out valid rate (KG prompt, greedy
    and sampled), cold start and every arm. Returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    panels = [
        (axes[0][0], "valid_rate", "Proposer valid-question rate"),
        (axes[0][1], "solver_reward", "Solver reward (dashed: on the model's own questions)"),
    ]
    names, shared = shared_settings([arm.label for arm in results.arms])
    arm_curves(
        panels,
        [(name, [dataclasses.asdict(run.curves) for run in arm.runs]) for arm, name in zip(results.arms, names)],
        dashed=(axes[0][1], "solver_proposed_reward"),
    )
    stages = {"cold start": [results.cold_start]}
    stages.update({name: [r.heldout for r in arm.runs] for arm, name in zip(results.arms, names)})
    hops = sorted({h for runs in stages.values() for ho in runs for h in ho.solver_by_hop}, key=int)
    hop_bars(axes[1][0], {s: [ho.solver_by_hop for ho in runs] for s, runs in stages.items()}, hops)
    axes[1][0].set_title("held-out Solver exact match", fontsize=10)
    kg = {
        s: [
            {k: c for k, c in (("kg", ho.proposer_valid), ("kg_sampled", ho.proposer_sampled)) if c is not None}
            for ho in runs
        ]
        for s, runs in stages.items()
    }
    interval_bars(axes[1][1], kg, ["kg", "kg_sampled"], ["KG prompt, greedy", "KG prompt, sampled"])
    axes[1][1].set_title("Proposer valid-question rate on held-out targets", fontsize=10)
    seeds = ", ".join(map(str, results.seeds))
    fig.suptitle(
        f"KGSelfPlay-v0 from the cold start, both roles trained: benchmarks/bench_selfplay.py, {results.size} size, "
        f"seeds {seeds}" + (f"\nevery arm with {shared}" if shared else ""),
        fontsize=11,
    )
    fig.tight_layout()
    try:
        write_file(path, lambda tmp: fig.savefig(tmp, dpi=100))
    finally:
        plt.close(fig)
    return path
