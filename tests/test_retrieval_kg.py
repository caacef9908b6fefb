"""DynaSearcher-style KG lookup: entity matching, one-hop ranking, caps and bad input."""

from __future__ import annotations

import pytest

from searchgym.retrieval import KGLookup, format_triples
from searchgym.retrieval.kg import NO_TRIPLES
from searchgym.world import Literal, WorldBuilder


@pytest.fixture(scope="module")
def kg(tiny_world):
    return KGLookup(tiny_world)


def test_exact_entity_and_relation_rank_the_asked_fact_first(kg):
    lines = kg.lookup(["Merovia"], ["capital"])
    assert lines[0] == "(Merovia, capital, Ostrel)"
    # one hop in both directions: Merovia's out-edges and the edge into it
    assert set(lines) == {"(Merovia, capital, Ostrel)", "(Merovia, inception, 1204)", "(Tarsk, located in, Merovia)"}


@pytest.mark.parametrize("name", ["mEROVIA", "  merovia ", "Republic of Merovia", "Merovai", "Merovia republic"])
def test_case_alias_and_fuzzy_names_resolve(kg, tiny_world, name):
    assert [tiny_world.entity_ids[i] for i in kg.match_entities(name)] == ["E3"]


def test_partial_name_matches_every_namesake(kg):
    lines = kg.lookup(["Varn"], ["born"])
    assert set(lines) == {"(Alice Varn, place of birth, Tarsk)", "(Bob Varn, place of birth, Ostrel)"}


def test_relation_words_order_the_triples(kg):
    assert kg.lookup(["Tarsk"], ["headquarters"])[0] == "(Dura Labs, headquarters location, Tarsk)"
    assert kg.lookup(["Tarsk"], ["located"])[0] == "(Tarsk, located in, Merovia)"
    assert kg.lookup(["Tarsk"], [], query="who was born here")[0] == "(Alice Varn, place of birth, Tarsk)"


def test_literal_tails_are_printed_by_value(kg):
    assert kg.lookup(["Merovia"], ["inception"])[0] == "(Merovia, inception, 1204)"


def test_shared_edges_are_listed_once(kg):
    lines = kg.lookup(["Merovia", "Tarsk"], ["located in"])
    assert lines.count("(Tarsk, located in, Merovia)") == 1
    assert lines[0] == "(Tarsk, located in, Merovia)"


def test_unknown_entities_give_nothing(kg):
    assert kg.lookup(["Atlantis"], ["capital"]) == []
    assert kg.lookup([], ["capital"]) == []
    assert kg.lookup([""], []) == []
    assert format_triples([]) == NO_TRIPLES
    assert format_triples(["(a, b, c)", "(d, e, f)"]) == "(a, b, c)\n(d, e, f)"


def test_triple_and_token_caps(kg):
    assert len(kg.lookup(["Tarsk"], [], max_triples=1)) == 1
    lines = kg.lookup(["Tarsk"], [], max_tokens=8)
    assert sum(len(line.split()) for line in lines) <= 8 and lines


@pytest.fixture(scope="module")
def hub_world():
    b = WorldBuilder("hub")
    b.add_relation("member", "member of")
    b.add_relation("award", "award received")
    b.add_entity("H", "Grand Guild")
    for i in range(300):
        b.add_entity(f"P{i}", f"Person Number{i}")
        b.add_triple(f"P{i}", "member", "H")
    b.add_triple("H", "award", Literal("Golden Anvil"))
    return b.build()


def test_hub_results_are_capped_at_100_and_keep_the_relevant_fact(hub_world):
    kg = KGLookup(hub_world, max_scan=50)
    lines = kg.lookup(["grand guild"], ["award"])
    assert lines[0] == "(Grand Guild, award received, Golden Anvil)"
    assert len(kg.lookup(["grand guild"], ["member"])) == 50
    assert len(KGLookup(hub_world).lookup(["grand guild"], ["member"])) == 100
    assert sum(len(s.split()) for s in KGLookup(hub_world).lookup(["grand guild"], [], max_triples=1000)) <= 1024


def test_bad_arguments_are_rejected(kg, tiny_world):
    with pytest.raises(TypeError, match="entities must be a list"):
        kg.lookup("Merovia", [])
    with pytest.raises(TypeError, match="relations must be a list"):
        kg.lookup(["Merovia"], [3])
    with pytest.raises(TypeError, match="query must be a string"):
        kg.lookup(["Merovia"], [], query=None)
    with pytest.raises(ValueError, match="max_triples"):
        kg.lookup(["Merovia"], [], max_triples=0)
    with pytest.raises(ValueError, match="fuzzy_cutoff"):
        KGLookup(tiny_world, fuzzy_cutoff=0)


def test_default_world_lookup_finds_entity_facts(default_world):
    kg = KGLookup(default_world)
    ents = [
        e
        for e in list(default_world.entities())[:: max(1, default_world.num_entities // 10)]
        if default_world.out_edges(e.id)
    ]
    for e in ents:
        edge = default_world.out_edges(e.id)[0]
        lines = kg.lookup([e.title.lower()], [edge.relation.label])
        assert 0 < len(lines) <= 100
        assert f"({e.title}, {edge.relation.label}, {edge.target.title})" in lines
