"""The self-play benchmark's committed results as ``searchgym demo`` shows them: the compact form
(:mod:`searchgym.evaluation.selfplay_results`) made from a real ``benchmarks/bench_selfplay.py`` results JSON (the
``toy`` size, a tiny random model on CPU), ``bench_selfplay.py --ship``, the table, the picture, the clear errors
and the demo's phase."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from searchgym.errors import InvalidArgumentError, MissingFileError
from searchgym.evaluation import plots
from searchgym.evaluation import selfplay_results as spr
from tests.support.selfplay_bench import bench_selfplay, toy_args
from tests.support.shared_fixture import build_once


@pytest.fixture(scope="session")
def toy(tmp_path_factory) -> tuple[list[str], Path]:
    """A real toy run of the benchmark, arms (a) and (c), seed 0: its command line and its results JSON (run once
    per session and shared by the xdist workers, so a test that collects again writes its own ``--out``)."""
    for module in ("transformers", "peft", "matplotlib"):
        pytest.importorskip(module)

    def run(folder: Path) -> None:
        args = toy_args(folder)
        assert bench_selfplay().main([*args, "--arms", "a,c", "--seeds", "0"]) == 0
        (folder / "args.json").write_text(json.dumps(args))

    folder = build_once(tmp_path_factory, "selfplay_toy_run", run)
    return json.loads((folder / "args.json").read_text()), folder / "res" / "selfplay_toy.json"


def _cell(mean: float) -> dict:
    return {"mean": mean, "lo": max(0.0, mean - 0.1), "hi": min(1.0, mean + 0.1), "n": 8}


def distinct(full: dict) -> dict:
    """The toy results with distinct numbers written into what the compact form keeps (a tiny random model
    scores 0 everywhere), and a second seed of arm (c), so that every number in the table can be traced."""
    r = copy.deepcopy(full)
    cold = r["cold_start"]
    cold["solver"]["by_hops"] = {"1": _cell(0.31), "2": _cell(0.06), "3": _cell(0.02)}
    cold["proposer_cells"]["kg"] = _cell(0.27)
    cold["proposer_cells"]["kg_sampled"] = _cell(0.14)
    a = r["arms"]["a"]["runs"][0]
    a["train"].update(valid_rate=[0.1, 0.3], solver_reward=[0.2, 0.6], solver_proposed_reward=[None, 0.5])
    a["solver"]["by_hops"] = {"1": _cell(0.44), "2": _cell(0.12), "3": _cell(0.03)}
    a["proposer_cells"]["kg"] = _cell(0.52)
    a["proposer_cells"]["kg_sampled"] = _cell(0.33)
    c0 = r["arms"]["c"]["runs"][0]
    c0["train"].update(valid_rate=[0.15, 0.45], solver_reward=[0.25, 0.35])
    c0["solver"]["by_hops"] = {"1": _cell(0.30), "2": _cell(0.20), "3": _cell(0.10)}
    c0["proposer_cells"]["kg"] = _cell(0.40)
    c0["proposer_cells"]["kg_sampled"] = _cell(0.21)
    c1 = copy.deepcopy(c0)
    c1["seed"] = 1
    c1["train"].update(valid_rate=[0.25, 0.55], solver_reward=[0.05, float("nan")])
    c1["solver"]["by_hops"] = {"1": _cell(0.50), "2": _cell(0.40), "3": _cell(0.30)}
    c1["proposer_cells"]["kg"] = _cell(0.60)
    c1["proposer_cells"]["kg_sampled"] = _cell(0.41)
    r["arms"]["c"]["runs"].append(c1)
    r["seeds"] = [0, 1]
    return r


@pytest.mark.slow
def test_compact_form_keeps_the_benchmarks_curves_and_heldout_results(toy, tmp_path):
    _, out = toy
    full = json.loads(out.read_text())
    compact = spr.compact_results(full)
    assert compact[spr.FORMAT_KEY] == spr.FORMAT_VERSION
    assert len(json.dumps(compact)) < len(json.dumps(full)) / 2  # compact: no questions, configs, flips, ...
    path = tmp_path / "selfplay.json"
    path.write_text(json.dumps(compact, allow_nan=False))
    res = spr.load_selfplay_results(path)
    assert res == spr.SelfPlayResults.from_dict(compact)
    assert res.to_dict() == compact == json.loads(path.read_text())  # plain JSON types, a lossless round trip

    assert res.size == "toy" and res.seeds == (0,) and full["machine"]["cpu"] in res.machine
    assert res.budget == {
        "steps": 2,
        "games_per_step": 1,
        "solvers_per_game": 2,
        "max_turns": 2,
        "max_new_tokens": 8,
        "games_per_run": 2,
    }
    assert [(a.key, a.label, a.recipe) for a in res.arms] == [
        ("a", "(a) vanilla SSP", "ssp"),
        ("c", "(c) KG Proposer + WCR", "kg-wcr"),
    ]
    for arm in res.arms:
        (run,) = arm.runs
        src = full["arms"][arm.key]["runs"][0]
        assert run.seed == 0 and run.games == src["games"] == 2 and arm.steps == 2
        assert list(run.curves.step) == src["train"]["step"] == [1, 2]
        for name in spr.CURVES:
            assert list(getattr(run.curves, name)) == src["train"][name], name
        assert {h: c.mean for h, c in run.heldout.solver_by_hop.items()} == {
            h: c["mean"] for h, c in src["solver"]["by_hops"].items()
        }
        assert run.heldout.proposer_valid is not None
        assert run.heldout.proposer_valid.mean == src["proposer_cells"]["kg"]["mean"]
        assert run.heldout.proposer_sampled is not None  # the rate as the game samples its Proposer
        assert run.heldout.proposer_sampled.mean == src["proposer_cells"]["kg_sampled"]["mean"]
    assert set(res.cold_start.solver_by_hop) == {"1", "2", "3"}
    assert res.cold_start.solver_by_hop["1"].n == full["cold_start"]["solver"]["by_hops"]["1"]["n"]


@pytest.mark.slow
def test_table_shows_each_arms_numbers(toy):
    res = spr.SelfPlayResults.from_dict(spr.compact_results(distinct(json.loads(toy[1].read_text()))))
    table = spr.format_selfplay_table(res)
    lines = table.splitlines()
    assert lines[0].startswith("toy size, 2 seeds (0, 1), on ") and "cores" in lines[0]
    assert "every run: 2 steps x 1 game x 2 Solvers, 2 turns x 8 tokens (2 games)" in table
    assert "first -> last 1 steps" in table and "held-out, cold start -> after" in table
    start = json.loads(toy[1].read_text())["start"]  # the checkpoint every arm started from is named
    assert res.start.startswith(str(start["init"] or "the base model")) and start["fingerprint"] in res.start
    assert f"every arm started from {res.start}" in lines
    (a,) = [line for line in lines if line.startswith("(a) vanilla SSP ")]
    # the first vs last step of its one run; held-out cold start -> after for 1-, 2-, 3-hop and the Proposer
    for cell in ("2 x 1", "0.10 -> 0.30", "0.20 -> 0.60", "0.31 -> 0.44", "0.06 -> 0.12", "0.02 -> 0.03"):
        assert cell in a, (cell, a)
    assert "0.27 -> 0.52" in a and a.endswith("0.14 -> 0.33")  # the Proposer, greedy then sampled
    (c,) = [line for line in lines if line.startswith("(c) KG Proposer + WCR ")]
    # two seeds: their mean (a NaN step is left out of the mean, not counted as 0)
    for cell in ("0.20 -> 0.50", "0.15 -> 0.35", "0.31 -> 0.40", "0.06 -> 0.30", "0.02 -> 0.20"):
        assert cell in c, (cell, c)
    assert "0.27 -> 0.50" in c and c.endswith("0.14 -> 0.31")
    assert res.arms[1].runs[1].curves.solver_reward == (0.05, None)  # JSON has no NaN
    assert len(lines) <= 9 and "Proposer (KG, sampled)" in table

    # a file written before the sampled rate was measured still loads, without its column
    old = spr.compact_results(distinct(json.loads(toy[1].read_text())))
    for stage in [old["cold_start"], *(run["heldout"] for arm in old["arms"] for run in arm["runs"])]:
        del stage["proposer_sampled"]
    table = spr.format_selfplay_table(spr.SelfPlayResults.from_dict(old))
    assert "sampled" not in table
    assert [line for line in table.splitlines() if line.startswith("(a) ")][0].endswith("0.27 -> 0.52")


def test_settings_every_arm_shares_are_said_once(toy, tmp_path, monkeypatch):
    """An ablation names its settings in every arm's label; the table and the picture say them once, not per arm."""
    compact = spr.compact_results(distinct(json.loads(toy[1].read_text())))
    for arm in compact["arms"]:
        arm["label"] += ", kl_coef=0.01, pool 3=128"
    res = spr.SelfPlayResults.from_dict(compact)
    lines = spr.format_selfplay_table(res).splitlines()
    assert "every arm with kl_coef=0.01, pool 3=128" in lines
    assert sum("kl_coef" in line for line in lines) == 1
    assert any(line.startswith("(c) KG Proposer + WCR ") for line in lines)
    legends: list[str] = []
    monkeypatch.setattr(plots, "legend_label", lambda label: legends.append(label) or label)
    spr.plot_selfplay_curves(res, tmp_path / "selfplay.png")
    assert "(a) vanilla SSP" in legends and not any("kl_coef" in label for label in legends)
    assert spr.shared_settings(["(a) vanilla SSP", "(b) KG Proposer, binary"]) == (
        ["(a) vanilla SSP", "(b) KG Proposer, binary"],
        "",
    )
    assert spr.shared_settings(["(b) x, t=1"]) == (["(b) x, t=1"], "")  # one arm: nothing shared to say once
    assert spr.shared_settings(["t=1", "t=1"]) == (["t=1", "t=1"], "")  # a label is never left empty


