"""World format version 2 (column files): exact round trip, old version 1 still loads, clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from searchgym.world import Literal, World, WorldBuilder, WorldFormatError, load_world, save_world
from searchgym.world.storage import VERSION


def _same(a: World, b: World) -> None:
    assert repr(a) == repr(b)
    assert list(a.entities()) == list(b.entities())
    assert list(a.triples()) == list(b.triples())
    assert list(a.documents()) == list(b.documents())
    assert a.relations() == b.relations()
    assert a.metadata == b.metadata


def _odd_world() -> World:
    """Non-ASCII, empty strings, a lone surrogate, entities without aliases, an unlinked document."""
    b = WorldBuilder("odd", metadata={"source": "test", "ünï": [1, 2]})
    b.add_entity("Q1", "Zürich", aliases=["Zueri", "苏黎世"], description="", type="city")
    b.add_entity("Q2", "Ελλάδα 🇬🇷", description="a country\nwith lines", type="")
    b.add_entity("Q3", "bad \udc80 surrogate")
    b.add_relation("P1", "located in")
    b.add_triple("Q1", "P1", "Q2")
    b.add_triple("Q2", "P1", Literal("1821-03-25", kind="date"))
    b.add_document("D1", "Zürich", "Zürich liegt in der Schweiz.", entity="Q1")
    b.add_document("D2", "", "", entity=None)
    return b.build()


def test_version_2_round_trip_is_exact(tiny_world, tmp_path):
    for world in (tiny_world, _odd_world()):
        d = tmp_path / world.name
        world.save(d)
        m = json.loads((d / "manifest.json").read_text())
        assert m["version"] == VERSION == 2 and "doc_texts.utf8" in m["files"]
        assert not list(d.glob("*.jsonl")) and not list(d.glob("*.tmp"))
        _same(load_world(d), world)


def test_version_1_worlds_still_load(tiny_world, tmp_path):
    save_world(tiny_world, tmp_path / "v1", version=1)
    assert json.loads((tmp_path / "v1" / "manifest.json").read_text())["version"] == 1
    _same(load_world(tmp_path / "v1"), tiny_world)
    with pytest.raises(ValueError, match="version 3 does not exist"):
        save_world(tiny_world, tmp_path / "v3", version=3)


def test_unknown_version_is_refused_with_the_versions_read(tiny_world, tmp_path):
    tiny_world.save(tmp_path / "w")
    mf = tmp_path / "w" / "manifest.json"
    mf.write_text(json.dumps({**json.loads(mf.read_text()), "version": 3}))
    with pytest.raises(WorldFormatError, match="version 3 is not supported.*versions 1, 2.*upgrade searchgym"):
        load_world(tmp_path / "w")


@pytest.fixture()
def saved(tiny_world, tmp_path):
    d = tmp_path / "w"
    tiny_world.save(d)
    return d


def _rewrite(d, name: str, data: bytes) -> None:
    """Replace a file and fix its size and checksum in the manifest, so only the column checks can catch it."""
    import hashlib

    (d / name).write_bytes(data)
    m = json.loads((d / "manifest.json").read_text())
    m["files"][name] = len(data)
    m["files_sha256"][name] = hashlib.sha256(data).hexdigest()
    (d / "manifest.json").write_text(json.dumps(m))


def test_missing_and_truncated_column_files(saved):
    p = saved / "doc_texts.utf8"
    p.write_bytes(p.read_bytes()[:-10])
    with pytest.raises(WorldFormatError, match="doc_texts.utf8.*truncated"):
        load_world(saved)
    p.unlink()
    with pytest.raises(WorldFormatError, match="doc_texts.utf8 is missing"):
        load_world(saved)


def test_offsets_that_do_not_fit_the_text(saved):
    _rewrite(saved, "entity_titles.utf8", (saved / "entity_titles.utf8").read_bytes() + b"extra")
    with pytest.raises(WorldFormatError, match="entity_titles.offsets.npy does not partition"):
        load_world(saved)


def test_wrong_row_count_and_bad_utf8(saved, tmp_path):
    import io

    buf = io.BytesIO()
    np.save(buf, np.zeros(3, dtype=np.int64))
    _rewrite(saved, "doc_ids.offsets.npy", buf.getvalue())
    with pytest.raises(WorldFormatError, match=r"doc_ids.offsets.npy has shape \(3,\)"):
        load_world(saved)
    _rewrite(saved, "relation_labels.utf8", b"\xff" + (saved / "relation_labels.utf8").read_bytes()[1:])
    with pytest.raises(WorldFormatError, match="relation_labels.utf8 is not valid UTF-8"):
        load_world(saved)


def test_document_linked_outside_the_entity_table(saved):
    import io

    ents = np.load(saved / "doc_entities.npy")
    ents[0] = 99
    buf = io.BytesIO()
    np.save(buf, ents)
    _rewrite(saved, "doc_entities.npy", buf.getvalue())
    with pytest.raises(WorldFormatError, match="doc_entities.npy: a document links to an entity row outside"):
        load_world(saved)


def test_moved_world_names_raise_errors_naming_their_new_home():
    """Storage reads and writes tables only; the World's load/save functions and the renamed synthetic
    modules say where they live now."""
    import importlib

    import searchgym.world.storage as storage

    for name in ("load_world", "save_world"):
        with pytest.raises(AttributeError, match=f"from searchgym.world import {name}"):
            getattr(storage, name)
    for old, new in (("synthetic_names", "synthetic_name_forge"), ("synthetic_naming", "synthetic_titles")):
        with pytest.raises(ModuleNotFoundError, match=f"searchgym.world.{new}"):
            importlib.import_module(f"searchgym.world.{old}")


def test_world_columns_round_trip(tmp_path):
    """A world's tables (World.columns) written and read back give an equal world."""
    from searchgym.world.storage import read_columns, write_columns

    world = WorldBuilder("cols")
    world.add_entity("Q1", "Alpha", aliases=["A"], type="city")
    world.add_entity("Q2", "Beta")
    world.add_triple("Q1", "P1", "Q2")
    world.add_triple("Q2", "P2", Literal("1921", "date"))
    world.add_document("D1", "Alpha", "Alpha is a city.", entity="Q1")
    w = world.build()
    write_columns(w.columns(), tmp_path / "w")
    back = World.from_columns(read_columns(tmp_path / "w"))
    assert list(back.triples()) == list(w.triples())
    assert [e for e in back.entities()] == [e for e in w.entities()]
    assert back.document("D1") == w.document("D1")
