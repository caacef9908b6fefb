"""World / WorldBuilder API and the on-disk format, including corrupt and partial directories."""

from __future__ import annotations

import json

import numpy as np
import pytest

from searchgym.world import (
    Document,
    Literal,
    Relation,
    Triple,
    World,
    WorldBuilder,
    WorldError,
    WorldFormatError,
    load_world,
    normalize_name,
    save_world,
)


def _ids(entities):
    return [e.id for e in entities]


# ------------------------------------------------------------------ lookups
def test_find_entities_exact_case_insensitive_and_alias(tiny_world):
    w = tiny_world
    assert _ids(w.find_entities("Alice Varn")) == ["E1"]
    assert _ids(w.find_entities("  alice   VARN ")) == ["E1"]
    assert w.find_entities("alice varn", case_insensitive=False) == []
    assert _ids(w.find_entities("A. Varn")) == ["E1"]
    assert _ids(w.find_entities("republic of merovia")) == ["E3"]
    assert w.find_entities("Nowhere") == []
    assert normalize_name("  Foo\tBAR ") == "foo bar"


def test_same_name_entities_are_all_returned_title_matches_first():
    b = WorldBuilder("dup")
    b.add_entity("C1", "Ostrel", description="city in Merovia", type="location")
    b.add_entity("C2", "Ostrel", description="city in Kelrand", type="location")
    b.add_entity("P1", "Ostrel Varn", aliases=["Ostrel"], type="person")
    b.add_entity("C3", "ostrel", description="village", type="location")
    w = b.build()
    # exact titles first, then titles equal after case-folding, then alias matches
    assert _ids(w.find_entities("Ostrel")) == ["C1", "C2", "C3", "P1"]
    assert _ids(w.find_entities("Ostrel", case_insensitive=False)) == ["C1", "C2", "P1"]


def test_entity_access_and_unknown_ids(tiny_world):
    w = tiny_world
    e = w.entity("E3")
    assert (e.title, e.aliases, e.type) == ("Merovia", ("Republic of Merovia",), "location")
    assert e.names == ("Merovia", "Republic of Merovia")
    assert w.title("E2") == "Tarsk"
    assert w.has_entity("E1") and not w.has_entity("E42")
    assert w.entity_at(w.entity_index("E5")).id == "E5"
    with pytest.raises(KeyError, match="E42"):
        w.entity("E42")
    assert w.relation("born_in") == Relation("born_in", "place of birth")
    with pytest.raises(KeyError, match="nope"):
        w.relation("nope")
    assert [r.id for r in w.relations()] == ["born_in", "located_in", "capital", "founded", "hq"]


# -------------------------------------------------------------------- edges
def test_out_in_and_both_neighbours(tiny_world):
    w = tiny_world
    out = w.neighbors("E2", "out")
    assert [(x.relation.id, x.target.id, x.direction) for x in out] == [("located_in", "E3", "out")]
    inc = w.neighbors("E2", "in")
    assert sorted((x.relation.id, x.target.id) for x in inc) == [("born_in", "E1"), ("hq", "E6")]
    assert all(x.direction == "in" and x.source.id == "E2" for x in inc)
    both = w.neighbors("E2")
    assert both[:1] == out and len(both) == 3
    assert w.degree("E2") == 3
    with pytest.raises(ValueError, match="direction"):
        w.neighbors("E2", "sideways")  # type: ignore[arg-type]


def test_literal_tails(tiny_world):
    w = tiny_world
    lits = [x for x in w.out_edges("E3") if x.target_is_literal]
    assert len(lits) == 1
    assert lits[0].target == Literal("1204", "date") and lits[0].target.title == "1204"
    assert lits[0].as_triple() == Triple("E3", "founded", Literal("1204", "date"))
    assert lits[0].as_triple().tail_is_literal
    in_edge = w.in_edges("E3")[0]
    assert in_edge.as_triple() == Triple("E2", "located_in", "E3")
    with pytest.raises(ValueError, match="kind"):
        Literal("x", "colour")


def test_fast_paths_agree_with_edges(tiny_world):
    w = tiny_world
    arr = w.triple_array
    assert arr.shape == (w.num_triples, 3) and arr.dtype == np.int64
    with pytest.raises(ValueError):
        arr[0, 0] = 5  # read-only view
    i = w.entity_index("E3")
    tails = [w.node_at(int(arr[row, 2])) for row in w.out_rows(i)]
    assert tails == [x.target for x in w.out_edges("E3")]
    assert [w.relation_at(int(arr[row, 1])).id for row in w.in_rows(i)] == ["located_in"]
    assert list(w.triples())[0] == Triple("E1", "born_in", "E2")


