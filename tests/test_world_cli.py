"""``searchgym world build|stats`` through the real command-line entry point."""

from __future__ import annotations

import argparse
import json

import pytest

from searchgym.cli import main
from searchgym.commands import world as world_cli
from searchgym.world import load_world


def test_build_then_stats(tmp_path, capsys):
    out = tmp_path / "w"
    assert main(["world", "build", "--output-dir", str(out), "--entities", "500", "--seed", "3", "--no-progress"]) == 0
    assert "entities=500" in capsys.readouterr().out
    world = load_world(out)
    assert world.num_entities == 500 and world.metadata["seed"] == 3

    assert main(["world", "stats", str(out)]) == 0
    text = capsys.readouterr().out
    assert "entities     500" in text and "top relations" in text and "place of birth" in text

    assert main(["world", "stats", str(out), "--json", "--top", "3"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["entities"] == 500 and stats["documents"] == 500
    assert len(stats["top_relations"]) == 3
    assert stats["entity_types"]["person"] > 0


def test_build_scale_and_same_seed_identical(tmp_path):
    for name in ("a", "b"):
        assert main(["world", "build", "--output-dir", str(tmp_path / name), "--scale", "0.2", "--no-progress"]) == 0
    a = (tmp_path / "a" / "doc_texts.utf8").read_bytes()
    assert a == (tmp_path / "b" / "doc_texts.utf8").read_bytes()


def test_stats_of_a_fresh_synthetic_world(capsys):
    assert main(["world", "stats", "--synthetic", "--entities", "300", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entities"] == 300


def test_build_refuses_to_overwrite_without_force(tmp_path, capsys):
    out = tmp_path / "w"
    assert main(["world", "build", "--output-dir", str(out), "--entities", "300", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["world", "build", "--output-dir", str(out), "--entities", "300", "--no-progress"]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["world", "build", "--output-dir", str(out), "--entities", "400", "--no-progress", "--force"]) == 0
    assert load_world(out).num_entities == 400


@pytest.mark.parametrize(
    "argv, message",
    [
        (["world", "build", "--output-dir", "{tmp}/x", "--source", "nope"], "unknown world source 'nope'"),
        (["world", "build", "--output-dir", "{tmp}/x", "--entities", "10"], "at least 200"),
        (["world", "build", "--output-dir", "{tmp}/x", "--input", "f.json"], "--input is not used"),
        (["world", "build", "--output-dir", "{tmp}/x", "--corpus", "c.jsonl"], "--corpus is not used"),
        (["world", "stats", "{tmp}/missing"], "does not exist"),
        (["world", "stats"], "either a world directory or --synthetic"),
    ],
)
def test_errors_are_reported_with_a_reason(tmp_path, capsys, argv, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_entities_and_scale_are_exclusive(tmp_path):
    with pytest.raises(SystemExit):
        main(["world", "build", "--output-dir", str(tmp_path), "--entities", "300", "--scale", "2"])


def fake_source(args: argparse.Namespace):
    """A registered-by-name builder used by the registry test."""
    from tests.conftest import build_tiny_world

    assert args.input == "some/input"
    return build_tiny_world()


def test_sources_registry_dispatches_by_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(world_cli.WORLD_SOURCES, "fake", f"{__name__}:fake_source")
    out = tmp_path / "w"
    assert (
        main(["world", "build", "--output-dir", str(out), "--source", "fake", "--input", "some/input", "--no-progress"])
        == 0
    )
    assert load_world(out).name == "tiny"
    monkeypatch.setitem(world_cli.WORLD_SOURCES, "broken", "no_module_path")
    assert main(["world", "build", "--output-dir", str(tmp_path / "v"), "--source", "broken"]) == 2
    assert "module:function" in capsys.readouterr().err


def test_register_source_validates_the_name(monkeypatch):
    monkeypatch.setattr(world_cli, "WORLD_SOURCES", dict(world_cli.WORLD_SOURCES))
    world_cli.register_source("my-source", fake_source)
    assert world_cli.WORLD_SOURCES["my-source"] is fake_source
    with pytest.raises(ValueError, match="alphanumeric"):
        world_cli.register_source("bad name", fake_source)


def test_build_shows_progress_bars_by_default(tmp_path, capsys):
    assert main(["world", "build", "--output-dir", str(tmp_path / "w"), "--entities", "300"]) == 0
    err = capsys.readouterr().err
    assert "articles" in err and "columns" in err  # generation, then the save
