"""What kind of searchgym artefact a folder or file holds, and the one check every builder runs on its output.

Artefacts identify themselves: a world or an index folder by the ``format`` of its ``manifest.json``
(``searchgym-world``, ``searchgym-index``), an evaluation run by ``run.json`` / ``eval.jsonl``, a training
run (``searchgym train`` / ``sft``) by ``checkpoints/`` or ``metrics.jsonl``, and a JSON Lines file by
the fields of its first record (a trajectory export, a subgraph pool, eval records, ...).

:func:`check_output` refuses to write one kind of artefact where another one lives -- an index built
into a world folder would replace the world's ``manifest.json`` -- unless the caller passes ``force``
(a command's ``--force``). Its errors name what is there and ask for a new path; they never suggest
writing over it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional, Union

from ..errors import InvalidArgumentError

__all__ = ["FOLDER_KINDS", "FILE_KINDS", "folder_kind", "file_kind", "check_output", "article"]

PathLike = Union[str, "os.PathLike[str]"]

#: ``manifest.json`` format → kind of the folder
MANIFEST_FORMATS = {"searchgym-world": "world", "searchgym-index": "index"}
FOLDER_KINDS = ("world", "index", "eval run", "training run")
#: kind of a JSONL file → fields its first record has
FILE_KINDS = {
    "trajectory export": ("game", "solvers"),
    "subgraph pool": ("id", "path", "nodes"),
    "pool rejections": ("seed_index", "reason", "pool_fingerprint"),
    "eval records": ("key", "golds"),
    "demonstrations": ("demo", "segments"),
    "training metrics": ("step",),
}
NOT_SEARCHGYM = "a file searchgym did not write"


def folder_kind(path: PathLike) -> Optional[str]:
    """The kind of artefact folder ``path`` is (see :data:`FOLDER_KINDS`), or None (missing, empty, other)."""
    d = Path(path)
    if not d.is_dir():
        return None
    manifest = d / "manifest.json"
    if manifest.is_file():
        try:
            fmt = json.loads(manifest.read_text(encoding="utf-8")).get("format")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            fmt = None
        return MANIFEST_FORMATS.get(fmt, f"folder with a manifest.json of format {fmt!r}")
    if (d / "triples.npy").is_file():  # a world whose save was interrupted (the manifest is written last)
        return "world"
    if (d / "docs.jsonl").is_file():  # likewise an index
        return "index"
    if (d / "run.json").is_file() or (d / "eval.jsonl").is_file():
        return "eval run"
    if (d / "checkpoints").is_dir() or (d / "metrics.jsonl").is_file():
        return "training run"
    return None


def file_kind(path: PathLike) -> Optional[str]:
    """The kind of JSONL file ``path`` is, from its first record (see :data:`FILE_KINDS`).

    None for a missing or empty file, or JSON objects of no known kind; :data:`NOT_SEARCHGYM` when the
    first line is not a JSON object (appending records to it would damage someone's file).
    """
    p = Path(path)
    if not p.is_file():
        return None
    with open(p, "rb") as f:
        first = b""
        for raw in f:
            if raw.strip():
                first = raw
                break
    if not first:
        return None
    try:
        obj = json.loads(first.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None if not first.endswith(b"\n") else NOT_SEARCHGYM  # a lone torn line: an interrupted first write
    if not isinstance(obj, dict):
        return NOT_SEARCHGYM
    for kind, fields in FILE_KINDS.items():
        if all(k in obj for k in fields):
            return kind
    return None


def article(kind: str) -> str:
    """``kind`` with its indefinite article, for messages: ``"an index"``, ``"a world"``, ``"eval records"``."""
    if kind.endswith("s"):  # a plural kind (eval records, demonstrations) takes none
        return kind
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def check_output(path: PathLike, kind: str, *, force: bool = False) -> None:
    """Raise :class:`~searchgym.errors.InvalidArgumentError` if writing ``kind`` to ``path`` would write over
    another kind of artefact.

    ``kind`` is one of :data:`FOLDER_KINDS` (``path`` is a folder) or :data:`FILE_KINDS` (``path`` is a
    JSONL file). A folder output is refused when the folder holds another kind; a file output when the file
    holds another kind, is a folder, or lies inside a world or index folder (whose files are checksummed).
    ``force`` lets a command's ``--force`` replace what is there. The same kind is always accepted (a
    resume, or the command's own overwrite rules).
    """
    p = Path(path)
    if kind in FOLDER_KINDS:
        if p.exists() and not p.is_dir():
            raise InvalidArgumentError(f"{p} is a file, not a folder; give a folder path for the {kind}")
        found = folder_kind(p)
        if found is not None and found != kind and not force:
            raise InvalidArgumentError(
                f"{p} holds {article(found)}; writing {article(kind)} there would overwrite it: "
                f"give a new folder for the {kind}"
            )
        return
    if kind not in FILE_KINDS:
        raise InvalidArgumentError(f"unknown artefact kind {kind!r}; one of {FOLDER_KINDS + tuple(FILE_KINDS)}")
    if p.is_dir():
        raise InvalidArgumentError(f"{p} is a folder; give a file name for the {kind}, e.g. {p / 'out.jsonl'}")
    if force:
        return
    parent = folder_kind(p.parent)
    if parent in ("world", "index"):
        raise InvalidArgumentError(
            f"{p} is inside {article(parent)} folder ({p.parent}); writing there would change the {parent}: "
            f"give a file outside it for the {kind}"
        )
    found = file_kind(p)
    if found is not None and found != kind:
        raise InvalidArgumentError(
            f"{p} holds {found if found == NOT_SEARCHGYM else article(found)}; writing {article(kind)} "
            f"there would damage it: give a new file for the {kind}"
        )