# ---------------------------------------------------------------- documents
def test_documents_of_and_unlinked_documents(tiny_world):
    w = tiny_world
    (doc,) = w.documents_of("E2")
    assert doc.title == "Tarsk" and doc.entity == "E2" and "Merovia" in doc.text
    assert w.has_document("E1")
    assert w.document("D99") == Document("D99", "Weather", "It rains often in the northern hills.", None)
    assert w.num_documents == 7 and len(w.doc_titles) == len(w.doc_texts) == len(w.doc_ids) == 7
    assert w.document_at(0).id == "D0"
    with pytest.raises(KeyError, match="D1000"):
        w.document("D1000")


def test_entity_without_document():
    b = WorldBuilder()
    b.add_entity("A", "Alpha")
    w = b.build()
    assert not w.has_document("A") and w.documents_of("A") == []


# ----------------------------------------------------------------- analysis
def test_to_networkx(tiny_world):
    g = tiny_world.to_networkx()
    assert g.number_of_nodes() == 6 + 1  # six entities and the literal 1204
    assert g.number_of_edges() == tiny_world.num_triples
    assert g.has_edge("E1", "E2", key="born_in") and g.edges["E1", "E2", "born_in"]["label"] == "place of birth"
    g2 = tiny_world.to_networkx(include_literals=False)
    assert g2.number_of_nodes() == 6 and g2.number_of_edges() == tiny_world.num_triples - 1


def test_stats(tiny_world):
    s = tiny_world.stats()
    assert (s.entities, s.relations, s.triples, s.literal_triples) == (6, 5, 6, 1)
    assert (s.documents, s.linked_documents) == (7, 6)
    assert s.entity_types == {"location": 3, "person": 2, "organisation": 1}
    assert s.top_relations[0] == ("place of birth", 2)
    assert s.max_out_degree == 2 and s.mean_out_degree == pytest.approx(1.0)
    assert json.loads(json.dumps(s.as_dict()))["triples"] == 6


# ------------------------------------------------------------------ builder
def test_dangling_triple_raises_naming_the_entity():
    b = WorldBuilder()
    b.add_entity("A", "Alpha")
    b.add_triple("A", "knows", "GHOST")
    with pytest.raises(WorldError, match="GHOST.*drop_dangling"):
        b.build()


def test_drop_dangling_counts_what_it_dropped():
    b = WorldBuilder()
    b.add_entity("A", "Alpha")
    b.add_entity("B", "Beta")
    b.add_triple("A", "knows", "B")
    b.add_triple("A", "knows", "GHOST")
    b.add_triple("GHOST", "knows", "B")
    b.add_document("d1", "Alpha", "text", entity="GHOST")
    w = b.build(drop_dangling=True)
    assert w.num_triples == 1
    assert b.dropped == {"dangling_triple": 2, "dangling_document_link": 1}
    assert w.metadata["dropped"]["dangling_triple"] == 2
    assert w.document("d1").entity is None


def test_dangling_document_link_raises():
    b = WorldBuilder()
    b.add_document("d1", "T", "x", entity="NOPE")
    with pytest.raises(WorldError, match="NOPE"):
        b.build()


def test_duplicates_and_empty_titles_are_rejected():
    b = WorldBuilder()
    b.add_entity("A", "Alpha")
    with pytest.raises(WorldError, match="duplicate entity id 'A'"):
        b.add_entity("A", "Again")
    with pytest.raises(WorldError, match="empty title"):
        b.add_entity("B", "")
    b.add_document("d", "t", "x")
    with pytest.raises(WorldError, match="duplicate document id 'd'"):
        b.add_document("d", "t", "y")


def test_repeated_triples_are_deduplicated_and_counted():
    b = WorldBuilder()
    b.add_entity("A", "Alpha", aliases=["Alpha", "Al", "Al", ""])
    b.add_entity("B", "Beta")
    for _ in range(3):
        b.add_triple("A", "r", "B")
    b.add_triple("A", "r", Literal("5", "quantity"))
    b.add_triple("B", "r", Literal("5", "quantity"))
    w = b.build()
    assert w.num_triples == 3 and b.dropped["duplicate_triple"] == 2
    assert w.entity("A").aliases == ("Al",)  # title and duplicates dropped from aliases
    assert len({int(t) for t in w.triple_array[:, 2] if t < 0}) == 1  # literal interned once
    kept = WorldBuilder()
    kept.add_entity("A", "Alpha")
    kept.add_triple("A", "r", "A")
    kept.add_triple("A", "r", "A")
    assert kept.build(dedupe=False).num_triples == 2


