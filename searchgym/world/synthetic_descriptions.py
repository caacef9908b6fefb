"""Description phase of the synthetic world: a short Wikidata-like description of every entity.

Runs after :mod:`.synthetic_titles`, since descriptions quote titles ("university in Merovia", "1921
novel by Hourem Trisova"); life dates, places and creators tell namesakes apart.
"""

from __future__ import annotations

from .synthetic_draft import DraftWorld
from .synthetic_name_forge import demonym
from .synthetic_schema import OCCUPATIONS

__all__ = ["assign_descriptions"]


def assign_descriptions(g: DraftWorld) -> None:
    """Give every entity a short Wikidata-like description (``g.descs``) that tells namesakes apart."""
    titles = g.titles
    descs = [""] * len(g.kind)
    g.descs = descs
    dem = {c: demonym(titles[c]) for c in g.countries}
    for c in g.countries:
        descs[c] = "sovereign state"
    for reg in g.regions:
        descs[reg] = f"region of {titles[g.country_of[reg]]}"
    capitals = set(g.capital.values())
    for city in g.cities:
        country = titles[g.country_of[city]]
        if city in capitals:
            descs[city] = f"capital city of {country}"
        else:
            descs[city] = f"{'city' if g.population[city] >= 15000 else 'town'} in {country}"
    for lang in g.languages:
        descs[lang] = "language"
    for k, p in enumerate(g.people):
        b, d = g.birth[k], g.death[k]
        span = f"{b}–{d}" if d else f"born {b}"
        descs[p] = f"{dem[g.country_of[p]]} {OCCUPATIONS[g.occ[k]][0]} ({span})"
    for u in g.universities:
        descs[u] = f"university in {titles[g.country_of[u]]}"
    for c in g.companies:
        descs[c] = f"{dem[g.country_of[c]]} {g.industry[c]} company"
    for p in g.publishers:
        descs[p] = f"{dem[g.country_of[p]]} publishing house"
    for m in g.museums:
        descs[m] = f"art museum in {titles[g.country_of[m]]}"
    for b in g.bands:
        descs[b] = f"{dem[g.country_of[b]]} {g.genre[b]} band"
    for c in g.clubs:
        descs[c] = f"{dem[g.country_of[c]]} football club"
    for works, word, verb in (
        (g.novels, "novel", "by"),
        (g.films, "film", "directed by"),
        (g.albums, "album", "by"),
        (g.paintings, "painting", "by"),
    ):
        for w in works:
            who = g.creator.get(w)
            descs[w] = f"{g.year_of[w]} {word}" + (f" {verb} {titles[who]}" if who is not None else "")
    for w in g.wars:
        start, end = g.year_of[w], g.war_end[w]
        descs[w] = f"war ({start}–{end})" if end != start else f"war ({start})"
    for bt in g.battles:
        war = g.war_of.get(bt)
        descs[bt] = f"{g.year_of[bt]} battle" + (f" of the {titles[war]}" if war is not None else "")
    for f in g.festivals:
        descs[f] = f"annual {g.genre[f]} festival in {titles[g.country_of[f]]}"
    for tr in g.treaties:
        descs[tr] = f"{g.year_of[tr]} treaty"
    for a in g.awards:
        org = g.award_conferrer.get(a)
        descs[a] = f"award for {g.award_field[a]}" + (f" conferred by {titles[org]}" if org is not None else "")
