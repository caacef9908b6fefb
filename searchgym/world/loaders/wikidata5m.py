"""Wikidata5M → :class:`~searchgym.world.World` whose corpus is the entity descriptions.

Wikidata5M (Wang et al., KEPLER) ships tab-separated text files, plain or gzipped:

* ``wikidata5m_entity.txt`` (or ``entity.txt``): ``Q42\\tDouglas Adams\\tDouglas Noël Adams\\t…``,
  an entity id then its aliases; the first alias becomes the title.
* ``wikidata5m_relation.txt`` (or ``relation.txt``): ``P19\\tplace of birth\\tbirthplace\\t…``; the
  first name is the relation label.
* triplets: ``*_triplet.txt`` (e.g. ``wikidata5m_all_triplet.txt``) or, when there is none, the
  split files ``wikidata5m_{transductive,inductive}_{train,valid,test}.txt``: ``Q42\\tP19\\tQ350``.
* ``wikidata5m_text.txt`` (or ``text.txt``): ``Q42\\tDouglas Noël Adams was an English author…``;
  each becomes the entity's document (id = entity id, title = entity title), and its first
  sentence the entity description.

Pass a directory (files found by those names, ``.gz``/``.bz2``/``.xz`` accepted) and/or explicit
paths. Entity types come from ``instance of`` (P31) triples through the same class table as the
Wikidata loader. Triples naming an entity that has no alias line, and texts of unknown entities,
are dropped and counted. Malformed lines (wrong column count, empty fields, duplicate ids) are
reported with ``file:line`` and skipped or raise (:mod:`.common`).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from ...errors import InvalidArgumentError, MissingFileError
from ..world import World, WorldBuilder
from .common import LoadReport, check_on_error, iter_lines, resolve_file
from .wikidata_tables import CLASS_TYPES, DEFAULT_BLOCKLIST, PROPERTY_LABELS, type_from_classes

logger = logging.getLogger(__name__)

__all__ = ["load_wikidata5m", "find_wikidata5m_files", "Wikidata5MFiles", "first_sentence"]

ENTITY_FILES = ("wikidata5m_entity.txt", "entity.txt")
RELATION_FILES = ("wikidata5m_relation.txt", "relation.txt")
TEXT_FILES = ("wikidata5m_text.txt", "text.txt")
SPLIT_FILES = tuple(
    f"wikidata5m_{setting}_{split}.txt"
    for setting in ("transductive", "inductive")
    for split in ("train", "valid", "test")
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
MAX_DESCRIPTION_CHARS = 300


def first_sentence(text: str, max_chars: int = MAX_DESCRIPTION_CHARS) -> str:
    """The first sentence of ``text`` (cut at ``max_chars`` on a word boundary), used as description."""
    s = _SENTENCE_END.split(text.strip(), 1)[0]
    if len(s) > max_chars:
        s = s[:max_chars].rsplit(" ", 1)[0] + "…"
    return s


@dataclass
class Wikidata5MFiles:
    """Where the parts of a Wikidata5M release are: alias files, triplet files, optional text."""

    entities: Path
    relations: Path
    triplets: list[Path]
    text: Path | None = None


def find_wikidata5m_files(directory: str | os.PathLike) -> Wikidata5MFiles:
    """Locate the Wikidata5M files in ``directory``.

    ``triplets`` is: every ``*_triplet.txt*`` file, else the transductive/inductive split
    files. ``text`` may be None (then the world has no corpus). Missing entity, relation or
    triplet files raise :class:`FileNotFoundError` listing the names tried.
    """
    d = Path(directory)
    if not d.is_dir():
        raise MissingFileError(f"{d}: not a directory; pass the Wikidata5M directory or explicit file paths")
    triplets = sorted(p for p in d.iterdir() if p.is_file() and re.search(r"_triplet\.txt(\.(gz|bz2|xz))?$", p.name))
    if not triplets:
        triplets = [p for name in SPLIT_FILES if (p := resolve_file(d, (name,), "split", required=False)) is not None]
    if not triplets:
        raise MissingFileError(
            f"{d}: no triplet file found (looked for *_triplet.txt and wikidata5m_transductive_*.txt / "
            "wikidata5m_inductive_*.txt, optionally .gz); pass triplet_files= explicitly"
        )
    entities = resolve_file(d, ENTITY_FILES, "entity alias")
    relations = resolve_file(d, RELATION_FILES, "relation alias")
    assert entities is not None and relations is not None  # required=True raises instead
    return Wikidata5MFiles(entities, relations, triplets, resolve_file(d, TEXT_FILES, "entity text", required=False))


def _files(path, entity_file, relation_file, triplet_files, text_file) -> Wikidata5MFiles:
    """Explicit paths override the ones found in directory ``path``."""
    found = find_wikidata5m_files(path) if path is not None else None
    ent = Path(entity_file) if entity_file is not None else (found.entities if found else None)
    rel = Path(relation_file) if relation_file is not None else (found.relations if found else None)
    tri = [Path(t) for t in triplet_files] if triplet_files is not None else (found.triplets if found else [])
    text = Path(text_file) if text_file is not None else (found.text if found else None)
    if ent is None or rel is None or not tri:
        raise InvalidArgumentError("load_wikidata5m needs a directory, or entity_file, relation_file and triplet_files")
    return Wikidata5MFiles(ent, rel, tri, text)


def _tsv_rows(
    path: Path,
    report: LoadReport,
    *,
    progress: bool,
    exact: int | None = None,
    at_least: int | None = None,
    maxsplit: int = -1,
) -> Iterator[tuple[int, list[str]]]:
    """``(line number, columns)`` of each non-blank TSV line whose column count and leading fields
    are valid; malformed lines are reported (and skipped, or raised under ``on_error="raise"``)."""
    for lineno, line in iter_lines(path, report, progress=progress, desc=path.name):
        if not line.strip():
            continue
        cols = line.split("\t", maxsplit)
        if exact is not None and len(cols) != exact:
            report.bad_line(
                path, lineno, f"expected {exact} tab-separated columns, got {len(cols)}", kind="wrong column count"
            )
        elif at_least is not None and len(cols) < at_least:
            report.bad_line(
                path,
                lineno,
                f"expected at least {at_least} tab-separated columns, got {len(cols)}",
                kind="wrong column count",
            )
        elif not cols[0].strip() or (len(cols) > 1 and not cols[1].strip()):
            report.bad_line(path, lineno, "empty id or first field", kind="empty field")
        else:
            yield lineno, cols


def _relation_labels(rel_p: Path, report: LoadReport, progress: bool) -> dict[str, str]:
    """Relation id -> label from the relation file (a repeated id is a bad line)."""
    labels: dict[str, str] = {}
    for lineno, cols in _tsv_rows(rel_p, report, progress=progress, at_least=2):
        rid = cols[0].strip()
        if rid in labels:
            report.bad_line(rel_p, lineno, f"duplicate relation id {rid!r}", kind="duplicate id")
            continue
        labels[rid] = cols[1].strip()
    return labels


def _add_triplets(
    b: WorldBuilder,
    triplet_files: Sequence[Path],
    labels: dict[str, str],
    allow: frozenset[str] | None,
    block: frozenset[str],
    report: LoadReport,
    progress: bool,
) -> dict[str, list[str]]:
    """Add the triplets of the allowed relations (each relation registered with its label once); returns
    each entity's classes from its ``P31`` triples (kept whether P31 is allowed or not: they give types)."""
    classes: dict[str, list[str]] = {}
    registered: set[str] = set()
    for tp in triplet_files:
        for lineno, cols in _tsv_rows(tp, report, progress=progress, exact=3):
            h, r, t = (c.strip() for c in cols)
            if not t:
                report.bad_line(tp, lineno, "empty tail", kind="empty field")
                continue
            if r == "P31" and t in CLASS_TYPES:
                classes.setdefault(h, []).append(t)
            if (allow is not None and r not in allow) or r in block:
                report.drop("blocked_relation")
                continue
            if r not in registered:
                registered.add(r)
                if r not in labels:
                    report.drop("relation_without_label")
                b.add_relation(r, labels.get(r) or PROPERTY_LABELS.get(r) or r)
            b.add_triple(h, r, t)
    return classes


