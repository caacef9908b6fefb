"""Wikidata JSON dump loader: exact entities/triples/literals from a real-shaped dump excerpt."""

from __future__ import annotations

import bz2
import gzip
import json
import logging
import shutil
from pathlib import Path

import pytest

from searchgym.world import Literal, Triple, load_world
from searchgym.world.loaders import DEFAULT_BLOCKLIST, LoaderError, load_wikidata_dump
from searchgym.world.loaders.wikidata import format_wikidata_quantity, format_wikidata_time

FIXTURE = Path(__file__).parent / "fixtures" / "wikidata" / "dump_excerpt.json"
BAD_LINE = 12  # the truncated entity line in the fixture


@pytest.fixture(scope="module")
def world():
    return load_wikidata_dump(FIXTURE)


def _facts(w):
    return {(t.head, t.relation, t.tail) for t in w.triples()}


def test_entities_labels_aliases_descriptions_types(world):
    assert world.num_entities == 10
    paris = world.entity("Q90")
    assert (paris.title, paris.aliases, paris.description, paris.type) == (
        "Paris",
        ("City of Light",),
        "capital and largest city of France",
        "location",
    )
    curie = world.entity("Q7186")
    assert curie.aliases == ("Maria Salomea Skłodowska", "Madame Curie")
    assert curie.type == "person"
    assert world.entity("Q209842").type == "organisation"
    assert world.entity("Q38104").type == "award"
    assert world.entity("Q150").type == "other"
    assert world.entity("Q4916").aliases == ("EUR", "€", "Euro")  # the enwiki article title is an alias
    # no English label: dropped and counted; lexemes are not items
    assert not world.has_entity("Q4115189")
    assert not world.has_entity("L7")
    dropped = world.metadata["load_report"]["dropped"]
    assert dropped["item_without_label"] == 1 and dropped["lexeme_entity"] == 1


def test_item_valued_claims_become_entity_triples(world):
    facts = _facts(world)
    for f in [
        ("Q142", "P36", "Q90"),
        ("Q142", "P47", "Q183"),
        ("Q183", "P36", "Q64"),
        ("Q90", "P17", "Q142"),
        ("Q7186", "P27", "Q142"),
        ("Q7186", "P166", "Q38104"),
        ("Q209842", "P159", "Q90"),
        ("Q142", "P37", "Q150"),
        ("Q142", "P38", "Q4916"),
    ]:
        assert f in facts
    # Q46 (Europe), Q270 (Warsaw) and the P31 classes are not in the excerpt: dangling, dropped, counted
    assert not any(t == "Q46" or t == "Q270" for _, _, t in facts)
    assert world.metadata["load_report"]["dropped"]["triple_to_missing_item"] == 13
    assert "P31" not in {r.id for r in world.relations()}  # only had triples to missing classes


def test_time_and_quantity_literals(world):
    facts = _facts(world)
    expected = {
        ("Q7186", "P569", Literal("7 November 1867", "date")),
        ("Q7186", "P570", Literal("4 July 1934", "date")),
        ("Q142", "P571", Literal("843", "date")),
        ("Q209842", "P571", Literal("1150s", "date")),
        ("Q209842", "P576", Literal("18th century", "date")),
        ("Q209842", "P580", Literal("500 BC", "date")),
        ("Q142", "P1082", Literal("68000000", "quantity")),
        ("Q90", "P2046", Literal("105.4 square kilometre", "quantity")),  # unit label from the built-in table
        ("Q90", "P2044", Literal("35 metre", "quantity")),  # unit entity appears later in the dump
        ("Q90", "P2048", Literal("5 Q99999999", "quantity")),  # unknown unit: its id, never silently unitless
    }
    assert expected <= facts
    # the deprecated-rank birth date and the somevalue father are skipped
    assert ("Q7186", "P569", Literal("8 November 1867", "date")) not in facts
    assert not any(r == "P22" for _, r, _ in facts)


