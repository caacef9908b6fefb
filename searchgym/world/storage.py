"""On-disk world format: a directory of column files and a manifest.

Version 2 (written by default): every column is a flat binary file, so saving and loading are a
few large reads and writes instead of one JSON object per row::

    my_world/
      manifest.json       {"format": "searchgym-world", "version": 2, "name", "metadata",
                           "counts": {entities, relations, literals, triples, documents},
                           "files": {file name: size in bytes},
                           "files_sha256": {file name: SHA-256 hex digest}}
      .searchgym-verified.json  which files were verified, by stat (searchgym.core.checksums)
      <column>.utf8       the column's strings concatenated, UTF-8 (lone surrogates kept)
      <column>.offsets.npy  int64 (rows + 1,): character offsets of row i's string in the decoded
                          text, [offsets[i], offsets[i + 1])
        columns: entity_ids, entity_titles, entity_descriptions, entity_types, entity_aliases,
                 relation_ids, relation_labels, literal_values, literal_kinds,
                 doc_ids, doc_titles, doc_texts
      entity_alias_offsets.npy  int64 (entities + 1,): entity i's aliases are rows
                          [a[i], a[i + 1]) of the entity_aliases column
      triples.npy         int64 (N, 3): head entity row, relation row, tail code;
                          tail code >= 0 is an entity row, < 0 is literal row (-code - 1)
      doc_entities.npy    int64 (documents,): the entity row a document describes, or -1

Version 1 (still read; ``save_world(..., version=1)`` still writes it): JSON Lines per table::

      entities.jsonl    {"id", "title", "aliases": [..], "description", "type"}   one per line
      relations.jsonl   {"id", "label"}
      literals.jsonl    {"value", "kind"}          kind ∈ date | quantity | string
      triples.npy       as above
      documents.jsonl   {"id", "title", "text", "entity": id or null}

This module reads and writes a world's tables, :class:`WorldColumns`, and knows nothing of the
:class:`~searchgym.world.world.World` built from them: :func:`~searchgym.world.world.load_world` and
:func:`~searchgym.world.world.save_world` (also :meth:`World.load` / :meth:`World.save`) turn the
tables into a World and back.

Rows refer to 0-based positions in the tables. Every file is written to a temporary name and
renamed, and the manifest is written last, so an interrupted save never looks complete. Loading
checks the manifest's sizes and counts, every file's SHA-256 and every column's shape, and fails
with :class:`WorldFormatError` naming the file and the command that rebuilds the world; a version
this code does not know is refused with the versions it reads. Checksums are verified once per file
version: :class:`~searchgym.core.checksums.VerifiedCache` skips a file whose size, mtime, ctime and
inode are those it had when last verified (``save_world`` records the files it wrote). A world saved
before checksums existed loads as before; its files' checksums are recorded on the first load and
checked from then on.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ..core.atomic_writes import write_file
from ..core.checksums import CACHE_NAME, VerifiedCache, bytes_sha256, sha256_file
from ..core.moved import moved_getattr
from ..core.path_errors import not_there
from ..core.progress import progress_iter
from ..errors import InvalidArgumentError, SearchGymError

logger = logging.getLogger(__name__)

__all__ = [
    "FORMAT",
    "VERSION",
    "READABLE_VERSIONS",
    "WorldColumns",
    "WorldFormatError",
    "read_columns",
    "write_columns",
]

FORMAT = "searchgym-world"
VERSION = 2
READABLE_VERSIONS = (1, 2)
FILES = ("entities.jsonl", "relations.jsonl", "literals.jsonl", "triples.npy", "documents.jsonl")  # version 1
# version 2: string column file name -> (count key, WorldColumns field)
STRING_COLUMNS = {
    "entity_ids": ("entities", "entity_ids"),
    "entity_titles": ("entities", "titles"),
    "entity_descriptions": ("entities", "descriptions"),
    "entity_types": ("entities", "types"),
    "relation_ids": ("relations", "relation_ids"),
    "relation_labels": ("relations", "relation_labels"),
    "literal_values": ("literals", "literal_values"),
    "literal_kinds": ("literals", "literal_kinds"),
    "doc_ids": ("documents", "doc_ids"),
    "doc_titles": ("documents", "doc_titles"),
    "doc_texts": ("documents", "doc_texts"),
}
ARRAYS_V2 = ("entity_alias_offsets.npy", "triples.npy", "doc_entities.npy")


class WorldFormatError(SearchGymError, ValueError):
    """A world directory is missing, partial or corrupt; the message names the file and a fix."""


@dataclass(frozen=True)
class WorldColumns:
    """A world's tables as they are stored: what :func:`write_columns` writes and :func:`read_columns`
    reads. The fields are :class:`~searchgym.world.world.World`'s constructor arguments, so the World and
    its storage share one typed contract instead of the storage reading the World's private fields.

    ``triples`` is ``(N, 3)`` int64 (head row, relation row, tail code: ``>= 0`` an entity row, ``< 0``
    literal ``-code - 1``); ``doc_entities`` holds the entity row each document describes, or -1.
    """

    name: str
    metadata: dict
    entity_ids: list[str]
    titles: list[str]
    aliases: list[tuple[str, ...]]
    descriptions: list[str]
    types: list[str]
    relation_ids: list[str]
    relation_labels: list[str]
    literal_values: list[str]
    literal_kinds: list[str]
    triples: np.ndarray
    doc_ids: list[str]
    doc_titles: list[str]
    doc_texts: list[str]
    doc_entities: np.ndarray


def _write_jsonl(path: Path, rows: Iterable[dict], total: int, progress: bool, desc: str) -> None:
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            buf: list[str] = []
            for row in progress_iter(rows, total, desc, unit="row", enabled=progress, scale=True):
                buf.append(dumps(row))
                if len(buf) >= 50_000:
                    f.write("\n".join(buf) + "\n")
                    buf.clear()
            if buf:
                f.write("\n".join(buf) + "\n")

    write_file(path, write)


def _write_binary(path: Path, write) -> None:
    """``write(file)`` on a binary file that replaces ``path`` whole (atomic_writes.write_file)."""

    def to(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            write(f)

    write_file(path, to)


def _save_array(path: Path, array: np.ndarray) -> None:
    _write_binary(path, lambda f: np.save(f, np.ascontiguousarray(array, dtype=np.int64)))


def _save_strings(d: Path, name: str, values) -> None:
    """One string column: ``name.utf8`` (all strings joined) and ``name.offsets.npy`` (char offsets)."""
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=len(values)), out=offsets[1:])
    _write_binary(d / f"{name}.utf8", lambda f: f.write("".join(values).encode("utf-8", "surrogatepass")))
    _save_array(d / f"{name}.offsets.npy", offsets)


def write_columns(w: WorldColumns, path, *, progress: bool = False, version: int = VERSION) -> None:
    """Write a world's tables to directory ``path`` in format ``version`` (see the module docstring)."""
    if version not in READABLE_VERSIONS:
        raise InvalidArgumentError(f"world format version {version} does not exist; use one of {READABLE_VERSIONS}")
    d = Path(path)
    d.mkdir(parents=True, exist_ok=True)
    manifest = d / "manifest.json"
    if manifest.exists():
        manifest.unlink()  # the directory is incomplete until the new manifest lands
    if version == 1:
        names = list(_save_v1(w, d, progress))
    else:
        names = []
        columns = progress_iter(STRING_COLUMNS.items(), len(STRING_COLUMNS), "columns", unit="column", enabled=progress)
        for name, (_, field) in columns:
            _save_strings(d, name, getattr(w, field))
            names += [f"{name}.utf8", f"{name}.offsets.npy"]
        n_ent = len(w.entity_ids)
        _save_strings(d, "entity_aliases", [a for row in w.aliases for a in row])
        alias_offsets = np.zeros(n_ent + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, w.aliases), dtype=np.int64, count=n_ent), out=alias_offsets[1:])
        _save_array(d / "entity_alias_offsets.npy", alias_offsets)
        _save_array(d / "triples.npy", w.triples)
        _save_array(d / "doc_entities.npy", w.doc_entities)
        names += ["entity_aliases.utf8", "entity_aliases.offsets.npy", *ARRAYS_V2]
    body: dict[str, Any] = {
        "format": FORMAT,
        "version": version,
        "name": w.name,
        "metadata": w.metadata,
        "counts": {
            "entities": len(w.entity_ids),
            "relations": len(w.relation_ids),
            "literals": len(w.literal_values),
            "triples": int(w.triples.shape[0]),
            "documents": len(w.doc_ids),
        },
        "files": {name: (d / name).stat().st_size for name in names},
        "files_sha256": {name: sha256_file(d / name) for name in names},
    }
    raw = json.dumps(body, indent=2, ensure_ascii=False).encode("utf-8")
    write_file(manifest, lambda tmp: tmp.write_bytes(raw))
    cache = VerifiedCache(d, bytes_sha256(raw))  # what was just written needs no hashing on load
    for name, sha in body["files_sha256"].items():
        cache.record(name, sha)
    cache.save()


