"""`searchgym train` / `searchgym plot` end to end with a tiny model folder, and play_games."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.cli import main  # noqa: E402
from tests.support.tiny_lm import save_tiny  # noqa: E402

SMALL = [
    "--size",
    "paper",  # the recipe's own settings, scaled down by the --set lines below
    "--set",
    "device=cpu",
    "--set",
    "batch_size=1",
    "--set",
    "group_size=2",
    "--set",
    "max_turns=1",
    "--set",
    "max_new_tokens=8",
    "--set",
    "tensorboard=false",
    "--set",
    "progress=false",
    "--set",
    "save_every=1",
    "--set",
    "lr=1e-4",
]


@pytest.mark.slow
def test_train_cli_runs_resumes_and_refuses_a_changed_config(tmp_path, capsys):
    model = save_tiny(tmp_path / "tiny")
    cfg = tmp_path / "cfg.yaml"
    assert main(["train", "--size", "paper", "--dump-config", str(cfg)]) == 0
    assert "lr: 1.0e-06" in cfg.read_text() and "recipe: kg-wcr" in cfg.read_text()
    out = tmp_path / "run"
    args = ["train", "--config", str(cfg), "--model", str(model), "--output-dir", str(out), "--steps", "1"] + SMALL
    assert main(args) == 0
    recs = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [1] and "solver/reward" in recs[0] and "proposer/reward" in recs[0]
    assert (out / "checkpoints" / "step_00000001" / "COMPLETE").is_file()
    assert main(args[: -len(SMALL)] + ["--steps", "2"] + SMALL) == 0  # resumes at step 1, runs step 2
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    capsys.readouterr()
    assert main(args + ["--set", "group_size=3"]) == 2
    err = capsys.readouterr().err
    assert "different config" in err and "group_size" in err
    assert (out / "checkpoints" / "step_00000002" / "COMPLETE").is_file()  # nothing lost
    assert main(["plot", str(out / "metrics.jsonl"), "--out", str(tmp_path / "c.png")]) == 0


def test_train_cli_bad_input_is_a_clear_error(tmp_path, capsys):
    assert main(["train", "--model", str(tmp_path / "missing"), "--set", "device=cpu"]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["train", "--set", "batchsize=3"]) == 2
    assert "unknown config key" in capsys.readouterr().err


@pytest.mark.slow
def test_play_games_summarises_and_exports(tmp_path, tiny_world):
    import gymnasium as gym

    from searchgym.agents import LLMAgent
    from searchgym.core.llm import GenerationConfig
    from searchgym.core.types import Task
    from searchgym.evaluation import play_games
    from searchgym.llm.bundled_model import load_generator

    model = save_tiny(tmp_path / "tiny")
    agent = LLMAgent(load_generator(str(model)), config=GenerationConfig(max_new_tokens=8, seed=0))
    task = Task(id="q", question="Where was Alice Varn born?", answers=["Tarsk"])
    env = gym.make("KGSolverGroup-v0", world=tiny_world, tasks=[task], group_size=2, max_turns=2)
    games = play_games(env, agent, 2, export_path=tmp_path / "t.jsonl")
    assert [g["game"] for g in games] == [0, 1]
    assert all(len(g["solver_rewards"]) == 2 for g in games)
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[0])["role"] == "solver"


@pytest.mark.slow
def test_a_run_killed_mid_way_resumes_to_the_same_state(tmp_path):
    """SIGKILL a real `searchgym train` process after its first checkpoint; resuming reaches exactly the
    weights of an uninterrupted run."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import torch
    from safetensors.torch import load_file

    model = save_tiny(tmp_path / "tiny")
    common = (
        ["--model", str(model), "--steps", "3"]
        + SMALL
        + ["--set", "threads=1", "--set", "lr=1e-2", "--set", "reward=tests.test_trainer_mechanics:LengthReward"]
    )
    killed = tmp_path / "killed"
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "searchgym.cli", "train", "--output-dir", str(killed)] + common,
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    first = killed / "checkpoints" / "step_00000001" / "COMPLETE"
    deadline = time.monotonic() + 300
    while not first.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.exists(), "the training process never wrote its first checkpoint"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert main(["train", "--output-dir", str(killed)] + common) == 0  # resume
    whole = tmp_path / "whole"
    assert main(["train", "--output-dir", str(whole)] + common) == 0
    a = load_file(str(killed / "checkpoints" / "step_00000003" / "policy" / "model.safetensors"))
    b = load_file(str(whole / "checkpoints" / "step_00000003" / "policy" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    init = load_file(str(model / "model.safetensors"))
    assert not all(torch.equal(init[k], a[k]) for k in init)  # the run did train
    steps = [json.loads(x)["step"] for x in (killed / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
