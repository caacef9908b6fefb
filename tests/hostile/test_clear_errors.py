"""Clear errors and progress (issue 33, items 10-15, 17 and 18).

Each bad input a hostile user can give -- damaged weights, a YAML typo, an unknown env id, a damaged
checkpoint, a full disk, Ctrl-C -- ends in one line naming the file or key and the fix (exit 2; 130 for
Ctrl-C) and no traceback; a LoRA checkpoint is evaluated instead of refused; long phases report count,
rate and ETA, and dependencies' warnings stay out of the output. Full disks are real: the command runs in
a subprocess under ``RLIMIT_FSIZE`` (with ``SIGXFSZ`` ignored), so its writes fail with ``EFBIG``; Ctrl-C
is a real ``SIGINT`` sent to a real ``searchgym`` process once it has printed progress.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from searchgym.cli import main
from searchgym.core import progress
from searchgym.core.progress import Progress, interrupted_message
from tests.hostile.conftest import ENV, EVAL_FIXTURES, ROOT

FSIZE_LIMIT = 20_000  # bytes a child may write to any one file


def _run(args: list[str], *, limit_fsize: bool = False, env: dict | None = None, cwd: Path = ROOT):
    """``searchgym ARGS`` in a real subprocess (optionally unable to write more than FSIZE_LIMIT bytes per file)."""

    def fsize_limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, FSIZE_LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "searchgym.cli", *args],
        cwd=cwd,
        env=env or ENV,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=fsize_limit if limit_fsize else None,
    )


def _one_line_error(err: str, command: str) -> str:
    """The command's error line; asserts there is exactly one and no traceback."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith(f"searchgym {command}: ")]
    assert len(lines) == 1, err
    return lines[0]


# ------------------------------------------------------------------ tiny models
@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    pytest.importorskip("transformers")
    from tests.support.tiny_lm import save_tiny

    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def lora_checkpoint(tiny_model, tmp_path_factory):
    """A trainer checkpoint folder of a LoRA run: ``step_00000003/policy/`` holds an adapter of ``tiny_model``."""
    pytest.importorskip("peft")
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model))
    lora = get_peft_model(
        model,
        LoraConfig(
            r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False, task_type="CAUSAL_LM"
        ),
    )
    step = tmp_path_factory.mktemp("run") / "checkpoints" / "step_00000003"
    lora.save_pretrained(step / "policy")
    AutoTokenizer.from_pretrained(str(tiny_model)).save_pretrained(step / "policy")
    assert json.loads((step / "policy" / "adapter_config.json").read_text())["base_model_name_or_path"]
    return step


def _copy_model(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def _eval_tiny(model: str, out: Path) -> list[str]:
    return [
        "eval",
        "--agent",
        "transformers",
        "--model",
        model,
        "--tasks",
        f"tiny={EVAL_FIXTURES / 'tiny_qa.jsonl'}",
        "--limit",
        "2",
        "--max-turns",
        "1",
        "--max-new-tokens",
        "4",
        "--concurrency",
        "2",
        "--no-progress",
        "--output-dir",
        str(out),
    ]


# ------------------------------------------------------------------ 10. damaged safetensors
@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_damaged_model_file_is_named_before_loading(tiny_model, tmp_path, capsys, damage):
    bad = _copy_model(tiny_model, tmp_path / "model")
    weights = bad / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"\x00garbage, not a model" * 50)
    assert main(_eval_tiny(str(bad), tmp_path / "out")) == 2
    line = _one_line_error(capsys.readouterr().err, "eval")
    assert str(weights) in line and "not a valid safetensors file" in line
    assert ("cut short" if damage == "truncated" else "header") in line
    assert "download" in line  # the fix


def test_a_damaged_adapter_given_to_train_init_is_named(tiny_model, lora_checkpoint, tmp_path, capsys):
    adapter = _copy_model(lora_checkpoint / "policy", tmp_path / "adapter")
    weights = adapter / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    args = ["train", "--model", str(tiny_model), "--init", str(adapter), "--output-dir", str(tmp_path / "run")]
    assert main(args + ["--set", "device=cpu", "--set", "tensorboard=false"]) == 2
    line = _one_line_error(capsys.readouterr().err, "train")
    assert str(weights) in line and "not a valid safetensors file" in line


