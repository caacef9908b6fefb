"""Whole-file reports never lose an input or another artefact, and bad report paths are one line.

``subgraphs stats pool.jsonl --png pool.jsonl`` turned the pool into a PNG, ``diagnose g.jsonl --json g.jsonl``
replaced the export, ``train --dump-config WORLD/manifest.json`` destroyed a world; ``--out x.jsonl`` was a
matplotlib traceback and ``--out DIR`` wrote ``DIR.png`` while printing ``wrote DIR``. Every report now goes
through :func:`searchgym.core.artefacts.check_report_output` before any work, and is written whole.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from searchgym.cli import main
from searchgym.core.artefacts import PNG_MAGIC


@pytest.fixture
def world_dir(saved_tiny, tmp_path):
    """A private copy of the saved tiny world (a test may try to damage it)."""
    return shutil.copytree(saved_tiny, tmp_path / "world")


@pytest.fixture(scope="module")
def pool_src(tmp_path_factory):
    """A 3-subgraph pool of the synthetic world, built once."""
    out = tmp_path_factory.mktemp("pool") / "pool.jsonl"
    assert main(["subgraphs", "build", "--synthetic", "--n", "3", "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.fixture
def pool(pool_src, tmp_path):
    """A private copy of the pool."""
    return Path(shutil.copy(pool_src, tmp_path / "pool.jsonl"))


@pytest.fixture
def metrics(tmp_path):
    """A small metrics file as `searchgym train` writes it."""
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"step": s, "solver/reward": s / 10}) + "\n" for s in range(3)))
    return path


@pytest.fixture
def export(tmp_path):
    """A trajectory export of two games."""
    path = tmp_path / "g.jsonl"
    assert main(["play", "--games", "2", "--export", str(path)]) == 0
    return path


def refused(capsys, argv: list[str], *words: str) -> str:
    """Run ``argv``: it must exit 2 with one stderr line holding ``words`` and no traceback."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err
    return err


def unchanged(argv: list[str], capsys, *files: Path, words: tuple[str, ...]) -> None:
    """``argv`` is refused naming ``words`` and leaves every one of ``files`` byte for byte as it was."""
    before = [f.read_bytes() for f in files]
    refused(capsys, argv, *words)
    assert [f.read_bytes() for f in files] == before


@pytest.mark.parametrize(
    "argv",
    [
        ["subgraphs", "stats", "{pool}", "--png", "{pool}"],
        ["subgraphs", "show", "{pool}", "--png", "{pool}"],
        ["train", "--config", "{cfg}", "--dump-config", "{cfg}"],
        ["plot", "{png}", "--out", "{png}"],
    ],
    ids=["stats", "show", "dump-config", "plot"],
)
def test_a_report_is_never_written_over_the_commands_input(argv, pool, tmp_path, capsys):
    cfg, png = tmp_path / "c.yaml", tmp_path / "m.png"
    assert main(["train", "--dump-config", str(cfg)]) == 0
    png.write_bytes(PNG_MAGIC + b"rest")
    argv = [a.format(pool=pool, cfg=cfg, png=png) for a in argv]
    unchanged(argv, capsys, pool, cfg, png, words=("is this command's input", "give another file"))


def test_diagnose_never_writes_over_its_export(export, capsys):
    for flag in ("--json", "--out"):
        unchanged(["diagnose", str(export), flag, str(export)], capsys, export, words=("command's input",))


@pytest.mark.parametrize(
    "argv",
    [
        ["subgraphs", "show", "{pool}", "--png", "{world}/manifest.json"],
        ["subgraphs", "stats", "{pool}", "--png", "{world}/x.png"],
        ["train", "--dump-config", "{world}/manifest.json"],
        ["sft", "--dump-config", "{world}/manifest.json"],
        ["plot", "{metrics}", "--out", "{world}/c.png"],
    ],
    ids=["show", "stats", "train", "sft", "plot"],
)
def test_a_report_is_never_written_into_a_world(argv, pool, world_dir, metrics, capsys):
    argv = [a.format(pool=pool, world=world_dir, metrics=metrics) for a in argv]
    unchanged(argv, capsys, world_dir / "manifest.json", pool, words=("inside a world folder", "outside it"))
    assert not (world_dir / "x.png").exists() and not (world_dir / "c.png").exists()


