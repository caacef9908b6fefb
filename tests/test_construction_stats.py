"""Pool statistics (paper Fig. 5), subgraph pictures (Fig. 6) and the ``subgraphs`` CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from searchgym.commands.subgraphs import main as cli_main
from searchgym.construction import (
    Branch,
    Subgraph,
    SubgraphNode,
    build_pool,
    format_stats,
    load_pool,
    plot_stats,
    plot_subgraph,
    pool_stats,
)
from searchgym.construction.plot import subgraph_layout
from tests.support.construction_world import build_random_world

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_sg(sid, hops, answer_type="other", distractors=()):
    path = [f"{sid}n{i}" for i in range(hops + 1)]
    nodes = {n: SubgraphNode(n, f"Title {n}") for n in path}
    branches = []
    for k, labels in distractors:
        bn = [f"{sid}d{k}{j}" for j in range(len(labels))]
        nodes.update({n: SubgraphNode(n, f"Title {n}") for n in bn})
        branches.append(Branch(k, bn, list(labels), list(labels)))
    rels = ["r1", "r2", "r1", "r3", "r4", "r5", "r6"][:hops]
    return Subgraph(sid, path[0], path, rels, rels, nodes, branches, answer_type=answer_type)


def assert_png(path):
    import matplotlib.image as mpimg

    data = Path(path).read_bytes()
    assert data[:8] == PNG_MAGIC
    img = mpimg.imread(str(path))
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    assert img.std() > 0.01  # not a blank canvas


@pytest.fixture(scope="module")
def sgs():
    return [
        make_sg("a", 3, "person", [(1, ["x"])]),
        make_sg("b", 4, "date", [(2, ["x", "y"]), (1, ["z"])]),
        make_sg("c", 3, "person"),
    ]


def test_pool_stats_exact(sgs):
    st = pool_stats(sgs)
    assert st["count"] == 3
    assert st["path_length"]["histogram"] == {3: 2, 4: 1}
    assert st["path_length"]["mean"] == pytest.approx(10 / 3, abs=1e-3)
    assert st["answer_types"] == {"person": 2, "location": 0, "organisation": 0, "date": 1, "number": 0, "other": 0}
    # a: r1 r2 r1 + x -> {r1,r2,x}; b: r1 r2 r1 r3 + x y z -> 6; c: {r1, r2} -> 2
    assert st["relations_per_subgraph"]["histogram"] == {2: 1, 3: 1, 6: 1}
    assert st["top_relations"][0] == ["r1", 6]
    assert st["unique_relations"] == 6 and st["edges"] == 3 + 4 + 3 + 1 + 3
    assert st["node_count"]["max"] == 8 and st["distractors"]["histogram"] == {0: 1, 1: 1, 2: 1}
    json.dumps(st)  # serialisable
    text = format_stats(st)
    assert "subgraphs: 3" in text and "3: 2 (66.7%)" in text and "person 2 (66.7%)" in text
    empty = pool_stats([])
    assert empty["count"] == 0 and "subgraphs: 0" in format_stats(empty)


def test_plot_stats_writes_png(sgs, tmp_path):
    plot_stats(pool_stats(sgs), tmp_path / "stats.png")
    assert_png(tmp_path / "stats.png")


def test_plot_subgraph_writes_png_and_layout_is_left_to_right(sgs, tmp_path):
    sg = sgs[1]
    pos = subgraph_layout(sg)
    xs = [pos[n][0] for n in sg.path]
    assert xs == sorted(xs) and all(pos[n][1] == 0 for n in sg.path)
    assert all(pos[n][1] != 0 for br in sg.distractors for n in br.nodes)
    assert subgraph_layout(sg) == pos  # deterministic
    plot_subgraph(sg, tmp_path / "sg.png")
    assert_png(tmp_path / "sg.png")


@pytest.fixture(scope="module")
def saved_world(tmp_path_factory):
    d = tmp_path_factory.mktemp("w") / "world"
    build_random_world(300, seed=9).save(d)
    return d


def test_cli_build_stats_show(saved_world, tmp_path, capsys):
    out = tmp_path / "pool.jsonl"
    assert (
        cli_main(
            [
                "subgraphs",
                "build",
                "--world",
                str(saved_world),
                "--n",
                "25",
                "--out",
                str(out),
                "--no-progress",
                "--seed",
                "4",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "25 subgraphs from" in text and "pool.rejections.jsonl" in text
    assert len(load_pool(out)) == 25
    # resuming a finished pool does no new work
    assert (
        cli_main(
            [
                "subgraphs",
                "build",
                "--world",
                str(saved_world),
                "--n",
                "25",
                "--out",
                str(out),
                "--no-progress",
                "--seed",
                "4",
            ]
        )
        == 0
    )
    m = re.search(r"25 subgraphs from (\d+) seeds \((\d+) resumed\)", capsys.readouterr().out)
    assert m and m.group(1) == m.group(2)
    assert len(out.read_text().splitlines()) == 25

    png = tmp_path / "stats.png"
    assert cli_main(["subgraphs", "stats", str(out), "--png", str(png)]) == 0
    text = capsys.readouterr().out
    assert "subgraphs: 25" in text and "path length" in text
    assert_png(png)
    assert cli_main(["subgraphs", "stats", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 25

    sg_png = tmp_path / "sg.png"
    assert cli_main(["subgraphs", "show", str(out), "--index", "2", "--png", str(sg_png)]) == 0
    text = capsys.readouterr().out
    sg = load_pool(out)[2]
    assert text.startswith(f"{sg.id}: seed {sg.seed}") and sg.describe() in text
    assert_png(sg_png)
    assert cli_main(["subgraphs", "show", str(out), "--id", sg.id]) == 0
    assert sg.describe() in capsys.readouterr().out


def test_cli_errors_are_clear(saved_world, tmp_path):
    out = tmp_path / "p.jsonl"
    with pytest.raises(ValueError, match="--endpoint"):
        cli_main(["subgraphs", "build", "--world", str(saved_world), "--out", str(out), "--selector", "llm"])
    base = ["subgraphs", "build", "--world", str(saved_world), "--out", str(out), "--no-progress"]
    with pytest.raises(ValueError, match="--api-key: only used with --selector llm"):  # was silently ignored
        cli_main([*base, "--api-key", "secret"])
    with pytest.raises(ValueError, match="--n must be >= 1, got 0"):  # was an empty pool file and exit 0
        cli_main([*base, "--n", "0"])
    assert not out.exists()
    with pytest.raises(ValueError, match="no eligible relation"):
        cli_main(
            [
                "subgraphs",
                "build",
                "--world",
                str(saved_world),
                "--out",
                str(out),
                "--n",
                "3",
                "--relation-allowlist",
                "nothing",
                "--no-progress",
            ]
        )
    with pytest.raises(FileNotFoundError):
        cli_main(["subgraphs", "stats", str(tmp_path / "missing.jsonl")])
    build_pool(build_random_world(300, seed=9), 3, out=out, progress=False)
    with pytest.raises(ValueError, match="out of range"):
        cli_main(["subgraphs", "show", str(out), "--index", "7"])
    with pytest.raises(KeyError, match="nope"):
        cli_main(["subgraphs", "show", str(out), "--id", "nope"])


def test_cli_is_registered_in_the_main_parser():
    from searchgym.cli import COMMAND_MODULES

    assert "searchgym.commands.subgraphs" in COMMAND_MODULES