def _save_v1(w: WorldColumns, d: Path, progress: bool) -> tuple[str, ...]:
    """The version-1 JSON Lines tables (see the module docstring)."""
    _write_jsonl(
        d / "entities.jsonl",
        (
            {"id": i, "title": t, "aliases": list(a), "description": ds, "type": ty}
            for i, t, a, ds, ty in zip(w.entity_ids, w.titles, w.aliases, w.descriptions, w.types)
        ),
        len(w.entity_ids),
        progress,
        "entities",
    )
    _write_jsonl(
        d / "relations.jsonl",
        ({"id": i, "label": lab} for i, lab in zip(w.relation_ids, w.relation_labels)),
        len(w.relation_ids),
        False,
        "relations",
    )
    _write_jsonl(
        d / "literals.jsonl",
        ({"value": v, "kind": k} for v, k in zip(w.literal_values, w.literal_kinds)),
        len(w.literal_values),
        False,
        "literals",
    )
    _save_array(d / "triples.npy", w.triples)
    ents = w.entity_ids
    _write_jsonl(
        d / "documents.jsonl",
        (
            {"id": i, "title": t, "text": x, "entity": ents[e] if e >= 0 else None}
            for i, t, x, e in zip(w.doc_ids, w.doc_titles, w.doc_texts, np.asarray(w.doc_entities).tolist())
        ),
        len(w.doc_ids),
        progress,
        "documents",
    )
    return FILES


