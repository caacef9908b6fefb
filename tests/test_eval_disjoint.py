"""The built-in benchmark is disjoint from every default training source: the envs' default pool,
the trainer's default envs and the demo's pool. Disjoint means no training subgraph has an answer
(title or alias, normalised) that is a benchmark answer; a question text may recur with another
answer (multi-valued relations such as "an award received by X")."""

from __future__ import annotations

import pytest

from searchgym.core.answers import normalize_answer
from searchgym.tasks.heldout import builtin_benchmark, is_heldout_answer, is_heldout_name
from searchgym.tasks.tasksets import load_tasksets


@pytest.fixture(scope="module")
def bench(default_world):
    return builtin_benchmark(default_world)


def _held(bench) -> set[str]:
    return {normalize_answer(t.answers[0]) for t in bench}


def _assert_disjoint(bench, subgraphs, where: str) -> None:
    held = _held(bench)
    assert subgraphs, where
    clash = [sg.answer_node.title for sg in subgraphs if {normalize_answer(n) for n in sg.answer_node.names} & held]
    assert not clash, f"{where} trains on benchmark answers {clash[:5]}"


def test_eval_builtin_is_the_held_out_benchmark(default_world, bench):
    (ts,) = load_tasksets("builtin", world=default_world)
    assert [t.id for t in ts.tasks] == [t.id for t in bench] and len(ts.tasks) == 500
    assert all(t.metadata["dataset"] == "builtin" and t.metadata["family"] for t in ts.tasks)
    assert {t.hops for t in ts.tasks} == set(range(1, 8))
    assert all(is_heldout_name(t.answers[0]) for t in ts.tasks)
    lit = [t for t in ts.tasks if t.subgraph is not None and not t.subgraph.answer_node.is_literal]
    assert lit and all(is_heldout_answer(default_world, t.subgraph.path[-1]) for t in lit)
    # --limit is a seeded sample of the same benchmark
    (small,) = load_tasksets("builtin", world=default_world, limit=20, seed=3)
    assert len(small.tasks) == 20 and {t.id for t in small.tasks} <= {t.id for t in bench}


def test_disjoint_from_the_default_pool(default_world, bench):
    from searchgym.envs.resources import default_pool

    _assert_disjoint(bench, default_pool(default_world), "the envs' default pool")


def test_disjoint_from_the_trainers_default_envs(default_world, bench):
    from searchgym.training.selfplay_config import TrainConfig
    from searchgym.training.selfplay_envs import make_envs

    cfg = TrainConfig()  # KGSelfPlay-v0 on the default world, as `searchgym train` builds it
    envs = make_envs(cfg, 1)
    _assert_disjoint(bench, list(envs[0].unwrapped.pool), "the trainer's default KGSelfPlay-v0 pool")
    solver = make_envs(TrainConfig(env_id="KGSolverGroup-v0"), 1)[0].unwrapped
    _assert_disjoint(bench, [solver.tasks[i].subgraph for i in range(len(solver.tasks))], "KGSolverGroup-v0 default")


def test_disjoint_from_the_demo_pool(default_world, bench, monkeypatch, tmp_path):
    """The demo's pool, captured from a real `searchgym demo --agent scripted` run."""
    import searchgym.tasks.heldout as heldout
    from searchgym.commands.demo import run_demo

    captured = []
    real = heldout.training_subgraphs

    def spy(*a, **k):
        captured.append(real(*a, **k))
        return captured[-1]

    monkeypatch.setattr(heldout, "training_subgraphs", spy)
    from searchgym.cli import build_parser

    demo = ["demo", "--agent", "scripted", "--games", "1", "--pool-size", "200", "--no-picture"]
    args = build_parser().parse_args([*demo, "--output-dir", str(tmp_path)])
    assert run_demo(args) == 0
    assert captured and len(captured[0]) == 200
    _assert_disjoint(bench, captured[0], "the demo's pool")
