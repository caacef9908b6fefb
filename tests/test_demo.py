"""`searchgym demo`: imports matplotlib only to draw its pictures, and its live GRPO steps train the cold start."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys

import pytest
from searchgym.cli import main
code = main(sys.argv[1:])
print("MPL", any(m == "matplotlib" or m.startswith("matplotlib.") for m in sys.modules), code)
"""


def _run(tmp_path, *extra):
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            "demo",
            "--agent",
            "scripted",
            "--games",
            "1",
            "--pool-size",
            "20",
            "--output-dir",
            str(tmp_path),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_demo_without_picture_never_imports_matplotlib(tmp_path):
    stdout = _run(tmp_path / "a", "--no-picture")
    assert "MPL False 0" in stdout and "not drawn" in stdout
    assert "game 0: question " in stdout and "proposer reward " in stdout  # each game: verdict, rewards' terms
    assert (tmp_path / "a" / "trajectories.jsonl").is_file() and not (tmp_path / "a" / "subgraph.png").exists()


def test_demo_draws_its_picture_by_default(tmp_path):
    stdout = _run(tmp_path / "b")
    assert "MPL True 0" in stdout and (tmp_path / "b" / "subgraph.png").stat().st_size > 0


@pytest.mark.slow
def test_live_rl_updates_the_shipped_cold_start_only_when_a_group_has_signal(tmp_path):
    """The demo's live GRPO step on the real shipped cold start: it prints the step, returns a plain (merged)
    model, and that model's weights moved exactly when some group's rollouts scored differently."""
    import argparse
    import io
    import re

    import torch

    from searchgym.commands.demo import live_rl
    from searchgym.training.cold_start import load_cold_start
    from searchgym.world.synthetic import default_world

    model, tok = load_cold_start()
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    args = argparse.Namespace(model="smollm2", rl_steps=1, rl_group=2, max_turns=3, max_new_tokens=64, seed=0)
    printed = io.StringIO()
    trained = live_rl(args, default_world(), model, tok, tmp_path, printed)

    assert not hasattr(trained, "peft_config")  # LoRA merged: the games and the eval get a whole model
    line = re.search(r"step 1: solver reward ([\d.]+), groups without signal (\d)/2", printed.getvalue())
    assert line, printed.getvalue()
    after = trained.state_dict()
    assert set(after) == set(before)
    moved = any(not torch.equal(before[k], after[k]) for k in before)
    assert moved == (int(line.group(2)) < 2), printed.getvalue()


def test_the_demo_says_when_the_benchmark_started_from_another_shipped_adapter(tmp_path):
    """The committed self-play table names the start's weights; once a new adapter ships, the demo says the table
    measured an earlier one (and says nothing for the adapter shipped now, or for a start that is not the shipped
    cold start)."""
    import shutil

    from searchgym.commands.demo import start_note
    from searchgym.training.cold_start import shipped_adapter, weights_fingerprint

    now = weights_fingerprint(shipped_adapter())
    assert start_note(f"shipped-cold-start (weights {now})") == ""
    assert start_note("runs/sft/final (weights 0123456789abcdef)") == ""
    note = start_note("shipped-cold-start (weights 0123456789abcdef)")
    assert "earlier shipped adapter" in note and now in note
    copy = shutil.copytree(shipped_adapter(), tmp_path / "copy")
    assert weights_fingerprint(copy) == now and weights_fingerprint("smollm2") == "smollm2"


def test_bad_counts_are_refused_before_the_world_is_built(capsys):
    """``--threads 0`` once meant torch's default and ``--games 0`` failed only after the world, the searches and
    the subgraphs had been printed: every count is checked first, all named in one line."""
    from searchgym.cli import main

    assert main(["demo", "--threads", "0", "--games", "0", "--no-picture"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing shown, nothing built
    assert captured.err.count("\n") == 1 and "--games 0 (at least 1), --threads 0 (at least 1)" in captured.err


def test_default_args_are_the_demos_own_and_refuse_an_unknown_name():
    """A script measuring the demo's games gets the demo's defaults, with only what it overrides changed."""
    from searchgym.commands.demo import default_args
    from searchgym.errors import InvalidArgumentError

    args = default_args(games=4)
    assert args.games == 4 and args.max_new_tokens == 96 and args.group_size == 3 and args.agent == "llm"
    with pytest.raises(InvalidArgumentError, match="not a demo argument: gamez"):
        default_args(gamez=4)
