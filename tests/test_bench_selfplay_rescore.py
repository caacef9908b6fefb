"""benchmarks/bench_selfplay_rescore.py: a finished toy self-play run rescored on more held-out Solver questions than
its benchmark scored, paired with the cold start, checked against the run's own records, cached, and refused
with one line when the input is wrong."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("matplotlib")

from tests.support.selfplay_bench import bench_selfplay, benchmark_module, toy_args  # noqa: E402
from tests.support.tiny_lm import save_tiny  # noqa: E402

bs = bench_selfplay()
rs = benchmark_module("bench_selfplay_rescore")


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """A finished toy run (arm c, seed 0) and the tiny model it started from."""
    tmp = tmp_path_factory.mktemp("rescore")
    base = toy_args(tmp)
    assert bs.main([*base, "--arms", "c", "--seeds", "0"]) == 0
    return tmp / "w" / "toy" / "c_s0", tmp / "tiny"


def test_rescore_pairs_a_larger_set_with_the_cold_start_and_checks_the_benchmarks_own(toy_run, tmp_path, capsys):
    run, _ = toy_run
    out, cache = tmp_path / "rescore.json", tmp_path / "cache"
    args = [str(run), "--hops", "1=3,2=3,3=2", "--cache", str(cache), "--max-new-tokens", "8", "--out", str(out)]
    assert rs.main(args) == 0
    r = json.loads(out.read_text())
    assert r["hops"] == {"1": 3, "2": 3, "3": 2} and r["pending"] == []
    assert {h: c["n"] for h, c in r["cold_start"]["solver"]["by_hops"].items()} == {"1": 3, "2": 3, "3": 2}
    (entry,) = r["runs"]
    assert entry["run"] == "w/c_s0" and entry["settings"]["seed"] == 0 and entry["settings"]["total_steps"] == 2
    for wording in ("solver", "solver_reworded"):
        paired = entry["vs_cold_start"][wording]
        assert paired["n"] == 8 and {h: c["n"] for h, c in paired["by_hops"].items()} == {"1": 3, "2": 3, "3": 2}
        # the toy benchmark scored the first 2 / 2 / 1 of the same questions: the rescore answers them alike
        own = entry["bench_questions"][wording]
        assert own["n"] == 5 and own["same_em"] == 5
        assert {h: c["n"] for h, c in own["vs_cold_start"]["by_hops"].items()} == {"1": 2, "2": 2, "3": 1}
    for wording in ("solver", "solver_reworded"):  # the cold start, rescored, answers its own questions alike too
        assert r["cold_start_bench_questions"]["w"][wording] == {"n": 5, "same_answer": 5, "same_em": 5}
    setting = r["settings"]["w"]  # the workdir's seeds pooled: one seed here, so its own counts
    assert setting["seeds"] == [0] and set(setting["solver"]) == {"1", "2", "3"}
    for h, c in entry["vs_cold_start"]["solver"]["by_hops"].items():
        cell = setting["solver"][h]
        assert cell["net"] == [c["gained"] - c["lost"]] and (cell["gained"], cell["lost"]) == (c["gained"], c["lost"])
        assert cell["sign_test_p"] == rs.sign_test(c["gained"], c["lost"])
    assert "w/c_s0" in capsys.readouterr().out
    for wording in ("solver", "solver_reworded"):  # every lost question listed once, with the run that lost it
        lost = r["lost_questions"][wording]
        for h, c in entry["vs_cold_start"][wording]["by_hops"].items():
            cell = lost.get(h, {"lost": 0, "questions": 0, "by_question": []})
            assert cell["lost"] == cell["questions"] == len(cell["by_question"]) == c["lost"]
            assert all(q["runs"] == q["prediction_runs"] == 1 and q["searched_more"] <= 1 for q in cell["by_question"])

    # scored stages are cached: a rerun scores nothing, --collect reads them alone
    stage = cache / "1-3_2-3_3-2" / "eval_w_c_s0.json"
    made = stage.stat().st_mtime_ns
    assert rs.main(args) == 0 and rs.main([*args, "--collect"]) == 0
    assert stage.stat().st_mtime_ns == made and json.loads(out.read_text())["runs"][0]["run"] == "w/c_s0"


def test_a_stage_another_process_scores_is_deferred_not_waited_on(toy_run, tmp_path):
    from searchgym.core.output_lock import OutputLock

    args = rs.parse_args([str(toy_run[0]), "--hops", "1=1", "--cache", str(tmp_path)])
    held = OutputLock(tmp_path / "x.stage", what="test").acquire()
    try:
        assert (
            rs.score(
                "x", lambda: pytest.fail("loaded a model another process is scoring"), tmp_path, args, "x", block=False
            )
            is False
        )
    finally:
        held.release()


def test_bad_input_is_a_one_line_error(toy_run, tmp_path, capsys):
    run, tiny = toy_run
    cache = ["--cache", str(tmp_path / "cache"), "--hops", "1=1"]

    def error(argv) -> str:
        assert rs.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("bench_selfplay_rescore: error:") and "\n" not in err
        return err

    assert "has no final/ policy" in error([str(run.parent), *cache])
    other = save_tiny(tmp_path / "other", seed=1)
    capsys.readouterr()  # its save's progress bar
    assert "give the folder the run started from" in error([str(run), "--start", str(other), *cache])
    moved = tmp_path / "moved"  # the start.json's folder is gone: --start with the same weights stands in for it
    shutil.copytree(tiny, moved)
    shutil.rmtree(tiny)
    try:
        assert "which is gone; give --start" in error([str(run), *cache])
        assert rs.main([str(run), "--start", str(moved), *cache, "--max-new-tokens", "4"]) == 0
        capsys.readouterr()
        elsewhere = tmp_path / "elsewhere" / "w"  # a workdir of the same name: its run may not reuse the stage
        shutil.copytree(run.parent.parent, elsewhere)
        err = error([str(elsewhere / "toy" / "c_s0"), "--start", str(moved), *cache])
        assert f"scored {run} as stage w_c_s0, not {elsewhere / 'toy' / 'c_s0'}" in err and "another --cache" in err
    finally:
        shutil.copytree(moved, tiny)
    # the cold start scored from the moved copy is found again from the original folder (its stage is keyed by
    # weights, not by folder), and the run's own stage is reused
    assert rs.main([str(run), *cache, "--max-new-tokens", "4"]) == 0
    capsys.readouterr()
    assert "not scored in" in error([str(run), "--cache", str(tmp_path / "empty"), "--collect"])


def test_cold_start_only_scores_the_cold_start_of_a_run_still_training(toy_run, tmp_path, capsys):
    run, _ = toy_run
    training = tmp_path / "w" / "toy" / "c_s0"  # the same run before its final/ policy is written
    shutil.copytree(run.parent, training.parent)
    shutil.rmtree(training / "final")
    cache = tmp_path / "cache"
    args = ["--hops", "1=2,2=1", "--cache", str(cache), "--max-new-tokens", "4"]
    out = tmp_path / "rescore.json"
    assert rs.main([str(training), *args, "--cold-start-only", "--out", str(out)]) == 0
    assert "the cold start is scored in" in capsys.readouterr().out
    (stage,) = (cache / "1-2_2-1").glob("eval_cold_start_*.json")  # the cold start's stage alone, nothing collected
    assert not list((cache / "1-2_2-1").glob("eval_w_*")) and not out.exists()
    made = stage.stat().st_mtime_ns
    assert rs.main([str(run), *args, "--out", str(out)]) == 0  # once finished, the run's rescore reuses it
    assert stage.stat().st_mtime_ns == made and json.loads(out.read_text())["runs"][0]["run"] == "w/c_s0"
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:  # argparse's one-line usage error
        rs.main([str(training), *args, "--cold-start-only", "--collect"])
    assert refused.value.code == 2 and "give one of them" in capsys.readouterr().err


def test_sign_test_is_the_exact_binomial_two_sided_p():
    assert rs.sign_test(0, 0) == 1.0 and rs.sign_test(3, 3) == 1.0
    assert rs.sign_test(0, 5) == rs.sign_test(5, 0) == 2 / 32  # 5 changes, all one way: 2 x 0.5^5
    assert abs(rs.sign_test(12, 23) - 0.0895) < 1e-3


def _record(key: str, em: float, thinks: list, queries: list, hops: int = 1) -> dict:
    """A held-out record with its trajectory: one turn a think, the turn's search (if any) beside it."""
    turns = [
        {"think": think, "searches": [{"query": query}] if query is not None else []}
        for think, query in zip(thinks, queries)
    ]
    searches = sum(q is not None for q in queries)
    return {
        "key": key,
        "dataset": "heldout",
        "em": em,
        "hops": hops,
        "searches": searches,
        "trajectory": {"turns": turns},
    }


