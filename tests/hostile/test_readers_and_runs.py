"""Hostile input to the readers (exports, QA files, SFT data, eval records and summaries) and to the run commands
(``eval``, ``play``, ``demo``, ``demos``): one line naming the problem and the fix, exit status 2, no traceback,
nothing made and nothing changed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchgym.cli import main

BINARY = b"\x00\x01\xff\xfe binary\n"


def _refused(capsys, argv: list[str], *words: str) -> str:
    """Run ``searchgym ARGV``; assert it was refused in one stderr line holding ``words``; return that line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def _same_files(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "--seed", "-1", "--output-dir", "ev", "--limit", "2"],
        ["demos", "--out", "d.jsonl", "--solver", "1:2", "--proposer", "", "--vanilla", "", "--seed", "-1"],
        ["demo", "--agent", "scripted", "--seed", "-1", "--no-picture", "--output-dir", "dm"],
        ["play", "--games", "2", "--seed", "-1"],
    ],
)
def test_a_negative_seed_is_refused_first(argv, in_tmp, capsys):
    _refused(capsys, argv, "--seed -1 (at least 0)")
    assert list(in_tmp.iterdir()) == []


@pytest.mark.parametrize(
    "argv, words",
    [
        (["diagnose", "{f}"], ("line 1 is not valid JSON ('utf-8' codec", "fix or delete that line")),
        (["eval", "--tasks", "{f}", "--limit", "2"], ("not valid JSON ('utf-8' codec",)),
        (["sft", "--data", "{f}", "--output-dir", "r1", "--max-steps", "1", "--on-error", "stop"], ("'utf-8' codec",)),
    ],
)
def test_a_file_that_is_not_utf8_is_named_with_its_line(argv, words, in_tmp, capsys):
    f = in_tmp / "t6.jsonl"
    f.write_bytes(BINARY)
    _refused(capsys, [a.replace("{f}", str(f)) for a in argv], "t6.jsonl", *words)
    assert f.read_bytes() == BINARY and [p.name for p in in_tmp.iterdir()] == ["t6.jsonl"]


@pytest.mark.parametrize(
    "argv",
    [
        ["diagnose", "{f}"],
        ["eval", "--tasks", "{f}", "--limit", "2", "--output-dir", "ev"],
        ["sft", "--data", "{f}", "--output-dir", "r1", "--max-steps", "1", "--on-error", "stop"],
        ["subgraphs", "stats", "{f}"],
        ["plot", "{f}", "--out", "p.png"],
    ],
)
def test_a_line_nested_too_deeply_is_named_not_a_recursion_error(argv, in_tmp, capsys):
    f = in_tmp / "deep.jsonl"
    f.write_text("[" * 100_000 + "]" * 100_000 + "\n")  # json raises RecursionError past about 1,000 levels
    _refused(capsys, [a.replace("{f}", str(f)) for a in argv], "deep.jsonl", "nested too deeply to decode")
    assert [p.name for p in in_tmp.iterdir()] == ["deep.jsonl"]


@pytest.mark.parametrize(
    "line, words",
    [
        ("[]", ("line 1 is a JSON list",)),
        ("{}", ("line 1 has no 'game' field",)),
        ('{"role": "solver", "segments": []}', ("one trajectory", "searchgym demos")),
        ('{"game": 1, "solvers": [', ("line 1 is truncated",)),
    ],
)
def test_diagnose_says_what_a_line_is_not(line, words, in_tmp, capsys):
    f = in_tmp / "d.jsonl"
    f.write_text(line if line.endswith("[") else line + "\n")
    _refused(capsys, ["diagnose", str(f)], *words, "fix or delete that line")


@pytest.fixture(scope="module")
def eval_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "ev1"
    assert main(["eval", "--output-dir", str(out), "--limit", "2", "--no-progress"]) == 0
    return out


