"""The update benchmarks' shared inputs: the ``cpu`` size's update and scripted Solver demonstrations to time it on.

``bench_anchor_loss.py`` and ``bench_update_precision.py`` time the self-play update as the ``kg-wcr`` recipe's
``cpu`` size builds it (:func:`cpu_size_update`) on sequences as long as the Solver's real games
(:func:`solver_demos_file`: the default world's games played by the scripted expert, the way ``searchgym demos``
writes them with the cold start's recipe and default seed).
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any, Mapping


def solver_demos_file(counts: Mapping[int, int]) -> Path:
    """A new temporary JSONL of ``counts[h]`` rewarded Solver demonstrations of ``h`` hops each (no Proposer ones)."""
    from searchgym.training.demonstrations import demonstrations_by_hops
    from searchgym.world.synthetic import default_world

    data = Path(tempfile.mkdtemp()) / "solver_demos.jsonl"
    demonstrations_by_hops(
        default_world(), data, solver=dict(counts), proposer={}, vanilla={}, openings={}, proposer_openings={}
    )
    return data


def cpu_size_update(**overrides: Any):
    """A :class:`~searchgym.training.selfplay_update.PolicyUpdate` of the ``kg-wcr`` recipe's ``cpu`` size (the shipped
    cold start merged, a LoRA adapter) on the CPU, ``overrides`` set on its config, a fresh output folder, mini-batch
    order from seed 0."""
    from searchgym.training.recipes import recipe_config
    from searchgym.training.selfplay_update import build_policy_update

    cfg = recipe_config("kg-wcr", "cpu", device="cpu", output_dir=tempfile.mkdtemp(), progress=False, **overrides)
    return build_policy_update(cfg, None, None, device="cpu", rng=random.Random(0))
