"""What kind of searchgym artefact a folder or file holds, and the one check every builder runs on its output.

Artefacts identify themselves: a world or an index folder by the ``format`` of its ``manifest.json``
(``searchgym-world``, ``searchgym-index``), an evaluation run by ``run.json`` / ``eval.jsonl``, a training
run (``searchgym train`` / ``sft``) by ``checkpoints/`` or ``metrics.jsonl``, and a JSON Lines file by
the fields of its first record (a trajectory export, a subgraph pool, eval records, ...).

:func:`check_output` refuses to write one kind of artefact where another one lives -- an index built
into a world folder would replace the world's ``manifest.json`` -- unless the caller passes ``force``
(a command's ``--force``). Its errors name what is there and ask for a new path; they never suggest
writing over it. :func:`check_report_output` does the same for a whole-file report (a PNG, a JSON report, a
YAML config dump): it is never written over the command's own input, into a world or index, over a file of
another kind, or with a suffix its writer cannot write.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Iterable, Optional, Union

from ..errors import InvalidArgumentError
from .atomic_writes import write_file
from .jsonl import loads_json
from .path_errors import refuse_empty_path

__all__ = [
    "FOLDER_KINDS",
    "FILE_KINDS",
    "REPORT_KINDS",
    "folder_kind",
    "file_kind",
    "check_output",
    "check_report_output",
    "write_report",
    "article",
]

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
#: kind of a whole-file report → the suffixes its writer writes (the first is the one to suggest)
REPORT_KINDS = {"PNG figure": (".png",), "JSON report": (".json",), "YAML config": (".yaml", ".yml")}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: files that make a folder an artefact (:func:`folder_kind`); a report never replaces one
MARKER_FILES = ("manifest.json", "run.json")


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


def check_report_output(
    path: PathLike, kind: str, *, inputs: Iterable[Optional[PathLike]] = (), suffixes: Optional[tuple] = None
) -> Path:
    """Raise :class:`~searchgym.errors.InvalidArgumentError` if writing the report ``kind`` (one of
    :data:`REPORT_KINDS`) to the file ``path`` would lose something; returns ``path`` as a Path.

    Refused: an empty path or a folder; a suffix the writer cannot write (``suffixes``, default the kind's);
    the same file as one of ``inputs`` (the command's own input files; None entries are skipped); a path
    inside a world or index folder, or an artefact folder's ``manifest.json`` / ``run.json``; a path below a
    file; an existing non-empty file that holds a searchgym JSONL artefact or is not a ``kind`` report (a PNG,
    a JSON object, a YAML mapping). A report of the same kind is replaced: it is what the command writes.
    """
    if kind not in REPORT_KINDS:
        raise InvalidArgumentError(f"unknown report kind {kind!r}; one of {tuple(REPORT_KINDS)}")
    wanted = suffixes or REPORT_KINDS[kind]
    p = refuse_empty_path(str(path), f"the path for the {kind}", f"a file name, e.g. report{wanted[0]}")
    if p.is_dir():
        raise InvalidArgumentError(f"{p} is a folder; give a file name for the {kind}, e.g. {p / ('x' + wanted[0])}")
    _refuse_input(p, kind, inputs)
    _refuse_artefact_folder(p, kind)
    _refuse_other_content(p, kind)
    if p.suffix.lower() not in wanted:
        raise InvalidArgumentError(
            f"{p}: a {kind} is written to a {' or '.join(wanted)} file; give a name ending in {wanted[0]}, "
            f"e.g. {p.with_suffix(wanted[0])}"
        )
    return p


def write_report(
    path: PathLike, kind: str, write: Callable[[Path], object], *, inputs: Iterable[Optional[PathLike]] = ()
) -> Path:
    """Write the report ``kind`` to ``path`` whole: :func:`check_report_output` (``inputs``: the command's input
    files), then ``write(tmp)`` on a temporary file renamed over ``path`` (its folder made if missing), so a
    failed write loses nothing. Returns the path written (for the command's ``wrote PATH`` line)."""
    p = check_report_output(path, kind, inputs=inputs)
    write_file(p, write)
    return p


def _refuse_input(p: Path, kind: str, inputs: Iterable[Optional[PathLike]]) -> None:
    """Refuse ``p`` when it is (or links to) the same file as one of the command's ``inputs``."""
    for given in inputs:
        if given is None or not p.exists() or not os.path.exists(given):
            continue
        if os.path.samefile(p, given):
            alias = "" if str(given) == str(p) else f" ({given})"
            raise InvalidArgumentError(
                f"{p} is this command's input{alias}; writing the {kind} there would destroy it: "
                f"give another file for the {kind}"
            )


def _refuse_artefact_folder(p: Path, kind: str) -> None:
    """Refuse ``p`` inside a world or index folder (whose files are checksummed), over the marker file of any
    artefact folder, or below a file (its folder could not be made)."""
    parent = folder_kind(p.parent)
    if parent in ("world", "index") or (parent is not None and p.name in MARKER_FILES):
        raise InvalidArgumentError(
            f"{p} is inside {article(parent)} folder ({p.parent}); writing there would change the {parent}: "
            f"give a file outside it for the {kind}"
        )
    above = next((a for a in p.parents if a.exists()), None)
    if above is not None and not above.is_dir():
        raise InvalidArgumentError(f"{above} is a file, so {p} cannot be made: give a path in a folder for the {kind}")


def _refuse_other_content(p: Path, kind: str) -> None:
    """Refuse an existing non-empty ``p`` that holds a searchgym JSONL artefact or is not a ``kind`` report."""
    if p.exists() and not p.is_file():
        raise InvalidArgumentError(f"{p} is not a regular file; give a file name for the {kind}")
    if not p.exists() or p.stat().st_size == 0:  # nothing there to lose
        return
    found = file_kind(p)
    if found in FILE_KINDS:
        what = article(found)
    elif _holds_report(p, kind):
        return
    else:
        what = f"something that is not {article(kind)}"
    raise InvalidArgumentError(
        f"{p} holds {what}; writing {article(kind)} there would replace it: give a new file for the {kind}"
    )


def _holds_report(p: Path, kind: str) -> bool:
    """Whether the existing file ``p`` holds a ``kind`` report: PNG bytes, a JSON object, a YAML mapping."""
    if kind == "PNG figure":
        with open(p, "rb") as f:
            return f.read(len(PNG_MAGIC)) == PNG_MAGIC
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return False
    if kind == "JSON report":
        try:
            return isinstance(loads_json(text), dict)
        except ValueError:
            return False
    import yaml

    try:
        return isinstance(yaml.safe_load(text), dict)
    except yaml.YAMLError:
        return False