def test_plan_steps_and_first_query_read_the_trajectory():
    two = _record("k", 0.0, ["Plan: 1) the team that A played for; 2) the team that it played for."], ["A  Played for"])
    assert rs.plan_steps(two) == 2 and rs.first_query(two) == "a played for"
    one = _record("k", 1.0, ["Plan: 1) the publication date of Broken Tides (1964).", ""], [None, "broken tides"])
    assert rs.plan_steps(one) == 1 and rs.first_query(one) == "broken tides"  # the first search, turn 2
    assert rs.plan_steps(_record("k", 0.0, ["No plan; version 2.1) is not a step"], [None])) == 0
    assert rs.first_query(_record("k", 0.0, [""], [None])) is None


def test_answer_moves_splits_lost_kept_and_gained_by_what_changed(tmp_path):
    from searchgym.evaluation.runner import RECORDS_NAME

    cold = [
        _record("a", 1.0, ["Plan: 1) x."], ["date broken tides was published"]),
        _record("b", 1.0, ["Plan: 1) y."], ["team a played for"]),
        _record("c", 1.0, ["Plan: 1) z."], ["place b was born"]),
        _record("d", 1.0, ["Plan: 1) w."], ["city c"]),
        _record("e", 0.0, ["Plan: 1) v."], ["e"]),
        _record("f", 0.0, ["Plan: 1) u."], ["f"]),
    ]
    run = [
        _record("a", 0.0, ["Plan: 1) x."], ["published date broken tides"]),  # lost: rewrote its query
        _record("b", 0.0, ["Plan: 1) y; 2) y again."], ["team a played for", "team b"]),  # lost: plan + search
        _record("c", 0.0, ["Plan: 1) z."], ["Place B was  born"]),  # lost: same query (normalised), read otherwise
        _record("d", 1.0, ["Plan: 1) w."], ["city of c"]),  # kept, with another query
        _record("e", 1.0, ["Plan: 1) v."], ["e", "e again"]),  # gained by a second search
        _record("f", 0.0, ["Plan: 1) u."], ["f"]),  # wrong both times: not counted
    ]
    for name, records in (("cold", cold), ("run", run)):
        (tmp_path / f"eval_{name}").mkdir()
        (tmp_path / f"eval_{name}" / RECORDS_NAME).write_text("".join(json.dumps(r) + "\n" for r in records))
    moves = rs.answer_moves(tmp_path, "cold", ["run"], reworded=False)
    assert moves == {
        "1": {
            "lost": {"n": 3, "query_rewritten": 1, "longer_plan": 1, "more_searches": 1, "none": 1},
            "kept": {"n": 1, "query_rewritten": 1, "longer_plan": 0, "more_searches": 0, "none": 0},
            "gained": {"n": 1, "query_rewritten": 0, "longer_plan": 0, "more_searches": 1, "none": 0},
        }
    }
    assert rs.answer_moves(tmp_path, "cold", ["run"], reworded=True) == {}  # no reworded records here