def test_world_constructor_rejects_inconsistent_columns():
    base = dict(
        name="x",
        entity_ids=["a", "a"],
        titles=["A", "B"],
        aliases=[(), ()],
        descriptions=["", ""],
        types=["other", "other"],
        relation_ids=[],
        relation_labels=[],
        literal_values=[],
        literal_kinds=[],
        triples=np.zeros((0, 3), dtype=np.int64),
        doc_ids=[],
        doc_titles=[],
        doc_texts=[],
        doc_entities=np.zeros(0, dtype=np.int64),
    )
    with pytest.raises(WorldError, match="duplicate entity ids"):
        World(**base)
    with pytest.raises(WorldError, match="different lengths"):
        World(**{**base, "entity_ids": ["a", "b"], "titles": ["A"]})
    with pytest.raises(WorldError, match="outside"):
        World(
            **{
                **base,
                "entity_ids": ["a", "b"],
                "relation_ids": ["r"],
                "relation_labels": ["r"],
                "triples": np.array([[0, 0, 7]]),
            }
        )


# ------------------------------------------------------------------ storage
def test_save_load_round_trip(tiny_world, tmp_path):
    tiny_world.save(tmp_path / "w")
    w = World.load(tmp_path / "w")
    assert repr(w) == repr(tiny_world)
    assert list(w.entities()) == list(tiny_world.entities())
    assert list(w.triples()) == list(tiny_world.triples())
    assert list(w.documents()) == list(tiny_world.documents())
    assert w.relations() == tiny_world.relations()
    assert _ids(w.find_entities("a. varn")) == ["E1"]
    manifest = json.loads((tmp_path / "w" / "manifest.json").read_text())
    assert manifest["format"] == "searchgym-world" and manifest["counts"]["triples"] == 6


def test_resave_over_an_existing_world(tiny_world, tmp_path):
    tiny_world.save(tmp_path / "w")
    tiny_world.save(tmp_path / "w")
    assert load_world(tmp_path / "w").num_entities == 6
    assert not list((tmp_path / "w").glob("*.tmp"))


@pytest.fixture()
def saved(tiny_world, tmp_path):
    """A version-1 (JSON Lines) world as an older searchgym wrote it, without checksums (so damage
    reaches the parse: its failure paths are tested here, version 2's in tests/test_world_storage.py,
    checksums in tests/hostile/test_server_and_checksums.py)."""
    from searchgym.core.checksums import CACHE_NAME

    d = tmp_path / "w"
    save_world(tiny_world, d, version=1)
    m = json.loads((d / "manifest.json").read_text())
    del m["files_sha256"]
    (d / "manifest.json").write_text(json.dumps(m))
    (d / CACHE_NAME).unlink()
    return d


def _manifest(d):
    return json.loads((d / "manifest.json").read_text())


def _write_manifest(d, m):
    (d / "manifest.json").write_text(json.dumps(m))


def test_missing_directory(tmp_path):
    with pytest.raises(WorldFormatError, match="does not exist.*world build"):
        load_world(tmp_path / "nowhere")


def test_missing_manifest(saved):
    (saved / "manifest.json").unlink()
    with pytest.raises(WorldFormatError, match="no manifest.json"):
        load_world(saved)


def test_manifest_not_json(saved):
    (saved / "manifest.json").write_text("{not json")
    with pytest.raises(WorldFormatError, match="manifest.json is not valid JSON"):
        load_world(saved)


def test_wrong_version_and_format(saved):
    m = _manifest(saved)
    _write_manifest(saved, {**m, "version": 99})
    with pytest.raises(WorldFormatError, match="version 99 is not supported"):
        load_world(saved)
    _write_manifest(saved, {**m, "format": "something-else"})
    with pytest.raises(WorldFormatError, match="format is 'something-else'"):
        load_world(saved)


def test_missing_file(saved):
    (saved / "relations.jsonl").unlink()
    with pytest.raises(WorldFormatError, match="relations.jsonl is missing"):
        load_world(saved)


def test_truncated_file(saved):
    p = saved / "documents.jsonl"
    p.write_bytes(p.read_bytes()[:-40])
    with pytest.raises(WorldFormatError, match="documents.jsonl.*truncated"):
        load_world(saved)


