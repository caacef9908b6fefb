"""Real-data loaders: Wikidata JSON dumps, Wikidata5M and Search-R1/FlashRAG corpora → worlds.

Every loader streams its files (plain, ``.gz``, ``.bz2`` or ``.xz``), reports malformed lines
with ``file:line`` and either skips them (``on_error="skip"``, default) or raises
:class:`LoaderError` (``on_error="raise"``), and attaches what it read and dropped to
``world.metadata["load_report"]``.
"""

from .common import LoaderError, LoadReport, open_text
from .flashrag import (
    FlashRAGCorpus,
    link_to_world,
    load_flashrag_corpus,
    read_flashrag_corpus,
    save_flashrag_corpus,
    with_documents,
)
from .wikidata import load_wikidata_dump
from .wikidata5m import load_wikidata5m
from .wikidata_tables import DEFAULT_BLOCKED_DATATYPES, DEFAULT_BLOCKLIST

__all__ = [
    "LoaderError",
    "LoadReport",
    "open_text",
    "FlashRAGCorpus",
    "link_to_world",
    "load_flashrag_corpus",
    "read_flashrag_corpus",
    "save_flashrag_corpus",
    "with_documents",
    "load_wikidata_dump",
    "load_wikidata5m",
    "DEFAULT_BLOCKLIST",
    "DEFAULT_BLOCKED_DATATYPES",
]
