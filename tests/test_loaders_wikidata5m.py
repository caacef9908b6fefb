"""Wikidata5M loader: alias/relation/triplet/text files in the release's exact TSV format."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from searchgym.world.loaders import LoaderError, load_wikidata5m
from searchgym.world.loaders.wikidata5m import find_wikidata5m_files, first_sentence

FIXTURES = Path(__file__).parent / "fixtures" / "wikidata5m"


@pytest.fixture(scope="module")
def world():
    return load_wikidata5m(FIXTURES)


def test_entities_titles_aliases_and_types(world):
    assert list(world.entity_ids) == ["Q90", "Q142", "Q7186", "Q38104", "Q5", "Q515"]
    paris = world.entity("Q90")
    assert paris.title == "Paris" and paris.aliases == ("City of Light", "Paris, France")
    assert paris.type == "location"  # P31 city
    assert world.entity("Q7186").type == "person"  # P31 human
    assert world.entity("Q142").type == "other"
    assert paris.description == "Paris is the capital and most populous city of France."
    assert [e.title for e in world.find_entities("madame curie")] == ["Marie Curie"]


def test_triples_and_relation_labels(world):
    assert [(t.head, t.relation, t.tail) for t in world.triples()] == [
        ("Q90", "P31", "Q515"),
        ("Q90", "P17", "Q142"),
        ("Q142", "P36", "Q90"),
        ("Q7186", "P31", "Q5"),
        ("Q7186", "P27", "Q142"),
        ("Q7186", "P166", "Q38104"),
    ]
    assert world.relation("P36").label == "capital"
    assert world.relation("P166").label == "award received"  # not in relation.txt: built-in label
    dropped = world.metadata["load_report"]["dropped"]
    assert dropped == {
        "dangling_triple": 1,
        "blocked_relation": 1,
        "relation_without_label": 1,
        "text_of_unknown_entity": 1,
    }


def test_corpus_is_the_entity_descriptions(world):
    assert list(world.doc_ids) == ["Q90", "Q142", "Q7186"]
    (doc,) = world.documents_of("Q142")
    assert doc.title == "France"
    assert doc.text.startswith("France, officially the French Republic, is a country")
    assert not world.has_document("Q38104")


def test_malformed_lines_reported_with_file_and_line(world):
    errors = {(Path(e["file"]).name, e["line"]): e["problem"] for e in world.metadata["load_report"]["errors"]}
    assert errors == {
        ("wikidata5m_all_triplet.txt", 8): "expected 3 tab-separated columns, got 2",
        ("wikidata5m_text.txt", 5): "expected 2 tab-separated columns, got 1",
        ("wikidata5m_entity.txt", 7): "expected at least 2 tab-separated columns, got 1",
        ("wikidata5m_entity.txt", 8): "duplicate entity id 'Q90'",
    }
    assert world.metadata["load_report"]["malformed"] == {"wrong column count": 3, "duplicate id": 1}


def test_on_error_raise_stops_at_the_first_bad_line():
    with pytest.raises(LoaderError, match=r"wikidata5m_all_triplet\.txt:8: expected 3 tab-separated columns, got 2"):
        load_wikidata5m(FIXTURES, on_error="raise")


def test_gzipped_files_and_explicit_paths(tmp_path, world):
    for f in FIXTURES.iterdir():
        with open(f, "rb") as src, gzip.open(tmp_path / (f.name + ".gz"), "wb") as dst:
            shutil.copyfileobj(src, dst)
    w = load_wikidata5m(tmp_path)
    assert list(w.triples()) == list(world.triples())
    assert list(w.documents()) == list(world.documents())
    w = load_wikidata5m(
        entity_file=FIXTURES / "wikidata5m_entity.txt",
        relation_file=FIXTURES / "wikidata5m_relation.txt",
        triplet_files=[FIXTURES / "wikidata5m_all_triplet.txt"],
    )
    assert w.num_documents == 0 and w.num_triples == world.num_triples


def test_split_files_used_when_there_is_no_triplet_file(tmp_path):
    shutil.copy(FIXTURES / "wikidata5m_entity.txt", tmp_path / "entity.txt")
    shutil.copy(FIXTURES / "wikidata5m_relation.txt", tmp_path / "relation.txt")
    (tmp_path / "wikidata5m_transductive_train.txt").write_text("Q90\tP17\tQ142\n", encoding="utf-8")
    (tmp_path / "wikidata5m_transductive_valid.txt").write_text("Q142\tP36\tQ90\n", encoding="utf-8")
    files = find_wikidata5m_files(tmp_path)
    assert [p.name for p in files.triplets] == [
        "wikidata5m_transductive_train.txt",
        "wikidata5m_transductive_valid.txt",
    ]
    assert files.text is None
    w = load_wikidata5m(tmp_path)
    assert {(t.head, t.relation, t.tail) for t in w.triples()} == {("Q90", "P17", "Q142"), ("Q142", "P36", "Q90")}


def test_missing_files_name_what_was_looked_for(tmp_path):
    with pytest.raises(FileNotFoundError, match="no triplet file"):
        load_wikidata5m(tmp_path)
    (tmp_path / "all_triplet.txt").write_text("Q1\tP1\tQ2\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match="wikidata5m_entity.txt, entity.txt"):
        load_wikidata5m(tmp_path)
    with pytest.raises(ValueError, match="needs a directory"):
        load_wikidata5m(entity_file=FIXTURES / "wikidata5m_entity.txt")


def test_relation_allowlist():
    w = load_wikidata5m(FIXTURES, relation_allowlist={"P36"})
    assert [(t.head, t.relation, t.tail) for t in w.triples()] == [("Q142", "P36", "Q90")]
    assert w.entity("Q90").type == "location"  # P31 still types entities


def test_first_sentence():
    assert first_sentence("Paris is big. It has 2 million people.") == "Paris is big."
    assert first_sentence("Dr. no split here") == "Dr. no split here"
    assert first_sentence("word " * 200, max_chars=20).endswith("…")