def test_a_report_is_never_written_over_another_kind_of_file(pool, metrics, tmp_path, capsys):
    notes = tmp_path / "notes.png"
    notes.write_text("my notes\n")
    unchanged(["plot", str(metrics), "--out", str(notes)], capsys, notes, words=("not a PNG figure",))
    other = tmp_path / "other.yaml"
    shutil.copy(pool, other)
    unchanged(["train", "--dump-config", str(other)], capsys, other, words=("holds a subgraph pool",))


@pytest.mark.parametrize(
    ("out", "words"),
    [
        ("x.jsonl", ("ending in .png", "x.png")),
        ("noext", ("ending in .png", "noext.png")),
        ("", ("is empty", "give a file name")),
        ("adir", ("is a folder", "adir/x.png")),
    ],
)
def test_plot_refuses_an_out_it_cannot_write_and_writes_nothing(out, words, metrics, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    unchanged(["plot", str(metrics), "--out", out], capsys, metrics, words=words)
    assert sorted(p.name for p in tmp_path.iterdir()) == before and not list((tmp_path / "adir").iterdir())


def test_a_missing_folder_is_made_and_the_written_path_named(pool, metrics, tmp_path, capsys):
    for argv, png in (
        (["subgraphs", "stats", str(pool), "--png"], tmp_path / "a" / "s.png"),
        (["subgraphs", "show", str(pool), "--png"], tmp_path / "b" / "g.png"),
        (["plot", str(metrics), "--out"], tmp_path / "c" / "m.png"),
    ):
        capsys.readouterr()
        assert main([*argv, str(png)]) == 0
        assert png.read_bytes().startswith(PNG_MAGIC) and f"wrote {png}" in capsys.readouterr().out
        assert main([*argv, str(png)]) == 0  # its own earlier picture is replaced
    assert not [p for p in tmp_path.rglob(".*.tmp-*")]  # no temporary left behind


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (b"\x00\x01\xff\xfe binary", ("m.jsonl:1", "not UTF-8", "fix or delete that line")),
        (b'{"step": [1], "solver/reward": 1}', ("m.jsonl:1", "'step' is [1]", "fix or delete that line")),
        (b'{"step": "abc", "solver/reward": 1}', ("'step' is \"abc\"", "fix or delete")),
        (b'{"step": null, "solver/reward": 1}', ("'step' is null", "fix or delete")),
    ],
    ids=["binary", "list", "str", "null"],
)
def test_plot_names_a_bad_metrics_line(line, words, tmp_path, capsys):
    path = tmp_path / "m.jsonl"
    path.write_bytes(line + b"\n")
    unchanged(["plot", str(path), "--out", str(tmp_path / "c.png")], capsys, path, words=words)
    assert not (tmp_path / "c.png").exists()


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--seed", "-1"], ("--seed -1", "at least 0")),
        (["--ray-workers", "0"], ("--ray-workers 0",)),
        (["--ray-chunk", "-1"], ("--ray-chunk -1",)),
        (["--timeout", "-1"], ("--timeout -1.0",)),
        (["--temperature", "nan", "--selector", "llm", "--endpoint", "http://127.0.0.1:9/v1"], ("--temperature nan",)),
    ],
    ids=["seed", "ray-workers", "ray-chunk", "timeout", "temperature"],
)
def test_subgraphs_build_checks_numbers_before_making_a_file(flags, words, tmp_path, capsys):
    out = tmp_path / "p.jsonl"
    refused(
        capsys, ["subgraphs", "build", "--synthetic", "--n", "3", "--out", str(out), "--no-progress", *flags], *words
    )
    assert list(tmp_path.iterdir()) == []


def test_subgraphs_stats_checks_top(pool, capsys):
    unchanged(["subgraphs", "stats", str(pool), "--top", "-1"], capsys, pool, words=("--top -1", "at least 1"))