def _read_jsonl(path: Path, expected: int, progress: bool, desc: str) -> Iterator[dict]:
    loads = json.loads
    lineno = 0
    with open(path, encoding="utf-8") as f:
        try:
            for lineno, line in enumerate(
                progress_iter(f, expected, desc, unit="row", enabled=progress, scale=True), 1
            ):
                try:
                    yield loads(line)
                except json.JSONDecodeError as exc:
                    raise WorldFormatError(
                        f"{path}: line {lineno} is not valid JSON ({exc.msg}); the world is corrupt, rebuild it"
                    ) from None
        except UnicodeDecodeError:
            raise WorldFormatError(
                f"{path}: line {lineno + 1} is not valid UTF-8; the world is corrupt, rebuild it"
            ) from None


def _columns(
    path: Path, expected: int, keys: tuple[str, ...], progress: bool, convert: dict[str, Callable] | None = None
):
    cols: list[list] = [[] for _ in keys]
    appends = [c.append for c in cols]
    try:
        for row in _read_jsonl(path, expected, progress, path.stem):
            for app, k in zip(appends, keys):
                app(row[k])
    except KeyError as exc:
        raise WorldFormatError(f"{path}: a row lacks field {exc.args[0]!r}; the world is corrupt, rebuild it") from None
    except TypeError:
        raise WorldFormatError(
            f"{path}: row {len(cols[-1]) + 1} is not a JSON object; the world is corrupt, rebuild it"
        ) from None
    if len(cols[0]) != expected:
        raise WorldFormatError(
            f"{path}: has {len(cols[0])} rows but manifest.json says {expected}; the save was interrupted "
            "or the file was edited: rebuild the world"
        )
    if convert:
        for j, k in enumerate(keys):
            if k in convert:
                try:
                    cols[j] = [convert[k](v) for v in cols[j]]
                except (TypeError, ValueError):
                    raise WorldFormatError(
                        f"{path}: a row has a malformed {k!r} field; the world is corrupt, rebuild it"
                    ) from None
    return cols


