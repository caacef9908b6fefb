"""The synthetic world while it is drawn: entities as integer rows, facts as integer triples.

:class:`DraftWorld` is what every phase of the generator shares. The graph phases
(:mod:`.synthetic_domains`) add facts and fill the per-entity tables (country, place, year, life
dates, ...); the naming phases (:mod:`.synthetic_titles`, :mod:`.synthetic_descriptions`) fill
``titles``, ``aliases`` and ``descs`` from them; the article phase (:mod:`.synthetic_docs`) renders
the facts as prose. :class:`~searchgym.world.synthetic_graph.GraphGenerator` runs the phases, each
with its own seeded RNG, and freezes the draft into a :class:`~searchgym.world.world.World`.
"""

from __future__ import annotations

import random
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter

from . import synthetic_text as tx
from .synthetic_config import SyntheticConfig
from .synthetic_schema import HIDEABLE, LAST_YEAR, OCC_INDEX, RELATIONS

__all__ = ["DraftWorld"]


class DraftWorld:
    """Entity rows per kind, facts as integer arrays, the per-entity tables the phases fill, and the
    draws the phases share (a living person of an occupation, a city of a country).

    A fact's head and tail are entity rows; a literal tail is the code ``-j - 1`` of literal ``j``. A
    hideable fact may be *moved*: stated only in the tail's article (``mentions``), flagged in ``hid``.
    ``hide_rng`` decides which, at the config's ``other_document_rate``.
    """

    # geography (draw_geography)
    regions_of: list[list[int]]
    cities_of_region: dict[int, list[int]]
    cities_of: list[list[int]]
    region_of_city: dict[int, int]
    population: dict[int, int]
    capital: dict[int, int]
    language_of: dict[int, int]
    # people (draw_people); indexed by person offset (row - people.start)
    occ: list[int]
    birth: list[int]
    death: list[int]
    female: list[bool]
    birth_city: list[int]
    by_occ: list[list[int]]
    occ_births: list[list[int]]
    # organisations, works, events, awards, personal links
    industry: dict[int, str]
    genre: dict[int, str]
    band_members: dict[int, list[int]]
    clubs_of: dict[int, list[int]]
    creator: dict[int, int]
    depicted: dict[int, int]
    based_on: dict[int, int]
    parties: dict[int, tuple[int, ...]]
    war_end: dict[int, int]
    war_of: dict[int, int]
    award_field: dict[int, str]
    award_namesake: dict[int, int]
    award_conferrer: dict[int, int]
    parent_of: dict[int, int]
    # names (synthetic_titles, synthetic_descriptions)
    titles: list[str]
    aliases: list[tuple[str, ...]]
    family_name: list[str]
    descs: list[str]

    def __init__(self, cfg: SyntheticConfig, hide_rng: random.Random) -> None:
        self.cfg = cfg
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
        self._hide_rng = hide_rng
        # entity rows per kind, allocated in this order (row numbers are part of the seeded output)
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

    def random_city(self, rng: random.Random, country: int | None = None, p_home: float = 0.9) -> int:
        """A city: with probability ``p_home`` one of ``country``'s (when given), else any city."""
        if country is not None and rng.random() < p_home:
            pool = self.cities_of[country - self.countries.start]
            return pool[int(rng.random() * len(pool))]
        return self.cities[int(rng.random() * len(self.cities))]

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