def _texts(text_p: Path | None, report: LoadReport, progress: bool) -> dict[str, str]:
    """Entity id -> description text from the text file (none without one: the world has no corpus)."""
    texts: dict[str, str] = {}
    if text_p is not None:
        for lineno, cols in _tsv_rows(text_p, report, progress=progress, exact=2, maxsplit=1):
            texts[cols[0].strip()] = cols[1].strip()
    else:
        logger.warning("wikidata5m: no text file given or found; the world has no corpus")
    return texts


def _add_entities(
    b: WorldBuilder,
    ep: Path,
    texts: dict[str, str],
    classes: dict[str, list[str]],
    report: LoadReport,
    progress: bool,
) -> None:
    """Add every entity (names, type from its classes, first sentence as description) and its text as a
    document; texts of entities not in the entity file are counted as dropped."""
    for lineno, cols in _tsv_rows(ep, report, progress=progress, at_least=2):
        eid = cols[0].strip()
        if b.has_entity(eid):
            report.bad_line(ep, lineno, f"duplicate entity id {eid!r}", kind="duplicate id")
            continue
        names = [c.strip() for c in cols[1:] if c.strip()]
        text = texts.pop(eid, "")
        b.add_entity(
            eid, names[0], names[1:], first_sentence(text) if text else "", type_from_classes(classes.get(eid, ()))
        )
        if text:
            b.add_document(eid, names[0], text, entity=eid)
    if texts:
        report.drop("text_of_unknown_entity", len(texts))


def load_wikidata5m(
    path: str | os.PathLike | None = None,
    *,
    entity_file: str | os.PathLike | None = None,
    relation_file: str | os.PathLike | None = None,
    triplet_files: Sequence[str | os.PathLike] | None = None,
    text_file: str | os.PathLike | None = None,
    relation_allowlist: Iterable[str] | None = None,
    relation_blocklist: Iterable[str] = DEFAULT_BLOCKLIST,
    on_error: str = "skip",
    progress: bool = False,
    name: str | None = None,
) -> World:
    """Load Wikidata5M from a directory (``path``) and/or explicit file paths into a :class:`World`.

    Explicit paths override what is found in ``path``; with no ``path`` the entity, relation and
    triplet files must be given. ``text_file`` (or a text file found in the directory) gives the
    corpus. The load report is ``world.metadata["load_report"]``.
    """
    check_on_error(on_error)
    files = _files(path, entity_file, relation_file, triplet_files, text_file)
    allow = frozenset(relation_allowlist) if relation_allowlist is not None else None
    block = frozenset(relation_blocklist)
    report = LoadReport(source="wikidata5m", on_error=on_error)
    b = WorldBuilder(name or "wikidata5m")
    labels = _relation_labels(files.relations, report, progress)
    # Triplets before entities: the builder resolves entity references at build time, and P31
    # triples give the entity types.
    classes = _add_triplets(b, files.triplets, labels, allow, block, report, progress)
    texts = _texts(files.text, report, progress)
    ep = files.entities
    _add_entities(b, ep, texts, classes, report, progress)
    world = b.build(drop_dangling=True)
    report.attach(world, b.dropped, path if path is not None else ep)
    report.check_usable(ep, world.num_entities, "entities")
    logger.info("%s", report.summary())
    return world
