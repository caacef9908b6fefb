"""Diagnostics: Spearman per batch, accuracy by coverage bin, rates, utilisation, plots, real exports."""

from __future__ import annotations

import math

import pytest

from searchgym.wrappers import compute_diagnostics, information_utilisation, plot_diagnostics, search_turns
from tests.support.wrapper_fakes import make_task, make_traj

W = ["Alpha", "Beta", "Gamma", "Delta"]


def _batch(batch, rows):
    task = make_task(f"t{batch}", waypoints=W)
    out = []
    for think, correct in rows:
        t = make_traj(task, [think], correct=correct)
        t.metadata["batch"] = batch
        out.append(t)
    return out


def test_spearman_bins_and_rates_by_hand():
    b0 = _batch(0, [("Alpha Beta Gamma Delta", True), ("Alpha Beta", True), ("none", False), ("Gamma", False)])
    b1 = _batch(1, [("Alpha", True), ("Beta", False)])  # coverage constant -> undefined
    proposers = [make_traj(make_task("p"), ["x"], role="proposer", valid=v) for v in (True, False, True, True)]
    d = compute_diagnostics(b0 + b1 + proposers)
    s0, s1 = d["spearman"]
    assert s0["batch"] == 0 and s0["n"] == 4
    assert s0["rho"] == pytest.approx(4 / math.sqrt(20))  # ranks (4,3,1,2) vs (3.5,3.5,1.5,1.5)
    assert math.isnan(s1["rho"]) and math.isnan(s1["p"])
    bins = d["accuracy_by_coverage"]
    # coverages 1.0, .5, 0, .25 (batch 0) and .25, .25 (batch 1)
    assert [b["n"] for b in bins] == [1, 3, 1, 1]
    assert [b["accuracy"] for b in bins] == [0.0, pytest.approx(1 / 3), 1.0, 1.0]
    assert d["valid_question_rate"] == 0.75
    assert d["solver_rollouts"] == 6 and d["proposer_rollouts"] == 4
    assert d["accuracy"] == pytest.approx(3 / 6)


def test_coverage_bins_edges():
    rows = [
        ("none", False),
        ("Alpha", False),
        ("Alpha Beta", True),
        ("Alpha Beta Gamma", True),
        ("Alpha Beta Gamma Delta", True),
    ]
    d = compute_diagnostics(_batch(0, rows))
    bins = d["accuracy_by_coverage"]
    # coverages 0, .25, .5, .75, 1.0 -> [0,.25) [.25,.5) [.5,.75) [.75,1.0]
    assert [b["n"] for b in bins] == [1, 1, 1, 2]
    assert [b["accuracy"] for b in bins] == [0.0, 0.0, 1.0, 1.0]
    assert d["spearman_overall"]["n"] == 5
    with pytest.raises(ValueError, match="increasing"):
        compute_diagnostics([], bins=(0.0, 0.5, 0.5, 1.0))


def test_empty_input_gives_nan_not_errors():
    d = compute_diagnostics([])
    assert d["solver_rollouts"] == 0
    assert (
        math.isnan(d["accuracy"]) and math.isnan(d["valid_question_rate"]) and math.isnan(d["spearman_overall"]["rho"])
    )


def test_information_utilisation_and_search_turns():
    task = make_task("u", waypoints=W)
    t = make_traj(
        task,
        ["I should search first", "alpha and delta", ""],
        ["Alpha beta gamma.", "", ""],
        searches_per_turn=[1, 0, 2],
    )
    # block 1 is written before any retrieval (skipped); block 2: 'alpha' seen, 'and', 'delta' not -> 1/3
    assert information_utilisation(t) == pytest.approx(1 / 3)
    assert search_turns(t) == 2
    assert information_utilisation(make_traj(task, ["only thinking"])) is None


def test_rollouts_without_waypoints_are_counted_not_scored():
    t = make_traj(make_task("bare"), ["x"], correct=True)
    d = compute_diagnostics([t])
    assert d["solver_without_waypoints"] == 1 and d["spearman_overall"]["n"] == 0


def test_bad_input_type():
    with pytest.raises(TypeError, match="Trajectory"):
        compute_diagnostics([{"role": "solver"}])


def test_plot_writes_png(tmp_path):
    d = compute_diagnostics(_batch(0, [("Alpha", True), ("none", False)]))
    path = plot_diagnostics(d, tmp_path / "diag.png")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_diagnostics_from_a_real_selfplay_export(tmp_path):
    import gymnasium as gym

    import searchgym  # noqa: F401  (registers the envs)
    from searchgym.agents.scripted import ScriptedSelfPlayAgent

    out = tmp_path / "games.jsonl"
    env = gym.make("KGSelfPlay-v0", export_path=str(out), group_size=3)
    agent = ScriptedSelfPlayAgent(seed=0)
    for game in range(3):
        obs, info = env.reset(seed=game)
        done = False
        while not done:
            obs, _, term, trunc, info = env.step(agent.act(obs, info))
            done = term or trunc
    env.close()
    d = compute_diagnostics(str(out), games_per_batch=2)
    assert d["solver_rollouts"] == 9 and d["proposer_rollouts"] == 3
    assert [s["batch"] for s in d["spearman"]] == [0, 1]
    assert 0.0 <= d["valid_question_rate"] <= 1.0
    assert d["search_turns"] > 0 and 0.0 < d["information_utilisation"] <= 1.0
    assert d["mean_coverage"] > 0.5  # the path-following solver names its waypoints


def test_diagnose_cli_on_a_play_export(tmp_path, capsys):
    import json

    from searchgym.cli import main as cli_main

    games = tmp_path / "games.jsonl"
    assert cli_main(["play", "--games", "4", "--export", str(games)]) == 0
    capsys.readouterr()
    out_json, out_png = tmp_path / "diag.json", tmp_path / "diag.png"
    assert (
        cli_main(["diagnose", str(games), "--games-per-batch", "2", "--json", str(out_json), "--out", str(out_png)])
        == 0
    )
    text = capsys.readouterr().out
    assert "Spearman(coverage, correct)" in text and "accuracy by coverage bin" in text
    # Strict JSON: undefined statistics are null, never NaN.
    diag = json.loads(out_json.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert diag["proposer_rollouts"] == 4 and diag["solver_rollouts"] > 0
    assert [s["batch"] for s in diag["spearman"]] == [0, 1]
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_diagnose_cli_names_a_missing_file(tmp_path, capsys):
    from searchgym.cli import main as cli_main

    assert cli_main(["diagnose", str(tmp_path / "nope.jsonl")]) == 2
    assert "searchgym play --export" in capsys.readouterr().err