# ------------------------------------------------------------------ 11. YAML syntax error
def test_a_yaml_syntax_error_names_the_file_line_and_column(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("lr: 1.0e-4\nbatch_size: [1, 2\nfoo: : bar\n")
    assert main(["train", "--config", str(cfg)]) == 2
    line = _one_line_error(capsys.readouterr().err, "train")
    assert str(cfg) in line and "line 3, column 4" in line and "<unicode string>" not in line
    assert "--dump-config" in line  # the fix
    assert main(["sft", "--set", "roles=[solver"]) == 2  # a bad --set value is named too
    line = _one_line_error(capsys.readouterr().err, "sft")
    assert "roles=[solver" in line and "YAML syntax error" in line


# ------------------------------------------------------------------ 12. unknown env_id
@pytest.mark.parametrize("command", ["train", "sft"])
def test_an_unknown_env_id_is_refused_before_anything_loads(tmp_path, capsys, command):
    missing_model = str(tmp_path / "no-such-model")  # were the model opened first, this would be the error
    assert main([command, "--model", missing_model, "--set", "env_id=KGSolvr-v0"]) == 2
    line = _one_line_error(capsys.readouterr().err, command)
    assert "env_id='KGSolvr-v0'" in line and "did you mean KGSolver-v0" in line and "no-such-model" not in line
    assert main([command, "--set", "env_id=Hopper-v4"]) == 2
    line = _one_line_error(capsys.readouterr().err, command)
    assert "Hopper" in line.split(";")[0] and "did you mean" not in line and "KGSelfPlay-v0" in line


# ------------------------------------------------------------------ 13. damaged meta.json
def _two_checkpoints(root: Path, tiny_model: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from searchgym.training.checkpoints import CheckpointManager
    from searchgym.training.selfplay_config import TrainConfig

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model))
    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    cfg = TrainConfig(model=str(tiny_model), device="cpu")
    manager = CheckpointManager(root, keep=3)
    for step in (1, 2):
        manager.save(step, model=model, tokenizer=tok, trainer_state={"step": step}, config=cfg)
    return manager, cfg


def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(tiny_model, tmp_path, caplog):
    from searchgym.training.checkpoints import CheckpointFormatError, CheckpointManager

    manager, cfg = _two_checkpoints(tmp_path / "checkpoints", tiny_model)
    first, newest = manager.root / "step_00000001", manager.root / "step_00000002"
    assert manager.latest() == newest
    (newest / "meta.json").write_text('{"step": 2, "dig')  # a torn write
    with pytest.raises(CheckpointFormatError, match="meta.json is damaged") as info:
        CheckpointManager.check_config(newest, cfg)  # was a bare JSONDecodeError
    assert str(newest / "meta.json") in str(info.value) and "earlier checkpoint" in str(info.value)
    with caplog.at_level(logging.WARNING, logger="searchgym.training.checkpoints"):
        assert manager.latest() == first
    assert "skipping damaged checkpoint" in caplog.text and "meta.json" in caplog.text
    assert CheckpointManager.load_state(first)["step"] == 1

    (newest / "meta.json").write_text(json.dumps({"step": 2, "digest": cfg.digest(), "format": 2}))
    weights = newest / "policy" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # damaged weights fall back the same way
    assert manager.latest() == first

    (first / "trainer_state.json").write_text("\x00\x01")
    with pytest.raises(CheckpointFormatError, match="no readable checkpoint") as info:
        manager.latest()  # nothing to fall back to: refused, never a silent fresh start
    assert "step_00000001: trainer_state.json" in str(info.value) and "new output_dir" in str(info.value)


# ------------------------------------------------------------------ 14. disk full
def test_disk_full_during_eval_names_the_file(tmp_path):
    out = tmp_path / "ev"
    res = _run(["eval", "--agent", "scripted", "--output-dir", str(out), "--no-progress"], limit_fsize=True)
    assert res.returncode == 2, res.stderr
    line = _one_line_error(res.stderr, "eval")
    assert line == (
        f"searchgym eval: error: disk full writing {out / 'eval.jsonl'}; free space and rerun the same command "
        "to resume"
    )
    assert (out / "eval.jsonl").stat().st_size == FSIZE_LIMIT  # it did fill the file up to the limit


