"""TRL's ``rollout_func`` without vLLM: every turn is capped at ``max_turn_tokens`` and ends at its first
stop string (TRL's transformers path alone sizes each call for a whole rollout), and
``examples/trl_grpo.py --model tiny`` trains a step from outside the checkout (no ``tests`` imports).

A real ``GRPOTrainer`` (TRL 1.16, CPU) with the untouched random tiny Llama, which never writes a
closing tag on its own: without the cap its first turn would take the rollout's whole budget."""

from __future__ import annotations

import ast
import copy
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl", reason="needs the trl extra (pip install -e '.[trl]')")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from searchgym.errors import InvalidArgumentError  # noqa: E402
from searchgym.integrations.trl import grpo_trainer, local_config, rollout_func, train_dataset  # noqa: E402
from searchgym.integrations.trl.generation import TrainerGeneration, cut_at_stop  # noqa: E402
from searchgym.llm.tiny_models import tiny_policy  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ENV = {"max_turns": 3, "doc_max_chars": 160}
CAP = 16
BUDGET = 256


@pytest.fixture(scope="module")
def setup():
    rows = train_dataset(n=1, env_kwargs=ENV)
    model, tok = tiny_policy("tiny", hidden=64, layers=2)
    args = local_config(per_device_train_batch_size=2, num_generations=2, max_completion_length=BUDGET, max_steps=1)
    trainer = grpo_trainer(
        model,
        processing_class=tok,
        args=args,
        train_dataset=rows,
        entry="rollout_func",
        rewards="binary",
        env_kwargs=ENV,
        max_turn_tokens=CAP,
    )
    return rows, trainer, tok


def test_no_turn_samples_more_than_the_cap(setup):
    rows, trainer, _ = setup
    out = trainer.rollout_func([rows[0]["prompt"]] * 2, trainer)
    for ids, mask in zip(out["completion_ids"], out["env_mask"]):
        turns = [len(list(run)) for sampled, run in itertools.groupby(mask) if sampled == 1]
        assert len(ids) <= BUDGET + 1  # + the end-of-sequence token the adapter appends (mask 0)
        assert turns and max(turns) <= CAP, turns
        assert max(turns) == CAP  # the random model never closes a tag: the cap is what ended its turns
        assert len(turns) == ENV["max_turns"]  # every turn got sampled: the first did not eat the budget


def test_turns_stop_at_their_first_stop_string(setup):
    """Each row ends at its first stop string (transformers' StopStringCriteria inside generate, then
    trimmed of the padding that follows), or at EOS, or at the cap."""
    rows, trainer, tok = setup
    stops = ["e"]  # a letter the random model writes within a few tokens: rows stop at different points
    generation = TrainerGeneration(trainer, stops)
    prompt = tok.apply_chat_template(rows[0]["prompt"], add_generation_prompt=True, tokenize=False)
    ids, logprobs = generation([tok(prompt, add_special_tokens=False)["input_ids"]] * 6, 32)
    assert logprobs is None and generation.calls == 1
    early = 0
    for row in ids:
        assert 1 <= len(row) <= 32
        assert cut_at_stop(row, tok, stops) == len(row)  # no stop string before the row's last token
        text = tok.decode(row, skip_special_tokens=True)
        if "e" in text:
            early += 1
            assert "e" not in tok.decode(row[:-1], skip_special_tokens=True)
        else:
            assert len(row) == 32 or row[-1] == tok.eos_token_id
    assert early >= 2


def _check_rows(ids, caps, tok, stops, eos, *, skip_special: bool = True):
    """Each row within its own cap, ending at its first stop string, at an EOS or at its cap (transformers'
    StopStringCriteria also sees stop strings inside special tokens' names: ``skip_special=False``)."""
    for row, cap in zip(ids, caps):
        assert 1 <= len(row) <= cap
        assert cut_at_stop(row, tok, stops) == len(row)
        text = tok.decode(row, skip_special_tokens=skip_special)
        if not any(s in text for s in stops) and row[-1] not in eos:
            assert len(row) == cap, (row, text)


def test_the_rollout_engine_samples_with_per_row_caps(setup):
    """On one CPU process with plain sampling the rollout engine samples TRL's transformers path: each row
    stops inside generation at its own cap or first stop string, reproducibly from torch's seed."""
    rows, trainer, tok = setup
    prompt = tok.apply_chat_template(rows[0]["prompt"], add_generation_prompt=True, tokenize=False)
    ids = [tok(prompt, add_special_tokens=False)["input_ids"]] * 6
    caps = [3, 7, 12, 32, 5, 20]
    eos = set(trainer.eos_token_ids)
    generation = TrainerGeneration(trainer, ["e"])
    torch.manual_seed(0)
    out, logprobs = generation(ids, caps)
    assert generation.engine_used and logprobs is None
    _check_rows(out, caps, tok, ["e"], eos)
    torch.manual_seed(0)
    assert generation(ids, caps)[0] == out  # the engine is kept per trainer, and seeded from torch's generator
    hf = TrainerGeneration(trainer, ["e"], engine="hf")
    out_hf, _ = hf(ids, caps)
    assert not hf.engine_used
    _check_rows(out_hf, caps, tok, ["e"], eos, skip_special=False)
    with pytest.raises(InvalidArgumentError, match="2 turn caps for 6 prompts"):
        generation(ids, [4, 4])


def test_the_engine_stands_aside_where_it_would_sample_differently(setup):
    rows, trainer, tok = setup
    prompt = tok.apply_chat_template(rows[0]["prompt"], add_generation_prompt=True, tokenize=False)
    ids = [tok(prompt, add_special_tokens=False)["input_ids"]] * 2
    config = copy.deepcopy(trainer.generation_config)
    config.top_k = 5
    old = trainer.generation_config
    trainer.generation_config = config
    try:
        auto = TrainerGeneration(trainer, ["e"])
        out, _ = auto(ids, 4)
        assert not auto.engine_used and all(1 <= len(r) <= 4 for r in out)  # model.generate, with top-k
        with pytest.raises(InvalidArgumentError, match="engine='static' cannot sample this TRL run: top_k=5"):
            TrainerGeneration(trainer, ["e"], engine="static")(ids, 4)
    finally:
        trainer.generation_config = old
    with pytest.raises(InvalidArgumentError, match="engine='paged'"):
        TrainerGeneration(trainer, engine="paged")


def test_bad_turn_caps_are_refused(setup):
    rows, trainer, tok = setup
    with pytest.raises(InvalidArgumentError, match="max_turn_tokens must be >= 1"):
        rollout_func(rows, max_turn_tokens=0)
    with pytest.raises(InvalidArgumentError, match="use entry='rollout_func'"):
        grpo_trainer(
            trainer.model,
            processing_class=tok,
            args=trainer.args,
            train_dataset=rows,
            entry="environment_factory",
            max_turn_tokens=8,
        )


def test_example_and_benchmark_import_nothing_from_tests():
    for path in (ROOT / "examples" / "trl_grpo.py", ROOT / "benchmarks" / "bench_trl.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in names if m == "tests" or m.startswith("tests.")], path


@pytest.mark.slow
def test_example_trains_a_tiny_step_outside_the_checkout(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "trl_grpo.py"),
            "--model",
            "tiny",
            "--steps",
            "1",
            "--threads",
            "1",
            "--output-dir",
            str(tmp_path / "run"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "step 1: reward" in proc.stdout
    assert "'rollouts': 2" in proc.stdout  # one question x 2 generations played through the env


def test_example_refuses_bad_threads(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trl_grpo.py"), "--threads", "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "--threads must be >= 1" in proc.stderr
