"""benchmarks/bench_selfplay.py: the held-out sets are disjoint from self-play training, and the whole benchmark
(three arms, metrics, held-out evaluation, JSON/PNG, collect, resume) runs at toy scale -- the GPU size's settings
on a tiny random Llama on CPU, so the code path the GPU run takes is exercised without one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("matplotlib")

from searchgym.construction import interleave_by_hops, load_pool  # noqa: E402
from tests.support.selfplay_bench import BENCH, bench_selfplay, benchmark_module, toy_args  # noqa: E402
from tests.support.tiny_lm import save_tiny  # noqa: E402

bs = bench_selfplay()
setup = benchmark_module("selfplay_setup")
collected = benchmark_module("selfplay_collect")
bl = benchmark_module("bench_learning")


@pytest.fixture(scope="module")
def world():
    from searchgym.world.synthetic import default_world

    return default_world()


@pytest.mark.parametrize("size", ["cpu", "gpu"])
def test_heldout_sets_are_disjoint_from_the_selfplay_pool(tmp_path, world, size):
    """The pool every training game is built on shares no answer name, answer entity or question with the
    held-out Solver questions (both wordings) or Proposer targets of the size; a leaked one is refused by name."""
    settings = setup.SIZES[size]
    pool = load_pool(setup.stage_pool(world, settings["pool"], tmp_path))
    hops = [sg.hops for sg in pool]
    assert sorted(hops) == sorted(h for h, n in settings["pool"].items() for _ in range(n))
    assert hops == [sg.hops for sg in interleave_by_hops({h: [sg for sg in pool if sg.hops == h] for h in set(hops)})]
    heldout = setup.heldout_sets(world, settings)
    report = setup.check_disjoint(pool, heldout)
    assert report["disjoint"] and report["pool_subgraphs"] == len(pool)
    for name, tasks in heldout.items():
        cell = report["sets"][name]
        assert cell["n"] == len(tasks) > 0
        assert cell["answer_name_overlap"] == cell["answer_entity_overlap"] == cell["question_overlap"] == 0
        assert cell["answers_on_heldout_side"] == len(tasks)
    leaked = heldout["proposer"][0]
    with pytest.raises(setup.BenchError, match=f"proposer shares answer names.*{leaked.id}"):
        setup.check_disjoint([*pool, leaked.subgraph], heldout)


def test_wait_lock_lets_the_second_process_in_after_the_first(tmp_path):
    """A shared stage (the pool, the cold start's evaluation) is made by whoever locks it first; the other waits."""
    from searchgym.core.output_lock import OutputLock

    events: list[str] = []
    holder = OutputLock(tmp_path / "x.stage").acquire()

    def second() -> None:
        with setup.wait_lock(tmp_path / "x.stage", poll_s=0.01):
            events.append("second has it")

    t = threading.Thread(target=second)
    t.start()
    events.append("first releases")
    holder.release()
    t.join()
    assert events == ["first releases", "second has it"]


def test_the_solvers_are_scored_apart_on_the_models_own_questions():
    """The per-step 'Solver reward on the proposed questions': games on a question the model wrote (fresh or
    replayed, task source ``proposer``) apart from games on the fallback template question."""
    from searchgym.core.types import Task
    from searchgym.training.selfplay_trainer import Sample, rollout_metrics
    from tests.support.trajectories import segmented_trajectory

    def solver(source: str, reward: float, game: int) -> Sample:
        t = segmented_trajectory(["<answer> Tarsk </answer>"])
        t.task = Task(id=f"{source}:{game}", question="Where?", answers=["Tarsk"], source=source)
        t.correct = reward == 1.0
        return Sample("solver", t, reward, {}, game)

    m = rollout_metrics([solver("proposer", 1.0, 0), solver("proposer", 0.0, 0), solver("dummy", 0.0, 1)])
    assert m["solver/on_proposed"] == 2 / 3 and m["solver/proposed_reward"] == 0.5
    assert m["solver/proposed_correct"] == 0.5 and m["solver/reward"] == 1 / 3
    none = rollout_metrics([solver("dummy", 0.0, 1)])
    assert none["solver/on_proposed"] == 0.0 and "solver/proposed_reward" not in none


def _steps(run: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_toy_benchmark_trains_three_arms_collects_and_resumes(tmp_path, capsys):
    base = toy_args(tmp_path)
    work, out = tmp_path / "w", tmp_path / "res" / "selfplay_toy.json"

    # the cold start's evaluation alone, as a process beside the training runs would make it: no run, no results
    assert bs.main([*base, "--cold-start-only"]) == 0
    assert "collect once a run has finished" in capsys.readouterr().out and not out.exists()
    assert {p.name for p in (work / "toy").iterdir() if p.is_dir()} == {"eval_cold_start"}
    cold_made = (work / "toy" / "eval_cold_start.json").stat().st_mtime_ns

    # two arms, one seed, in this process, each also scored half-way (--eval-at)
    assert bs.main([*base, "--arms", "a,b", "--seeds", "0", "--eval-at", "1"]) == 0
    r = json.loads(out.read_text())
    assert set(r["arms"]) == {"a", "b"} and r["seeds"] == [0] and r["disjointness"]["disjoint"]
    assert r["arms"]["a"]["recipe"] == "ssp" and r["arms"]["a"]["proposer_mode"] == "vanilla"
    assert r["arms"]["b"]["config"]["env_kwargs"]["proposer_mode"] == "kg"
    assert r["arms"]["a"]["config"]["train_proposer"] and r["arms"]["a"]["config"]["train_solver"]
    assert r["budget"]["games_per_run"] == 2 and r["budget_equal"]
    run = r["arms"]["a"]["runs"][0]
    curve = run["train"]
    assert curve["step"] == [1, 2] and run["games"] == 2
    for key in ("valid_rate", "proposer_reward", "solver_reward", "groups_with_signal", "question_hops", "step_s"):
        assert len(curve[key]) == 2 and all(v is None or 0 <= v for v in curve[key]), key
    assert curve["question_hops"] == [2.0, 3.0]  # the pool's play order: 2-hop first
    shares = [sum(v[i] for v in curve["rejected"].values()) for i in range(2)]  # every invalid question has a reason
    assert all(abs(s - (1 - v)) < 1e-9 for s, v in zip(shares, curve["valid_rate"]))
    assert curve["questions_first_step"][0]["answer"] and "reason" in curve["questions_first_step"][0]
    assert "invalid_kinds" not in curve  # arm (a)'s answer-only questions are written on no path
    kg_curve = r["arms"]["b"]["runs"][0]["train"]
    assert kg_curve["questions_first_step"][0]["target"].startswith("h2-")  # the pool subgraph it was written on
    kinds = kg_curve["invalid_kinds"]  # why each invalid training question was invalid, per step and in all
    assert [sum(c.values()) for c in kinds["steps"]] == [round(1 - v) for v in kg_curve["valid_rate"]]
    assert sum(kinds["total"].values()) == sum(sum(c.values()) for c in kinds["steps"])
    by_step = curve["valid_by_hops"]["steps"]  # one game a step: its subgraph's hop count, valid or not
    assert [list(c) for c in by_step] == [["2"], ["3"]]
    assert [c[h]["valid"] for c, h in zip(by_step, ("2", "3"))] == [round(v) for v in curve["valid_rate"]]
    assert all(c[h]["n"] == 1 for c, h in zip(by_step, ("2", "3")))
    assert curve["valid_by_hops"]["total"] == {"2": by_step[0]["2"], "3": by_step[1]["3"]}
    flips = run["vs_cold_start"]
    assert flips["solver"]["n"] == 5 and set(flips["solver"]["by_hops"]) == {"1", "2", "3"}
    assert flips["solver_reworded"]["n"] == 5 and set(flips["solver_reworded"]["by_hops"]) == {"1", "2", "3"}
    assert flips["proposer_kg"]["n"] == flips["proposer_vanilla"]["n"] == 2
    for wording in ("solver", "solver_reworded"):  # every held-out question counted once, by its hop count
        short = run[wording]["stopped_short_by_hops"]
        assert {h: c["n"] for h, c in short.items()} == {h: c["n"] for h, c in flips[wording]["by_hops"].items()}
        assert short["1"]["intermediate"] == 0  # a 1-hop path passes through no node between seed and answer
    assert "proposer_vanilla" not in r["arms"]["b"]["runs"][0]["vs_cold_start"]  # b trains the KG prompt only
    assert set(r["cold_start"]["proposer_cells"]) == {"kg", "kg_sampled", "vanilla"}
    sampled = r["cold_start"]["proposer_cells"]["kg_sampled"]  # each target played twice at the rollouts' temperature
    assert sampled["samples"] == r["eval"]["proposer_samples"] == 2 and sampled["n"] == 2  # n: targets resampled
    assert {h: c["n"] for h, c in sampled["by_hops"].items()} == {"2": 2, "3": 2}
    assert sum(sampled["invalid_kinds"].values()) == 4 - sum(c["valid"] for c in sampled["by_hops"].values())
    assert flips["proposer_kg_sampled"]["n"] == 2 and "kg_sampled" in run["proposer_cells"]
    assert r["eval"]["proposer_sampled_temperature"] == 1.0
    by_hops = r["cold_start"]["proposer_cells"]["kg"]["by_hops"]  # the 2 held-out targets: one of 2, one of 3 hops
    assert {h: c["n"] for h, c in by_hops.items()} == {"2": 1, "3": 1} and all(
        0 <= c["valid"] <= 1 for c in by_hops.values()
    )
    single = r["cold_start"]["proposer_cells"]["kg"]["single_answer"]  # the targets whose path has one answer
    assert single["n"] == r["eval"]["proposer_single_answer_targets"] and 0 <= single["valid"] <= single["n"] <= 2
    kg = r["cold_start"]["proposer_cells"]["kg"]  # why each invalid question was invalid (a tiny model: all are)
    assert sum(kg["invalid_kinds"].values()) == 2 - sum(c["valid"] for c in by_hops.values())
    assert "invalid_kinds" not in r["cold_start"]["proposer_cells"]["vanilla"]  # an answer-only question has no path
    assert set(r["solver_gain"]) == {"(a) vanilla SSP", "(b) KG Proposer, binary"}
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert (work / "toy" / "a_s0" / "final" / "adapter_model.safetensors").is_file()
    (mid,) = run["checkpoints"]  # step 1's checkpoint, scored like the final policy and paired with the cold start
    assert mid["step"] == 1 and mid["model"].endswith("step_00000001/policy") and mid["solver"]["overall"]["n"] == 5
    assert mid["vs_cold_start"]["proposer_kg"]["n"] == 2 and set(mid["proposer_cells"]) == {"kg", "vanilla"}
    assert r["arms"]["a"]["config"]["keep_checkpoint_every"] == 1

    # the third arm, both toy seeds, as a script in its own process: collected with the first two
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench_selfplay.py"), *base, "--arms", "c"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert set(r["arms"]) == {"a", "b", "c"} and r["seeds"] == [0, 1]
    assert [x["seed"] for x in r["arms"]["c"]["runs"]] == [0, 1]
    assert r["seeds_note"].startswith("seeds per arm: (a) 0; (b) 0; (c) 0, 1; one seed is allowed")  # arms differ
    assert r["solver_gain"]["(c) KG Proposer + WCR"]["2"]["seeds"] == 2
    assert set(r["targets"]) == {"c_2hop_plus_5", "c_3hop_plus_5", "ordering_c_ge_b_ge_a"}
    assert (work / "toy" / "eval_cold_start.json").stat().st_mtime_ns == cold_made  # evaluated once, by the first

    # a run killed after its first checkpoint resumes from it; its evaluation is redone, the rest is kept
    c0 = work / "toy" / "c_s0"
    shutil.rmtree(c0 / "final")
    shutil.rmtree(c0 / "checkpoints" / "step_00000002")
    (work / "toy" / "eval_c_s0.json").unlink()
    a_metrics = (work / "toy" / "a_s0" / "metrics.jsonl").stat().st_mtime_ns
    assert bs.main([*base, "--arms", "c", "--seeds", "0"]) == 0
    assert _steps(c0) == [1, 2] and (c0 / "checkpoints" / "step_00000002").is_dir()
    assert (work / "toy" / "a_s0" / "metrics.jsonl").stat().st_mtime_ns == a_metrics
    assert len(json.loads(out.read_text())["arms"]["c"]["runs"]) == 2

    # --collect rewrites the results from the workdir alone
    out.unlink()
    out.with_suffix(".png").unlink()
    capsys.readouterr()
    assert bs.main([*base, "--collect"]) == 0
    assert set(json.loads(out.read_text())["arms"]) == {"a", "b", "c"} and out.with_suffix(".png").is_file()
    assert "(c) KG Proposer + WCR s1" in capsys.readouterr().out

    # cached results are never silently mixed with another budget or another start
    assert bs.main([*base, "--arms", "a", "--seeds", "0", "--steps", "3"]) == 2
    assert "finished at 2 steps, not 3" in capsys.readouterr().err
    assert bs.main([*base, "--arms", "a", "--seeds", "0", "--proposer-baseline", "hop_group"]) == 2
    assert "trained with proposer_baseline=none, not hop_group" in capsys.readouterr().err
    assert bs.main([*base, "--arms", "a", "--seeds", "0", "--proposer-samples", "3"]) == 2
    assert "sampled 2 times a target, this invocation asks 3" in capsys.readouterr().err
    assert bs.main([*base, "--arms", "a", "--seeds", "0", "--set", "kl_coef=0.05"]) == 2
    assert "trained with --set (none), not kl_coef=0.05" in capsys.readouterr().err
    shutil.rmtree(c0 / "checkpoints" / "step_00000001")
    assert bs.main([*base, "--arms", "c", "--seeds", "0", "--eval-at", "1"]) == 2
    assert "run c_s0 in" in (err := capsys.readouterr().err) and "kept no checkpoint at step 1" in err
    other = save_tiny(tmp_path / "other", seed=1)
    assert bs.main([*base[:2], "--model", str(other), *base[4:]]) == 2
    assert f"this command starts from {other}" in capsys.readouterr().err


@pytest.mark.slow
def test_stop_at_ends_a_run_at_a_checkpoint_trained_to_or_kept_by_a_run_killed_later(tmp_path, capsys):
    base = toy_args(tmp_path)
    work, out = tmp_path / "w" / "toy", tmp_path / "res" / "selfplay_toy.json"

    # trained on to the stop: step 1 of the 2-step schedule, named in the label, budget and curves
    assert bs.main([*base, "--arms", "b", "--seeds", "0", "--stop-at", "1"]) == 0
    r = json.loads(out.read_text())
    (run,) = r["arms"]["b"]["runs"]
    assert run["stopped_at"] == 1 and run["train"]["step"] == [1] and run["games"] == 1
    assert r["budget"]["stopped_at"] == 1 and r["budget"]["total_steps"] == 2 and r["budget"]["games_per_run"] == 1
    assert r["arms"]["b"]["label"] == "(b) KG Proposer, binary, stopped at step 1"
    assert _steps(work / "b_s0") == [1]
    done = json.loads((work / "b_s0" / "final" / setup.DONE).read_text())
    assert (done["steps"], done["total_steps"], done["stopped_at"]) == (1, 2, 1)
    assert bs.main([*base, "--arms", "b", "--seeds", "0"]) == 2  # a stopped run is never passed off as a whole one
    assert "stopped at step 1 of 2, not 2 steps" in capsys.readouterr().err

    # a run that went on to step 2 and was killed before its final policy: its kept step-1 checkpoint is the stop
    assert bs.main([*base, "--arms", "c", "--seeds", "1"]) == 2  # an unstopped run beside a stopped one is refused
    assert "different rollout budgets" in capsys.readouterr().err
    c1 = work / "c_s1"
    shutil.rmtree(c1 / "final")
    (work / "eval_c_s1.json").unlink()
    assert _steps(c1) == [1, 2]
    assert bs.main([*base, "--arms", "c", "--seeds", "1", "--stop-at", "1"]) == 0
    kept = c1 / "checkpoints" / "step_00000001" / "policy" / "adapter_model.safetensors"
    assert (c1 / "final" / "adapter_model.safetensors").read_bytes() == kept.read_bytes()
    (run,) = json.loads(out.read_text())["arms"]["c"]["runs"]
    assert run["stopped_at"] == 1 and run["train"]["step"] == [1]  # step 2, logged past the stop, left out

    # ... and refused in one line when that checkpoint was not kept
    shutil.rmtree(c1 / "final")
    shutil.rmtree(c1 / "checkpoints" / "step_00000001")
    assert bs.main([*base, "--arms", "c", "--seeds", "1", "--stop-at", "1"]) == 2
    err = capsys.readouterr().err
    assert "run c_s1 in" in err and "kept no checkpoint at step 1" in err and "Traceback" not in err


def test_proposer_baseline_override_reaches_every_arm_and_only_when_given(tmp_path):
    pool = tmp_path / "pool.jsonl"
    opts = {"model": "smollm2", "init": None, "device": "cpu", "steps": None}
    from searchgym.training.recipes import recipe_values

    for arm in setup.ARMS.values():  # without the option: each recipe's own at the size
        own = setup.train_config(arm, 0, setup.SIZES["cpu"], opts, pool, tmp_path).proposer_baseline
        assert own == recipe_values(arm.recipe, setup.SIZES["cpu"]["recipe_size"])["proposer_baseline"] != "hop_group"
    hrpo = {**opts, "proposer_baseline": "hop_group"}
    assert {
        setup.train_config(arm, 0, setup.SIZES["cpu"], hrpo, pool, tmp_path).proposer_baseline
        for arm in setup.ARMS.values()
    } == {"hop_group"}


def test_set_overrides_reach_every_arm_and_name_it(tmp_path):
    pool = tmp_path / "pool.jsonl"
    opts = {"model": "smollm2", "init": None, "device": "cpu", "steps": None}
    sets = setup.parse_overrides(["kl_coef=0.01", " lr = 5e-5"])
    assert sets == ["kl_coef=0.01", "lr=5e-5"]
    for arm in setup.ARMS.values():
        plain = setup.train_config(arm, 0, setup.SIZES["cpu"], opts, pool, tmp_path)
        cfg = setup.train_config(arm, 0, setup.SIZES["cpu"], {**opts, "overrides": sets}, pool, tmp_path)
        assert plain.kl_coef == 0.0 and cfg.kl_coef == 0.01 and cfg.lr == 5e-5
        assert cfg.to_dict() | {"kl_coef": 0.0, "lr": plain.lr} == plain.to_dict()  # nothing else moved
        own = plain.proposer_baseline
        assert collected.arm_label(arm, own, "cpu") == arm.label
        assert collected.arm_label(arm, own, "cpu", sets) == f"{arm.label}, kl_coef=0.01, lr=5e-5"
    for bad, message in [
        ("seed=3", "--set seed: the benchmark sets it; use --seeds"),
        ("total_steps=9", "use --steps"),
        ("kl_coef", "must look like KEY=VALUE"),
    ]:
        with pytest.raises(setup.BenchError, match=message):
            setup.parse_overrides([bad])
    with pytest.raises(setup.BenchError, match=r"--set lr is given twice \('lr=1e-4' and 'lr = 5e-5'\); keep one"):
        setup.parse_overrides(["lr=1e-4", "kl_coef=0.1", "lr = 5e-5"])
    with pytest.raises(ValueError, match="unknown config key 'kl'"):
        setup.train_config(setup.ARMS["b"], 0, setup.SIZES["cpu"], {**opts, "overrides": ["kl=1"]}, pool, tmp_path)


def test_set_filter_overrides_reach_every_arm_env(tmp_path):
    pool = tmp_path / "pool.jsonl"
    opts = {"model": "smollm2", "init": None, "device": "cpu", "steps": None}
    sets = setup.parse_overrides(["filter.searches_at_least_required=true", "kl_coef=0.01"])
    for arm in setup.ARMS.values():
        cfg = setup.train_config(arm, 0, setup.SIZES["cpu"], {**opts, "overrides": sets}, pool, tmp_path)
        assert cfg.env_kwargs["filter_config"] == {"searches_at_least_required": True} and cfg.kl_coef == 0.01
        assert cfg.env_kwargs["pool"] == str(pool)
        plain = setup.train_config(arm, 0, setup.SIZES["cpu"], opts, pool, tmp_path)
        assert "filter_config" not in plain.env_kwargs
        label = collected.arm_label(arm, plain.proposer_baseline, "cpu", sets)
        assert label == f"{arm.label}, filter.searches_at_least_required=true, kl_coef=0.01"
    with pytest.raises(setup.BenchError, match="no such rule filter; valid: filter.min_chars"):
        setup.parse_overrides(["filter.min_searchs=3"])
    with pytest.raises(setup.BenchError, match="--set filter.min_searches=\\[: the value is not YAML"):
        setup.parse_overrides(["filter.min_searches=["])
    with pytest.raises(
        setup.BenchError, match="--set filter.\\*: searches_at_least_required expects true/false, got 3"
    ):
        setup.parse_overrides(["filter.searches_at_least_required=3"])


def test_bad_input_is_a_one_line_error(tmp_path, capsys):
    script = [sys.executable, str(BENCH / "bench_selfplay.py")]
    proc = subprocess.run([*script, "--arms", "a,x"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--arms 'a,x': use a comma-separated subset of a,b,c" in proc.stderr
    proc = subprocess.run([*script, "--size", "toy"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--size toy needs --model DIR" in proc.stderr
    for bad, message in [
        ("6", "step 6 is not a checkpointed step before the last (16); use multiples of save_every=4 below 16"),
        ("16", "step 16 is not a checkpointed step before the last (16)"),
        ("8,x", "--eval-at '8,x': give comma-separated training steps, e.g. 8,16"),
    ]:
        with pytest.raises(SystemExit) as info:
            bs.parse_args(["--eval-at", bad])
        assert info.value.code == 2 and message in capsys.readouterr().err
    assert bs.parse_args(["--eval-at", "16,8", "--steps", "32"]).eval_steps == [8, 16]
    with pytest.raises(SystemExit) as info:
        bs.parse_args(["--proposer-samples", "-1"])
    assert info.value.code == 2 and "--proposer-samples must be 0 (greedy only) or more" in capsys.readouterr().err
    assert bs.parse_args([]).samples == 4 and bs.parse_args(["--proposer-samples", "0"]).samples == 0
    for bad, message in [
        (["--stop-at", "16"], "--stop-at 16: stop at a checkpointed step before the last (16); use a multiple of"),
        (["--stop-at", "6"], "use a multiple of save_every=4 below 16"),
        (["--stop-at", "8", "--eval-at", "8"], "step 8 is not a checkpointed step before the last (8)"),
    ]:
        with pytest.raises(SystemExit) as info:
            bs.parse_args(bad)
        assert info.value.code == 2 and message in capsys.readouterr().err
    assert bs.parse_args(["--stop-at", "8", "--eval-at", "4"]).eval_steps == [4]
    with pytest.raises(SystemExit) as info:
        bs.parse_args(["--cold-start-only", "--collect"])
    assert info.value.code == 2 and "give one of them" in capsys.readouterr().err
    empty = ["--size", "toy", "--model", str(tmp_path / "m"), "--workdir", str(tmp_path / "w"), "--collect"]
    assert bs.main(empty) == 2
    err = capsys.readouterr().err
    assert "no finished run to collect" in err and "without --collect" in err and "Traceback" not in err


def test_pool_hops_ablation_makes_that_pool_and_refuses_a_workdir_holding_another(tmp_path, world, capsys):
    """``--pool-hops`` sets the pool's subgraphs per hop count; a workdir plays one pool, so asking it for another
    is a one-line error naming the pool it holds; a malformed value is argparse's one-line error (exit 2)."""
    assert setup.parse_pool_hops("3=88,2=40") == {2: 40, 3: 88}
    path = setup.stage_pool(world, {2: 3, 3: 5}, tmp_path)
    assert setup.pool_hops(path) == {2: 3, 3: 5} and setup.format_pool_hops({3: 5, 2: 3}) == "2=3,3=5"
    assert setup.stage_pool(world, {3: 5, 2: 3}, tmp_path) == path  # the same pool: reused
    with pytest.raises(setup.BenchError, match="holds 2=3,3=5 subgraphs, not 3=8: .*another --workdir"):
        setup.stage_pool(world, {3: 8}, tmp_path)
    for bad in ("3", "3=x", "0=4", "2=40,3"):
        with pytest.raises(SystemExit) as exc:
            bs.parse_args(["--pool-hops", bad])
        assert exc.value.code == 2 and "is not HOPS=COUNT; give e.g. 2=40,3=88" in capsys.readouterr().err
    assert bs.parse_args(["--pool-hops", "3=128"]).pool == {3: 128}
    assert bs.parse_args([]).pool == setup.SIZES["cpu"]["pool"]
    arm = setup.ARMS["b"]
    assert collected.arm_label(arm, "none", "cpu", ["temperature=0.7"], {"3": 128}) == (
        "(b) KG Proposer, binary, temperature=0.7, pool 3=128"
    )
    assert collected.arm_label(arm, "none", "cpu", (), {"2": 80, "3": 48}) == arm.label  # the size's own pool: unnamed


def test_valid_by_hops_counts_questions_per_hop_count_per_step_and_in_all():
    q = lambda hops, valid: {"hops": hops, "valid": valid}  # noqa: E731
    rows = [
        {"step": 1, "proposer/questions": [q(2, True), q(3, False), q(2, False)]},
        {"step": 2, "proposer/questions": [q(3, True)]},
        {"step": 3},  # a step whose record has no questions (e.g. an older metrics file)
    ]
    got = collected.valid_by_hops(rows)
    cell = lambda valid, n: {"valid": valid, "n": n}  # noqa: E731
    assert got["steps"] == [{"2": cell(1, 2), "3": cell(0, 1)}, {"3": cell(1, 1)}, {}]
    assert got["total"] == {"2": cell(1, 2), "3": cell(1, 2)}
    # with the searches behind each question: their total, the questions written short of the path's hops or past
    # it, and how many of those written after exactly the path's searches were valid
    rows = [
        {
            "proposer/questions": [
                {**q(3, False), "searches": 2},
                {**q(3, True), "searches": 3},
                {**q(3, False), "searches": 3},
                {**q(2, False), "searches": 3},
                q(2, True),
            ]
        }
    ]
    searched = {"searches_total": 8, "short": 1, "long": 0, "matched": 2, "matched_valid": 1}
    assert collected.valid_by_hops(rows)["total"] == {
        "2": {**cell(1, 2), "searches_total": 3, "short": 0, "long": 1, "matched": 0, "matched_valid": 0},
        "3": {**cell(1, 3), **searched},
    }


def test_stopped_short_counts_answers_at_a_node_before_the_answer(world):
    """An answer naming a node the question's path passes through is counted, whatever its case or article; so is
    a rollout that searched fewer times than the hops, and one that searched more; a record whose task is not known
    is left out."""
    from searchgym.training.learning_checks import heldout_solver_tasks

    (task,) = heldout_solver_tasks(world, {2: 1})
    mid = task.subgraph.nodes[task.subgraph.path[1]].title
    records = {
        "stopped": {"id": task.id, "hops": 2, "prediction": f"the {mid.upper()}", "searches": 1},
        "right": {"id": task.id, "hops": 2, "prediction": task.subgraph.answer, "searches": 2},
        "silent": {"id": task.id, "hops": 2, "prediction": None, "searches": 0},
        "long": {"id": task.id, "hops": 2, "prediction": "elsewhere", "searches": 3},
        "unknown": {"id": "not-a-task", "hops": 2, "prediction": mid, "searches": 1},
    }
    counts = bl.stopped_short(records, {task.id: task.subgraph.bridge_names})
    assert counts == {"2": {"n": 4, "intermediate": 1, "searched_short": 2, "searched_long": 1}}


def test_heldout_records_split_by_wording_read_once_and_again_when_the_file_grows(tmp_path, monkeypatch):
    """A stage's records file is parsed once while unchanged however many times a collection asks (each wording,
    each pairing), comes back read-only, and is read again after it grows (a resumed evaluation appends)."""
    from searchgym.evaluation.runner import RECORDS_NAME

    folder = bl.eval_dir(tmp_path, "stage")
    folder.mkdir()
    path = folder / RECORDS_NAME
    rows = [{"key": "q1", "dataset": "kg-heldout", "em": 1.0}, {"key": "q1", "dataset": "kg-heldout-reworded", "em": 0}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    reads = []
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(self) or real(self, *a, **k))
    own, reworded = bl.heldout_records(tmp_path, "stage"), bl.heldout_records(tmp_path, "stage", reworded=True)
    assert (own["q1"]["em"], reworded["q1"]["em"]) == (1.0, 0)
    assert bl.heldout_records(tmp_path, "stage")["q1"] is own["q1"] and reads == [path]
    with pytest.raises(TypeError):
        own["q2"] = {}  # type: ignore[index]
    with path.open("a") as f:
        f.write(json.dumps({"key": "q2", "dataset": "kg-heldout", "em": 0.0}) + "\n")
    assert sorted(bl.heldout_records(tmp_path, "stage")) == ["q1", "q2"] and reads == [path, path]
