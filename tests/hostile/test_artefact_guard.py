"""No command writes over another kind of artefact, and no error tells the user to (issue 33, item 4).

``searchgym search x --index worlds/default`` (a world, not an index) used to answer "rebuild it with
``searchgym index build --world DIR --out worlds/default``", and following that overwrote the world's
``manifest.json``. Artefacts identify themselves (a manifest's ``format``, ``run.json``, a JSONL file's
first record); every builder's output goes through :func:`searchgym.core.artefacts.check_output`, which
refuses another kind unless the command's ``--force`` says so.
"""

from __future__ import annotations

import json
import shutil

import pytest

from searchgym.cli import main
from searchgym.core.artefacts import check_output, file_kind, folder_kind
from searchgym.errors import InvalidArgumentError
from searchgym.training.demonstrations import generate_demonstrations
from searchgym.world import load_world
from tests.hostile.conftest import EVAL_FIXTURES


@pytest.fixture
def world_dir(saved_tiny, tmp_path):
    """A private copy of the saved tiny world (a test may try to damage it)."""
    return shutil.copytree(saved_tiny, tmp_path / "world")


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_issue_repro_search_with_a_world_as_index_gives_safe_advice(world_dir, capsys):
    manifest = (world_dir / "manifest.json").read_bytes()
    assert main(["search", "Alice", "--index", str(world_dir)]) == 2
    err = _error(capsys)
    assert "holds a world, not an index" in err and f"--world {world_dir}" in err
    assert f"--output-dir {world_dir}" not in err and "--output-dir NEW_DIR" in err
    # the advice the old message gave is refused instead of followed
    assert main(["index", "build", "--world", str(world_dir), "--output-dir", str(world_dir)]) == 2
    err = _error(capsys)
    assert "holds a world; writing an index there would overwrite it: give a new folder" in err
    assert "--force" not in err
    assert (world_dir / "manifest.json").read_bytes() == manifest
    assert load_world(world_dir).num_entities == 6


def test_search_with_a_run_folder_as_index_does_not_suggest_writing_there(saved_tiny, tmp_path, capsys):
    run = tmp_path / "run"
    assert (
        main(
            [
                "eval",
                "--tasks",
                "tiny=" + str(EVAL_FIXTURES / "tiny_qa.jsonl"),
                "--world",
                str(saved_tiny),
                "--output-dir",
                str(run),
                "--no-progress",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["search", "Alice", "--index", str(run)]) == 2
    err = _error(capsys)
    assert "holds an eval run, not an index" in err and f"--output-dir {run}" not in err


def test_every_builder_refuses_another_kind_of_artefact(world_dir, saved_tiny, tmp_path, capsys):
    index = tmp_path / "index"
    assert main(["index", "build", "--world", str(world_dir), "--output-dir", str(index)]) == 0
    pool = tmp_path / "pool.jsonl"
    assert main(["subgraphs", "build", "--synthetic", "--n", "2", "--out", str(pool), "--no-progress"]) == 0
    capsys.readouterr()
    before = {p: p.read_bytes() for p in [*world_dir.iterdir(), *index.iterdir(), pool] if p.is_file()}
    refused = [
        ["world", "build", "--output-dir", str(index), "--entities", "60", "--no-progress"],
        ["index", "build", "--world", str(world_dir), "--output-dir", str(world_dir)],
        [
            "eval",
            "--tasks",
            "tiny=" + str(EVAL_FIXTURES / "tiny_qa.jsonl"),
            "--world",
            str(saved_tiny),
            "--output-dir",
            str(world_dir),
            "--no-progress",
        ],
        ["subgraphs", "build", "--world", str(world_dir), "--out", str(world_dir / "pool.jsonl"), "--no-progress"],
        ["play", "--games", "1", "--export", str(pool)],
        ["play", "--games", "1", "--export", str(index / "games.jsonl")],
        ["train", "--output-dir", str(index)],
    ]
    for args in refused:
        assert main(args) == 2, args
        err = _error(capsys)
        assert ("give a new" in err or "give a file outside it" in err) and "--force" not in err, (args, err)
    records = tmp_path / "eval.jsonl"
    records.write_text('{"key": "tiny/q1", "golds": ["x"]}\n')
    before[records] = records.read_bytes()
    with pytest.raises(InvalidArgumentError, match="holds eval records; writing demonstrations there would damage"):
        generate_demonstrations(None, records)  # refused before any work (or the file's truncation)
    after = {p: p.read_bytes() for p in before}
    assert after == before and not (world_dir / "pool.jsonl").exists()


def test_force_replaces_what_is_there(world_dir, tmp_path, capsys):
    assert main(["index", "build", "--world", str(world_dir), "--output-dir", str(world_dir), "--force"]) == 0
    assert folder_kind(world_dir) == "index"


def test_artefacts_identify_themselves(world_dir, tmp_path):
    assert folder_kind(world_dir) == "world" and folder_kind(tmp_path / "missing") is None
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\nnot json\n")
    with pytest.raises(InvalidArgumentError, match="a file searchgym did not write"):
        check_output(notes, "trajectory export")  # appending would cut its last line as a torn tail
    games = tmp_path / "games.jsonl"
    games.write_text(json.dumps({"game": 0, "solvers": []}) + "\n")
    assert file_kind(games) == "trajectory export"
    check_output(games, "trajectory export")  # the same kind: a resume
    with pytest.raises(InvalidArgumentError, match="holds a trajectory export; writing a subgraph pool there"):
        check_output(games, "subgraph pool")
    check_output(games, "subgraph pool", force=True)