@pytest.mark.slow
def test_picture_is_drawn(toy, tmp_path):
    res = spr.SelfPlayResults.from_dict(spr.compact_results(distinct(json.loads(toy[1].read_text()))))
    path = spr.plot_selfplay_curves(res, tmp_path / "pics" / "selfplay.png")
    assert path == tmp_path / "pics" / "selfplay.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
    assert [p.name for p in path.parent.iterdir()] == ["selfplay.png"]  # written through a temporary file


@pytest.mark.slow
def test_ship_writes_the_compact_results_where_asked(toy, tmp_path, monkeypatch, capsys):
    """``--collect --ship`` (the documented command) writes the compact form of the collected JSON: to
    ``searchgym/assets/selfplay_<size>.json`` by default (here the assets folder is moved to tmp), or to PATH."""
    bs = bench_selfplay()
    args, _ = toy
    out = tmp_path / "res" / "selfplay_toy.json"
    args = [*args[: args.index("--out")], "--out", str(out)]  # the shared run's results stay as they are
    monkeypatch.setattr(bs, "ASSETS", tmp_path / "assets")
    assert bs.main([*args, "--collect", "--ship"]) == 0
    shipped = tmp_path / "assets" / "selfplay_toy.json"
    assert json.loads(shipped.read_text()) == spr.compact_results(json.loads(out.read_text()))
    assert f"wrote {shipped}" in capsys.readouterr().out
    assert spr.load_selfplay_results(shipped).arms[0].label == "(a) vanilla SSP"

    elsewhere = tmp_path / "x" / "mine.json"
    assert bs.main([*args, "--ship", str(elsewhere), "--collect"]) == 0
    assert spr.load_selfplay_results(elsewhere) == spr.load_selfplay_results(shipped)
    assert bs.parse_args(args).ship is None  # no --ship, nothing shipped
    # by default the benchmark ships to where the demo reads (the repository's package tree)
    monkeypatch.undo()
    assert bs.ASSETS / "selfplay_cpu.json" == spr.shipped_results_path()


