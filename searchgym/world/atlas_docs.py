"""Infobox-style documents for atlas entities that have no Wikipedia summary.

Each document states the entity's facts in plain sentences ("Sweden is a country in Northern
Europe. Its capital is Stockholm. It shares borders with Finland and Norway. ..."), so every
fact of the atlas KG can also be found by searching text. Phrasing varies between a few
templates per relation; the choice comes from the ``random.Random`` passed in, so a seed fixes
the corpus byte for byte.
"""

from __future__ import annotations

import random
from typing import Sequence

from .synthetic_text import join_names

__all__ = ["FACT_TEMPLATES", "join_names", "infobox_text"]

# relation id → sentence variants; {s} = subject title, {o} = object title(s) joined in prose.
FACT_TEMPLATES: dict[str, tuple[str, ...]] = {
    "capital": ("Its capital is {o}.", "The capital of {s} is {o}."),
    "shares_border_with": ("{s} shares borders with {o}.", "It borders {o}."),
    "continent": ("It is located in {o}.", "{s} lies on the continent of {o}."),
    "region": ("It belongs to the region of {o}.", "{s} is part of {o}."),
    "official_language": ("Official language: {o}.", "The official languages of {s} include {o}."),
    "currency": ("Its currency is the {o}.", "The currency used in {s} is the {o}."),
    "population": ("It has a population of {o}.", "The population of {s} is {o}."),
    "area": ("It covers an area of {o}.", "{s} has an area of {o}."),
    "calling_code": ("Its international calling code is {o}.", "The telephone country code of {s} is {o}."),
    "internet_domain": ("Its internet top-level domain is {o}.", "Websites of {s} use the {o} domain."),
    "demonym": ("Its people are called {o}.", "The demonym of {s} is {o}."),
    "country_code": ("Its ISO 3166 country code is {o}.", "{s} has the ISO country code {o}."),
    "country": ("{s} is in {o}.", "It is located in {o}."),
    "located_in_state": ("It lies in the U.S. state of {o}.", "{s} is in the state of {o}."),
    "part_of": ("{s} is part of {o}.", "It is a part of {o}."),
    "replaced_by": ("It was succeeded by {o}.", "{s} was replaced by {o}."),
    "currency_code": ("Its ISO 4217 code is {o}.", "The currency code of the {s} is {o}."),
    "atomic_number": ("Its atomic number is {o}.", "{s} has atomic number {o}."),
    "element_symbol": ("Its chemical symbol is {o}.", "The symbol of {s} is {o}."),
    "element_category": ("It belongs to the {o}.", "{s} is classed among the {o}."),
    "period": ("It is in period {o} of the periodic table.", "{s} sits in period {o}."),
    "discoverer": ("It was discovered by {o}.", "{s} was first identified by {o}."),
    "location_of_discovery": ("It was discovered in {o}.", "The discovery of {s} took place in {o}."),
    "time_of_discovery": ("It was discovered in {o}.", "{s} was discovered in the year {o}."),
    "notable_discovery": ("{s} discovered {o}.", "{s} is credited with the discovery of {o}."),
}


def infobox_text(title: str, description: str, facts: Sequence[tuple[str, Sequence[str]]], rng: random.Random) -> str:
    """A short article: ``"{title} is {description}."`` then one sentence per relation in ``facts``.

    ``facts`` lists ``(relation id, object titles)`` in the order to state them; relations without
    a template are stated as ``"Its <relation>: <objects>."``.
    """
    sentences = [f"{title} is {description}." if description else f"{title}."]
    for rel, objects in facts:
        if not objects:
            continue
        variants = FACT_TEMPLATES.get(rel)
        obj = join_names(list(objects))
        if variants is None:
            sentences.append(f"Its {rel.replace('_', ' ')}: {obj}.")
        else:
            sentences.append(rng.choice(variants).format(s=title, o=obj))
    return " ".join(sentences)
