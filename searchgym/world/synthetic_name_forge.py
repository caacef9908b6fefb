"""Seeded generators of pronounceable fictional names for the synthetic world.

Names are built from syllables (onset + vowel, a closing consonant on the last syllable), so they
read like names but belong to no real person or place: a language model cannot answer questions
about them from memory, only by searching. Every draw goes through the ``random.Random`` handed
to :class:`NameForge`, so the same seed yields the same names.
"""

from __future__ import annotations

import random

from ..errors import SearchGymRuntimeError

__all__ = ["NameForge", "acronym", "demonym", "mutate"]

_ONSETS = (
    "b",
    "br",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "h",
    "k",
    "kr",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "sk",
    "st",
    "t",
    "tr",
    "th",
    "v",
    "z",
    "sh",
    "c",
    "j",
    "w",
    "",
    "",
    "",
)
_NUCLEI = ("a", "e", "i", "o", "u", "a", "e", "o", "ae", "ai", "ei", "ou", "y")
_CODAS = ("", "", "", "n", "r", "l", "s", "th", "m", "nd", "rn", "rk", "st", "v", "sk", "x")

_COUNTRY_SUFFIXES = ("ia", "ia", "and", "ova", "eth", "or", "ania", "esh", "ium", "ara")
_CITY_SUFFIXES = ("", "", "", "", "mor", "dal", "ven", "holm", "port", "wick", "stad", "gard", "ance", "ira")
_FEMALE_ENDINGS = ("a", "ia", "ine", "elle", "wen", "ys", "ra", "eth")
_MALE_ENDINGS = ("o", "an", "ric", "or", "ius", "ek", "em", "ald")
_FAMILY_SUFFIXES = ("", "", "", "en", "ar", "is", "ova", "ik", "ley", "mont", "holt", "ier")


def demonym(country: str) -> str:
    """Adjective of a country name: ``Merovia`` → ``Merovian``, ``Kelrand`` → ``Kelrandian``."""
    if country.endswith("ia"):
        return country + "n"
    if country[-1] in "aeiouy":
        return country[:-1] + "an"
    return country + "ian"


def acronym(name: str) -> str:
    """Initials of the capitalised words of a name (``University of Tarsk`` → ``UT``)."""
    return "".join(w[0] for w in name.split() if w[:1].isupper())


def mutate(name: str, rng: random.Random) -> str:
    """A near-collision of ``name``: one vowel changed, or a letter added or dropped at the end.

    Used to plant confusable names (``Tarsk`` / ``Tarska``) so lexical search is not trivial.
    """
    vowels = [i for i, ch in enumerate(name) if ch in "aeiou" and i > 0]
    choice = rng.random()
    if vowels and choice < 0.5:
        i = rng.choice(vowels)
        repl = rng.choice([v for v in "aeiou" if v != name[i]])
        return name[:i] + repl + name[i + 1 :]
    if choice < 0.8 or len(name) < 5:
        return name + rng.choice(("a", "e", "s", "o", "en"))
    return name[:-1]


class NameForge:
    """Makes fictional words and names from one seeded RNG.

    ``unique`` variants retry until a name unused so far in the given namespace appears, so
    collisions happen only where the generator plants them on purpose.
    """

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._used: dict[str, set[str]] = {}

    def word(self, min_syllables: int = 2, max_syllables: int = 3) -> str:
        """A capitalised pronounceable word of ``min``–``max`` syllables."""
        rng = self.rng
        n = rng.randint(min_syllables, max_syllables)
        parts = [rng.choice(_ONSETS) + rng.choice(_NUCLEI) for _ in range(n)]
        parts.append(rng.choice(_CODAS))
        w = "".join(parts)
        if len(w) < 3:
            w += rng.choice(("n", "r", "l", "th"))
        return w[0].upper() + w[1:]

    def unique(self, namespace: str, make) -> str:
        """Call ``make()`` until it returns a name not yet used in ``namespace``; record it."""
        used = self._used.setdefault(namespace, set())
        for attempt in range(1000):
            name = make()
            if name not in used:
                used.add(name)
                return name
        raise SearchGymRuntimeError(
            f"name space {namespace!r} exhausted after {len(used)} names; reduce the world size"
        )

    def reserve(self, namespace: str, name: str) -> None:
        """Mark ``name`` as used in ``namespace`` (for names made outside :meth:`unique`)."""
        self._used.setdefault(namespace, set()).add(name)

    def country(self) -> str:
        """A new country name such as ``Merovia``."""
        rng = self.rng
        return self.unique("country", lambda: self.word(1, 2).rstrip("aeiouy") + rng.choice(_COUNTRY_SUFFIXES))

    def city(self) -> str:
        """A new town or city name such as ``Tarsk`` or ``Velport``."""
        rng = self.rng
        return self.unique("place", lambda: self.word(1, 2) + rng.choice(_CITY_SUFFIXES))

    def given(self, female: bool) -> str:
        """A new given name; gendered by its ending."""
        rng = self.rng
        endings = _FEMALE_ENDINGS if female else _MALE_ENDINGS
        return self.unique("given", lambda: self._min_len(self.word(1, 2).rstrip("aeiouy") + rng.choice(endings), 4))

    def family(self) -> str:
        """A new family name such as ``Varnholt``."""
        rng = self.rng
        return self.unique("family", lambda: self._min_len(self.word(1, 2) + rng.choice(_FAMILY_SUFFIXES), 4))

    def _min_len(self, name: str, n: int) -> str:
        """Lengthen short names (``She`` → ``Sheth``) so they never read as English words."""
        while len(name) < n:
            name += self.rng.choice(("n", "th", "ra", "el"))
        return name