def test_missing_or_malformed_results_are_one_clear_line(tmp_path):
    missing = tmp_path / "none.json"
    with pytest.raises(MissingFileError, match="no self-play benchmark results at .*none.json; make them with: "):
        spr.load_selfplay_results(missing)
    bad = {
        "not json": "{oops",
        "a list": "[1, 2]",
        "not the compact form": json.dumps({"benchmark": "selfplay", "arms": {}}),
        "no arms": json.dumps({spr.FORMAT_KEY: 1, "size": "cpu", "machine": "m", "seeds": [0], "arms": []}),
    }
    for what, text in bad.items():
        path = tmp_path / "bad.json"
        path.write_text(text)
        with pytest.raises(InvalidArgumentError) as info:
            spr.load_selfplay_results(path)
        msg = str(info.value)
        assert msg.startswith(f"{path} is not a self-play results file (") and "\n" not in msg, what
        assert msg.endswith(f"remake it with: {spr.MAKE_COMMAND}"), what
    with pytest.raises(InvalidArgumentError, match="not the collected results of benchmarks/bench_selfplay.py"):
        spr.compact_results({"benchmark": "learning"})
    with pytest.raises(InvalidArgumentError, match="KeyError: 'budget'"):
        spr.compact_results({"benchmark": "selfplay"})


