"""Search-R1 / FlashRAG corpus JSONL ↔ world corpus.

The format (one JSON object per line, plain or ``.gz``/``.bz2``/``.xz``)::

    {"id": "0", "contents": "\\"Aaron\\"\\nAaron is a prophet, high priest, and the brother of Moses."}

``contents`` is the title on the first line, wrapped in double quotes, then the body. The
title is the first line with its surrounding quotes removed and the body is the rest; a
``contents`` with no newline has no title (body only, counted as ``untitled``). Lines of the
alternative shape ``{"id", "title", "text"}`` are accepted too.

* :func:`read_flashrag_corpus` parses a file into a :class:`FlashRAGCorpus`.
* :func:`link_to_world` links document titles to entities (exact title first, then
  case-insensitive; ``by="name"`` also matches aliases).
* :func:`load_flashrag_corpus` builds a corpus-only world, or (``world=``) a new world with the
  KG of ``world`` and this corpus attached and linked.
* :func:`save_flashrag_corpus` exports a world's corpus in the same format, for Search-R1's
  retrieval server and training scripts.

Malformed lines (bad JSON, missing ``id``/``contents``, duplicate ids) are reported with
``file:line`` and skipped or raise, as for every loader (:mod:`.common`).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ...core.arg_checks import check_choice
from ...core.atomic_writes import write_file
from ...core.jsonl import loads_json
from ...errors import InvalidArgumentError
from ..world import World, WorldBuilder, normalize_name
from .common import LoaderError, LoadReport, check_on_error, iter_lines, open_text

logger = logging.getLogger(__name__)

__all__ = [
    "FlashRAGCorpus",
    "parse_contents",
    "format_contents",
    "read_flashrag_corpus",
    "link_to_world",
    "load_flashrag_corpus",
    "save_flashrag_corpus",
    "with_documents",
]

LINK_BY = ("title", "name")
MODES = ("replace", "append")


def parse_contents(contents: str) -> tuple[str, str]:
    """Split a Search-R1 ``contents`` string into ``(title, body)``.

    ``'"Paris"\\nParis is the capital of France.'`` → ``("Paris", "Paris is the capital of France.")``.
    Without a newline the whole string is the body and the title is empty.
    """
    if "\n" not in contents:
        return "", contents
    first, body = contents.split("\n", 1)
    title = first.strip()
    if len(title) >= 2 and title[0] == '"' and title[-1] == '"':
        title = title[1:-1]
    return title, body


def format_contents(title: str, text: str) -> str:
    """Inverse of :func:`parse_contents`: ``'"Title"\\nbody'`` (newlines in the title become spaces)."""
    return f'"{" ".join(title.splitlines())}"\n{text}'


@dataclass
class FlashRAGCorpus:
    """A parsed corpus: index-aligned document ids, titles and bodies, and the load report."""

    ids: list[str] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    report: LoadReport = field(default_factory=lambda: LoadReport(source="flashrag"))

    def __len__(self) -> int:
        return len(self.ids)


def _record(obj: object) -> tuple[str, str, str]:
    """(id, title, text) of one decoded line; raises ValueError naming what is missing."""
    if not isinstance(obj, dict):
        raise InvalidArgumentError(f"expected a JSON object, got {type(obj).__name__}")
    doc_id = obj.get("id")
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)) or doc_id == "":
        raise InvalidArgumentError("missing or empty 'id' (a string or integer)")
    if isinstance(obj.get("contents"), str):
        title, text = parse_contents(obj["contents"])
    elif isinstance(obj.get("text"), str):
        title = obj.get("title", "")
        if not isinstance(title, str):
            raise InvalidArgumentError("'title' must be a string")
        text = obj["text"]
    else:
        raise InvalidArgumentError("missing 'contents' string (or 'title'/'text' strings)")
    return str(doc_id), title, text


def read_flashrag_corpus(
    path: str | os.PathLike,
    *,
    max_docs: int | None = None,
    on_error: str = "skip",
    progress: bool = False,
    reserved_ids: Iterable[str] = (),
) -> FlashRAGCorpus:
    """Parse a Search-R1/FlashRAG JSONL corpus file.

    ``max_docs`` stops after that many documents; ``reserved_ids`` are ids already taken (a
    document reusing one is reported as a duplicate, like a repeated id inside the file).
    """
    check_on_error(on_error)
    if max_docs is not None and max_docs < 1:
        raise InvalidArgumentError(f"max_docs must be a positive integer or None, got {max_docs!r}")
    p = Path(path)
    corpus = FlashRAGCorpus(report=LoadReport(source="flashrag", on_error=on_error))
    report = corpus.report
    seen: dict[str, int] = {i: 0 for i in reserved_ids}
    for lineno, line in iter_lines(p, report, progress=progress, desc="corpus"):
        if not line.strip():
            continue
        try:
            doc_id, title, text = _record(loads_json(line))
        except json.JSONDecodeError as exc:
            report.bad_line(p, lineno, f"bad JSON ({exc.msg} at column {exc.colno})", kind="bad JSON")
            continue
        except ValueError as exc:
            report.bad_line(p, lineno, str(exc), kind="missing field")
            continue
        if doc_id in seen:
            where = f"line {seen[doc_id]}" if seen[doc_id] else "the world it is attached to"
            report.bad_line(p, lineno, f"duplicate document id {doc_id!r} (first seen in {where})", kind="duplicate id")
            continue
        seen[doc_id] = lineno
        if not title:
            report.counts["untitled"] += 1
        corpus.ids.append(doc_id)
        corpus.titles.append(title)
        corpus.texts.append(text)
        if max_docs is not None and len(corpus.ids) >= max_docs:
            break
    report.counts["documents"] = len(corpus.ids)
    report.check_usable(p, len(corpus.ids), "documents")
    return corpus


def link_to_world(
    titles: Sequence[str] | FlashRAGCorpus,
    world: World,
    *,
    by: str = "title",
    case_insensitive: bool = True,
    report: LoadReport | None = None,
) -> list[str | None]:
    """The entity id each title names in ``world`` (None where no entity matches).

    ``by="title"`` matches entity titles only, ``by="name"`` titles and aliases. Exact matches win
    over case-insensitive ones (``case_insensitive``); when several entities share the name the
    first by the world's storage order is chosen and the link is counted as ``ambiguous_links``
    in ``report``. Titles are looked up once each, so passage corpora (many passages per title)
    link fast.
    """
    check_choice("by", by, LINK_BY)
    if isinstance(titles, FlashRAGCorpus):
        titles = titles.titles
    cache: dict[str, tuple[str | None, bool]] = {}
    out: list[str | None] = []
    linked = ambiguous = 0
    for t in titles:
        hit = cache.get(t)
        if hit is None:
            hit = cache[t] = _match(world, t, by, case_insensitive)
        eid, amb = hit
        out.append(eid)
        linked += eid is not None
        ambiguous += amb
    if report is not None:
        report.counts["linked_documents"] += linked
        report.counts["ambiguous_links"] += ambiguous
    return out


def _match(world: World, title: str, by: str, case_insensitive: bool) -> tuple[str | None, bool]:
    if not title:
        return None, False
    found = world.find_entities(title, case_insensitive=case_insensitive)
    if by == "title":
        key = normalize_name(title)
        exact = [e for e in found if e.title == title]
        found = exact or ([e for e in found if normalize_name(e.title) == key] if case_insensitive else [])
    else:
        exact = [e for e in found if title in e.names]
        found = exact or found
    if not found:
        return None, False
    return found[0].id, len(found) > 1


def with_documents(
    world: World,
    ids: Sequence[str],
    titles: Sequence[str],
    texts: Sequence[str],
    entities: Sequence[str | None],
    *,
    mode: str = "replace",
    name: str | None = None,
    metadata: dict | None = None,
) -> World:
    """A new :class:`World` with the KG of ``world`` and the given documents.

    ``mode="replace"`` drops the world's own documents, ``"append"`` keeps them first. ``world``
    itself is not changed. Raises :class:`ValueError` on a duplicate document id or a link to an
    unknown entity.
    """
    check_choice("mode", mode, MODES)
    if not (len(ids) == len(titles) == len(texts) == len(entities)):
        raise InvalidArgumentError("ids, titles, texts and entities must have the same length")
    cols = world.columns()
    keep = mode == "append"
    doc_ids = [*(cols.doc_ids if keep else ()), *ids]
    doc_ent = [
        *(cols.doc_entities.tolist() if keep else ()),
        *(world.entity_index(e) if e is not None else -1 for e in entities),
    ]
    if len(set(doc_ids)) != len(doc_ids):
        raise InvalidArgumentError(
            "duplicate document ids between the world's corpus and the new documents; use mode='replace'"
        )
    n_lits = _literals_used(cols.triples)
    return World.from_columns(
        replace(
            cols,
            name=name or world.name,
            entity_ids=list(cols.entity_ids),
            titles=list(cols.titles),
            aliases=[tuple(a) for a in cols.aliases],
            descriptions=list(cols.descriptions),
            types=list(cols.types),
            relation_ids=list(cols.relation_ids),
            relation_labels=list(cols.relation_labels),
            literal_values=list(cols.literal_values[:n_lits]),
            literal_kinds=list(cols.literal_kinds[:n_lits]),
            triples=np.array(cols.triples, dtype=np.int64),
            doc_ids=doc_ids,
            doc_titles=[*(cols.doc_titles if keep else ()), *titles],
            doc_texts=[*(cols.doc_texts if keep else ()), *texts],
            doc_entities=np.asarray(doc_ent, dtype=np.int64),
            metadata={**world.metadata, **(metadata or {})},
        )
    )


def _literals_used(triples: np.ndarray) -> int:
    """How many leading literals the triples use: one past the highest literal row a tail names."""
    lit_tails = triples[:, 2][triples[:, 2] < 0] if len(triples) else np.zeros(0, np.int64)
    return int((-lit_tails - 1).max() + 1) if len(lit_tails) else 0


def load_flashrag_corpus(
    path: str | os.PathLike,
    *,
    world: World | None = None,
    link_by: str = "title",
    case_insensitive: bool = True,
    mode: str = "replace",
    max_docs: int | None = None,
    on_error: str = "skip",
    progress: bool = False,
    name: str | None = None,
) -> World:
    """Load a Search-R1/FlashRAG corpus as a world.

    Without ``world``: a corpus-only world (no entities, unlinked documents). With ``world``: a
    new world holding ``world``'s KG and this corpus (``mode="replace"``, the default, drops the
    world's own documents; ``"append"`` keeps them), each document linked to the entity its
    title names (see :func:`link_to_world`). The load report, with the link counts, is
    ``metadata["load_report"]`` (a KG loader's report moves to ``metadata["kg_load_report"]``).
    """
    check_choice("link_by", link_by, LINK_BY)
    check_choice("mode", mode, MODES)
    reserved = world.doc_ids if world is not None and mode == "append" else ()
    corpus = read_flashrag_corpus(path, max_docs=max_docs, on_error=on_error, progress=progress, reserved_ids=reserved)
    report = corpus.report
    meta = {"corpus_source": "flashrag", "corpus_path": str(path)}
    if world is None:
        entities: list[str | None] = [None] * len(corpus)
        base = WorldBuilder(name or "flashrag", metadata={"source": "flashrag"}).build()
    else:
        entities = link_to_world(corpus.titles, world, by=link_by, case_insensitive=case_insensitive, report=report)
        base = world
        if "load_report" in world.metadata:
            meta["kg_load_report"] = world.metadata["load_report"]
    out = with_documents(base, corpus.ids, corpus.titles, corpus.texts, entities, mode=mode, name=name, metadata=meta)
    out.metadata["load_report"] = report.as_dict()
    logger.info("%s", report.summary())
    return out


def save_flashrag_corpus(world: World, path: str | os.PathLike) -> int:
    """Write ``world``'s documents as Search-R1/FlashRAG JSONL (compressed by suffix); returns the count.

    The file is written under a temporary name and renamed, so a crash never leaves half a corpus.
    """
    p = Path(path)
    if p.is_dir():
        raise LoaderError(f"{p}: is a directory; give a file name such as corpus.jsonl")

    def write(tmp: Path) -> int:
        with open_text(tmp, "w") as f:
            for doc_id, title, text in zip(world.doc_ids, world.doc_titles, world.doc_texts):
                f.write(json.dumps({"id": doc_id, "contents": format_contents(title, text)}, ensure_ascii=False))
                f.write("\n")
        return len(world.doc_ids)

    return write_file(p, write)