def test_bad_json_line_names_file_and_line(saved):
    p = saved / "entities.jsonl"
    lines = p.read_text().splitlines(keepends=True)
    lines[2] = "#" * (len(lines[2]) - 1) + "\n"  # same size, so only the parse can catch it
    p.write_text("".join(lines))
    with pytest.raises(WorldFormatError, match="entities.jsonl: line 3 is not valid JSON"):
        load_world(saved)


def test_row_missing_a_field(saved):
    p = saved / "relations.jsonl"
    lines = p.read_text().splitlines(keepends=True)
    row = json.loads(lines[0])
    bad = json.dumps({"id": row["id"], "lbl": row["label"]}, separators=(",", ":"))
    lines[0] = bad.ljust(len(lines[0]) - 1) + "\n"
    p.write_text("".join(lines))
    m = _manifest(saved)
    m["files"]["relations.jsonl"] = p.stat().st_size
    _write_manifest(saved, m)
    with pytest.raises(WorldFormatError, match="lacks field 'label'"):
        load_world(saved)


def test_row_count_disagrees_with_manifest(saved):
    m = _manifest(saved)
    m["counts"]["entities"] = 7
    _write_manifest(saved, m)
    with pytest.raises(WorldFormatError, match="has 6 rows but manifest.json says 7"):
        load_world(saved)


def test_triples_array_wrong_shape(saved):
    np.save(saved / "triples.npy", np.zeros((6, 2), dtype=np.int64))
    m = _manifest(saved)
    m["files"]["triples.npy"] = (saved / "triples.npy").stat().st_size
    _write_manifest(saved, m)
    with pytest.raises(WorldFormatError, match="triples.npy has shape"):
        load_world(saved)


def test_triples_pointing_outside_tables(saved):
    np.save(saved / "triples.npy", np.array([[0, 0, 99]] * 6, dtype=np.int64))
    m = _manifest(saved)
    m["files"]["triples.npy"] = (saved / "triples.npy").stat().st_size
    _write_manifest(saved, m)
    with pytest.raises(WorldFormatError, match="outside the entity/literal tables"):
        load_world(saved)


def test_document_linked_to_unknown_entity(saved):
    p = saved / "documents.jsonl"
    text = p.read_text().replace('"entity":"E1"', '"entity":"Z1"', 1)
    p.write_text(text)
    with pytest.raises(WorldFormatError, match="unknown entity 'Z1'"):
        load_world(saved)


def test_manifest_that_is_not_an_object(saved):
    (saved / "manifest.json").write_text("[]")
    with pytest.raises(WorldFormatError, match="not a JSON object"):
        load_world(saved)


@pytest.mark.parametrize("drop", ["counts", "files"])
def test_manifest_without_its_tables(saved, drop):
    m = _manifest(saved)
    del m[drop]
    _write_manifest(saved, m)
    with pytest.raises(WorldFormatError, match="lacks its 'files'/'counts' tables"):
        load_world(saved)


def test_manifest_not_listing_a_file(saved):
    m = _manifest(saved)
    del m["files"]["entities.jsonl"]
    _write_manifest(saved, m)
    (saved / "entities.jsonl").unlink()
    with pytest.raises(WorldFormatError, match="does not list entities.jsonl"):
        load_world(saved)


def test_manifest_with_a_bad_count(saved):
    m = _manifest(saved)
    m["counts"]["triples"] = "six"
    _write_manifest(saved, m)
    with pytest.raises(WorldFormatError, match="counts.triples"):
        load_world(saved)


def test_row_that_is_not_an_object(saved):
    p = saved / "relations.jsonl"
    lines = p.read_text().splitlines(keepends=True)
    lines[1] = "[1]".ljust(len(lines[1]) - 1) + "\n"
    p.write_text("".join(lines))
    with pytest.raises(WorldFormatError, match="row 2 is not a JSON object"):
        load_world(saved)


def test_malformed_aliases_field(saved):
    p = saved / "entities.jsonl"
    text = p.read_text()
    bad = text.replace('"aliases":[]', '"aliases":7', 1)
    bad = bad.replace('"description":"city"', '"description":"city"' + " " * (len(text) - len(bad)), 1)
    assert len(bad) == len(text)
    p.write_text(bad)
    with pytest.raises(WorldFormatError, match="malformed 'aliases'"):
        load_world(saved)


def test_invalid_utf8(saved):
    p = saved / "relations.jsonl"
    data = bytearray(p.read_bytes())
    data[3] = 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(WorldFormatError, match="not valid UTF-8"):
        load_world(saved)