def test_default_blocklist_drops_ids_media_and_bookkeeping(world):
    relations = {r.id for r in world.relations()}
    for blocked in ("P41", "P18", "P214", "P213", "P646", "P8408", "P373", "P856"):
        assert blocked not in relations
    assert {"P41", "P18", "P94", "P154", "P373", "P910", "P1343", "P935", "P646", "P8408"} <= DEFAULT_BLOCKLIST
    assert "P31" not in DEFAULT_BLOCKLIST
    dropped = world.metadata["load_report"]["dropped"]
    assert dropped["blocked_property"] == 7
    assert dropped["blocked_datatype:external-id"] == 2  # P214 and P213 are not on the id list but are external-ids


def test_strings_are_opt_in():
    plain = load_wikidata_dump(FIXTURE)
    assert not any(t.tail_is_literal and t.tail.kind == "string" for t in plain.triples())
    w = load_wikidata_dump(FIXTURE, include_strings=True)
    strings = {(t.head, t.relation, t.tail) for t in w.triples() if t.tail_is_literal and t.tail.kind == "string"}
    # monolingual text only in the requested languages; the Commons category string is still blocked
    assert strings == {
        ("Q142", "P1448", Literal("French Republic", "string")),
        ("Q11573", "P5061", Literal("m", "string")),
    }


def test_allowlist_and_custom_blocklist():
    w = load_wikidata_dump(FIXTURE, relation_allowlist={"P36", "P17"})
    assert {t.relation for t in w.triples()} == {"P36", "P17"}
    # P31 stays readable for typing even when not allowed
    assert w.entity("Q7186").type == "person"
    w = load_wikidata_dump(FIXTURE, relation_blocklist=(), blocked_datatypes=())
    assert ("Q90", "P18", Literal("Paris Night.jpg", "string")) not in set(w.triples())  # strings still opt-in
    w = load_wikidata_dump(FIXTURE, relation_blocklist=(), blocked_datatypes=(), include_strings=True)
    assert Triple("Q90", "P18", Literal("Paris Night.jpg", "string")) in set(w.triples())


def test_relation_labels_from_dump_then_builtin_table(world):
    assert world.relation("P2936").label == "language used"  # property line in the dump
    assert world.relation("P17").label == "country"  # property line in the dump
    assert world.relation("P36").label == "capital"  # built-in table (no property line)


def test_description_corpus_linked_to_entities(world):
    assert world.num_documents == 10
    (doc,) = world.documents_of("Q90")
    assert doc.title == "Paris"
    assert doc.text == "Paris: capital and largest city of France. Also known as City of Light."


def test_languages_preference_and_max_entities():
    w = load_wikidata_dump(FIXTURE, languages=("de", "en"))
    assert w.entity("Q4115189").title == "Wikidata-Sandbox"
    assert w.entity("Q90").title == "Paris"
    w = load_wikidata_dump(FIXTURE, max_entities=3)
    assert list(w.entity_ids) == ["Q142", "Q90", "Q183"]
    assert w.metadata["load_report"]["counts"]["stopped_at_max_entities"] == 1


def test_malformed_line_reported_with_line_number_and_skipped(world, caplog):
    report = world.metadata["load_report"]
    assert report["malformed"] == {"bad JSON": 1}
    (err,) = report["errors"]
    assert err["line"] == BAD_LINE and err["file"].endswith("dump_excerpt.json")
    assert "bad JSON" in err["problem"]
    with caplog.at_level(logging.WARNING, logger="searchgym.world.loaders.common"):
        load_wikidata_dump(FIXTURE)
    assert f"dump_excerpt.json:{BAD_LINE}" in caplog.text


def test_on_error_raise_names_file_and_line():
    with pytest.raises(LoaderError, match=rf"dump_excerpt\.json:{BAD_LINE}: bad JSON"):
        load_wikidata_dump(FIXTURE, on_error="raise")