def test_disk_full_during_play_export_names_the_file(tmp_path):
    games = tmp_path / "g.jsonl"
    res = _run(["play", "--games", "40", "--export", str(games)], limit_fsize=True)
    assert res.returncode == 2, res.stderr
    line = _one_line_error(res.stderr, "play")
    assert f"disk full writing {games}; free space and rerun the same command to resume" in line


@pytest.mark.slow
def test_disk_full_in_a_writer_outside_python_names_the_file(tmp_path):
    """safetensors (Rust) reports the OS error in its message: still a disk-full error naming the file."""
    pytest.importorskip("safetensors")
    target = tmp_path / "w.safetensors"
    code = (
        "import resource, signal, sys, torch\n"
        "from safetensors.torch import save_file\n"
        "from searchgym.cli import disk_full_target\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))\n"
        "try:\n"
        "    save_file({'w': torch.zeros(1000)}, sys.argv[1])\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, disk_full_target(exc))\n"
        "    print(disk_full_target(ValueError('not a disk error')))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(target)], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120
    )
    assert res.stdout.splitlines() == [f"SafetensorError {target}", "None"], res.stderr


# ------------------------------------------------------------------ 15. Ctrl-C
def _interrupt_after_progress(args: list[str], prefix: str) -> tuple[int, str, str]:
    """Start ``searchgym ARGS``, send SIGINT once it printed a progress line starting with ``prefix`` that
    counts some work done; return (exit code, that line, the rest of stderr)."""
    env = {**ENV, "SEARCHGYM_PROGRESS_EVERY": "0.05"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "searchgym.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # a test run started as a background job (``make test &``) inherits SIGINT ignored, and Python then
        # keeps ignoring it: give the command the terminal's default, as a user pressing Ctrl-C has
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stderr is not None
    seen = ""
    try:
        for line in proc.stderr:
            if line.startswith(prefix) and not line.startswith(prefix + "0/"):
                seen = line
                break
        assert seen, "the command printed no progress before it ended"
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        return proc.wait(timeout=120), seen, rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


def test_ctrl_c_during_subgraphs_build_says_how_far_it_got(tmp_path):
    pool = tmp_path / "pool.jsonl"
    args = ["subgraphs", "build", "--synthetic", "--n", "100000", "--out", str(pool)]
    code, seen, rest = _interrupt_after_progress(args, "subgraphs: ")
    assert code == 130, rest
    line = _one_line_error(rest, "subgraphs")
    assert line.startswith("searchgym subgraphs: interrupted after ")
    assert line.endswith("/100000 subgraphs; rerun the same command to resume")
    assert "KeyboardInterrupt" not in rest
    accepted = sum(1 for _ in open(pool, encoding="utf-8"))
    assert 0 < int(line.split("after ")[1].split("/")[0]) <= accepted  # every counted subgraph is on disk


@pytest.mark.slow
def test_ctrl_c_during_eval_then_the_same_command_resumes(tmp_path):
    questions = [json.loads(x) for x in (EVAL_FIXTURES / "tiny_qa.jsonl").read_text().splitlines()]
    many = tmp_path / "many.jsonl"
    n = 1500
    many.write_text("".join(json.dumps({**questions[i % len(questions)], "id": f"q{i}"}) + "\n" for i in range(n)))
    out = tmp_path / "ev"
    args = ["eval", "--agent", "scripted", "--tasks", f"many={many}", "--concurrency", "1", "--output-dir", str(out)]
    code, seen, rest = _interrupt_after_progress(args, "eval: ")
    assert code == 130, rest
    line = _one_line_error(rest, "eval")
    assert line.startswith("searchgym eval: interrupted after ") and "Traceback" not in rest
    assert line.endswith(f"/{n} questions; rerun the same command to resume")
    done = int(line.split("after ")[1].split("/")[0])
    kept = len((out / "eval.jsonl").read_text().splitlines())
    assert 0 < done <= kept < n
    res = _run(args + ["--no-progress"])  # the same command: resumes, redoes nothing
    assert res.returncode == 0, res.stderr
    keys = [json.loads(x)["key"] for x in (out / "eval.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == n


def test_interrupted_message_names_the_outermost_phase():
    progress.reset_phases()
    assert interrupted_message() == "interrupted before any work was done"
    with Progress(10, "train", unit="step", initial=2, enabled=False, resume_hint="rerun to resume") as outer:
        with Progress(64, "validation", unit="question", enabled=False) as inner:
            inner.update(5)
        outer.update(3)
    assert interrupted_message() == "interrupted after 5/10 steps; rerun to resume"  # counted though not shown
    progress.reset_phases()


# ------------------------------------------------------------------ 17. LoRA checkpoint to eval
def test_eval_accepts_a_lora_checkpoint_folder(lora_checkpoint, tmp_path, capsys):
    out = tmp_path / "ev"
    assert main(_eval_tiny(str(lora_checkpoint), out)) == 0, capsys.readouterr().err
    recs = [json.loads(x) for x in (out / "eval.jsonl").read_text().splitlines()]
    assert len(recs) == 2
    adapter_only = tmp_path / "adapter"  # the adapter folder itself, as `sft --save-adapter` writes it
    _copy_model(lora_checkpoint / "policy", adapter_only)
    assert main(_eval_tiny(str(adapter_only), tmp_path / "ev2")) == 0, capsys.readouterr().err


# ------------------------------------------------------------------ 18. progress and quiet output
class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_has_rate_in_seconds_per_step_and_an_eta():
    bar = Progress(10, "train", unit="step", stream=io.StringIO())
    assert bar.line().startswith("train: 0/10 steps (0%), ? s/step, ETA ?, ")  # before the first step: not silent
    bar.start -= 120.0  # two minutes spent on 3 steps (no clock in the test)
    bar.update(3)
    bar.set_postfix(solver="0.250")
    line = bar.line()
    assert line.startswith("train: 3/10 steps (30%), 40.0 s/step, ETA 4m40s, 2m00s elapsed")
    assert line.endswith("solver=0.250")
    bar.start -= 30.0  # half a minute into step 4: the rate stays that of the finished steps, the ETA counts down
    bar._updated -= 30.0
    assert bar.line().startswith("train: 3/10 steps (30%), 40.0 s/step, ETA 4m10s, 2m30s elapsed")
    bar.close()
    fast = Progress(100, "eval", unit="question", initial=40, stream=io.StringIO())
    fast.start -= 10.0
    fast.update(20)
    assert "2.00 questions/s, ETA 20s" in fast.line()  # resumed questions do not count toward the rate
    fast.close()


def test_progress_in_a_log_is_whole_lines_and_on_a_terminal_is_one_redrawn_line():
    log = io.StringIO()
    with Progress(3, "demonstrations", unit="task", stream=log) as bar:
        bar.update(3)
    assert log.getvalue().startswith("demonstrations: 3/3 tasks (100%), ")
    assert "\r" not in log.getvalue() and log.getvalue().count("\n") == 1
    tty = _Tty()
    with Progress(3, "eval", unit="question", stream=tty) as bar:
        bar.update(1)
        bar.write("a result line", file=tty)
        bar.update(2)
    text = tty.getvalue()
    assert text.count("\n") == 2 and re.search("\r +\ra result line\n", text)  # its own line, the bar cleared
    assert text.rstrip("\n").rsplit("\r", 1)[1].startswith("eval: 3/3 questions (100%)")


def test_disabled_progress_prints_nothing():
    quiet = io.StringIO()
    with Progress(5, "sft", unit="step", enabled=False, stream=quiet) as bar:
        bar.update(5)
    assert quiet.getvalue() == "" and bar.count == 5


def test_dependency_warnings_are_kept_out_of_a_command_unless_verbose(tmp_path):
    code = (
        "import sys, warnings\n"
        "from searchgym.cli import quiet_dependencies\n"
        "quiet_dependencies()\n"
        "warnings.warn('the next transformers will change this', FutureWarning)\n"
        "warnings.warn('TypedStorage is deprecated', UserWarning)\n"
        "print('done', file=sys.stderr)\n"
    )
    quiet = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True)
    assert quiet.stderr == "done\n"
    chosen = subprocess.run(  # the user's own -W choice wins
        [sys.executable, "-W", "default", "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True
    )
    assert "FutureWarning" in chosen.stderr and "UserWarning" in chosen.stderr
    res = _run(["eval", "--agent", "scripted", "--limit", "20", "--output-dir", str(tmp_path / "ev")])
    assert res.returncode == 0 and "Warning" not in res.stderr and "\r" not in res.stderr
    assert res.stderr.startswith("eval: 20/20 questions (100%)")  # its own progress: one line in a log


# ------------------------------------------------------------------ an output path that cannot be used
@pytest.mark.parametrize(
    "command",
    [
        ["eval", "--limit", "1", "--output-dir", "{blocked}/run"],
        ["play", "--games", "1", "--export", "{blocked}/games.jsonl"],
        ["demos", "--solver", "1:1", "--out", "{blocked}/demos.jsonl"],
        ["world", "build", "--entities", "200", "--output-dir", "{blocked}/world"],
    ],
    ids=lambda c: c[0],
)
def test_a_file_in_the_way_of_an_output_folder_is_one_line_naming_it(tmp_path, capsys, command):
    """A file where a command must make its output folder was a FileExistsError / NotADirectoryError traceback."""
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a folder")
    assert main([part.format(blocked=blocked) for part in command]) == 2
    line = _one_line_error(capsys.readouterr().err, command[0])
    assert str(blocked) in line and "a file is in the way of a folder; give another path" in line
    assert blocked.read_text() == "a file, not a folder"  # nothing lost


def test_an_os_error_that_is_a_code_bug_keeps_its_traceback(tmp_path):
    from searchgym.cli import unusable_path

    try:
        os.mkdir(tmp_path)  # a mkdir without exist_ok over a folder: searchgym's bug, not the user's path
    except FileExistsError as exc:
        assert unusable_path(exc) is None
    try:
        (tmp_path / "f").write_text("")
        os.mkdir(tmp_path / "f")
    except FileExistsError as exc:
        assert unusable_path(RuntimeError("wrapped")) is None and unusable_path(exc).endswith(
            "f: a file is in the way of a folder"
        )


# ------------------------------------------------------------------ an input path of the wrong kind
@pytest.mark.parametrize(
    "command",
    [
        ["plot", "{path}"],
        ["train", "--config", "{path}", "--dump-config", "{out}/c.yaml"],
        ["sft", "--config", "{path}", "--dump-config", "{out}/c.yaml"],
        ["diagnose", "{path}"],
        ["eval", "--agent", "scripted", "--compare", "{path}", "{path}"],
    ],
    ids=lambda c: c[0],
)
@pytest.mark.parametrize("kind", ["folder", "device"])
def test_an_input_of_the_wrong_kind_is_named_as_such_not_as_missing(tmp_path, capsys, command, kind):
    """``--config /dev/null`` or a folder given for a file was reported as "does not exist", which sends the user
    looking for a typo in a path that is there."""
    if kind == "folder":
        path = tmp_path / "a_folder"
        path.mkdir()
        want = "is a folder, not a file"
    else:
        path, want = Path(os.devnull), "is not a regular file"
    argv = [part.format(path=path, out=tmp_path) for part in command]
    assert main(argv) == 2
    line = _one_line_error(capsys.readouterr().err, command[0])
    assert want in line and "does not exist" not in line, line


def test_not_there_says_what_is_wrong_with_a_path(tmp_path):
    from searchgym.core.path_errors import not_there

    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    assert not_there(tmp_path / "nope") == "does not exist"
    assert not_there(tmp_path / "d") == "is a folder, not a file"
    assert not_there(tmp_path / "f", folder=True) == "is a file, not a folder"
    assert not_there(os.devnull) == "is not a regular file"
    assert not_there(tmp_path / "link") == "is a broken link"
