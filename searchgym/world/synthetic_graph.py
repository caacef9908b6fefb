"""Graph phase of the synthetic world: entities as integer rows, facts as integer triples.

:class:`GraphGenerator` allocates entity rows per kind (countries, cities, people, ...), draws their
attributes and links (with lifetimes, so a novel is written while its author lives), then calls
the naming (:mod:`.synthetic_naming`) and article (:mod:`.synthetic_docs`) phases and freezes the
result into a :class:`~searchgym.world.world.World`. Each phase draws from its own seeded RNG.
"""

from __future__ import annotations

import random
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import asdict
from typing import TYPE_CHECKING

import numpy as np

from . import synthetic_text as tx
from .synthetic_docs import documents
from .synthetic_naming import descriptions, names
from .synthetic_schema import HIDEABLE, LAST_YEAR, OCC_INDEX, OCCUPATIONS, RELATIONS, TYPE_OF_KIND
from .world import World

if TYPE_CHECKING:
    from .synthetic import SyntheticConfig

__all__ = ["GraphGenerator", "FastRandom"]


class FastRandom(random.Random):
    """``random.Random`` whose integer draws use one ``random()`` call each (about 3x faster than
    the rejection-sampling originals; the bias of 2**-53 is irrelevant here). Still fully
    determined by the seed."""

    def randint(self, a: int, b: int) -> int:
        """Uniform integer in ``[a, b]``."""
        return a + int(self.random() * (b - a + 1))

    def randrange(self, start: int, stop: int | None = None) -> int:  # type: ignore[override]  # no step argument
        """Uniform integer in ``[0, start)`` or ``[start, stop)`` (no step)."""
        if stop is None:
            return int(self.random() * start)
        return start + int(self.random() * (stop - start))

    def choice(self, seq):
        """A uniformly chosen element of a non-empty sequence."""
        return seq[int(self.random() * len(seq))]

    def shuffle(self, x) -> None:  # type: ignore[override]  # no 3.10 `random=` argument
        """Fisher-Yates shuffle in place."""
        rand = self.random
        for i in range(len(x) - 1, 0, -1):
            j = int(rand() * (i + 1))
            x[i], x[j] = x[j], x[i]