def test_trajectories_are_scored_apart_and_reported_as_answer_moves(toy_run, tmp_path, capsys):
    run, _ = toy_run
    out, cache = tmp_path / "rescore.json", tmp_path / "cache"
    args = [str(run), "--hops", "1=2,2=1", "--cache", str(cache), "--max-new-tokens", "8", "--out", str(out)]
    assert rs.main([*args, "--trajectories"]) == 0
    assert "answer moves (solver)" in capsys.readouterr().out
    work = cache / "1-2_2-1_trajectories"  # never mixed with records scored without trajectories
    assert not (cache / "1-2_2-1").exists()
    records = rs.heldout_records(work, "w_c_s0")
    assert len(records) == 3 and all(r["trajectory"]["turns"] for r in records.values())
    r = json.loads(out.read_text())
    (entry,) = r["runs"]
    for wording in ("solver", "solver_reworded"):
        moves = r["answer_moves"][wording]
        for h, c in entry["vs_cold_start"][wording]["by_hops"].items():
            assert moves.get(h, {}).get("lost", {}).get("n", 0) == c["lost"]
            assert moves.get(h, {}).get("gained", {}).get("n", 0) == c["gained"]
    assert rs.main(args) == 0 and "answer_moves" not in json.loads(out.read_text())
    assert (cache / "1-2_2-1").is_dir()
