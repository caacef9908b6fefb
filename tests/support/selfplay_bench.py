"""The benchmark scripts for the tests: any of them as a module (``benchmark_module``), and
``benchmarks/bench_selfplay.py``'s ``toy`` size's command line (a tiny random Llama on CPU: a real results JSON in
seconds)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from tests.support.tiny_lm import save_tiny

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def benchmark_module(name: str):
    """The script ``benchmarks/<name>.py`` as a module, imported with ``benchmarks/`` on ``sys.path`` (the
    benchmarks import each other, and ``machine``, the way ``python benchmarks/x.py`` finds them)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


def bench_selfplay():
    """The ``bench_selfplay`` module (:func:`benchmark_module`)."""
    return benchmark_module("bench_selfplay")


def toy_args(tmp_path: Path) -> list[str]:
    """``--size toy`` over a fresh tiny model in ``tmp_path/tiny``, the workdir ``tmp_path/w`` and the results
    file ``tmp_path/res/selfplay_toy.json`` (in this order: ``--size``, ``--model``, ``--workdir``, ``--out``)."""
    tiny = save_tiny(tmp_path / "tiny")
    out = tmp_path / "res" / "selfplay_toy.json"
    return ["--size", "toy", "--model", str(tiny), "--workdir", str(tmp_path / "w"), "--out", str(out)]