class GraphGenerator:
    """One generation run: integer-coded graph first, then names, descriptions and articles."""

    # filled by synthetic_naming.names / .descriptions (after the graph is built)
    titles: list[str]
    aliases: list[tuple[str, ...]]
    family_name: list[str]
    descs: list[str]

    def __init__(self, cfg: "SyntheticConfig", seed: int, progress: bool) -> None:
        self.cfg = cfg
        self.seed = seed
        self.progress = progress
        self.kind: list[str] = []
        self.h = array("q")
        self.r = array("q")
        self.t = array("q")
        self.hid = bytearray()
        self.rel_row = {pid: k for k, (pid, _) in enumerate(RELATIONS)}
        self.hideable_rows = frozenset(self.rel_row[p] for p in HIDEABLE)
        self.lit_index: dict[tuple[str, str], int] = {}
        self.lit_values: list[str] = []
        self.lit_kinds: list[str] = []
        self.mentions: dict[int, list[tuple[int, int]]] = {}
        self._mention_count: Counter = Counter()
        self._hide_rng = self.rng("hide")

    # ----------------------------------------------------------- primitives
    def rng(self, phase: str) -> random.Random:
        """An RNG private to one generation phase (changing one phase leaves the others intact)."""
        return FastRandom(f"searchgym-synthetic:{self.seed}:{phase}")

    def alloc(self, kind: str, n: int) -> range:
        """Reserve ``n`` consecutive entity rows of ``kind``."""
        start = len(self.kind)
        self.kind.extend([kind] * n)
        return range(start, start + n)

    def fact(self, h: int, pid: str, t: int) -> None:
        """Add an entity-valued fact; hideable facts may move to the tail's article."""
        r = self.rel_row[pid]
        self.h.append(h)
        self.r.append(r)
        self.t.append(t)
        hidden = 0
        if r in self.hideable_rows and self._hide_rng.random() < self.cfg.other_document_rate:
            key = (t, r)
            if self._mention_count[key] < self.cfg.max_list_mentions:
                self._mention_count[key] += 1
                self.mentions.setdefault(t, []).append((r, h))
                hidden = 1
        self.hid.append(hidden)

    def literal(self, h: int, pid: str, value: str, kind: str) -> None:
        """Add a literal-valued fact (always stated in the head's article)."""
        key = (kind, value)
        j = self.lit_index.get(key)
        if j is None:
            j = self.lit_index[key] = len(self.lit_values)
            self.lit_values.append(value)
            self.lit_kinds.append(kind)
        self.h.append(h)
        self.r.append(self.rel_row[pid])
        self.t.append(-j - 1)
        self.hid.append(0)

    @staticmethod
    def date(rng: random.Random, year: int) -> str:
        """A day in ``year`` written as prose and as the literal value (``12 March 1921``)."""
        return f"{rng.randint(1, 28)} {tx.MONTHS[rng.randrange(12)]} {year}"

    # ------------------------------------------------------------ structure
    def run(self) -> World:
        """Generate the graph, names, descriptions and articles; return the frozen World."""
        cfg = self.cfg
        self.countries = self.alloc("country", cfg.num_countries)
        self.regions = self.alloc("region", cfg.num_regions)
        self.cities = self.alloc("city", cfg.num_cities)
        self.languages = self.alloc("language", cfg.num_languages)
        self.people = self.alloc("person", cfg.num_people)
        self.universities = self.alloc("university", cfg.num_universities)
        self.companies = self.alloc("company", cfg.num_companies)
        self.publishers = self.alloc("publisher", cfg.num_publishers)
        self.museums = self.alloc("museum", cfg.num_museums)
        self.bands = self.alloc("band", cfg.num_bands)
        self.clubs = self.alloc("club", cfg.num_clubs)
        self.novels = self.alloc("novel", cfg.num_novels)
        self.films = self.alloc("film", cfg.num_films)
        self.albums = self.alloc("album", cfg.num_albums)
        self.paintings = self.alloc("painting", cfg.num_paintings)
        self.wars = self.alloc("war", cfg.num_wars)
        self.battles = self.alloc("battle", cfg.num_battles)
        self.festivals = self.alloc("festival", cfg.num_festivals)
        self.treaties = self.alloc("treaty", cfg.num_treaties)
        self.awards = self.alloc("award", cfg.num_awards)
        n = len(self.kind)
        self.country_of = [-1] * n  # country entity index for places, people, organisations
        self.place_of = [-1] * n  # city of an organisation / event
        self.year_of = [0] * n  # inception / publication / event year
        steps = (
            self._geography,
            self._people,
            self._organisations,
            self._works,
            self._events,
            self._awards,
            self._personal_links,
        )
        for step in steps:
            step()
        names(self)
        descriptions(self)
        docs = documents(self)
        return self._freeze(docs)

    def _geography(self) -> None:
        rng = self.rng("geography")
        countries, regions, cities = self.countries, self.regions, self.cities
        nc = len(countries)
        self.regions_of: list[list[int]] = [[] for _ in range(nc)]
        for k, reg in enumerate(regions):
            c = k if k < nc else rng.randrange(nc)
            self.regions_of[c].append(reg)
            self.country_of[reg] = countries[c]
            self.fact(reg, "P131", countries[c])
        self.cities_of_region: dict[int, list[int]] = {reg: [] for reg in regions}
        self.cities_of: list[list[int]] = [[] for _ in range(nc)]
        self.region_of_city: dict[int, int] = {}
        for k, city in enumerate(cities):
            reg = regions[k] if k < len(regions) else regions[rng.randrange(len(regions))]
            self.cities_of_region[reg].append(city)
            self.region_of_city[city] = reg
            c = self.country_of[reg]
            self.country_of[city] = c
            self.cities_of[c - countries.start].append(city)
            self.fact(city, "P131", reg)
        self.population = {city: int(rng.lognormvariate(9.5, 1.1)) + 200 for city in cities}
        self.capital: dict[int, int] = {}
        for ci, c in enumerate(countries):
            cap = rng.choice(self.cities_of[ci])
            self.capital[c] = cap
            self.population[cap] *= 4
            self.fact(c, "P36", cap)
            self.fact(cap, "P1376", c)
            self.literal(c, "P571", str(rng.randint(1150, 1950)), "date")
            self.literal(c, "P2046", str(int(rng.lognormvariate(10.5, 0.8))), "quantity")
        for reg in regions:
            seat = rng.choice(self.cities_of_region[reg])
            self.fact(reg, "P36", seat)
            self.fact(seat, "P1376", reg)
        for city in cities:
            self.literal(city, "P1082", str(self.population[city]), "quantity")
        for ci, c in enumerate(countries):
            pop = sum(self.population[x] for x in self.cities_of[ci])
            self.literal(c, "P1082", str(int(pop * rng.uniform(1.5, 3.0))), "quantity")
        langs = self.languages
        self.language_of: dict[int, int] = {}
        for ci, c in enumerate(countries):
            lang = langs[ci] if ci < len(langs) else langs[rng.randrange(len(langs))]
            self.language_of[c] = lang
            self.fact(c, "P37", lang)

    def _random_city(self, rng: random.Random, country: int | None = None, p_home: float = 0.9) -> int:
        if country is not None and rng.random() < p_home:
            pool = self.cities_of[country - self.countries.start]
            return pool[int(rng.random() * len(pool))]
        return self.cities[int(rng.random() * len(self.cities))]

    def _people(self) -> None:
        rng = self.rng("people")
        people = self.people
        n = len(people)
        occ = rng.choices(range(len(OCCUPATIONS)), weights=[w for _, w in OCCUPATIONS], k=n)
        self.occ = occ
        self.birth = [0] * n
        self.death = [0] * n
        self.female = [False] * n
        self.birth_city = [0] * n
        countries = self.countries
        for k, p in enumerate(people):
            b = rng.randint(1760, 2002)
            d = b + rng.randint(30, 98)
            d = d if d <= LAST_YEAR else 0
            self.birth[k], self.death[k] = b, d
            self.female[k] = rng.random() < 0.5
            c = countries[int(rng.random() * len(countries))]
            self.country_of[p] = c
            bc = self._random_city(rng, c)
            self.birth_city[k] = bc
            self.literal(p, "P569", self.date(rng, b), "date")
            self.fact(p, "P19", bc)
            self.fact(p, "P27", c)
            if d:
                self.literal(p, "P570", self.date(rng, d), "date")
                u = rng.random()
                dc = bc if u < 0.5 else self._random_city(rng, c)
                self.fact(p, "P20", dc)
            if rng.random() < 0.3:
                self.fact(p, "P1412", self.language_of[c])
        # per occupation: people sorted by birth year, for "who was alive in year Y" draws
        self.by_occ: list[list[int]] = [[] for _ in OCCUPATIONS]
        order = sorted(range(n), key=lambda k: (self.birth[k], k))
        for k in order:
            self.by_occ[occ[k]].append(people[k])
        self.occ_births = [[self.birth[p - people.start] for p in pool] for pool in self.by_occ]

    def pick_alive(self, rng: random.Random, occupation: str, year: int, min_age: int, max_age: int) -> int | None:
        """A person of ``occupation`` aged ``min_age``–``max_age`` in ``year`` (None if nobody fits)."""
        o = OCC_INDEX[occupation]
        births = self.occ_births[o]
        lo = bisect_left(births, year - max_age)
        hi = bisect_right(births, year - min_age)
        if hi <= lo:
            return None
        pool, start, death = self.by_occ[o], self.people.start, self.death
        for _ in range(4):
            p = pool[lo + int(rng.random() * (hi - lo))]
            d = death[p - start]
            if not d or d >= year:
                return p
        return None

    def pick_any(self, rng: random.Random, occupation: str) -> int | None:
        """Any person of ``occupation``, skewed towards a prolific few (None if there is none)."""
        pool = self.by_occ[OCC_INDEX[occupation]]
        if not pool:
            return None
        return pool[int(len(pool) * rng.random() ** 2)] if rng.random() < 0.5 else pool[int(len(pool) * rng.random())]

    def creator_for(
        self, rng: random.Random, occupation: str, year: int, min_age: int, max_age: int
    ) -> tuple[int | None, int]:
        """A creator alive and aged ``min_age``–``max_age`` in ``year``; if nobody fits, any person of
        the occupation with the year moved into their working life. Returns (person, year)."""
        person = self.pick_alive(rng, occupation, year, min_age, max_age)
        if person is not None:
            return person, year
        person = self.pick_any(rng, occupation)
        if person is None:
            return None, year
        k = person - self.people.start
        last = min(self.death[k] or LAST_YEAR, LAST_YEAR)
        return person, max(self.birth[k] + min_age, min(last, self.birth[k] + rng.randint(min_age, max_age)))

    def _org(self, org: int, city: int, year: int, founder: int | None) -> None:
        self.place_of[org] = city
        self.country_of[org] = self.country_of[city]
        self.year_of[org] = year
        if self.kind[org] == "band":
            self.fact(org, "P740", city)
        else:
            self.fact(org, "P159", city)
        self.literal(org, "P571", str(year), "date")
        if founder is not None:
            self.fact(org, "P112", founder)

    def _organisations(self) -> None:
        rng = self.rng("organisations")
        self.industry: dict[int, str] = {}
        self.genre: dict[int, str] = {}
        for u in self.universities:
            year = rng.randint(1250, 1990)
            founder = self.pick_alive(rng, "scientist", year, 30, 80) if rng.random() < 0.3 else None
            self._org(u, self._random_city(rng), year, founder)
        for kind_range, occupation, lo in ((self.companies, "businessperson", 1780), (self.publishers, "writer", 1750)):
            for org in kind_range:
                year = rng.randint(lo, 2020)
                founder = self.pick_alive(rng, occupation, year, 22, 70)
                home = (
                    self.birth_city[founder - self.people.start] if founder is not None and rng.random() < 0.6 else None
                )
                self._org(org, home if home is not None else self._random_city(rng), year, founder)
                self.industry[org] = rng.choice(tx.INDUSTRIES)
        for m in self.museums:
            self._org(m, self._random_city(rng), rng.randint(1700, 2000), None)
        self.band_members: dict[int, list[int]] = {}
        for b in self.bands:
            year = rng.randint(1950, 2020)
            self._org(b, self._random_city(rng), year, None)
            self.genre[b] = rng.choice(tx.GENRES[:6])
            members: list[int] = []
            for _ in range(rng.randint(2, 5)):
                member = self.pick_alive(rng, "musician", year, 16, 45)
                if member is not None and member not in members:
                    members.append(member)
                    self.fact(member, "P463", b)
            self.band_members[b] = members
        for c in self.clubs:
            self._org(c, self._random_city(rng), rng.randint(1860, 2000), None)
        self.clubs_of: dict[int, list[int]] = {}
        for c in self.clubs:
            self.clubs_of.setdefault(self.country_of[c], []).append(c)

    def _works(self) -> None:
        rng = self.rng("works")
        self.creator: dict[int, int] = {}
        self.depicted: dict[int, int] = {}
        self.based_on: dict[int, int] = {}
        pubs_of: dict[int, list[int]] = {}
        for p in self.publishers:
            pubs_of.setdefault(self.country_of[p], []).append(p)
        for w in self.novels:
            year = rng.randint(1790, 2023)
            author, year = self.creator_for(rng, "writer", year, 20, 85)
            self.year_of[w] = year
            if author is not None:
                self.creator[w] = author
                self.fact(w, "P50", author)
                self.country_of[w] = self.country_of[author]
                self.fact(w, "P495", self.country_of[author])
                local = pubs_of.get(self.country_of[author])
                if local and rng.random() < 0.7:
                    self.fact(w, "P123", rng.choice(local))
                elif len(self.publishers):
                    self.fact(w, "P123", self.publishers[rng.randrange(len(self.publishers))])
            self.literal(w, "P577", str(year), "date")
        for w in self.films:
            year = rng.randint(1905, 2023)
            director, year = self.creator_for(rng, "film director", year, 22, 80)
            self.year_of[w] = year
            if director is not None:
                self.creator[w] = director
                self.fact(w, "P57", director)
                self.country_of[w] = self.country_of[director]
                self.fact(w, "P495", self.country_of[director])
            cast: list[int] = []
            for _ in range(rng.randint(1, 4)):
                a = self.pick_alive(rng, "actor", year, 8, 85)
                if a is not None and a not in cast:
                    cast.append(a)
                    self.fact(w, "P161", a)
            if len(self.novels) and rng.random() < 0.12:
                src = self.novels[rng.randrange(len(self.novels))]
                if self.year_of[src] <= year:
                    self.based_on[w] = src
                    self.fact(w, "P144", src)
            self.literal(w, "P577", str(year), "date")
        for w in self.albums:
            if not len(self.bands):
                break
            band = self.bands[rng.randrange(len(self.bands))]
            year = min(LAST_YEAR, self.year_of[band] + rng.randint(0, 25))
            self.year_of[w] = year
            self.creator[w] = band
            self.country_of[w] = self.country_of[band]
            self.fact(w, "P175", band)
            self.fact(w, "P495", self.country_of[band])
            self.literal(w, "P577", str(year), "date")
        for w in self.paintings:
            year = rng.randint(1500, 2020)
            painter, year = self.creator_for(rng, "painter", year, 16, 85)
            self.year_of[w] = year
            if painter is not None:
                self.creator[w] = painter
                self.country_of[w] = self.country_of[painter]
                self.fact(w, "P170", painter)
            if len(self.museums):
                self.fact(w, "P195", self.museums[rng.randrange(len(self.museums))])
            if rng.random() < 0.25:
                sitter = self.pick_alive(rng, OCCUPATIONS[rng.randrange(len(OCCUPATIONS))][0], year, 5, 80)
                if sitter is not None and sitter != painter:
                    self.depicted[w] = sitter
                    self.fact(w, "P180", sitter)
            self.literal(w, "P577", str(year), "date")

    def _two_countries(self, rng: random.Random) -> tuple[int, ...]:
        """Two different countries (one if the world has only one)."""
        countries = self.countries
        a = countries[rng.randrange(len(countries))]
        if len(countries) == 1:
            return (a,)
        b = countries[rng.randrange(len(countries) - 1)]
        return (a, b if b < a else b + 1)

    def _events(self) -> None:
        rng = self.rng("events")
        countries = self.countries
        self.parties: dict[int, tuple[int, ...]] = {}
        self.war_end: dict[int, int] = {}
        for w in self.wars:
            parties = self._two_countries(rng)
            a = parties[0]
            start = rng.randint(1300, 1950)
            end = start + rng.randint(0, 12)
            self.parties[w] = parties
            self.year_of[w] = start
            self.country_of[w] = a
            self.war_end[w] = end
            for c in parties:
                self.fact(w, "P710", c)
            self.literal(w, "P580", str(start), "date")
            self.literal(w, "P582", str(end), "date")
        self.war_of: dict[int, int] = {}
        for bt in self.battles:
            if len(self.wars):
                war = self.wars[rng.randrange(len(self.wars))]
                year = rng.randint(self.year_of[war], self.war_end[war])
                country = rng.choice(self.parties[war])
                self.war_of[bt] = war
                self.fact(bt, "P361", war)
            else:
                year, country = rng.randint(1300, 1950), countries[rng.randrange(len(countries))]
            city = self._random_city(rng, country, 1.0)
            self.place_of[bt], self.year_of[bt], self.country_of[bt] = city, year, country
            self.fact(bt, "P276", city)
            self.literal(bt, "P585", self.date(rng, year), "date")
            officers = {self.pick_alive(rng, "military officer", year, 18, 65) for _ in range(rng.randint(1, 3))}
            for officer in sorted(o for o in officers if o is not None):
                self.fact(officer, "P1344", bt)
        organisers = [*self.companies, *self.clubs, *self.universities]
        for f in self.festivals:
            city = self._random_city(rng)
            year = rng.randint(1850, 2018)
            self.place_of[f], self.year_of[f], self.country_of[f] = city, year, self.country_of[city]
            self.genre[f] = rng.choice(tx.GENRES)
            self.fact(f, "P276", city)
            self.literal(f, "P571", str(year), "date")
            if organisers:
                self.fact(f, "P664", organisers[rng.randrange(len(organisers))])
            performers = {
                self.pick_alive(rng, "musician", rng.randint(year, LAST_YEAR), 16, 70) for _ in range(rng.randint(0, 3))
            }
            for m in sorted(p for p in performers if p is not None):
                self.fact(m, "P1344", f)
        for tr in self.treaties:
            self.parties[tr] = parties = self._two_countries(rng)
            a = parties[0]
            year = rng.randint(1400, 2010)
            city = self._random_city(rng, a, 1.0)
            self.place_of[tr], self.year_of[tr], self.country_of[tr] = city, year, a
            for c in self.parties[tr]:
                self.fact(tr, "P1891", c)
            self.fact(tr, "P276", city)
            self.literal(tr, "P585", self.date(rng, year), "date")

    def _awards(self) -> None:
        rng = self.rng("awards")
        conferrers = [*self.universities, *self.museums, *self.publishers, *self.companies]
        fields_ = list(tx.AWARD_FIELDS)
        self.award_field: dict[int, str] = {}
        self.award_namesake: dict[int, int] = {}
        self.award_conferrer: dict[int, int] = {}
        by_field: dict[str, list[int]] = {}
        for a in self.awards:
            field = fields_[rng.randrange(len(fields_))]
            self.award_field[a] = field
            by_field.setdefault(field, []).append(a)
            if conferrers:
                org = conferrers[rng.randrange(len(conferrers))]
                self.award_conferrer[a] = org
                self.country_of[a] = self.country_of[org]
                self.fact(a, "P1027", org)
                self.fact(a, "P17", self.country_of[org])
            if rng.random() < 0.7:
                honoree = self.pick_any(rng, tx.AWARD_FIELDS[field][0])
                if honoree is not None:
                    self.award_namesake[a] = honoree
                    self.fact(a, "P138", honoree)
        awards_for_occ: list[list[int]] = [[] for _ in OCCUPATIONS]
        for field, occs in tx.AWARD_FIELDS.items():
            for o in occs:
                awards_for_occ[OCC_INDEX[o]].extend(by_field.get(field, ()))
        for k, p in enumerate(self.people):
            pool = awards_for_occ[self.occ[k]]
            if pool and rng.random() < 0.2:
                first = pool[rng.randrange(len(pool))]
                self.fact(p, "P166", first)
                second = pool[rng.randrange(len(pool))]
                if second != first and rng.random() < 0.2:
                    self.fact(p, "P166", second)
        for works, field in (
            (self.novels, "literature"),
            (self.films, "film"),
            (self.albums, "music"),
            (self.paintings, "painting"),
        ):
            field_awards = by_field.get(field)
            if not field_awards:
                continue
            for w in works:
                if rng.random() < 0.1:
                    self.fact(w, "P166", field_awards[rng.randrange(len(field_awards))])

    def _personal_links(self) -> None:
        rng = self.rng("links")
        people = self.people
        start = people.start
        unis_of: dict[int, list[int]] = {}
        for u in self.universities:
            unis_of.setdefault(self.country_of[u], []).append(u)
        employers = {
            "scientist": list(self.universities),
            "physician": list(self.universities),
            "engineer": list(self.companies),
            "businessperson": list(self.companies),
            "writer": list(self.publishers),
            "painter": list(self.museums),
        }
        studied = {"scientist", "physician", "engineer"}
        unis = list(self.universities)
        for k, p in enumerate(people):
            occupation = OCCUPATIONS[self.occ[k]][0]
            if unis and rng.random() < (0.95 if occupation in studied else 0.5):
                local = unis_of.get(self.country_of[p])
                u = rng.choice(local) if local and rng.random() < 0.75 else unis[rng.randrange(len(unis))]
                self.fact(p, "P69", u)
                if rng.random() < 0.1:
                    u2 = unis[rng.randrange(len(unis))]
                    if u2 != u:
                        self.fact(p, "P69", u2)
            pool = employers.get(occupation)
            if pool and rng.random() < 0.6:
                self.fact(p, "P108", pool[rng.randrange(len(pool))])
            if occupation == "athlete" and len(self.clubs):
                local = self.clubs_of.get(self.country_of[p])
                teams = []
                for _ in range(rng.randint(1, 2)):
                    club = (
                        rng.choice(local)
                        if local and rng.random() < 0.7
                        else self.clubs[rng.randrange(len(self.clubs))]
                    )
                    if club not in teams:
                        teams.append(club)
                        self.fact(p, "P54", club)
        # spouses: a random third of the people; men and women of similar birth-year rank are paired
        chosen = [k for k in range(len(people)) if rng.random() < 0.35]
        chosen.sort(key=lambda k: (self.birth[k], k))
        men = [k for k in chosen if not self.female[k]]
        women = [k for k in chosen if self.female[k]]
        couples: list[tuple[int, int, int]] = []  # (younger birth, husband, wife)
        for a, b in zip(men, women):
            if abs(self.birth[b] - self.birth[a]) <= 8:
                self.fact(start + a, "P26", start + b)
                self.fact(start + b, "P26", start + a)
                couples.append((max(self.birth[a], self.birth[b]), a, b))
        couples.sort()
        couple_births = [c[0] for c in couples]
        self.parent_of: dict[int, int] = {}  # child person offset -> parent offset whose family name it takes
        for k in range(len(people)):
            if rng.random() >= 0.3:
                continue
            lo = bisect_left(couple_births, self.birth[k] - 45)
            hi = bisect_right(couple_births, self.birth[k] - 18)
            if hi <= lo:
                continue
            _, a, b = couples[lo + int(rng.random() * (hi - lo))]
            if k in (a, b) or any(self.death[p] and self.death[p] < self.birth[k] for p in (a, b)):
                continue
            for parent in (a, b):
                self.fact(start + parent, "P40", start + k)
                self.fact(start + k, "P25" if self.female[parent] else "P22", start + parent)
            self.parent_of[k] = a  # children take the father's family name
        for c in self.countries:
            head = self.pick_alive(rng, "politician", LAST_YEAR, 35, 85)
            if head is not None:
                self.fact(c, "P35", head)
        for city in self.cities:
            if rng.random() < 0.25:
                mayor = self.pick_alive(rng, "politician", LAST_YEAR, 30, 85)
                if mayor is not None:
                    self.fact(city, "P6", mayor)

    def _freeze(self, texts: list[str]) -> World:
        n = len(self.kind)
        triples = np.empty((len(self.h), 3), dtype=np.int64)
        triples[:, 0] = np.frombuffer(self.h, dtype=np.int64)
        triples[:, 1] = np.frombuffer(self.r, dtype=np.int64)
        triples[:, 2] = np.frombuffer(self.t, dtype=np.int64)
        ids = [f"S{i}" for i in range(n)]
        return World(
            name=self.cfg.name,
            entity_ids=ids,
            titles=self.titles,
            aliases=self.aliases,
            descriptions=self.descs,
            types=[TYPE_OF_KIND[k] for k in self.kind],
            relation_ids=[pid for pid, _ in RELATIONS],
            relation_labels=[label for _, label in RELATIONS],
            literal_values=self.lit_values,
            literal_kinds=self.lit_kinds,
            triples=triples,
            doc_ids=[f"D{i}" for i in range(n)],
            doc_titles=list(self.titles),
            doc_texts=texts,
            doc_entities=np.arange(n, dtype=np.int64),
            metadata={
                "source": "synthetic",
                "seed": self.seed,
                "config": asdict(self.cfg),
                "other_document_facts": int(sum(self.hid)),
            },
        )
