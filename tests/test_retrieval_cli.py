"""``searchgym index build`` / ``search`` / ``serve`` end to end on a saved tiny world."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from searchgym.commands import retrieval as cli
from searchgym.retrieval import RemoteRetriever
from searchgym.world import save_world

REPO = Path(__file__).resolve().parents[1]


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="searchgym")
    sub = parser.add_subparsers(dest="command", required=True)
    cli.register(sub)
    args = parser.parse_args(list(argv))
    return args.func(args)


@pytest.fixture(scope="module")
def world_dir(tiny_world, tmp_path_factory):
    d = tmp_path_factory.mktemp("world")
    save_world(tiny_world, d)
    return d


def test_registered_with_the_main_cli():
    from searchgym.cli import COMMAND_MODULES

    assert "searchgym.commands.retrieval" in COMMAND_MODULES


def test_build_then_search_the_index(world_dir, tmp_path, capsys):
    assert run("index", "build", "--world", str(world_dir), "--output-dir", str(tmp_path / "idx")) == 0
    assert "indexed 7 documents" in capsys.readouterr().out
    assert run("search", "capital", "of", "Merovia", "--index", str(tmp_path / "idx"), "-k", "2") == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].startswith('Doc 1 (Title: "Merovia") ')


def test_search_a_world_directly_with_each_lexical_backend(world_dir, capsys):
    for backend in ("bm25", "rank-bm25"):
        assert (
            run("search", "Bob Varn", "--world", str(world_dir), "--backend", backend, "-k", "1", "--max-chars", "10")
            == 0
        )
        assert capsys.readouterr().out.strip() == 'Doc 1 (Title: "Bob Varn") Bob Var...'


def test_search_without_matches_or_source(world_dir, capsys):
    assert run("search", "the of", "--world", str(world_dir)) == 1
    assert "no documents match" in capsys.readouterr().out
    with pytest.raises(ValueError, match="--world DIR, --synthetic, --index DIR or --url URL"):
        run("search", "Merovia")


def test_search_a_bad_index_names_the_fix(tmp_path):
    (tmp_path / "junk").mkdir()
    with pytest.raises(ValueError, match="searchgym index build"):
        run("search", "Merovia", "--index", str(tmp_path / "junk"))


def test_serve_answers_a_real_client(world_dir):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = (
        "import argparse, sys; from searchgym.commands import retrieval as cli; p = argparse.ArgumentParser(); "
        "s = p.add_subparsers(dest='command'); cli.register(s); a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--world", str(world_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline()
        assert "serving" in line, proc.stderr.read() if proc.poll() is not None else line
        url = next(w for w in line.split() if w.startswith("http://127.0.0.1:"))
        remote = RemoteRetriever(url, timeout=10)
        assert remote.search("capital of Merovia", k=1)[0].title == "Merovia"
        assert remote.health()["backend"] == "bm25"
        remote.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.slow
def test_dense_index_build_and_search(world_dir, tmp_path, capsys):
    assert (
        run("index", "build", "--world", str(world_dir), "--output-dir", str(tmp_path / "d"), "--backend", "dense") == 0
    )
    capsys.readouterr()
    assert run("search", "who paints pictures", "--index", str(tmp_path / "d"), "-k", "1") == 0
    assert capsys.readouterr().out.startswith('Doc 1 (Title: "Bob Varn")')
