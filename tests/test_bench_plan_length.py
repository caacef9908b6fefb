"""``benchmarks/bench_plan_length.py`` reads the plan-length decision exactly where the demonstrations make it,
and writes a result for any model folder."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from searchgym.core.types import Trajectory  # noqa: E402
from searchgym.training.demonstrations import SolverExpert  # noqa: E402
from searchgym.training.learning_checks import heldout_solver_tasks  # noqa: E402
from searchgym.world.synthetic import default_world  # noqa: E402
from tests.support.selfplay_bench import benchmark_module  # noqa: E402
from tests.support.tiny_lm import save_tiny  # noqa: E402


def _bench():
    return benchmark_module("bench_plan_length")


@pytest.fixture(scope="module")
def world():
    return default_world()


def test_the_prefix_is_the_experts_first_thought_up_to_the_plans_first_step(world):
    """The decision is read after the very text the Solver demonstrations open with, and the next character
    there is the choice: ``;`` for a longer question, ``.`` for a 1-hop one."""
    bench = _bench()
    tasks = heldout_solver_tasks(world, {1: 3, 2: 3, 3: 2})
    for task in tasks:
        prompt = bench.solver_prompt(world, task)
        assert prompt.rstrip().endswith(task.question)
        traj = Trajectory(role="solver", task=task, prompt=prompt, metadata={"max_turns": 5})
        first = SolverExpert(0, p_question_query=0.0).turn(traj, 0)
        prefix = bench.plan_prefix(task)
        assert first.startswith(prefix), (first, prefix)
        assert first[len(prefix)] == (";" if task.subgraph.hops > 1 else ".")


def test_a_run_writes_each_wordings_cells(tmp_path):
    """Any model folder can be scored: every held-out question is counted once per wording, with a probability."""
    bench = _bench()
    tiny = save_tiny(tmp_path / "tiny")
    out = tmp_path / "plan.json"
    bench.main(["--adapter", str(tiny), "--out", str(out)])
    cells = json.loads(out.read_text())["adapters"][str(tiny)]
    assert set(cells) == set(bench.WORDINGS)
    for score in cells.values():
        by_hops = score["by_hops"]
        assert 0.0 <= score["separation"] <= 1.0
        assert {h: c["n"] for h, c in by_hops.items()} == {str(h): n for h, n in bench.EVAL_HOPS.items()}
        assert all(0.0 <= c["p_more_steps"] <= 1.0 and 0 <= c["right"] <= c["n"] for c in by_hops.values())


def test_separation_is_one_when_a_threshold_splits_the_hop_counts_and_a_half_when_it_cannot():
    bench = _bench()
    assert bench.separation([0.6, 0.7], [0.8, 0.9]) == 1.0  # all planned long, yet told apart
    assert bench.separation([0.5, 0.5], [0.5, 0.5]) == 0.5
    assert bench.separation([0.9], [0.1]) == 0.0
    assert bench.separation([], [0.1]) is None


def test_the_training_split_scores_training_side_questions_in_training_wordings(world):
    """``--split training`` is what a setting is chosen on: none of its questions is a held-out one (by answer or
    by text), every hop count is full, and both wordings ask the same questions."""
    from searchgym.tasks.heldout import answer_name, is_heldout_name

    bench = _bench()
    split = bench.split_tasks(world, "training")
    assert set(split) == set(bench.TRAINING_WORDINGS)
    heldout = {t.question for w in bench.WORDINGS for t in heldout_solver_tasks(world, bench.EVAL_HOPS, wording=w)}
    template, train = split["template"], split["train"]
    for tasks in split.values():
        assert {h: sum(t.subgraph.hops == h for t in tasks) for h in bench.EVAL_HOPS} == bench.EVAL_HOPS
        assert not any(is_heldout_name(answer_name(t.subgraph)) for t in tasks)
        assert not heldout & {t.question for t in tasks}
    assert [t.subgraph.path for t in template] == [t.subgraph.path for t in train]
    assert sum(a.question != b.question for a, b in zip(template, train)) > len(train) // 2