def test_a_resumed_record_with_a_score_that_is_not_a_number_is_named(eval_run, tmp_path, capsys):
    import shutil

    run = shutil.copytree(eval_run, tmp_path / "evr")
    lines = (run / "eval.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    rec["em"] = "high"
    (run / "eval.jsonl").write_text("\n".join([lines[0], json.dumps(rec), *lines[2:]]) + "\n")
    before = _same_files(run)
    _refused(capsys, ["eval", "--output-dir", str(run), "--limit", "2"], "line 2", "'em' is 'high'", "fix or delete")
    assert _same_files(run) == before


def test_records_without_run_json_are_not_resumed_under_other_settings(eval_run, tmp_path, capsys):
    import shutil

    run = shutil.copytree(eval_run, tmp_path / "evr")
    (run / "run.json").unlink()
    before = _same_files(run)
    argv = ["eval", "--output-dir", str(run), "--limit", "2", "--max-turns", "1", "--top-k", "1"]
    _refused(capsys, argv, "run.json", "--restart", "new --output-dir")
    assert _same_files(run) == before


@pytest.mark.parametrize(
    "content, words",
    [
        (None, ("not a searchgym eval summary", "summary.json")),  # the eval.jsonl itself
        ("", ("not a searchgym eval summary",)),
        ("[1]", ("not a searchgym eval summary",)),
    ],
)
def test_compare_refuses_what_is_not_a_summary(content, words, eval_run, tmp_path, capsys):
    a = eval_run / "eval.jsonl"
    if content is not None:
        a = tmp_path / "a.json"
        a.write_text(content)
    _refused(capsys, ["eval", "--compare", str(a), str(eval_run / "summary.json")], *words)


def test_a_file_that_is_not_parquet_is_named(in_tmp, capsys):
    (in_tmp / "g.parquet").write_bytes(b"PAR1garbage")
    _refused(capsys, ["eval", "--tasks", "g.parquet", "--limit", "2"], "g.parquet is not a readable parquet file")


def test_a_bad_ray_address_is_refused_before_the_run_folder(in_tmp, capsys):
    _refused(capsys, ["eval", "--ray", "bogus", "--output-dir", "eray", "--limit", "1"], "HOST:PORT", "ray://")
    assert not (in_tmp / "eray").exists()


def test_a_reward_that_is_not_a_wrapper_class_is_never_called(monkeypatch, capsys):
    import os

    called = []
    monkeypatch.setattr(os, "system", lambda *a: called.append(a))
    _refused(capsys, ["play", "--games", "2", "--reward", "os:system"], "is a function", "gymnasium.Wrapper subclass")
    assert called == []
    # a class that is no wrapper is never built either (it would be called with the env)
    _refused(capsys, ["play", "--games", "2", "--reward", "collections:OrderedDict"], "is a OrderedDict, not a gym")


def test_impossible_hop_counts_are_refused_before_any_file(in_tmp, capsys):
    argv = ["demos", "--out", "d2.jsonl", "--solver", "99:3", "--proposer", "", "--vanilla", ""]
    _refused(capsys, argv, "no training-side subgraph of 99 hops", "1-7")
    argv = ["demo", "--agent", "scripted", "--pool-hops", "99", "--no-picture", "--output-dir", "dm1"]
    _refused(capsys, argv, "no training-side subgraph of 99 hops")
    assert list(in_tmp.iterdir()) == []


@pytest.mark.parametrize(
    "argv, words",
    [
        (["eval", "--output-dir", "", "--limit", "2"], ("--output-dir is empty",)),
        (["play", "--games", "1", "--export", ""], ("--export is empty",)),
        (["play", "--games", "1", "--reward", ""], ("no reward given",)),
        (["play", "--games", "1", "--reward", "wcr,,gdcr"], ("empty name between commas",)),
        (["eval", "--metrics", "", "--limit", "2"], ("no metric given",)),
        (["eval", "--tasks", "=qa.jsonl", "--limit", "2"], ("empty name around '='",)),
        (["eval", "--dtype", "bogus", "--limit", "2"], ("--dtype is for an LLM agent",)),
        (["eval", "--temperature", "0.7", "--limit", "2"], ("--temperature is for an LLM agent",)),
        (["eval", "--judge-model", "x", "--limit", "2"], ("llm_judge",)),
        (["demo", "--agent", "scripted", "--model", "/nonexistent", "--no-picture"], ("--model is for --agent llm",)),
    ],
)
def test_empty_and_ignored_values_are_refused(argv, words, in_tmp, capsys):
    _refused(capsys, argv, *words)
    assert list(in_tmp.iterdir()) == []


def test_sft_names_a_missing_chat_template_before_loading_a_model(in_tmp, capsys):
    data = in_tmp / "g.jsonl"
    assert main(["play", "--games", "1", "--export", str(data)]) == 0
    capsys.readouterr()
    argv = [
        "sft",
        "--data",
        str(data),
        "--output-dir",
        "r",
        "--max-steps",
        "1",
        "--chat-template",
        "/nonexistent.jinja",
    ]
    _refused(capsys, argv, "/nonexistent.jinja", "does not exist", "chatml")
    assert not (in_tmp / "r").exists()


def test_sft_on_a_subgraph_pool_says_so_once(in_tmp, capsys):
    pool = in_tmp / "pool.jsonl"
    pool.write_text("".join(json.dumps({"id": f"sg{i}", "nodes": {}}) + "\n" for i in range(25)))
    _refused(capsys, ["sft", "--data", str(pool), "--output-dir", "r", "--max-steps", "1"], "25 malformed line(s)")


def test_a_file_name_longer_than_the_file_system_allows_is_one_line(in_tmp, capsys):
    """``OSError: [Errno 36] File name too long`` was a 30-line traceback from the output check."""
    long = "a" * 300 + ".jsonl"
    _refused(capsys, ["play", "--games", "1", "--export", long], "a name longer than the file system allows")
    assert list(in_tmp.iterdir()) == []


def test_binary_bytes_without_a_newline_are_not_called_an_interrupted_write(in_tmp, capsys):
    (in_tmp / "bin.jsonl").write_bytes(b"\x7fELF\x02\x01\x01\x00\xd0\xff\xfe")
    _refused(capsys, ["diagnose", "bin.jsonl"], "line 1 is not valid JSON ('utf-8' codec", "fix or delete that line")
