"""Solver demonstrations for the update benchmarks: the default world's games played by the scripted expert.

``bench_anchor_loss.py`` and ``bench_update_precision.py`` time the self-play update on sequences as long as the
Solver's real games; :func:`solver_demos_file` writes them the way ``searchgym demos`` does (the cold start's
recipe, default seed), into a temporary JSONL.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Mapping


def solver_demos_file(counts: Mapping[int, int]) -> Path:
    """A new temporary JSONL of ``counts[h]`` rewarded Solver demonstrations of ``h`` hops each (no Proposer ones)."""
    from searchgym.training.demonstrations import demonstrations_by_hops
    from searchgym.world.synthetic import default_world

    data = Path(tempfile.mkdtemp()) / "solver_demos.jsonl"
    demonstrations_by_hops(
        default_world(), data, solver=dict(counts), proposer={}, vanilla={}, openings={}, proposer_openings={}
    )
    return data