def read_columns(path, *, progress: bool = False) -> WorldColumns:
    """Read the tables of a world directory written by :func:`write_columns`, every file checked
    against the manifest (sizes, counts, SHA-256, shapes); raises :class:`WorldFormatError` naming the
    file and the fix."""
    d = Path(path)
    if not d.is_dir():
        raise WorldFormatError(
            f"world directory {d} {not_there(d, folder=True)}; build one with "
            f"`searchgym world build --output-dir {d if not d.exists() else 'DIR'}`"
        )
    mf = d / "manifest.json"
    if not mf.is_file():
        raise WorldFormatError(
            f"{d} has no manifest.json: it is not a searchgym world or its save did not finish; rebuild it"
        )
    raw = mf.read_bytes()
    try:
        manifest = json.loads(raw)
    except ValueError as exc:  # not JSON, or not UTF-8
        raise WorldFormatError(f"{mf} is not valid JSON ({getattr(exc, 'msg', exc)}); rebuild the world") from None
    if not isinstance(manifest, dict):
        raise WorldFormatError(f"{mf} is not a JSON object; rebuild the world")
    if manifest.get("format") != FORMAT:
        raise WorldFormatError(f"{mf}: format is {manifest.get('format')!r}, expected {FORMAT!r}")
    version = manifest.get("version")
    if version not in READABLE_VERSIONS:
        raise WorldFormatError(
            f"{mf}: version {version} is not supported (this searchgym reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}); upgrade searchgym or rebuild the world"
        )
    files = manifest.get("files")
    c = manifest.get("counts")
    if not isinstance(files, dict) or not isinstance(c, dict):
        raise WorldFormatError(f"{mf} lacks its 'files'/'counts' tables; the save did not finish: rebuild the world")
    for name in FILES if version == 1 else _v2_files():
        if name not in files:
            raise WorldFormatError(f"{mf} does not list {name}; the world directory is partial: rebuild it")
    for key in ("entities", "relations", "literals", "triples", "documents"):
        if not isinstance(c.get(key), int):
            raise WorldFormatError(f"{mf}: counts.{key} is missing or not an integer; rebuild the world")
    for name, size in files.items():
        p = d / name
        if not p.is_file():
            raise WorldFormatError(f"{p} is missing; the world directory is partial: rebuild it")
        if p.stat().st_size != size:
            raise WorldFormatError(
                f"{p} is {p.stat().st_size} bytes but manifest.json says {size}; the file is truncated or was "
                f"modified: rebuild the world"
            )
    _verify_checksums(d, manifest, bytes_sha256(raw))
    columns = _load_v1(d, c, progress) if version == 1 else _load_v2(d, c)
    return WorldColumns(name=manifest.get("name", d.name), metadata=manifest.get("metadata", {}), **columns)


def _rebuild_hint(d: Path, metadata) -> str:
    """The command that rebuilds the world in ``d`` (its source, and seed when synthetic, from its metadata)."""
    meta = metadata if isinstance(metadata, dict) else {}
    source = meta.get("source")
    args = f" --source {source}" if isinstance(source, str) and source.replace("-", "").isalnum() else ""
    if source == "synthetic" and isinstance(meta.get("seed"), int):
        args += f" --seed {meta['seed']}"
    return f"rebuild it: `searchgym world build{args} --output-dir {d} --force` (with the options it was built with)"


def _verify_checksums(d: Path, manifest: dict, scope: str) -> None:
    """Every listed file's SHA-256 against ``files_sha256`` (or, for a world saved before checksums
    existed, against what was recorded on its first load); hashes only files changed since verified."""
    files, listed = manifest["files"], manifest.get("files_sha256")
    if listed is not None and not (
        isinstance(listed, dict) and all(isinstance(listed.get(name), str) for name in files)
    ):
        raise WorldFormatError(
            f"{d / 'manifest.json'} has a malformed 'files_sha256' table; {_rebuild_hint(d, manifest.get('metadata'))}"
        )
    cache = VerifiedCache(d, scope)
    for name in sorted(files):
        if not cache.check(name, listed[name] if listed is not None else None):
            if listed is not None:
                why = (
                    "does not match its SHA-256 in manifest.json: it was modified or damaged after the world was saved"
                )
            else:
                why = f"changed since this world was first loaded (its SHA-256 was recorded then in {CACHE_NAME})"
            raise WorldFormatError(f"{d / name} {why}; {_rebuild_hint(d, manifest.get('metadata'))}")
    if cache.first_seen:
        logger.info(
            "%s was saved by an older searchgym without checksums: recorded them in %s on this first load, "
            "so later damage is caught (save the world again to keep them in its manifest)",
            d,
            CACHE_NAME,
        )
    cache.save()


def _load_array(path: Path, shape: tuple) -> np.ndarray:
    """An int64 array of exactly ``shape`` (``-1`` = any length) or a :class:`WorldFormatError`."""
    try:
        a = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise WorldFormatError(f"{path} cannot be read ({exc}); rebuild the world") from None
    if a.ndim != len(shape) or any(want not in (-1, got) for want, got in zip(shape, a.shape)):
        expected = "(" + ", ".join("N" if x == -1 else str(x) for x in shape) + (",)" if len(shape) == 1 else ")")
        raise WorldFormatError(f"{path} has shape {a.shape}, expected {expected}; rebuild the world")
    if a.dtype != np.int64:
        raise WorldFormatError(f"{path} holds {a.dtype}, expected int64; rebuild the world")
    return a


def _load_triples(d: Path, n: int) -> np.ndarray:
    return _load_array(d / "triples.npy", (n, 3))


