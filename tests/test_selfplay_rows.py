"""benchmarks/selfplay_rows.py: the per-seed rows docs/selfplay_runs.md's tables print, from the committed
results files; each docs table built from it (the search-count sections') is checked cell by cell against it, and
a file it cannot read gets one line and exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.selfplay_bench import benchmark_module

rows_mod = benchmark_module("selfplay_rows")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "selfplay_runs.md"
SOLVER_KL = "selfplay_cpu_one_hop_pool_32_solver_half_lr_bf16_solver_kl"
STACKED = f"{SOLVER_KL}_anchor1_stacked"
#: each setting's row label (after the seed) -> its results file, its rescore, and the runs' workdir name in the
#: rescore where the results' model paths name another
FILES = {
    "without": (f"{STACKED}.json", "selfplay_cpu_solver_rescored_100_anchor1_stacked.json"),
    "short alone": (f"{STACKED}_short_search.json", "selfplay_cpu_solver_rescored_100_stacked_short_search.json"),
    "filter alone": (f"{STACKED}_filter.json", "selfplay_cpu_solver_rescored_100_stacked_filter.json"),
    "filter + b": (f"{STACKED}_filter_all.json", "selfplay_cpu_solver_rescored_100_stacked_filter_all.json"),
    "filter + b + short": (
        f"{STACKED}_filter_all_short.json",
        "selfplay_cpu_solver_rescored_100_stacked_filter_all_short.json",
    ),
    "filter + b + short, bf16 updates": (
        f"{STACKED}_filter_all_short_mp.json",
        "selfplay_cpu_solver_rescored_100_stacked_filter_all_short_mp.json",
    ),
    # the Solvers-only KL runs were collected from runs/h32kls and rescored as runs/half32_bf16_solver_kl
    "no anchor": (f"{SOLVER_KL}.json", "selfplay_cpu_solver_rescored_100.json", "half32_bf16_solver_kl"),
    "anchor 1.0": (f"{SOLVER_KL}_anchor.json", "selfplay_cpu_solver_rescored_100.json"),
    "anchor 0.5, bf16 updates": (f"{SOLVER_KL}_anchor05_mp.json", "selfplay_cpu_solver_rescored_100_anchor05_mp.json"),
    "anchor 0.5": (f"{SOLVER_KL}_anchor05.json", "selfplay_cpu_solver_rescored_100_anchor05_f32.json"),
    "anchor 0.5 + filter": (f"{SOLVER_KL}_anchor05_filter.json", "selfplay_cpu_solver_rescored_100_anchor05_f32.json"),
    "anchor 0.5 + filter + short": (
        f"{SOLVER_KL}_anchor05_filter_short.json",
        "selfplay_cpu_solver_rescored_100_anchor05_f32.json",
    ),
    "anchor 0.5 + filter + short + b": (
        f"{SOLVER_KL}_anchor05_filter_short_all.json",
        "selfplay_cpu_solver_rescored_100_anchor05_f32.json",
    ),
    "arm (b), anchor 0.5 + filter + short": (
        f"{SOLVER_KL}_anchor05_filter_short_b.json",
        "selfplay_cpu_solver_rescored_100_anchor05_f32.json",
    ),
    "arm (b), anchor 0.5 + filter": (
        f"{SOLVER_KL}_anchor05_filter_b.json",
        "selfplay_cpu_solver_rescored_100_anchor05_f32.json",
    ),
}
#: each docs table built from the script: its section's heading -> the seeds and settings it holds
TABLES = {
    "**Stacked, with the search-count filter and b = the mean over every question**": {
        "0": ("without", "filter alone", "filter + b"),
        "1": ("without", "filter + b"),
        "2": ("without", "filter alone", "filter + b"),
    },
    "**Stacked, filter + b with the short-search discount**": {
        "0": ("without", "short alone", "filter + b", "filter + b + short"),
        "2": ("without", "short alone", "filter + b", "filter + b + short"),
    },
    "**Filter + b + short with bf16 updates**": {"1": ("filter + b", "filter + b + short, bf16 updates")},
    "**The anchor at half the weight, with bf16 updates**": {
        seed: ("no anchor", "anchor 1.0", "anchor 0.5, bf16 updates") for seed in ("1", "3")
    },
    "**The anchor at half the weight in float32, and with the search-count filter**": {
        "0": (
            "no anchor",
            "anchor 0.5 + filter",
            "anchor 0.5 + filter + short",
            "anchor 0.5 + filter + short + b",
            "arm (b), anchor 0.5 + filter",
            "arm (b), anchor 0.5 + filter + short",
        ),
        "1": (
            "no anchor",
            "anchor 1.0",
            "anchor 0.5, bf16 updates",
            "anchor 0.5",
            "anchor 0.5 + filter",
            "anchor 0.5 + filter + short",
            "anchor 0.5 + filter + short + b",
        ),
        "3": (
            "no anchor",
            "anchor 1.0",
            "anchor 0.5, bf16 updates",
            "anchor 0.5 + filter",
            "anchor 0.5 + filter + short",
            "arm (b), anchor 0.5 + filter",
        ),
        "2": ("no anchor", "anchor 0.5 + filter", "anchor 0.5 + filter + short", "anchor 0.5 + filter + short + b"),
    },
}
#: the setting whose cold start a table's ``cold start`` row prints, where not the stacked runs' (another machine's
#: sampled evaluation of the same cold start)
COLD_ROW = {
    "**Filter + b + short with bf16 updates**": "filter + b + short, bf16 updates",
    "**The anchor at half the weight, with bf16 updates**": "anchor 0.5, bf16 updates",
    "**The anchor at half the weight in float32, and with the search-count filter**": "anchor 0.5",
}


def doc_table(heading: str) -> list[list[str]]:
    """The body rows (cells split) of the first table after ``heading`` in the self-play docs."""
    text = DOC.read_text()
    start = text.index(heading)
    table = text[text.index("\n|", start) + 1 : text.index("\n\n", text.index("\n|", start))]
    lines = table.splitlines()[2:]  # below the head and its separator
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines]


def script_rows(setting: str) -> dict[str, list[str]]:
    """``selfplay_rows.rows`` of one setting's files, keyed by stage."""
    results_file, rescored_file, *workdir = FILES[setting]
    results, rescored = (json.loads((RESULTS / f).read_text()) for f in (results_file, rescored_file))
    return {row[0]: row[1:] for row in rows_mod.rows(results, rescored, *workdir)}


