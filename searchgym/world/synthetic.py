"""The embedded default world: a seeded, procedurally generated fictional encyclopedia.

:func:`generate_world` builds a knowledge graph of countries, regions, cities, languages, people,
organisations (universities, companies, publishers, museums, bands, clubs), creative works
(novels, films, albums, paintings), events (wars, battles, festivals, treaties) and awards, with
Wikidata-style relations (``P19`` place of birth, ``P131`` located in, ``P50`` author, ...) and
date/quantity literals, plus one Wikipedia-like article per entity.

Why fictional: every name comes from a syllable generator, so a language model cannot answer a
question about this world from memory; rewards measure search. Why it is hard enough: chains run
deep (novel → author → university → city → region → country → capital → mayor), names collide on
purpose (namesakes, two cities with one name, ``Tarsk``/``Tarska``), entities have aliases, and
some facts are stated only in the *other* entity's article ("People born in Tarsk include ..."),
as on Wikipedia.

Determinism: every random draw comes from ``random.Random`` instances seeded from ``seed`` and a
phase name, never from global state, so one seed gives a byte-identical world. Speed: the graph is
built as integer arrays and written straight into :class:`~searchgym.world.world.World`, so a
million entities take on the order of a minute.

Modules, in the order a world is made: :mod:`.synthetic_config` (sizes and rates),
:mod:`.synthetic_graph` (the run: seeded RNGs per phase, then the frozen World), :mod:`.synthetic_draft`
(the world as integer rows while it is drawn), :mod:`.synthetic_domains` (geography, people,
organisations, works, events, awards, personal links), :mod:`.synthetic_titles` and
:mod:`.synthetic_descriptions` (names and descriptions, from :mod:`.synthetic_name_forge`'s syllables),
:mod:`.synthetic_docs` (articles, phrased by :mod:`.synthetic_text`); :mod:`.synthetic_schema` is the
shared vocabulary.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from ..core.arg_checks import check_count
from ..errors import InvalidTypeError
from .shared import share
from .synthetic_config import SyntheticConfig
from .synthetic_graph import GraphGenerator
from .synthetic_schema import OCCUPATIONS, RELATIONS
from .world import World

logger = logging.getLogger(__name__)

__all__ = ["SyntheticConfig", "generate_world", "default_world", "RELATIONS", "OCCUPATIONS"]


def generate_world(config: SyntheticConfig | None = None, *, seed: int = 0, progress: bool = False) -> World:
    """Generate a fictional world (knowledge graph + one article per entity) from ``seed``.

    ``config`` sets the sizes (default :class:`SyntheticConfig`, ~2,850 entities); use
    ``SyntheticConfig.for_entities(n)`` for a given size. The same ``config`` and ``seed`` always give
    a byte-identical world. ``progress`` shows a progress bar while articles are written.
    """
    cfg = config if config is not None else SyntheticConfig()
    if not isinstance(cfg, SyntheticConfig):
        raise InvalidTypeError(f"config must be a SyntheticConfig, got {type(cfg).__name__}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise InvalidTypeError(f"seed must be an int, got {seed!r}")
    cfg.validate()
    logger.info("generating synthetic world: %d entities, seed %d", cfg.num_entities, seed)
    return GraphGenerator(cfg, seed, progress).run()


def default_world(seed: int = 0) -> World:
    """The embedded default world (default :class:`SyntheticConfig`), built once per process and
    seed. The object is shared: treat it as read-only."""
    return _cached_default_world(check_count("seed", seed, least=None))


@lru_cache(maxsize=4)
def _cached_default_world(seed: int) -> World:
    # pickles (and deep-copies) as default_world(seed): the cached instance in this process
    return share(generate_world(seed=seed), default_world, seed)