def _load_v1(d: Path, c: dict, progress: bool) -> dict:
    """World constructor columns from the version-1 JSON Lines tables."""
    ids, titles, aliases, descs, types = _columns(
        d / "entities.jsonl",
        c["entities"],
        ("id", "title", "aliases", "description", "type"),
        progress,
        {"aliases": tuple},
    )
    rel_ids, rel_labels = _columns(d / "relations.jsonl", c["relations"], ("id", "label"), False)
    lit_values, lit_kinds = _columns(d / "literals.jsonl", c["literals"], ("value", "kind"), False)
    triples = _load_triples(d, c["triples"])
    doc_ids, doc_titles, doc_texts, doc_ent_ids = _columns(
        d / "documents.jsonl", c["documents"], ("id", "title", "text", "entity"), progress
    )
    index = {e: i for i, e in enumerate(ids)}
    try:
        doc_ent = np.fromiter(
            (index[e] if e is not None else -1 for e in doc_ent_ids), dtype=np.int64, count=len(doc_ent_ids)
        )
    except KeyError as exc:
        raise WorldFormatError(
            f"{d / 'documents.jsonl'}: a document links to unknown entity {exc.args[0]!r}; rebuild the world"
        ) from None
    return dict(
        entity_ids=ids,
        titles=titles,
        aliases=aliases,
        descriptions=descs,
        types=types,
        relation_ids=rel_ids,
        relation_labels=rel_labels,
        literal_values=lit_values,
        literal_kinds=lit_kinds,
        triples=triples,
        doc_ids=doc_ids,
        doc_titles=doc_titles,
        doc_texts=doc_texts,
        doc_entities=doc_ent,
    )


def _v2_files() -> list[str]:
    names = [f"{n}{ext}" for n in (*STRING_COLUMNS, "entity_aliases") for ext in (".utf8", ".offsets.npy")]
    return names + list(ARRAYS_V2)


def _load_strings(d: Path, name: str, rows: int) -> list[str]:
    """A version-2 string column of exactly ``rows`` strings."""
    offsets = _load_array(d / f"{name}.offsets.npy", (rows + 1,))
    try:
        text = (d / f"{name}.utf8").read_bytes().decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise WorldFormatError(
            f"{d / (name + '.utf8')} is not valid UTF-8 at byte {exc.start}; the world is corrupt, rebuild it"
        ) from None
    if offsets[0] != 0 or offsets[-1] != len(text) or (rows and bool((np.diff(offsets) < 0).any())):
        raise WorldFormatError(
            f"{d / (name + '.offsets.npy')} does not partition {name}.utf8 ({len(text)} characters) "
            f"into {rows} strings; the world is corrupt, rebuild it"
        )
    bounds = offsets.tolist()
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def _load_v2(d: Path, c: dict) -> dict:
    """World constructor columns from the version-2 column files."""
    col = {name: _load_strings(d, name, c[key]) for name, (key, _) in STRING_COLUMNS.items()}
    alias_offsets = _load_array(d / "entity_alias_offsets.npy", (c["entities"] + 1,))
    flat = _load_strings(d, "entity_aliases", int(alias_offsets[-1]) if len(alias_offsets) else 0)
    if alias_offsets[0] != 0 or bool((np.diff(alias_offsets) < 0).any()):
        raise WorldFormatError(
            f"{d / 'entity_alias_offsets.npy'} is not a non-decreasing offset table from 0; "
            f"the world is corrupt, rebuild it"
        )
    bounds = alias_offsets.tolist()
    aliases = [tuple(flat[a:b]) for a, b in zip(bounds, bounds[1:])]
    doc_ent = _load_array(d / "doc_entities.npy", (c["documents"],))
    if len(doc_ent) and (doc_ent.min() < -1 or doc_ent.max() >= c["entities"]):
        raise WorldFormatError(
            f"{d / 'doc_entities.npy'}: a document links to an entity row outside the entity table; rebuild the world"
        )
    return dict(
        entity_ids=col["entity_ids"],
        titles=col["entity_titles"],
        aliases=aliases,
        descriptions=col["entity_descriptions"],
        types=col["entity_types"],
        relation_ids=col["relation_ids"],
        relation_labels=col["relation_labels"],
        literal_values=col["literal_values"],
        literal_kinds=col["literal_kinds"],
        triples=_load_triples(d, c["triples"]),
        doc_ids=col["doc_ids"],
        doc_titles=col["doc_titles"],
        doc_texts=col["doc_texts"],
        doc_entities=doc_ent,
    )


__getattr__ = moved_getattr(__name__)  # load_world / save_world moved to searchgym.world.world
