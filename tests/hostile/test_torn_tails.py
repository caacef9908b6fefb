"""A torn tail never swallows the next record (issue 33, item 1).

A run killed mid-line (a kill, a full disk) leaves a fragment without a newline at the end of an append-only
file. Every writer that appends -- trajectory export, eval records, subgraph pools and their rejections,
training metrics -- cuts that fragment before its first append, through the one helper
:func:`searchgym.core.jsonl.open_append`; a test below keeps it that way.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import searchgym
from searchgym.agents import AgentSpec, make_agent
from searchgym.cli import main
from searchgym.construction import build_pool, load_pool, rejections_path
from searchgym.core.jsonl import repair_torn_tail, scan_jsonl
from searchgym.envs.export import read_trajectories
from searchgym.envs.solver import KGSolverEnv
from searchgym.evaluation import EvalConfig, evaluate
from searchgym.tasks import load_tasksets
from searchgym.tasks.sources import SubgraphTaskSource
from searchgym.training.metrics import MetricsLogger, read_metrics
from tests.hostile.conftest import EVAL_FIXTURES
from tests.support.construction_world import build_random_world
from tests.support.env_helpers import tiny_subgraph

FRAGMENT = '{"game": 1'  # what a kill mid-write leaves: the start of a line, no newline


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_issue_repro_play_after_a_torn_export_then_diagnose(tmp_path, capsys):
    """``printf '{"game": 1' >> g.jsonl; searchgym play --games 1 --export g.jsonl; searchgym diagnose g.jsonl``."""
    games = tmp_path / "g.jsonl"
    games.write_text(FRAGMENT)
    assert main(["play", "--games", "1", "--export", str(games)]) == 0
    assert main(["play", "--games", "1", "--seed", "1", "--export", str(games)]) == 0
    assert len(read_trajectories(games)) == 2
    capsys.readouterr()
    assert main(["diagnose", str(games)]) == 0
    assert "solver rollouts" in capsys.readouterr().out


def test_trajectory_writer_cuts_a_torn_tail_and_keeps_finished_games(tiny_world, tmp_path):
    games = tmp_path / "games.jsonl"

    def play_one():
        env = KGSolverEnv(tiny_world, SubgraphTaskSource([tiny_subgraph()], tiny_world), export_path=games)
        env.reset(seed=0)
        env.step("<answer>Ostrel</answer>")
        env.close()

    play_one()
    finished = _lines(games)
    with open(games, "a", encoding="utf-8") as f:
        f.write(finished[0][: len(finished[0]) // 2])  # the next game torn halfway
    play_one()
    assert len(read_trajectories(games)) == 2 and _lines(games)[0] == finished[0]


def test_eval_records_drop_only_the_torn_last_line(tiny_world, tmp_path):
    tasks = load_tasksets("tiny=" + str(EVAL_FIXTURES / "tiny_qa.jsonl"))
    config = EvalConfig(progress=False, concurrency=2)
    evaluate(
        make_agent(AgentSpec("scripted"), world=tiny_world), tasks, world=tiny_world, config=config, output_dir=tmp_path
    )
    records = tmp_path / "eval.jsonl"
    full = _lines(records)
    records.write_text("\n".join(full[:5]) + "\n" + full[5][:40])  # the sixth record torn by a kill
    res = evaluate(
        make_agent(AgentSpec("scripted"), world=tiny_world), tasks, world=tiny_world, config=config, output_dir=tmp_path
    )
    assert res.summary["timing"]["questions_this_run"] == 1  # only the torn question is redone
    keys = [json.loads(x)["key"] for x in _lines(records)]
    assert _lines(records)[:5] == full[:5] and sorted(keys) == sorted(json.loads(x)["key"] for x in full)


def test_pool_and_rejections_resume_over_torn_tails(tmp_path):
    world = build_random_world(300, seed=11)
    out = tmp_path / "pool.jsonl"
    build_pool(world, 6, seed=2, out=out, progress=False)
    accepted, rejected = _lines(out), _lines(rejections_path(out))
    out.write_text("\n".join(accepted[:3]) + "\n" + accepted[3][:25])
    rejections_path(out).write_text("".join(x + "\n" for x in rejected) + '{"seed_index": ')
    build_pool(world, 8, seed=2, out=out, progress=False)
    ids = [sg.id for sg in load_pool(out)]
    assert len(ids) == len(set(ids)) == 8 and _lines(out)[:3] == accepted[:3]
    kept = [obj for _, obj in scan_jsonl(rejections_path(out), repair=False)]  # parses to the end
    assert kept[: len(rejected)] == [json.loads(x) for x in rejected]


def test_metrics_resume_after_a_torn_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log = MetricsLogger(path)
    for step in (1, 2, 3):
        log.log(step, {"solver/reward": step / 10})
    log.close()
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"step": 4, "solver/rew')
    log = MetricsLogger(path, resume_step=3)
    log.log(4, {"solver/reward": 0.4})
    log.close()
    assert [r["step"] for r in read_metrics(path)] == [1, 2, 3, 4]


def test_repair_keeps_a_complete_last_record_and_leaves_clean_files_alone(tmp_path):
    p = tmp_path / "hand.jsonl"
    p.write_text('{"a": 1}\n{"b": 2}')  # written by hand: complete, only the newline is missing
    assert repair_torn_tail(p) and p.read_text() == '{"a": 1}\n{"b": 2}\n'
    assert not repair_torn_tail(p) and p.read_text() == '{"a": 1}\n{"b": 2}\n'
    p.write_text('{"a": 1}\n{"b": 2}\n{"c": ')
    assert repair_torn_tail(p) and p.read_text() == '{"a": 1}\n{"b": 2}\n'
    p.write_text('{"c": ')  # a first line torn
    assert repair_torn_tail(p) and p.read_bytes() == b""
    assert not repair_torn_tail(tmp_path / "missing.jsonl")


def _append_mode_opens(path: Path):
    """``(line, call)`` of every ``open(..., "a...")`` / ``x.open("a...")`` with a constant append mode."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name != "open":
            continue
        position = 1 if isinstance(func, ast.Name) else 0
        modes = [kw.value for kw in node.keywords if kw.arg == "mode"]
        if len(node.args) > position:
            modes.append(node.args[position])
        for mode in modes:
            if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and "a" in mode.value:
                yield node.lineno, ast.unparse(node)


def test_every_append_goes_through_the_shared_helper():
    """No module opens a file to append except :mod:`searchgym.core.jsonl` (so none skips the repair)."""
    package = Path(searchgym.__file__).parent
    helper = package / "core" / "jsonl.py"
    found = [
        f"{path.relative_to(package)}:{line}: {call}"
        for path in sorted(package.rglob("*.py"))
        if path != helper
        for line, call in _append_mode_opens(path)
    ]
    assert not found, "append through searchgym.core.jsonl.open_append instead:\n" + "\n".join(found)
    assert list(_append_mode_opens(helper))  # the scan does see the helper's own append
