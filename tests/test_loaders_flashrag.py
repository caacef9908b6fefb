"""Search-R1 / FlashRAG corpus JSONL: parsing, linking to a KG by title, export round trip."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from pathlib import Path

import pytest

from searchgym.world.loaders import (
    LoaderError,
    link_to_world,
    load_flashrag_corpus,
    load_wikidata5m,
    read_flashrag_corpus,
    save_flashrag_corpus,
)
from searchgym.world.loaders.flashrag import format_contents, parse_contents

FIXTURE = Path(__file__).parent / "fixtures" / "flashrag" / "corpus.jsonl"
KG = Path(__file__).parent / "fixtures" / "wikidata5m"


@pytest.fixture(scope="module")
def kg():
    return load_wikidata5m(KG)


def test_parse_contents():
    assert parse_contents('"Paris"\nParis is the capital.\nSecond line.') == (
        "Paris",
        "Paris is the capital.\nSecond line.",
    )
    assert parse_contents('"The "Quoted" Title"\nbody') == ('The "Quoted" Title', "body")
    assert parse_contents("Unquoted title\nbody") == ("Unquoted title", "body")
    assert parse_contents("no newline at all") == ("", "no newline at all")
    assert parse_contents(format_contents("Two\nlines", "b")) == ("Two lines", "b")


def test_corpus_only_world():
    w = load_flashrag_corpus(FIXTURE)
    assert w.num_entities == 0 and w.num_triples == 0
    assert list(w.doc_ids) == ["0", "1", "2", "3", "4", "6", "7"]
    d = w.document("0")
    assert (d.title, d.text, d.entity) == ("Paris", "Paris is the capital and most populous city of France.", None)
    assert w.document("6").title == "" and w.document("6").text == "A passage without a title line."
    assert w.document("7").title == "Marie Curie"  # {"id", "title", "text"} shape, integer id
    report = w.metadata["load_report"]
    assert report["counts"]["untitled"] == 1


def test_malformed_lines_reported_and_skipped():
    corpus = read_flashrag_corpus(FIXTURE)
    errors = [(e["line"], e["problem"]) for e in corpus.report.errors]
    assert errors[0][0] == 6 and errors[0][1].startswith("bad JSON")
    assert errors[1:] == [
        (7, "missing or empty 'id' (a string or integer)"),
        (8, "duplicate document id '0' (first seen in line 1)"),
    ]
    assert corpus.report.malformed == {"bad JSON": 1, "missing field": 1, "duplicate id": 1}


def test_on_error_raise():
    with pytest.raises(LoaderError, match=r"corpus\.jsonl:6: bad JSON"):
        read_flashrag_corpus(FIXTURE, on_error="raise")


def test_linked_to_kg_by_title(kg):
    w = load_flashrag_corpus(FIXTURE, world=kg)
    assert w.num_triples == kg.num_triples and list(w.entity_ids) == list(kg.entity_ids)
    links = {d.id: d.entity for d in w.documents()}
    # exact title, case-insensitive title, alias-only title not linked with by="title"
    assert links == {"0": "Q90", "1": "Q90", "2": "Q142", "3": None, "4": None, "6": None, "7": "Q7186"}
    assert [d.id for d in w.documents_of("Q90")] == ["0", "1"]
    report = w.metadata["load_report"]
    assert report["counts"]["linked_documents"] == 4
    assert "kg_load_report" in w.metadata  # the KG loader's report is kept
    assert kg.num_documents == 3  # the input world is not modified


def test_link_by_name_and_exact_case(kg):
    corpus = read_flashrag_corpus(FIXTURE)
    assert link_to_world(corpus, kg, by="name")[3] == "Q7186"  # "Madame Curie" is an alias
    assert link_to_world(["france", "France"], kg, case_insensitive=False) == [None, "Q142"]
    with pytest.raises(ValueError, match="by must be one of"):
        link_to_world(["x"], kg, by="fuzzy")


def test_append_mode_keeps_world_documents_and_rejects_colliding_ids(kg, tmp_path):
    w = load_flashrag_corpus(FIXTURE, world=kg, mode="append")
    assert list(w.doc_ids)[:3] == ["Q90", "Q142", "Q7186"] and w.num_documents == 10
    p = tmp_path / "c.jsonl"
    clash = json.dumps({"id": "Q90", "contents": '"Paris"\nclash'}) + "\n"
    p.write_text(clash + json.dumps({"id": "new", "contents": '"Lyon"\nLyon is a city.'}) + "\n", encoding="utf-8")
    w = load_flashrag_corpus(p, world=kg, mode="append")
    assert w.num_documents == 4
    assert "duplicate document id 'Q90'" in w.metadata["load_report"]["errors"][0]["problem"]
    with pytest.raises(LoaderError, match="c.jsonl:1: duplicate document id 'Q90'"):
        load_flashrag_corpus(p, world=kg, mode="append", on_error="raise")
    p.write_text(clash, encoding="utf-8")  # nothing usable at all: stop rather than attach an empty corpus
    with pytest.raises(LoaderError, match="1 of 1 lines could not be read and 0 documents were kept"):
        load_flashrag_corpus(p, world=kg, mode="append")


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.jsonl.gz", "corpus.jsonl.bz2", "corpus.jsonl.xz"])
def test_save_and_reload_round_trip(kg, tmp_path, name):
    w = load_flashrag_corpus(FIXTURE, world=kg)
    out = tmp_path / name
    assert save_flashrag_corpus(w, out) == w.num_documents
    opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}.get(out.suffix, open)
    with opener(out, "rt", encoding="utf-8") as f:
        first = json.loads(f.readline())
    assert first == {"id": "0", "contents": '"Paris"\nParis is the capital and most populous city of France.'}
    again = load_flashrag_corpus(out, world=kg)
    assert list(again.documents()) == list(w.documents())
    assert not list(tmp_path.glob("*.tmp*"))


def test_wikidata_loader_accepts_a_corpus(kg):
    from searchgym.world.loaders import load_wikidata_dump

    dump = Path(__file__).parent / "fixtures" / "wikidata" / "dump_excerpt.json"
    w = load_wikidata_dump(dump, corpus=FIXTURE)
    assert [d.id for d in w.documents_of("Q90")] == ["0", "1"]
    assert [d.id for d in w.documents_of("Q7186")] == ["7"]
    assert w.metadata["kg_load_report"]["source"] == "wikidata"


def test_max_docs_and_bad_options(tmp_path):
    assert len(read_flashrag_corpus(FIXTURE, max_docs=2)) == 2
    with pytest.raises(ValueError, match="max_docs"):
        read_flashrag_corpus(FIXTURE, max_docs=0)
    with pytest.raises(ValueError, match="mode must be"):
        load_flashrag_corpus(FIXTURE, mode="merge")
    with pytest.raises(FileNotFoundError):
        load_flashrag_corpus(tmp_path / "nope.jsonl")


def test_invalid_utf8_line_is_reported_with_its_number(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_bytes(
        b'{"id": "1", "contents": "\\"A\\"\\nok"}\n{"id": "2", "contents": "\xff\xfe"}\n'
        b'{"id": "3", "contents": "\\"B\\"\\nfine"}\n'
    )
    corpus = read_flashrag_corpus(p)
    assert corpus.ids == ["1", "3"]
    assert corpus.report.errors[0]["line"] == 2 and "not valid UTF-8" in corpus.report.errors[0]["problem"]
    with pytest.raises(LoaderError, match=r"c\.jsonl:2: not valid UTF-8"):
        read_flashrag_corpus(p, on_error="raise")


def test_ambiguous_titles_link_to_the_first_and_are_counted():
    from searchgym.world import WorldBuilder
    from searchgym.world.loaders import LoadReport

    b = WorldBuilder("namesakes")
    b.add_entity("E1", "Springfield", type="location")
    b.add_entity("E2", "Springfield", type="location")
    b.add_entity("E3", "Shelbyville", aliases=["Shelby"], type="location")
    w = b.build()
    report = LoadReport(source="test")
    assert link_to_world(["Springfield", "springfield", "Shelby", "Nowhere", ""], w, report=report) == [
        "E1",
        "E1",
        None,
        None,
        None,
    ]
    assert report.counts["ambiguous_links"] == 2 and report.counts["linked_documents"] == 2
