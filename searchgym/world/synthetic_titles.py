"""Naming phase of the synthetic world: every entity's title and aliases.

Runs after the graph exists (:mod:`.synthetic_domains`), so names can follow it: children carry a parent's family name,
universities and clubs are named after their city, films adapted from a novel share its title,
battles and treaties after the city where they happened. Collisions are planted here on purpose
(namesakes, same-name cities, one-letter variants) at the rates set in the config. Words and names are
made by :class:`~searchgym.world.synthetic_name_forge.NameForge`; descriptions, which quote the titles,
are :mod:`.synthetic_descriptions`'.
"""

from __future__ import annotations

import random
from collections import Counter

from . import synthetic_text as tx
from .synthetic_draft import DraftWorld
from .synthetic_name_forge import NameForge, acronym, demonym, mutate

__all__ = ["assign_titles"]


def assign_titles(g: DraftWorld, rng: random.Random) -> None:
    """Give every entity a title and aliases (``g.titles``, ``g.aliases``; people's ``g.family_name``)."""
    forge = NameForge(rng)
    cfg = g.cfg
    n = len(g.kind)
    titles: list[str] = [""] * n
    aliases: list[tuple[str, ...]] = [()] * n
    g.titles, g.aliases = titles, aliases
    for k, c in enumerate(g.countries):
        if k and rng.random() < cfg.similar_name_rate:
            name = mutate(titles[g.countries[rng.randrange(k)]], rng)
            forge.reserve("country", name)
        else:
            name = forge.country()
        titles[c] = name
        form = rng.choice(("Republic of", "Kingdom of", "Federation of", "Grand Duchy of", "Commonwealth of"))
        aliases[c] = (f"{form} {name}",)
    for reg in g.regions:
        w = forge.unique("place", lambda: forge.word(1, 2))
        titles[reg] = rng.choice(tx.REGION_FORMS).format(w=w)
        aliases[reg] = (w,)
    for k, city in enumerate(g.cities):
        u = rng.random()
        if k and u < cfg.shared_city_name_rate:
            other = g.cities[rng.randrange(k)]
            name = titles[other]  # same name, (usually) another country
        elif k and u < cfg.shared_city_name_rate + cfg.similar_name_rate:
            name = mutate(titles[g.cities[rng.randrange(k)]], rng)
            forge.reserve("place", name)
        else:
            name = forge.city()
        titles[city] = name
        if rng.random() < 0.1:
            aliases[city] = (f"{name} City",)
        elif rng.random() < 0.08:
            aliases[city] = (forge.unique("place", forge.word),)  # a historical name
    for k, lang in enumerate(g.languages):
        name = demonym(titles[g.countries[k]])
        titles[lang] = name
        aliases[lang] = (f"{name} language",)
    _person_names(g, rng, forge)
    _org_names(g, rng, forge)
    _work_names(g, rng, forge)
    _event_names(g, rng, forge)


