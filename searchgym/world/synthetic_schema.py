"""Shared vocabulary of the synthetic world: relations, occupations, entity kinds and prose helpers.

Kept apart from the generator so the graph, naming and article modules agree on one schema.
"""

from __future__ import annotations

from . import synthetic_text as tx

__all__ = [
    "RELATIONS",
    "HIDEABLE",
    "OCCUPATIONS",
    "OCC_INDEX",
    "TYPE_OF_KIND",
    "PAST_KINDS",
    "THE_KINDS",
    "LAST_YEAR",
    "with_article",
    "capitalize",
    "indefinite_article",
]

#: Relation ids (Wikidata property numbers, for familiarity) and labels used by the generator.
RELATIONS: tuple[tuple[str, str], ...] = (
    ("P19", "place of birth"),
    ("P20", "place of death"),
    ("P27", "country of citizenship"),
    ("P569", "date of birth"),
    ("P570", "date of death"),
    ("P69", "educated at"),
    ("P108", "employer"),
    ("P463", "member of"),
    ("P54", "member of sports team"),
    ("P166", "award received"),
    ("P26", "spouse"),
    ("P40", "child"),
    ("P22", "father"),
    ("P25", "mother"),
    ("P1412", "languages spoken, written or signed"),
    ("P1344", "participant in"),
    ("P131", "located in the administrative territorial entity"),
    ("P36", "capital"),
    ("P1376", "capital of"),
    ("P37", "official language"),
    ("P1082", "population"),
    ("P2046", "area"),
    ("P571", "inception"),
    ("P112", "founded by"),
    ("P159", "headquarters location"),
    ("P17", "country"),
    ("P740", "location of formation"),
    ("P35", "head of state"),
    ("P6", "head of government"),
    ("P50", "author"),
    ("P123", "publisher"),
    ("P577", "publication date"),
    ("P57", "director"),
    ("P161", "cast member"),
    ("P144", "based on"),
    ("P175", "performer"),
    ("P495", "country of origin"),
    ("P170", "creator"),
    ("P195", "collection"),
    ("P180", "depicts"),
    ("P276", "location"),
    ("P585", "point in time"),
    ("P580", "start time"),
    ("P582", "end time"),
    ("P361", "part of"),
    ("P710", "participant"),
    ("P1891", "signatory"),
    ("P664", "organizer"),
    ("P1027", "conferred by"),
    ("P138", "named after"),
)
#: Relations whose facts may be stated only in the tail entity's article.
HIDEABLE = frozenset(tx.TAIL_TEMPLATES)
#: Occupations of people and their share of the population.
OCCUPATIONS: tuple[tuple[str, float], ...] = (
    ("writer", 0.11),
    ("film director", 0.04),
    ("actor", 0.09),
    ("musician", 0.11),
    ("painter", 0.07),
    ("athlete", 0.10),
    ("scientist", 0.10),
    ("physician", 0.05),
    ("engineer", 0.06),
    ("politician", 0.09),
    ("military officer", 0.07),
    ("businessperson", 0.11),
)
OCC_INDEX = {name: k for k, (name, _) in enumerate(OCCUPATIONS)}
TYPE_OF_KIND = {
    "country": "location",
    "region": "location",
    "city": "location",
    "language": "concept",
    "person": "person",
    "university": "organisation",
    "company": "organisation",
    "publisher": "organisation",
    "museum": "organisation",
    "band": "organisation",
    "club": "organisation",
    "novel": "work",
    "film": "work",
    "album": "work",
    "painting": "work",
    "war": "event",
    "battle": "event",
    "festival": "event",
    "treaty": "event",
    "award": "award",
}
PAST_KINDS = frozenset({"war", "battle", "treaty"})
LAST_YEAR = 2024

THE_KINDS = frozenset({"war", "battle", "treaty", "festival", "award", "museum"})


def with_article(title: str, kind: str) -> str:
    """How prose names an entity: ``the Battle of X``, ``the University of Y``, else the bare title."""
    if title.startswith("The "):
        return title
    if kind in THE_KINDS or (
        kind == "university" and (title.startswith("University of") or title.endswith("Technology"))
    ):
        return "the " + title
    return title


def capitalize(sentence: str) -> str:
    """Upper-case the first letter of a sentence that starts with a lower-case reference."""
    return sentence if sentence[:1].isupper() else sentence[:1].upper() + sentence[1:]


def indefinite_article(word: str) -> str:
    """``a`` or ``an`` before ``word`` (``an annual``, ``an 1854``)."""
    if word[:3].lower() in ("uni", "use", "eur"):
        return "a"
    if word[:1] in "aeiouAEIOU" or word[:1] == "8" or word[:2] in ("11", "18"):
        return "an"
    return "a"