def test_malformed_claim_rejects_the_entity(tmp_path):
    good = json.loads(FIXTURE.read_text(encoding="utf-8").splitlines()[4].rstrip(","))  # Berlin
    bad = json.loads(json.dumps(good))
    bad["id"] = "Q1055"
    bad["claims"]["P17"][0]["mainsnak"]["datavalue"] = {"type": "time", "value": {"time": "yesterday", "precision": 11}}
    p = tmp_path / "dump.json"
    p.write_text("[\n" + json.dumps(good) + ",\n" + json.dumps(bad) + "\n]\n", encoding="utf-8")
    w = load_wikidata_dump(p)
    assert w.has_entity("Q64") and not w.has_entity("Q1055")
    assert w.metadata["load_report"]["errors"][0]["line"] == 3
    assert "malformed time 'yesterday'" in w.metadata["load_report"]["errors"][0]["problem"]
    with pytest.raises(LoaderError, match=r"dump\.json:3: entity Q1055: P17: malformed time"):
        load_wikidata_dump(p, on_error="raise")


def test_duplicate_entity_line_is_malformed(tmp_path):
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    p = tmp_path / "dump.json"
    p.write_text("\n".join(["[", lines[4], lines[4], "]"]) + "\n", encoding="utf-8")  # Berlin twice
    w = load_wikidata_dump(p)
    assert list(w.entity_ids) == ["Q64"]
    assert w.metadata["load_report"]["errors"][0]["line"] == 3
    with pytest.raises(LoaderError, match=r"dump\.json:3: duplicate entity Q64"):
        load_wikidata_dump(p, on_error="raise")


@pytest.mark.parametrize("suffix,opener", [(".gz", gzip.open), (".bz2", bz2.open)])
def test_compressed_dumps_give_the_same_world(tmp_path, world, suffix, opener):
    p = tmp_path / ("latest-all.json" + suffix)
    with open(FIXTURE, "rb") as src, opener(p, "wb") as dst:
        shutil.copyfileobj(src, dst)
    w = load_wikidata_dump(p, progress=True)
    assert list(w.triples()) == list(world.triples())
    assert list(w.entities()) == list(world.entities())
    assert w.metadata["load_report"]["errors"][0]["line"] == BAD_LINE


def test_truncated_compressed_file_is_an_error(tmp_path):
    p = tmp_path / "dump.json.gz"
    data = gzip.compress(FIXTURE.read_bytes())
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(LoaderError, match="truncated"):
        load_wikidata_dump(p)


def test_world_saves_and_loads_with_report(tmp_path, world):
    world.save(tmp_path / "w")
    again = load_world(tmp_path / "w")
    assert list(again.triples()) == list(world.triples())
    assert again.metadata["load_report"]["malformed"] == {"bad JSON": 1}


def test_bad_options_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="on_error"):
        load_wikidata_dump(FIXTURE, on_error="ignore")
    with pytest.raises(ValueError, match="max_entities"):
        load_wikidata_dump(FIXTURE, max_entities=0)
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_wikidata_dump(tmp_path / "missing.json.gz")


@pytest.mark.parametrize(
    "time,precision,expected",
    [
        ("+1952-03-11T00:00:00Z", 11, "11 March 1952"),
        ("+1952-03-11T00:00:00Z", 10, "March 1952"),
        ("+1952-03-11T00:00:00Z", 9, "1952"),
        ("+1952-00-00T00:00:00Z", 11, "1952"),  # day precision claimed but no day: fall back
        ("+1952-00-00T00:00:00Z", 8, "1950s"),
        ("+2000-00-00T00:00:00Z", 7, "20th century"),
        ("+2001-00-00T00:00:00Z", 6, "3rd millennium"),
        ("-0044-03-15T00:00:00Z", 11, "15 March 44 BC"),
        ("-13798000000-00-00T00:00:00Z", 3, "13798000000 BC"),
    ],
)
def test_time_formatting(time, precision, expected):
    assert format_wikidata_time({"time": time, "precision": precision}) == expected


def test_quantity_formatting():
    assert format_wikidata_quantity({"amount": "+8000000", "unit": "1"}) == "8000000"
    assert format_wikidata_quantity({"amount": "-3.5"}, "degree Celsius") == "-3.5 degree Celsius"
    with pytest.raises(ValueError, match="not a number"):
        format_wikidata_quantity({"amount": "lots"})