@pytest.mark.slow
def test_a_curve_of_the_wrong_length_is_refused(toy, tmp_path):
    compact = spr.compact_results(json.loads(toy[1].read_text()))
    compact["arms"][0]["runs"][0]["curves"]["valid_rate"].append(0.5)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(compact))
    with pytest.raises(InvalidArgumentError, match="curve 'valid_rate' has 3 values for 2 steps"):
        spr.load_selfplay_results(path)


# ============================================================================ the demo's phase
@pytest.mark.slow
def test_demo_phase_prints_the_table_and_draws_the_curves(toy, tmp_path):
    from searchgym.commands.demo import show_selfplay_benchmark

    path = tmp_path / "results.json"
    path.write_text(json.dumps(spr.compact_results(distinct(json.loads(toy[1].read_text())))))
    out = io.StringIO()
    picture = show_selfplay_benchmark(path, tmp_path / "demo", out)
    text = out.getvalue()
    assert "Self-play benchmark (committed results of benchmarks/bench_selfplay.py, not re-run):" in text
    table = spr.format_selfplay_table(spr.load_selfplay_results(path))
    assert "\n".join("  " + line for line in table.splitlines()) in text
    assert "(a) vanilla SSP" in text and "0.27 -> 0.52" in text
    assert picture == tmp_path / "demo" / "selfplay.png" and picture.stat().st_size > 20_000
    assert f"drawn to {picture}" in text

    # without a picture: the table only, and matplotlib never imported (the demo's --no-picture promise)
    probe = (
        "import sys; from searchgym.commands.demo import show_selfplay_benchmark as s; "
        f"print(s({str(path)!r}, None, sys.stdout)); print('MPL', 'matplotlib' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "0.27 -> 0.52" in proc.stdout and proc.stdout.rstrip().endswith("None\nMPL False")


@pytest.mark.slow
def test_the_demo_runs_the_phase_with_its_flag(toy, tmp_path):
    from searchgym.cli import build_parser
    from searchgym.commands.demo import run_demo

    path = tmp_path / "results.json"
    path.write_text(json.dumps(spr.compact_results(json.loads(toy[1].read_text()))))
    parser = build_parser()
    assert parser.parse_args(["demo"]).selfplay_results is None  # the shipped asset
    args = parser.parse_args(
        ["demo", "--agent", "scripted", "--games", "1", "--pool-size", "20", "--no-picture"]
        + ["--output-dir", str(tmp_path), "--selfplay-results", str(path)]
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run_demo(args) == 0
    text = out.getvalue()
    phase = text.index("Self-play benchmark (committed results")
    assert text.index("Subgraph pool:") < phase < text.index("Playing 1 KGSelfPlay-v0 games")
    assert "(c) KG Proposer + WCR" in text[phase:] and not (tmp_path / "selfplay.png").exists()


def test_demo_without_results_says_how_to_make_them_and_goes_on(tmp_path, monkeypatch):
    from searchgym.commands.demo import show_selfplay_benchmark

    monkeypatch.setattr(spr, "_ASSETS", tmp_path / "assets")  # an install with no results shipped yet
    out = io.StringIO()
    assert show_selfplay_benchmark(None, tmp_path, out) is None
    lines = out.getvalue().strip().splitlines()
    assert lines[0].startswith("Self-play benchmark") and len(lines) == 2
    assert lines[1] == (
        f"  no results shipped yet ({tmp_path / 'assets' / 'selfplay_cpu.json'}); make them with: "
        "python benchmarks/bench_selfplay.py --size cpu --init INIT --collect --ship"
    )
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    out = io.StringIO()
    assert show_selfplay_benchmark(bad, tmp_path, out) is None
    (line,) = out.getvalue().strip().splitlines()[1:]
    assert line.startswith(f"  {bad} is not a self-play results file (JSONDecodeError") and "--ship" in line
    assert not (tmp_path / "selfplay.png").exists()


def test_long_arm_labels_are_wrapped_for_legends():
    from searchgym.evaluation.plots import LEGEND_WIDTH, legend_label

    label = "(b) KG Proposer, binary, all baseline, filter.searches_at_least_required=true, rollout_dtype=bfloat16"
    lines = legend_label(label).split("\n")
    assert len(lines) > 1 and all(len(x) <= LEGEND_WIDTH for x in lines) and " ".join(lines) == label
    assert legend_label("cold start") == "cold start"
