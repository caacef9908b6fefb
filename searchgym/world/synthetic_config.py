"""Sizes and rates of a synthetic world (:class:`SyntheticConfig`), kept below the generator's modules.

Every phase of the generator reads the configuration and :mod:`searchgym.world.synthetic` offers it to
users (``from searchgym.world import SyntheticConfig``); a module of its own lets both import it without
importing each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from ..errors import InvalidArgumentError

__all__ = ["SyntheticConfig", "MAX_ENTITIES", "MIN_ENTITIES"]

#: fewest entities :meth:`SyntheticConfig.for_entities` builds (every type needs a few)
MIN_ENTITIES = 200
#: most entities :meth:`SyntheticConfig.scaled` / :meth:`SyntheticConfig.for_entities` build: memory and time grow
#: linearly (1,000,000 entities: 3.0 GB peak, 84 s to build and save on one core), so this is ~6 GB and ~3 minutes,
#: within a 2-core, 16 GB machine; a far larger one (``--entities 99999999999999999999``) would exhaust memory
MAX_ENTITIES = 2_000_000

# How each count scales with the size factor: geography grows slower than the population.
_SQRT_FIELDS = ("num_countries", "num_languages", "num_wars")
_POW75_FIELDS = ("num_regions",)


@dataclass(frozen=True)
class SyntheticConfig:
    """Sizes and rates of a synthetic world. The defaults give ~2,850 entities (~1 s to build).

    Scale every size at once with :meth:`scaled` or :meth:`for_entities` rather than editing
    counts one by one; rates (``*_rate``) control how often confusable names and
    other-article-only facts are planted.
    """

    num_countries: int = 10
    num_regions: int = 40
    num_cities: int = 240
    num_languages: int = 8
    num_people: int = 1400
    num_universities: int = 40
    num_companies: int = 110
    num_publishers: int = 20
    num_museums: int = 20
    num_bands: int = 50
    num_clubs: int = 40
    num_novels: int = 250
    num_films: int = 170
    num_albums: int = 120
    num_paintings: int = 140
    num_wars: int = 15
    num_battles: int = 60
    num_festivals: int = 50
    num_treaties: int = 30
    num_awards: int = 36
    #: fraction of people who take the full name of an earlier person (namesakes)
    namesake_rate: float = 0.02
    #: fraction of cities named like a city in another country
    shared_city_name_rate: float = 0.05
    #: fraction of cities/countries whose name is a one-letter variant of an earlier one
    similar_name_rate: float = 0.05
    #: probability that a hideable fact is stated only in the tail entity's article
    other_document_rate: float = 0.15
    #: at most this many heads are listed per (tail, relation) in a tail-side sentence
    max_list_mentions: int = 8
    #: (min, max) filler sentences per article
    filler_sentences: tuple[int, int] = (2, 4)
    name: str = "synthetic"

    @property
    def num_entities(self) -> int:
        """Total number of entities this configuration generates."""
        return sum(getattr(self, f.name) for f in fields(self) if f.name.startswith("num_"))

    def scaled(self, factor: float) -> "SyntheticConfig":
        """A copy with every size multiplied by ``factor`` (countries, languages and wars by
        ``sqrt(factor)``, regions by ``factor**0.75``, so the world grows like a real one)."""
        if not (math.isfinite(factor) and factor > 0):
            raise InvalidArgumentError(f"scale factor must be a finite number > 0, got {factor!r}; use e.g. --scale 2")
        if round(self.num_entities * factor) > MAX_ENTITIES:
            raise InvalidArgumentError(
                f"scale factor {factor!r} gives ~{self.num_entities * factor:,.0f} entities, more than the "
                f"{MAX_ENTITIES:,} a synthetic world may have; use a scale of at most "
                f"{MAX_ENTITIES // self.num_entities:,} (or --entities up to {MAX_ENTITIES:,})"
            )
        changes = {}
        for f in fields(self):
            if not f.name.startswith("num_"):
                continue
            power = 0.5 if f.name in _SQRT_FIELDS else 0.75 if f.name in _POW75_FIELDS else 1.0
            changes[f.name] = max(1, round(getattr(self, f.name) * factor**power))
        changes["num_languages"] = min(changes["num_languages"], changes["num_countries"])
        changes["num_regions"] = max(changes["num_regions"], changes["num_countries"])
        changes["num_cities"] = max(changes["num_cities"], changes["num_regions"])
        return replace(self, **changes)

    @classmethod
    def for_entities(cls, num_entities: int, **overrides) -> "SyntheticConfig":
        """A configuration with exactly ``num_entities`` entities (the default mix, scaled; the
        rounding remainder goes to people). ``overrides`` set rates or the name."""
        whole = isinstance(num_entities, int) and not isinstance(num_entities, bool)
        if not (whole and MIN_ENTITIES <= num_entities <= MAX_ENTITIES):
            raise InvalidArgumentError(
                f"a synthetic world needs at least {MIN_ENTITIES} and at most {MAX_ENTITIES:,} entities, got "
                f"{f'{num_entities:,}' if whole else repr(num_entities)}; give --entities in that range"
            )
        base = cls(**overrides)
        cfg = base.scaled(num_entities / base.num_entities)
        return replace(cfg, num_people=cfg.num_people + num_entities - cfg.num_entities)

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first inconsistent field and how to fix it."""
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name.startswith("num_") and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise InvalidArgumentError(f"SyntheticConfig.{f.name} must be a non-negative int, got {v!r}")
            number = isinstance(v, (int, float)) and not isinstance(v, bool)
            if f.name.endswith("_rate") and not (number and 0.0 <= v <= 1.0):
                raise InvalidArgumentError(f"SyntheticConfig.{f.name} must be within [0, 1], got {v!r}")
        if self.num_entities > MAX_ENTITIES:
            raise InvalidArgumentError(
                f"SyntheticConfig has {self.num_entities:,} entities, more than the {MAX_ENTITIES:,} a synthetic "
                "world may have; lower its num_* fields"
            )
        for name in ("num_countries", "num_regions", "num_cities", "num_people", "num_languages"):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"SyntheticConfig.{name} must be at least 1")
        if self.num_regions < self.num_countries:
            raise InvalidArgumentError(
                "SyntheticConfig.num_regions must be >= num_countries (each country needs a region)"
            )
        if self.num_cities < self.num_regions:
            raise InvalidArgumentError("SyntheticConfig.num_cities must be >= num_regions (each region needs a city)")
        if self.num_languages > self.num_countries:
            raise InvalidArgumentError(
                "SyntheticConfig.num_languages must be <= num_countries (languages are named after countries)"
            )
        pair = self.filler_sentences
        whole = isinstance(pair, (tuple, list)) and len(pair) == 2
        whole = whole and all(isinstance(x, int) and not isinstance(x, bool) for x in pair)
        if not (whole and 0 <= pair[0] <= pair[1]):
            raise InvalidArgumentError(
                f"SyntheticConfig.filler_sentences must be (min, max) with 0 <= min <= max, got "
                f"{self.filler_sentences!r}"
            )
        if self.max_list_mentions < 1:
            raise InvalidArgumentError("SyntheticConfig.max_list_mentions must be at least 1")
