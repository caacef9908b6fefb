"""benchmarks/gpu_checks.sh, the one command a lent GPU node runs: its self-play stage at the toy size on CPU.

A GPU session has 15 minutes of device time, so a fault in the script's own flow (the processes it starts, the
collection, what it packs into $OUT) would cost a whole session. This runs that flow as the node does -- the
script from the checkout root, ``.gpu/node-setup.sh`` sourced first -- with ``SELFPLAY_SIZE=toy`` over a tiny
model and one arm, and checks what comes back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("matplotlib")

from tests.support.selfplay_bench import BENCH  # noqa: E402
from tests.support.tiny_lm import save_tiny  # noqa: E402


def _node(tmp_path):
    """A checkout-shaped folder as the node sees it: ``benchmarks/`` and a ``.gpu/node-setup.sh`` whose model is
    whole, and ``python3`` on PATH being this interpreter (searchgym installed)."""
    root = tmp_path / "checkout"
    (root / ".gpu").mkdir(parents=True)
    (root / "benchmarks").symlink_to(BENCH)
    (root / ".gpu" / "node-setup.sh").write_text("export SEARCHGYM_HAVE_MODEL=1 PYTHONUNBUFFERED=1\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python3 = bin_dir / "python3"  # a wrapper, not a link: a linked venv interpreter would not find its venv
    python3.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python3.chmod(0o755)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TMPDIR": str(scratch)}
    return root, env, scratch


def _gpu_checks(root, env, budget: int) -> subprocess.CompletedProcess:
    """``bash benchmarks/gpu_checks.sh BUDGET selfplay`` from the node's checkout root, its output captured."""
    return subprocess.run(
        ["bash", "benchmarks/gpu_checks.sh", str(budget), "selfplay"], cwd=root, env=env, capture_output=True, text=True
    )


@pytest.mark.slow
def test_the_selfplay_stage_runs_collects_and_packs_what_comes_back(tmp_path):
    root, env, scratch = _node(tmp_path)
    out = tmp_path / "out"
    model = save_tiny(tmp_path / "tiny")
    env.update(
        OUT=str(out), SELFPLAY_SIZE="toy", SELFPLAY_ARGS=f"--model {model}", SELFPLAY_ARMS="c", OMP_NUM_THREADS="1"
    )
    run = _gpu_checks(root, env, 400)
    said = run.stdout + run.stderr
    assert run.returncode == 0, said
    assert "a self-play process exit 0" in said and "self-play collection exit 0" in said, said
    assert sorted(p.name for p in out.iterdir()) == [
        "adapter_c_s0.tgz",
        "results.tgz",
        "selfplay_gpu.json",
        "selfplay_workdir.tgz",
    ]
    results = json.loads((out / "selfplay_gpu.json").read_text())
    assert results["size"] == "toy" and list(results["arms"]) == ["c"]
    with tarfile.open(out / "selfplay_workdir.tgz") as tar:  # what another node's collect merges: no weights
        names = tar.getnames()
    assert any(n.startswith("toy/c_s0/") for n in names)
    assert not any(n.endswith(".safetensors") or "/checkpoints" in n for n in names)
    with tarfile.open(out / "adapter_c_s0.tgz") as tar:
        assert "./adapter_model.safetensors" in tar.getnames()
    with tarfile.open(out / "results.tgz") as tar:
        assert {"./selfplay_c_s0.log", "./selfplay_collect.log"} <= set(tar.getnames())
    assert (scratch / "searchgym_selfplay" / "toy").is_dir()  # the scratch went where TMPDIR says


def test_a_node_without_the_whole_model_is_told_in_one_line(tmp_path):
    root, env, _ = _node(tmp_path)
    (root / ".gpu" / "node-setup.sh").write_text("export SEARCHGYM_HAVE_MODEL=0\n")
    run = _gpu_checks(root, {**env, "OUT": str(tmp_path / "out")}, 100)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "gpu_checks: the bundled model is not whole on this node; carry the parts benchmarks/gpu_bundle.sh printed"
    ]


def test_a_failed_step_still_packs_what_finished_and_exits_1(tmp_path):
    """A step that fails (here a model folder that does not exist) must not read as success on the node."""
    root, env, _ = _node(tmp_path)
    out = tmp_path / "out"
    env.update(OUT=str(out), SELFPLAY_SIZE="toy", SELFPLAY_ARGS=f"--model {tmp_path / 'missing'}", SELFPLAY_ARMS="c")
    run = _gpu_checks(root, env, 200)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "a self-play process exit 2" in run.stdout
    assert run.stderr.strip().endswith("step(s) failed; what finished came back, their logs are in results.tgz")
    with tarfile.open(out / "results.tgz") as tar:  # the failed process's log comes back
        assert "./selfplay_c_s0.log" in tar.getnames()