def _person_names(g: DraftWorld, rng: random.Random, forge: NameForge) -> None:
    """People, in birth order: children take the father's family name; some take an earlier person's full name."""
    people = g.people
    n = len(people)
    n_given = max(40, min(4000, n // 25))
    female_names = [forge.given(True) for _ in range(n_given)]
    male_names = [forge.given(False) for _ in range(n_given)]
    families = [forge.family() for _ in range(max(60, n // 6))]
    g.family_name = [""] * n
    titles, aliases = g.titles, g.aliases
    order = sorted(range(n), key=lambda k: (g.birth[k], k))
    named: list[int] = []
    for k in order:
        pool = female_names if g.female[k] else male_names
        given = pool[int(len(pool) * rng.random() ** 1.5)]  # some given names are common
        parent = g.parent_of.get(k)
        family = g.family_name[parent] if parent is not None else families[int(rng.random() * len(families))]
        g.family_name[k] = family
        title = f"{given} {family}"
        if named and rng.random() < g.cfg.namesake_rate:
            title = titles[people[named[int(rng.random() * len(named))]]]
            family = title.rsplit(" ", 1)[-1]
            given = title.split(" ", 1)[0]
            g.family_name[k] = family
        named.append(k)
        p = people[k]
        titles[p] = title
        al = [f"{given[0]}. {family}"]
        u = rng.random()
        if u < 0.25:
            middle = pool[int(len(pool) * rng.random())]
            al.append(f"{given} {middle} {family}")
        elif u < 0.3:
            al.append(f"The {rng.choice(tx.NICK_ADJECTIVES)} {rng.choice(tx.NICK_NOUNS)}")
        aliases[p] = tuple(al)


def _org_names(g: DraftWorld, rng: random.Random, forge: NameForge) -> None:
    """Universities, companies, publishers, museums, bands and clubs (often named after their city)."""
    titles, aliases = g.titles, g.aliases
    for u in g.universities:
        city = titles[g.place_of[u]]
        form = rng.randrange(4)
        if form == 0:
            t = f"University of {city}"
        elif form == 1:
            t = f"{city} University"
        elif form == 2:
            t = f"{city} Institute of Technology"
        else:
            t = f"{forge.word(2, 2)} College"
        titles[u] = t
        alts = {0: (f"{city} University",), 1: (f"University of {city}",)}.get(form, ())
        aliases[u] = alts + _acronym_alias(t)
    for c in g.companies:
        w = forge.word(1, 2)
        ind = g.industry[c]
        t = rng.choice((f"{w} {ind.title()}", f"{w} & {forge.word(1, 2)}", f"{w} Works", f"{w} Group"))
        titles[c] = t
        aliases[c] = (w, f"{t} Ltd.") if rng.random() < 0.5 else (w,)
    for p in g.publishers:
        w = forge.word(1, 2)
        titles[p] = rng.choice((f"{w} Press", f"{w} House", f"{w} Books"))
        aliases[p] = (w,)
    for m in g.museums:
        city = titles[g.place_of[m]]
        t = rng.choice((f"{city} Museum of Art", f"{forge.word(2, 2)} Museum", f"{city} Gallery"))
        titles[m] = t
        aliases[m] = _acronym_alias(t)
    for b in g.bands:
        form = rng.randrange(3)
        if form == 0:
            t = f"The {rng.choice(tx.TITLE_ADJECTIVES)} {rng.choice(tx.TITLE_NOUNS)}s"
        elif form == 1:
            t = forge.word(2, 3)
        else:
            t = f"{rng.choice(tx.TITLE_ADJECTIVES)} {forge.word(1, 2)}"
        titles[b] = t
        aliases[b] = (t[4:],) if t.startswith("The ") else ()
    for c in g.clubs:
        city = titles[g.place_of[c]]
        titles[c] = rng.choice((f"FC {city}", f"{city} Athletic", f"{city} Rovers", f"Sporting {city}"))
        aliases[c] = (f"{city} FC",) if titles[c].startswith("FC ") else ()


def _acronym_alias(title: str) -> tuple[str, ...]:
    """The title's acronym as an alias, when it has at least three letters."""
    a = acronym(title)
    return (a,) if len(a) >= 3 else ()


def _work_title(g: DraftWorld, rng: random.Random, forge: NameForge) -> str:
    """A title for a novel, film, album or painting from a few English patterns."""
    adj, noun = rng.choice(tx.TITLE_ADJECTIVES), rng.choice(tx.TITLE_NOUNS)
    form = rng.randrange(6)
    if form == 0:
        return f"The {adj} {noun}"
    if form == 1:
        return f"{noun} of {g.titles[g.cities[rng.randrange(len(g.cities))]]}"
    if form == 2:
        return f"The {noun} and the {rng.choice(tx.TITLE_NOUNS)}"
    if form == 3:
        return f"{adj} {noun}s"
    if form == 4:
        return f"{'An' if noun[0] in 'AEIOU' else 'A'} {noun} for {forge.word(2, 2)}"
    return f"{forge.word(2, 3)}"


def _work_names(g: DraftWorld, rng: random.Random, forge: NameForge) -> None:
    """Creative works; adaptations share their novel's title, portraits name their sitter."""
    titles, aliases = g.titles, g.aliases
    for w in g.novels:
        titles[w] = _work_title(g, rng, forge)
    for w in g.films:
        src = g.based_on.get(w)
        titles[w] = titles[src] if src is not None else _work_title(g, rng, forge)
    for w in g.albums:
        titles[w] = _work_title(g, rng, forge) if rng.random() < 0.7 else f"Songs of {forge.word(2, 2)}"
    for w in g.paintings:
        sitter = g.depicted.get(w)
        if sitter is not None:
            titles[w] = f"Portrait of {titles[sitter]}"
        elif rng.random() < 0.3:
            titles[w] = f"View of {titles[g.cities[rng.randrange(len(g.cities))]]}"
        else:
            titles[w] = _work_title(g, rng, forge)
    for works in (g.novels, g.films, g.albums, g.paintings):
        for w in works:
            t = titles[w]
            if t.startswith("The "):
                aliases[w] = (t[4:],)


def _event_names(g: DraftWorld, rng: random.Random, forge: NameForge) -> None:
    """Wars, battles, festivals and treaties (named after parties or places) and awards."""
    titles, aliases = g.titles, g.aliases
    for w in g.wars:
        parties = g.parties[w]
        if len(parties) == 2 and rng.random() < 0.6:
            t = f"{demonym(titles[parties[0]])}–{demonym(titles[parties[1]])} War"
            aliases[w] = (f"{demonym(titles[parties[0]])}-{demonym(titles[parties[1]])} War",)
        else:
            t = rng.choice((f"{forge.word(2, 2)} War", f"War of the {titles[parties[0]]} Succession"))
        titles[w] = t
    ordinals = ("First", "Second", "Third", "Fourth", "Fifth")
    seen: Counter = Counter()
    for bt in g.battles:
        city = titles[g.place_of[bt]]
        k = seen[city]
        seen[city] += 1
        titles[bt] = f"Battle of {city}" if k == 0 else f"{ordinals[min(k, 4)]} Battle of {city}"
        aliases[bt] = (f"{city} Battle",) if rng.random() < 0.3 else ()
    for f in g.festivals:
        city = titles[g.place_of[f]]
        titles[f] = f"{city} {g.genre[f].title()} Festival"
        aliases[f] = (f"{city} Festival",)
    seen.clear()
    for tr in g.treaties:
        city = titles[g.place_of[tr]]
        t = f"Treaty of {city}"
        if seen[t]:
            t = f"{t} ({g.year_of[tr]})"
        seen[f"Treaty of {city}"] += 1
        titles[tr] = t
    for a in g.awards:
        field = g.award_field[a]
        honoree = g.award_namesake.get(a)
        if honoree is not None:
            fam = g.family_name[honoree - g.people.start]
            t = rng.choice((f"{fam} Prize for {field.title()}", f"{fam} Medal", f"{fam} Award for {field.title()}"))
            aliases[a] = (f"{fam} Prize",) if not t.startswith(f"{fam} Prize") else ()
        else:
            t = rng.choice(
                (
                    f"{forge.word(2, 2)} Prize",
                    f"Order of the {rng.choice(tx.TITLE_ADJECTIVES)} {rng.choice(tx.TITLE_NOUNS)}",
                )
            )
        titles[a] = t
