"""Outputs are locked while written, and resumes refuse doubled records (issue 33, item 3).

Two ``subgraphs build`` (or ``eval``, ``play --export``) on one output used to both exit 0 with every record
twice, and a rerun accepted the doubled file. Now the second writer fails at once with one line naming the
first (its pid), whether that is another process or this one; a killed holder never blocks the rerun; and a
resume refuses a pool or eval file with an id on two lines, naming both lines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from searchgym.cli import main
from searchgym.construction import PoolFormatError, build_pool, load_pool
from searchgym.core.output_lock import OutputLock, OutputLockedError, lock_path
from searchgym.training.metrics import MetricsLogger
from tests.hostile.conftest import ENV, EVAL_FIXTURES, HOLDER, ROOT, lock_held_by_another_process
from tests.support.construction_world import build_random_world
from tests.support.openai_server import OpenAIStubServer


def _lines(path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_two_concurrent_subgraph_builds_on_one_out(tmp_path):
    """Two real ``searchgym subgraphs build`` processes: the first is held inside its first selector call
    (holding the pool's lock) while the second starts; the second is refused naming the first."""
    wdir = tmp_path / "world"
    build_random_world(300, seed=11).save(wdir)
    out = tmp_path / "pool.jsonl"
    asked, gate = threading.Event(), threading.Event()

    def selector(messages, body):
        asked.set()
        gate.wait(300)
        return '{"answer": 1}'

    with OpenAIStubServer(selector) as srv:
        cmd = [sys.executable, "-m", "searchgym.cli", "subgraphs", "build", "--world", str(wdir), "--n", "3"]
        cmd += ["--out", str(out), "--selector", "llm", "--endpoint", srv.url, "--concurrency", "1", "--timeout", "300"]
        cmd += ["--no-progress"]
        first = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert asked.wait(300), first.communicate()
            second = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
        finally:
            gate.set()
        _, first_err = first.communicate(timeout=300)
        assert first.returncode == 0, first_err
        assert second.returncode == 2, second.stderr
        err = second.stderr.strip()
        assert len(err.splitlines()) == 1, err
        assert f"is being written by another process (pid {first.pid}: " in err and "subgraphs build" in err
        ids = [json.loads(x)["id"] for x in _lines(out)]
        assert len(ids) == len(set(ids)) == 3
        rerun = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        assert [json.loads(x)["id"] for x in _lines(out)] == ids  # resumed: nothing added, nothing doubled
    assert not lock_path(out).exists()  # a clean exit removes its lock file


def test_eval_into_an_out_another_process_writes_is_refused(saved_tiny, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["eval", "--tasks", "tiny=" + str(EVAL_FIXTURES / "tiny_qa.jsonl"), "--world", str(saved_tiny)]
    args += ["--output-dir", str(out), "--no-progress"]
    with lock_held_by_another_process(out) as holder:
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"{out} is being written by another process (pid {holder.pid}" in err
        assert "give another --out" in err
        assert not (out / "eval.jsonl").exists()
    assert main(args) == 0  # the holder is gone: the run goes ahead
    assert len(_lines(out / "eval.jsonl")) == 6


def test_play_export_into_a_locked_file_is_refused(tmp_path, capsys):
    games = tmp_path / "games.jsonl"
    with lock_held_by_another_process(games) as holder:
        assert main(["play", "--games", "1", "--export", str(games)]) == 2
        assert f"pid {holder.pid}" in capsys.readouterr().err
    assert not games.exists() or games.read_text() == ""


def test_a_killed_holder_never_blocks_the_rerun(tmp_path):
    out = tmp_path / "pool.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)], cwd=ROOT, env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"locked"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert lock_path(out).exists()  # left behind by the kill ...
    build_pool(build_random_world(300, seed=11), 2, out=out, progress=False)  # ... and ignored: the kernel let go
    assert len(load_pool(out)) == 2


def test_a_second_writer_in_this_process_is_refused_too(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log = MetricsLogger(path)
    with pytest.raises(OutputLockedError, match=rf"being written by this process \(pid {os.getpid()}\) already"):
        MetricsLogger(path, resume_step=0)
    log.log(1, {"solver/reward": 0.5})
    log.close()
    with OutputLock(path):  # released: it can be taken again
        pass


def test_resume_refuses_a_pool_with_a_seed_index_twice(tmp_path):
    world = build_random_world(300, seed=11)
    out = tmp_path / "pool.jsonl"
    build_pool(world, 4, seed=1, out=out, progress=False)
    lines = _lines(out)
    out.write_text("".join(x + "\n" for x in lines + lines))  # what two unlocked builds used to leave
    with pytest.raises(PoolFormatError, match=r"pool\.jsonl: line 5: duplicate seed_index \d+ \(first on line 1\)"):
        build_pool(world, 4, seed=1, out=out, progress=False)
    with pytest.raises(PoolFormatError, match=r"line 5: duplicate subgraph id 'sg\d+' \(first on line 1\)"):
        load_pool(out)
