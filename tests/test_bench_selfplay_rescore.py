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


def test_sign_test_is_the_exact_binomial_two_sided_p():
    assert rs.sign_test(0, 0) == 1.0 and rs.sign_test(3, 3) == 1.0
    assert rs.sign_test(0, 5) == rs.sign_test(5, 0) == 2 / 32  # 5 changes, all one way: 2 x 0.5^5
    assert abs(rs.sign_test(12, 23) - 0.0895) < 1e-3
