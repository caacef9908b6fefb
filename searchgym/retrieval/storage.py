"""On-disk layout shared by saved retrieval indexes: a manifest plus the document table.

::

    my_index/
      manifest.json   {"format": "searchgym-index", "version": 1, "backend": "bm25" | "dense",
                       "num_docs", "docs_sha256", "params": {...backend settings...},
                       "files_sha256": {relative path: SHA-256 of each backend file}}
      docs.jsonl      {"id", "title", "text"} one per line, in index order
      ...             backend files (bm25s arrays in bm25s/, or faiss.index)

The manifest is written last (after every other file was renamed into place), so an interrupted
save never looks complete. Loading checks format, version, backend, document count and the
SHA-256 of ``docs.jsonl`` and raises :class:`IndexFormatError` naming the problem and the fix;
:func:`verify_files` checks the backend files against ``files_sha256`` before they are parsed (an
index saved before that key existed loads with a warning).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Iterable, Sequence

from ..core.artefacts import article, folder_kind
from ..core.atomic_writes import write_file, write_text
from ..core.checksums import sha256_file
from ..errors import SearchGymError

logger = logging.getLogger(__name__)

FORMAT = "searchgym-index"
VERSION = 1
REBUILD_HINT = "rebuild it with `searchgym index build --world DIR --output-dir {path}`"

__all__ = [
    "IndexFormatError",
    "index_error",
    "begin_save",
    "read_docs",
    "read_manifest",
    "write_docs",
    "write_manifest",
    "hash_files",
    "verify_files",
    "FORMAT",
    "VERSION",
]


class IndexFormatError(SearchGymError, ValueError):
    """A saved index directory is missing, partial, corrupt or of another kind; the message says how to fix it."""


def index_error(path: Path, problem: str, hint: str = REBUILD_HINT) -> IndexFormatError:
    """The error for a bad index directory: the problem, then ``hint`` (``{path}`` filled in) saying how to fix it.

    ``hint`` (which rebuilds the index in place) is only given for a folder that is, or was meant to be,
    an index: for a folder holding another artefact (a world, a run) or other files, following it would
    overwrite them, so the error names what is there and asks for a new folder instead."""
    d = Path(path)
    kind = folder_kind(d)
    if kind == "world":
        hint = (
            "it holds a world, not an index: search it with --world {path}, or build an index of it into a new "
            "folder with `searchgym index build --world {path} --output-dir NEW_DIR`"
        )
    elif kind not in (None, "index") or (
        d.is_dir() and not (d / "manifest.json").exists() and not (d / "docs.jsonl").exists() and any(d.iterdir())
    ):
        what = article(kind) if kind else "other files"
        hint = f"it holds {what}, not an index: build one into a new folder with "
        hint += "`searchgym index build --world DIR --output-dir NEW_DIR`"
    return IndexFormatError(f"index directory {str(path)!r}: {problem}; " + hint.format(path=path))


def write_docs(path: Path, doc_ids: Sequence[str], titles: Sequence[str], texts: Sequence[str]) -> str:
    """Write ``docs.jsonl`` atomically and return its SHA-256 hex digest."""
    enc = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    digest = hashlib.sha256()

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            buf: list[str] = []
            for i, t, x in zip(doc_ids, titles, texts):
                buf.append(enc({"id": i, "title": t, "text": x}))
                if len(buf) >= 20_000:
                    chunk = ("\n".join(buf) + "\n").encode("utf-8")
                    digest.update(chunk)
                    f.write(chunk)
                    buf.clear()
            if buf:
                chunk = ("\n".join(buf) + "\n").encode("utf-8")
                digest.update(chunk)
                f.write(chunk)

    write_file(path / "docs.jsonl", write)
    return digest.hexdigest()


def write_manifest(
    path: Path, backend: str, num_docs: int, docs_sha256: str, params: dict, files_sha256: dict[str, str] | None = None
) -> None:
    """Write ``manifest.json`` (last, atomically) describing a saved index; ``files_sha256`` (from
    :func:`hash_files`) records the backend files' checksums."""
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "backend": backend,
        "num_docs": num_docs,
        "docs_sha256": docs_sha256,
        "params": params,
    }
    if files_sha256:
        manifest["files_sha256"] = dict(files_sha256)
    write_text(path / "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False))


def begin_save(path) -> Path:
    """Create the directory and remove any old manifest so a half-written save never loads."""
    d = Path(path)
    d.mkdir(parents=True, exist_ok=True)
    if (d / "manifest.json").exists():
        (d / "manifest.json").unlink()
    return d


def read_manifest(path, backend: str) -> dict:
    """Read and validate ``manifest.json`` of a ``backend`` index at ``path``."""
    d = Path(path)
    if not d.is_dir():
        raise index_error(d, "no such directory")
    mf = d / "manifest.json"
    if not mf.is_file():
        raise index_error(d, "manifest.json is missing (not an index, or an interrupted save)")
    try:
        m = json.loads(mf.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise index_error(d, f"manifest.json is unreadable ({exc})") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise index_error(d, f"manifest.json is not a {FORMAT} manifest")
    if m.get("version") != VERSION:
        raise index_error(
            d, f"index format version {m.get('version')!r} is not supported (this version reads {VERSION})"
        )
    if m.get("backend") != backend:
        raise IndexFormatError(
            f"index directory {str(d)!r} holds a {m.get('backend')!r} index, not {backend!r}; "
            f"pass the matching --backend or rebuild with `searchgym index build --backend {backend}`"
        )
    for key in ("num_docs", "docs_sha256", "params"):
        if key not in m:
            raise index_error(d, f"manifest.json lacks {key!r}")
    return m


def read_docs(path, manifest: dict) -> tuple[list[str], list[str], list[str]]:
    """Read ``docs.jsonl`` and check it against the manifest's count and checksum."""
    d = Path(path)
    f = d / "docs.jsonl"
    if not f.is_file():
        raise index_error(d, "docs.jsonl is missing")
    raw = f.read_bytes()
    if hashlib.sha256(raw).hexdigest() != manifest["docs_sha256"]:
        raise index_error(d, "docs.jsonl does not match the checksum in manifest.json (modified or truncated)")
    ids: list[str] = []
    titles: list[str] = []
    texts: list[str] = []
    loads = json.loads
    for n, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        try:
            row = loads(line)
            ids.append(row["id"])
            titles.append(row["title"])
            texts.append(row["text"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise index_error(d, f"docs.jsonl line {n} is malformed ({exc})") from None
    if len(ids) != manifest["num_docs"]:
        raise index_error(d, f"docs.jsonl has {len(ids)} documents, manifest.json says {manifest['num_docs']}")
    return ids, titles, texts


def hash_files(path, names: Iterable[str]) -> dict[str, str]:
    """SHA-256 of each file ``names`` (paths relative to the index directory ``path``)."""
    d = Path(path)
    return {name: sha256_file(d / name) for name in sorted(names)}


def verify_files(path, manifest: dict, names: Iterable[str]) -> None:
    """Check the backend files ``names`` against the manifest's ``files_sha256``.

    Raises :class:`IndexFormatError` naming the first file that is missing, unlisted or does not
    match. A manifest without ``files_sha256`` (an index saved by an older searchgym) is accepted
    with a warning: its arrays are then only checked for structure.
    """
    d = Path(path)
    listed = manifest.get("files_sha256")
    if listed is None:
        logger.warning(
            "index directory %r has no file checksums (saved by an older searchgym); "
            "rebuild it to have its arrays verified on load",
            str(d),
        )
        return
    if not isinstance(listed, dict):
        raise index_error(d, "manifest.json has a malformed 'files_sha256' entry")
    for name in sorted(names):
        f = d / name
        if not f.is_file():
            raise index_error(d, f"{name} is missing")
        if name not in listed:
            raise index_error(d, f"manifest.json has no checksum for {name}")
        if sha256_file(f) != listed[name]:
            raise index_error(d, f"{name} does not match the checksum in manifest.json (modified or truncated)")
