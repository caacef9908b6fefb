"""Append-only JSON Lines files that survive torn writes: one reader and one way to open for appending.

Every append-only log searchgym keeps (trajectory exports, ``eval.jsonl``, subgraph pools and their
rejection sidecars, training ``metrics.jsonl``) ends each record with a newline, so a last line
without one is a write cut short by a kill or a full disk. Appending after such a fragment would
glue the next record onto it and make the whole file unreadable; :func:`open_append` therefore
repairs the tail first (:func:`repair_torn_tail`): a fragment that does not parse is cut off (and
logged), a complete record that merely lacks its newline gets one. :func:`scan_jsonl` reads such a
file back, naming the file and line of anything malformed and how to fix it, and never drops a bad
line in the middle. Call both while holding the file's :class:`~searchgym.core.output_lock.OutputLock`.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Iterator, TextIO, Union

from ..errors import SearchGymError

logger = logging.getLogger(__name__)

__all__ = [
    "JsonlFormatError",
    "repair_torn_tail",
    "open_append",
    "scan_jsonl",
    "iter_lines",
    "json_of_line",
    "loads_json",
    "bad_line",
    "check_unique",
]

PathLike = Union[str, "os.PathLike[str]"]


class JsonlFormatError(SearchGymError, ValueError):
    """A line of a JSONL file is malformed; the message names the file, the line and the fix."""


def _last_line_start(f, size: int) -> int:
    """Byte offset just after the last newline of the open binary file ``f`` (0 when it has none)."""
    pos, block = size, 1 << 16
    while pos > 0:
        start = max(0, pos - block)
        f.seek(start)
        chunk = f.read(pos - start)
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        pos = start
    return 0


def _parses(raw: bytes) -> bool:
    try:
        loads_json(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def repair_torn_tail(path: PathLike) -> bool:
    """Make ``path`` end at a record boundary before anything is appended to it; True if it changed.

    A last line without a trailing newline that does not parse is a torn write: it is cut off (logged as
    a warning with the number of bytes dropped). One that parses (a hand-written file) is kept and gets
    its newline. A missing or empty file, or one ending in a newline, is left alone.
    """
    p = Path(path)
    if not p.is_file():
        return False
    with open(p, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return False
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return False
        start = _last_line_start(f, size)
        f.seek(start)
        tail = f.read(size - start)
        if tail.strip() and _parses(tail):
            f.seek(size)
            f.write(b"\n")
            return True
        lineno = 1 + _count_newlines(f, start)
        logger.warning(
            "%s: cutting torn line %d (%d bytes) left by an interrupted write before appending", p, lineno, size - start
        )
        f.truncate(start)
        return True


def _count_newlines(f, end: int) -> int:
    f.seek(0)
    count, left = 0, end
    while left > 0:
        chunk = f.read(min(left, 1 << 20))
        if not chunk:
            break
        count += chunk.count(b"\n")
        left -= len(chunk)
    return count


def open_append(path: PathLike) -> TextIO:
    """Open ``path`` to append JSON lines (parent folders created), after :func:`repair_torn_tail`."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    repair_torn_tail(p)
    return open(p, "a", encoding="utf-8")


def iter_lines(path: PathLike) -> Iterator[tuple[int, bytes, bool]]:
    """Stream ``(line number, raw line without its newline, ends with a newline)`` of every non-blank line of
    ``path``, read as bytes: a reader decodes each line itself (:func:`json_of_line`), so a byte that is not
    UTF-8 is reported for its own line instead of as a traceback from the file object."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            complete = raw.endswith(b"\n")
            if raw.strip():
                yield lineno, raw.rstrip(b"\r\n") if complete else raw, complete


def loads_json(text: str) -> Any:
    """``json.loads(text)``, with JSON nested too deeply to decode refused as a ``JSONDecodeError`` (a ``ValueError``)
    like any other malformed JSON: ``json`` raises ``RecursionError`` past about a thousand levels (``"[" * 100000``),
    which no reader of a file, an action or a reply expects, so one such line was a traceback."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply to decode", text, 0) from None


def json_of_line(raw: bytes):
    """The JSON value of one raw line; ``ValueError`` (``UnicodeDecodeError`` or ``JSONDecodeError``) if it is not
    UTF-8 JSON."""
    return loads_json(raw.decode("utf-8"))


def bad_line(path: PathLike, lineno: int, exc: Exception, complete: bool = True) -> str:
    """The one message for a line that :func:`json_of_line` refused: ``<file>: line <n> is not valid JSON
    (<why>); fix or delete that line`` (or, for a last line of text without its newline, that it is truncated)."""
    torn = not complete and not isinstance(exc, UnicodeDecodeError)  # bytes that are no text were never a record
    what = "is truncated (an interrupted write?)" if torn else f"is not valid JSON ({exc})"
    return f"{path}: line {lineno} {what}; fix or delete that line"


def scan_jsonl(
    path: PathLike,
    *,
    repair: bool,
    error: type[SearchGymError] = JsonlFormatError,
) -> list[tuple[int, dict]]:
    """Parse a JSONL file into ``(line number, object)`` pairs (blank lines skipped; missing file: none).

    ``repair``: first :func:`repair_torn_tail` (a resume, holding the file's lock, about to append).
    Without it a torn last line is reported as truncated. Any malformed line -- not JSON, not an object --
    raises ``error`` naming the file and line: ``<file>: line <n> is not valid JSON (...); fix or delete
    that line``. Nothing after a bad line is ever dropped silently.
    """
    p = Path(path)
    if not p.exists():
        return []
    if repair:
        repair_torn_tail(p)
    records: list[tuple[int, dict]] = []
    for lineno, raw, complete in iter_lines(p):
        try:
            obj = json_of_line(raw)
        except ValueError as exc:
            raise error(bad_line(p, lineno, exc, complete)) from None
        if not isinstance(obj, dict):
            raise error(f"{p}: line {lineno} is not a JSON object; fix or delete that line")
        records.append((lineno, obj))
    return records


def check_unique(seen: dict, key: object, lineno: int, path: PathLike, what: str, error=JsonlFormatError) -> None:
    """Remember that ``key`` is on line ``lineno`` of ``path``; raise ``error`` naming both lines if it was
    seen before (a file two runs appended to at once, or a hand edit)."""
    first = seen.get(key)
    if first is not None:
        raise error(
            f"{path}: line {lineno}: duplicate {what} {key!r} (first on line {first}); two runs wrote this file "
            "at once or it was edited: delete the repeated lines, or write to a new output"
        )
    seen[key] = lineno