@pytest.mark.parametrize("heading", list(TABLES))
def test_each_docs_table_is_the_scripts_output(heading):
    """Every cell of the section's table is what the script prints for that seed and setting (bold aside)."""
    table = doc_table(heading)
    expected = {(seed, setting) for seed, settings in TABLES[heading].items() for setting in settings}
    assert len(table) == 1 + len(expected)
    seen = set()
    for label, *cells in table:
        if label == "cold start":
            assert cells == script_rows(COLD_ROW.get(heading, "without"))["cold start"]
            continue
        seed, setting = re.fullmatch(r"(\d+), (.+)", label).groups()
        setting = setting.strip("*")
        arm = re.match(r"arm \((\w)\), ", setting)  # a label names its arm where it is not (c)
        assert cells == script_rows(setting)[f"{arm[1] if arm else 'c'}, seed {seed}"], label
        seen.add((seed, setting))
    assert seen == expected


def test_the_cli_prints_a_markdown_table_with_the_rescore_column(capsys):
    results, rescored = (str(RESULTS / f) for f in FILES["filter + b"][:2])
    assert rows_mod.main([results, "--rescored", rescored]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| stage | training |") and len(out) == 2 + 4
    assert out[3].startswith("| c, seed 0 | 88 min | 35 (23 / 12; 7) | 0.27 (0.20–0.34) |")
    assert rows_mod.main([results]) == 0  # no rescore: its column is a dash
    seed0 = capsys.readouterr().out.splitlines()[3].split(" | ")
    assert seed0[7] == "—" and seed0[6] == "+0/−4, +0/−2"


def test_a_rescore_of_several_settings_is_matched_on_the_runs_workdir_not_the_seed_alone():
    """selfplay_cpu_solver_rescored_100.json holds seed 1 of the Solvers-only KL runs and of their anchored runs: each
    results file gets its own runs' cells, and a folder renamed since its collect is named with --workdir."""
    rescored = json.loads((RESULTS / "selfplay_cpu_solver_rescored_100.json").read_text())
    anchored = json.loads((RESULTS / f"{SOLVER_KL}_anchor.json").read_text())
    by_stage = {row[0]: row[7] for row in rows_mod.rows(anchored, rescored)}
    assert by_stage["c, seed 1"] == "+3/−2, +2/−0" and by_stage["c, seed 3"] == "+2/−1, +1/−3"
    # collected from runs/h32kls, rescored as runs/half32_bf16_solver_kl: no run matches by its own path
    plain = json.loads((RESULTS / f"{SOLVER_KL}.json").read_text())
    with pytest.raises(rows_mod.RowsError, match="holds none of these runs .*h32kls/c_s1.*--workdir NAME"):
        rows_mod.rows(plain, rescored)
    by_stage = {row[0]: row[7] for row in rows_mod.rows(plain, rescored, workdir="half32_bf16_solver_kl")}
    assert by_stage["c, seed 1"] == "+1/−4, +1/−0"  # not the anchored seed 1's +3/−2
    assert rows_mod.run_key(plain["arms"]["c"]["runs"][1], "cpu") == "h32kls/c_s1"
    with pytest.raises(rows_mod.RowsError, match="has no <workdir>/cpu/<run> folders"):
        rows_mod.run_key({"stage": "c_s1", "model": "/elsewhere/c_s1/final"}, "cpu")


def test_the_cli_refuses_a_rescore_of_other_runs_in_one_line_and_takes_workdir(capsys):
    results, rescored = (str(RESULTS / f) for f in (f"{SOLVER_KL}.json", "selfplay_cpu_solver_rescored_100.json"))
    assert rows_mod.main([results, "--rescored", rescored]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--workdir NAME" in err
    assert rows_mod.main([results, "--rescored", rescored, "--workdir", "half32_bf16_solver_kl"]) == 0
    assert "| c, seed 1 | 73 min |" in capsys.readouterr().out


def test_short_drift_names_each_window_count_when_they_differ():
    steps = [{"3": {"n": 1, "short": 0}}] * 8 + [{"3": {"n": 2, "short": 1}}] * 8
    assert rows_mod.short_drift({"valid_by_hops": {"steps": steps}}) == "0 of 8 → 8 of 16"
    assert rows_mod.short_drift({"valid_by_hops": {"steps": steps[:8]}}) == "0 → 0 (of 8)"
    assert rows_mod.short_drift({}) == "—"
    assert rows_mod.searches_drift({"solver_searches": [None] * 4}) == "—"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no such file"),
        ("{not json", "not JSON"),
        ('{"runs": []}', "lacks cold_start or arms"),
        ('{"cold_start": {}, "arms": {}}', "collect them again with bench_selfplay.py --collect"),
    ],
)
def test_a_file_it_cannot_read_gets_one_line_and_exit_2(tmp_path, capsys, content, expected):
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content)
    assert rows_mod.main([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err and err.startswith("selfplay_rows.py: ")
