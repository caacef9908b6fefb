"""Graph phases of the synthetic world: each kind of entity's attributes and links, as integer facts.

Each ``draw_*`` function fills one domain of a :class:`~searchgym.world.synthetic_draft.DraftWorld` from
an RNG of its own (:class:`~searchgym.world.synthetic_graph.GraphGenerator` seeds one per phase, so
changing a phase leaves the others' draws intact): geography, people, organisations, works, events,
awards, personal links, in that order (later phases read what earlier ones drew). Lifetimes are
respected: a novel is written while its author lives, a parent is 18 to 45 years older than the child.
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right

from . import synthetic_text as tx
from .synthetic_draft import DraftWorld
from .synthetic_schema import LAST_YEAR, OCC_INDEX, OCCUPATIONS

__all__ = [
    "draw_geography",
    "draw_people",
    "draw_organisations",
    "draw_works",
    "draw_events",
    "draw_awards",
    "draw_personal_links",
]


def draw_geography(g: DraftWorld, rng: random.Random) -> None:
    """Regions and cities of every country (located-in chains, capitals and seats, populations) and
    the language each country speaks."""
    countries, regions, cities = g.countries, g.regions, g.cities
    nc = len(countries)
    g.regions_of = [[] for _ in range(nc)]
    for k, reg in enumerate(regions):
        c = k if k < nc else rng.randrange(nc)
        g.regions_of[c].append(reg)
        g.country_of[reg] = countries[c]
        g.fact(reg, "P131", countries[c])
    g.cities_of_region = {reg: [] for reg in regions}
    g.cities_of = [[] for _ in range(nc)]
    g.region_of_city = {}
    for k, city in enumerate(cities):
        reg = regions[k] if k < len(regions) else regions[rng.randrange(len(regions))]
        g.cities_of_region[reg].append(city)
        g.region_of_city[city] = reg
        c = g.country_of[reg]
        g.country_of[city] = c
        g.cities_of[c - countries.start].append(city)
        g.fact(city, "P131", reg)
    g.population = {city: int(rng.lognormvariate(9.5, 1.1)) + 200 for city in cities}
    g.capital = {}
    for ci, c in enumerate(countries):
        cap = rng.choice(g.cities_of[ci])
        g.capital[c] = cap
        g.population[cap] *= 4
        g.fact(c, "P36", cap)
        g.fact(cap, "P1376", c)
        g.literal(c, "P571", str(rng.randint(1150, 1950)), "date")
        g.literal(c, "P2046", str(int(rng.lognormvariate(10.5, 0.8))), "quantity")
    for reg in regions:
        seat = rng.choice(g.cities_of_region[reg])
        g.fact(reg, "P36", seat)
        g.fact(seat, "P1376", reg)
    for city in cities:
        g.literal(city, "P1082", str(g.population[city]), "quantity")
    for ci, c in enumerate(countries):
        pop = sum(g.population[x] for x in g.cities_of[ci])
        g.literal(c, "P1082", str(int(pop * rng.uniform(1.5, 3.0))), "quantity")
    langs = g.languages
    g.language_of = {}
    for ci, c in enumerate(countries):
        lang = langs[ci] if ci < len(langs) else langs[rng.randrange(len(langs))]
        g.language_of[c] = lang
        g.fact(c, "P37", lang)


def draw_people(g: DraftWorld, rng: random.Random) -> None:
    """Every person's occupation, life dates, birth and death places, citizenship and language; then,
    per occupation, the people sorted by birth year (for the "who was alive in year Y" draws)."""
    people = g.people
    n = len(people)
    occ = rng.choices(range(len(OCCUPATIONS)), weights=[w for _, w in OCCUPATIONS], k=n)
    g.occ = occ
    g.birth = [0] * n
    g.death = [0] * n
    g.female = [False] * n
    g.birth_city = [0] * n
    countries = g.countries
    for k, p in enumerate(people):
        b = rng.randint(1760, 2002)
        d = b + rng.randint(30, 98)
        d = d if d <= LAST_YEAR else 0
        g.birth[k], g.death[k] = b, d
        g.female[k] = rng.random() < 0.5
        c = countries[int(rng.random() * len(countries))]
        g.country_of[p] = c
        bc = g.random_city(rng, c)
        g.birth_city[k] = bc
        g.literal(p, "P569", g.date(rng, b), "date")
        g.fact(p, "P19", bc)
        g.fact(p, "P27", c)
        if d:
            g.literal(p, "P570", g.date(rng, d), "date")
            u = rng.random()
            dc = bc if u < 0.5 else g.random_city(rng, c)
            g.fact(p, "P20", dc)
        if rng.random() < 0.3:
            g.fact(p, "P1412", g.language_of[c])
    # per occupation: people sorted by birth year, for "who was alive in year Y" draws
    g.by_occ = [[] for _ in OCCUPATIONS]
    order = sorted(range(n), key=lambda k: (g.birth[k], k))
    for k in order:
        g.by_occ[occ[k]].append(people[k])
    g.occ_births = [[g.birth[p - people.start] for p in pool] for pool in g.by_occ]


def draw_organisations(g: DraftWorld, rng: random.Random) -> None:
    """Universities, companies, publishers, museums, bands and clubs: city, founding year and
    founder; a company's industry, a band's genre and members."""
    g.industry = {}
    g.genre = {}
    for u in g.universities:
        year = rng.randint(1250, 1990)
        founder = g.pick_alive(rng, "scientist", year, 30, 80) if rng.random() < 0.3 else None
        _found(g, u, g.random_city(rng), year, founder)
    for kind_range, occupation, lo in ((g.companies, "businessperson", 1780), (g.publishers, "writer", 1750)):
        for org in kind_range:
            year = rng.randint(lo, 2020)
            founder = g.pick_alive(rng, occupation, year, 22, 70)
            home = g.birth_city[founder - g.people.start] if founder is not None and rng.random() < 0.6 else None
            _found(g, org, home if home is not None else g.random_city(rng), year, founder)
            g.industry[org] = rng.choice(tx.INDUSTRIES)
    for m in g.museums:
        _found(g, m, g.random_city(rng), rng.randint(1700, 2000), None)
    g.band_members = {}
    for b in g.bands:
        year = rng.randint(1950, 2020)
        _found(g, b, g.random_city(rng), year, None)
        g.genre[b] = rng.choice(tx.GENRES[:6])
        members: list[int] = []
        for _ in range(rng.randint(2, 5)):
            member = g.pick_alive(rng, "musician", year, 16, 45)
            if member is not None and member not in members:
                members.append(member)
                g.fact(member, "P463", b)
        g.band_members[b] = members
    for c in g.clubs:
        _found(g, c, g.random_city(rng), rng.randint(1860, 2000), None)
    g.clubs_of = {}
    for c in g.clubs:
        g.clubs_of.setdefault(g.country_of[c], []).append(c)


def _found(g: DraftWorld, org: int, city: int, year: int, founder: int | None) -> None:
    """Place an organisation in ``city`` (its headquarters, or a band's origin), founded in ``year``."""
    g.place_of[org] = city
    g.country_of[org] = g.country_of[city]
    g.year_of[org] = year
    if g.kind[org] == "band":
        g.fact(org, "P740", city)
    else:
        g.fact(org, "P159", city)
    g.literal(org, "P571", str(year), "date")
    if founder is not None:
        g.fact(org, "P112", founder)


def _two_countries(g: DraftWorld, rng: random.Random) -> tuple[int, ...]:
    """Two different countries (one if the world has only one)."""
    countries = g.countries
    a = countries[rng.randrange(len(countries))]
    if len(countries) == 1:
        return (a,)
    b = countries[rng.randrange(len(countries) - 1)]
    return (a, b if b < a else b + 1)


def draw_works(g: DraftWorld, rng: random.Random) -> None:
    """Novels, films, albums and paintings: creator (alive and of working age), country, year,
    publisher, cast, adaptations, collections and sitters, drawn in that order from one RNG."""
    g.creator = {}
    g.depicted = {}
    g.based_on = {}
    _novels(g, rng)
    _films(g, rng)
    _albums(g, rng)
    _paintings(g, rng)


def _novels(g: DraftWorld, rng: random.Random) -> None:
    """Each novel's author, country and publisher (a local one more often than not)."""
    pubs_of: dict[int, list[int]] = {}
    for p in g.publishers:
        pubs_of.setdefault(g.country_of[p], []).append(p)
    for w in g.novels:
        year = rng.randint(1790, 2023)
        author, year = g.creator_for(rng, "writer", year, 20, 85)
        g.year_of[w] = year
        if author is not None:
            g.creator[w] = author
            g.fact(w, "P50", author)
            g.country_of[w] = g.country_of[author]
            g.fact(w, "P495", g.country_of[author])
            local = pubs_of.get(g.country_of[author])
            if local and rng.random() < 0.7:
                g.fact(w, "P123", rng.choice(local))
            elif len(g.publishers):
                g.fact(w, "P123", g.publishers[rng.randrange(len(g.publishers))])
        g.literal(w, "P577", str(year), "date")


def _films(g: DraftWorld, rng: random.Random) -> None:
    """Each film's director, country, cast and (sometimes) the earlier novel it is based on."""
    for w in g.films:
        year = rng.randint(1905, 2023)
        director, year = g.creator_for(rng, "film director", year, 22, 80)
        g.year_of[w] = year
        if director is not None:
            g.creator[w] = director
            g.fact(w, "P57", director)
            g.country_of[w] = g.country_of[director]
            g.fact(w, "P495", g.country_of[director])
        cast: list[int] = []
        for _ in range(rng.randint(1, 4)):
            a = g.pick_alive(rng, "actor", year, 8, 85)
            if a is not None and a not in cast:
                cast.append(a)
                g.fact(w, "P161", a)
        if len(g.novels) and rng.random() < 0.12:
            src = g.novels[rng.randrange(len(g.novels))]
            if g.year_of[src] <= year:
                g.based_on[w] = src
                g.fact(w, "P144", src)
        g.literal(w, "P577", str(year), "date")


def _albums(g: DraftWorld, rng: random.Random) -> None:
    """Each album's band, country and year."""
    for w in g.albums:
        if not len(g.bands):
            break
        band = g.bands[rng.randrange(len(g.bands))]
        year = min(LAST_YEAR, g.year_of[band] + rng.randint(0, 25))
        g.year_of[w] = year
        g.creator[w] = band
        g.country_of[w] = g.country_of[band]
        g.fact(w, "P175", band)
        g.fact(w, "P495", g.country_of[band])
        g.literal(w, "P577", str(year), "date")


def _paintings(g: DraftWorld, rng: random.Random) -> None:
    """Each painting's painter, collection and (sometimes) sitter."""
    for w in g.paintings:
        year = rng.randint(1500, 2020)
        painter, year = g.creator_for(rng, "painter", year, 16, 85)
        g.year_of[w] = year
        if painter is not None:
            g.creator[w] = painter
            g.country_of[w] = g.country_of[painter]
            g.fact(w, "P170", painter)
        if len(g.museums):
            g.fact(w, "P195", g.museums[rng.randrange(len(g.museums))])
        if rng.random() < 0.25:
            sitter = g.pick_alive(rng, OCCUPATIONS[rng.randrange(len(OCCUPATIONS))][0], year, 5, 80)
            if sitter is not None and sitter != painter:
                g.depicted[w] = sitter
                g.fact(w, "P180", sitter)
        g.literal(w, "P577", str(year), "date")


def draw_events(g: DraftWorld, rng: random.Random) -> None:
    """Wars, battles, festivals and treaties: parties, dates, places, participants and organisers,
    drawn in that order from one RNG."""
    g.parties = {}
    g.war_end = {}
    g.war_of = {}
    _wars(g, rng)
    _battles(g, rng)
    _festivals(g, rng)
    _treaties(g, rng)


def _wars(g: DraftWorld, rng: random.Random) -> None:
    """Each war's two parties (one in a one-country world) and its start and end years."""
    for w in g.wars:
        parties = _two_countries(g, rng)
        a = parties[0]
        start = rng.randint(1300, 1950)
        end = start + rng.randint(0, 12)
        g.parties[w] = parties
        g.year_of[w] = start
        g.country_of[w] = a
        g.war_end[w] = end
        for c in parties:
            g.fact(w, "P710", c)
        g.literal(w, "P580", str(start), "date")
        g.literal(w, "P582", str(end), "date")


def _battles(g: DraftWorld, rng: random.Random) -> None:
    """Each battle's war (its year within the war), city, date and the officers who fought it."""
    countries = g.countries
    for bt in g.battles:
        if len(g.wars):
            war = g.wars[rng.randrange(len(g.wars))]
            year = rng.randint(g.year_of[war], g.war_end[war])
            country = rng.choice(g.parties[war])
            g.war_of[bt] = war
            g.fact(bt, "P361", war)
        else:
            year, country = rng.randint(1300, 1950), countries[rng.randrange(len(countries))]
        city = g.random_city(rng, country, 1.0)
        g.place_of[bt], g.year_of[bt], g.country_of[bt] = city, year, country
        g.fact(bt, "P276", city)
        g.literal(bt, "P585", g.date(rng, year), "date")
        officers = {g.pick_alive(rng, "military officer", year, 18, 65) for _ in range(rng.randint(1, 3))}
        for officer in sorted(o for o in officers if o is not None):
            g.fact(officer, "P1344", bt)


def _festivals(g: DraftWorld, rng: random.Random) -> None:
    """Each festival's city, founding year, genre, organiser and performers."""
    organisers = [*g.companies, *g.clubs, *g.universities]
    for f in g.festivals:
        city = g.random_city(rng)
        year = rng.randint(1850, 2018)
        g.place_of[f], g.year_of[f], g.country_of[f] = city, year, g.country_of[city]
        g.genre[f] = rng.choice(tx.GENRES)
        g.fact(f, "P276", city)
        g.literal(f, "P571", str(year), "date")
        if organisers:
            g.fact(f, "P664", organisers[rng.randrange(len(organisers))])
        performers = {
            g.pick_alive(rng, "musician", rng.randint(year, LAST_YEAR), 16, 70) for _ in range(rng.randint(0, 3))
        }
        for m in sorted(p for p in performers if p is not None):
            g.fact(m, "P1344", f)


def _treaties(g: DraftWorld, rng: random.Random) -> None:
    """Each treaty's two parties, city and date."""
    for tr in g.treaties:
        g.parties[tr] = parties = _two_countries(g, rng)
        a = parties[0]
        year = rng.randint(1400, 2010)
        city = g.random_city(rng, a, 1.0)
        g.place_of[tr], g.year_of[tr], g.country_of[tr] = city, year, a
        for c in g.parties[tr]:
            g.fact(tr, "P1891", c)
        g.fact(tr, "P276", city)
        g.literal(tr, "P585", g.date(rng, year), "date")


def draw_awards(g: DraftWorld, rng: random.Random) -> None:
    """Awards (field, conferrer, namesake), then who and what received them."""
    by_field = _award_fields(g, rng)
    _award_winners(g, rng, by_field)


def _award_fields(g: DraftWorld, rng: random.Random) -> dict[str, list[int]]:
    """Each award's field, conferring organisation (and so country) and, often, the person it is named
    after; returns the awards of each field."""
    conferrers = [*g.universities, *g.museums, *g.publishers, *g.companies]
    fields_ = list(tx.AWARD_FIELDS)
    g.award_field = {}
    g.award_namesake = {}
    g.award_conferrer = {}
    by_field: dict[str, list[int]] = {}
    for a in g.awards:
        field = fields_[rng.randrange(len(fields_))]
        g.award_field[a] = field
        by_field.setdefault(field, []).append(a)
        if conferrers:
            org = conferrers[rng.randrange(len(conferrers))]
            g.award_conferrer[a] = org
            g.country_of[a] = g.country_of[org]
            g.fact(a, "P1027", org)
            g.fact(a, "P17", g.country_of[org])
        if rng.random() < 0.7:
            honoree = g.pick_any(rng, tx.AWARD_FIELDS[field][0])
            if honoree is not None:
                g.award_namesake[a] = honoree
                g.fact(a, "P138", honoree)
    return by_field


def _award_winners(g: DraftWorld, rng: random.Random, by_field: dict[str, list[int]]) -> None:
    """People win awards of their occupation's fields; works win awards of their art's field."""
    awards_for_occ: list[list[int]] = [[] for _ in OCCUPATIONS]
    for field, occs in tx.AWARD_FIELDS.items():
        for o in occs:
            awards_for_occ[OCC_INDEX[o]].extend(by_field.get(field, ()))
    for k, p in enumerate(g.people):
        pool = awards_for_occ[g.occ[k]]
        if pool and rng.random() < 0.2:
            first = pool[rng.randrange(len(pool))]
            g.fact(p, "P166", first)
            second = pool[rng.randrange(len(pool))]
            if second != first and rng.random() < 0.2:
                g.fact(p, "P166", second)
    for works, field in (
        (g.novels, "literature"),
        (g.films, "film"),
        (g.albums, "music"),
        (g.paintings, "painting"),
    ):
        field_awards = by_field.get(field)
        if not field_awards:
            continue
        for w in works:
            if rng.random() < 0.1:
                g.fact(w, "P166", field_awards[rng.randrange(len(field_awards))])


def draw_personal_links(g: DraftWorld, rng: random.Random) -> None:
    """Studies, employers and teams; marriages; children of the married couples; heads of state and
    mayors, drawn in that order from one RNG."""
    _studies_and_work(g, rng)
    couples = _marriages(g, rng)
    _children(g, rng, couples)
    _office_holders(g, rng)


def _studies_and_work(g: DraftWorld, rng: random.Random) -> None:
    """Universities attended (a local one more often), an employer that fits the occupation, and an
    athlete's clubs."""
    people = g.people
    unis_of: dict[int, list[int]] = {}
    for u in g.universities:
        unis_of.setdefault(g.country_of[u], []).append(u)
    employers = {
        "scientist": list(g.universities),
        "physician": list(g.universities),
        "engineer": list(g.companies),
        "businessperson": list(g.companies),
        "writer": list(g.publishers),
        "painter": list(g.museums),
    }
    studied = {"scientist", "physician", "engineer"}
    unis = list(g.universities)
    for k, p in enumerate(people):
        occupation = OCCUPATIONS[g.occ[k]][0]
        if unis and rng.random() < (0.95 if occupation in studied else 0.5):
            local = unis_of.get(g.country_of[p])
            u = rng.choice(local) if local and rng.random() < 0.75 else unis[rng.randrange(len(unis))]
            g.fact(p, "P69", u)
            if rng.random() < 0.1:
                u2 = unis[rng.randrange(len(unis))]
                if u2 != u:
                    g.fact(p, "P69", u2)
        pool = employers.get(occupation)
        if pool and rng.random() < 0.6:
            g.fact(p, "P108", pool[rng.randrange(len(pool))])
        if occupation == "athlete" and len(g.clubs):
            local = g.clubs_of.get(g.country_of[p])
            teams = []
            for _ in range(rng.randint(1, 2)):
                club = rng.choice(local) if local and rng.random() < 0.7 else g.clubs[rng.randrange(len(g.clubs))]
                if club not in teams:
                    teams.append(club)
                    g.fact(p, "P54", club)


def _marriages(g: DraftWorld, rng: random.Random) -> list[tuple[int, int, int]]:
    """Spouses: a random third of the people; men and women of similar birth-year rank are paired.
    Returns the couples as ``(younger birth year, husband offset, wife offset)``, sorted."""
    people = g.people
    start = people.start
    chosen = [k for k in range(len(people)) if rng.random() < 0.35]
    chosen.sort(key=lambda k: (g.birth[k], k))
    men = [k for k in chosen if not g.female[k]]
    women = [k for k in chosen if g.female[k]]
    couples: list[tuple[int, int, int]] = []  # (younger birth, husband, wife)
    for a, b in zip(men, women):
        if abs(g.birth[b] - g.birth[a]) <= 8:
            g.fact(start + a, "P26", start + b)
            g.fact(start + b, "P26", start + a)
            couples.append((max(g.birth[a], g.birth[b]), a, b))
    couples.sort()
    return couples


def _children(g: DraftWorld, rng: random.Random, couples: list[tuple[int, int, int]]) -> None:
    """Some people are the children of a couple alive and 18 to 45 years older; they take the father's
    family name (``g.parent_of``)."""
    people = g.people
    start = people.start
    couple_births = [c[0] for c in couples]
    g.parent_of = {}  # child person offset -> parent offset whose family name it takes
    for k in range(len(people)):
        if rng.random() >= 0.3:
            continue
        lo = bisect_left(couple_births, g.birth[k] - 45)
        hi = bisect_right(couple_births, g.birth[k] - 18)
        if hi <= lo:
            continue
        _, a, b = couples[lo + int(rng.random() * (hi - lo))]
        if k in (a, b) or any(g.death[p] and g.death[p] < g.birth[k] for p in (a, b)):
            continue
        for parent in (a, b):
            g.fact(start + parent, "P40", start + k)
            g.fact(start + k, "P25" if g.female[parent] else "P22", start + parent)
        g.parent_of[k] = a  # children take the father's family name


def _office_holders(g: DraftWorld, rng: random.Random) -> None:
    """A living politician heads each country; a quarter of the cities have a mayor."""
    for c in g.countries:
        head = g.pick_alive(rng, "politician", LAST_YEAR, 35, 85)
        if head is not None:
            g.fact(c, "P35", head)
    for city in g.cities:
        if rng.random() < 0.25:
            mayor = g.pick_alive(rng, "politician", LAST_YEAR, 30, 85)
            if mayor is not None:
                g.fact(city, "P6", mayor)
