"""What every loader shares: opening possibly compressed files, walking their lines with a
progress bar, and reporting malformed lines.

The error policy lives here once so the Wikidata, Wikidata5M and FlashRAG loaders behave the
same way: a malformed line is logged with ``file:line`` and the problem, counted in a
:class:`LoadReport` (attached to the built world as ``world.metadata["load_report"]``), and then
either skipped (``on_error="skip"``, the default) or turned into a :class:`LoaderError`
(``on_error="raise"``). A loader never silently builds a wrong world.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import logging
import lzma
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator

from ...core.arg_checks import check_choice
from ...errors import InvalidArgumentError, MissingFileError, SearchGymError

logger = logging.getLogger(__name__)

__all__ = [
    "LoaderError",
    "LoadReport",
    "open_text",
    "iter_lines",
    "check_on_error",
    "resolve_file",
    "sniff_format",
    "COMPRESSED_SUFFIXES",
    "MAX_MALFORMED_SHARE",
]

_CODECS = {".gz": gzip, ".bz2": bz2, ".xz": lzma}  # suffix → module whose open() (de)compresses
COMPRESSED_SUFFIXES = tuple(_CODECS)
ON_ERROR = ("skip", "raise")
MAX_KEPT_ERRORS = 100  # examples kept in the report; the counts are always complete
_PROGRESS_EVERY = 4096  # lines between progress-bar refreshes
#: a load whose malformed lines exceed this share of the lines read stops: the file is the wrong format
MAX_MALFORMED_SHARE = 0.5
_SNIFF_LINES = 20
#: what each loader source reads, for messages
SOURCE_FORMATS = {
    "wikidata": "a Wikidata JSON dump (latest-all.json[.gz]: '[', one entity object per line, ']')",
    "flashrag": 'a Search-R1/FlashRAG corpus JSONL ({"id", "contents"} or {"id", "title", "text"} per line)',
    "wikidata5m": "Wikidata5M tab-separated files (Q-id<TAB>alias..., head<TAB>relation<TAB>tail)",
}


class LoaderError(SearchGymError, ValueError):
    """A real-data file could not be read: names the file, the line (when there is one) and the problem."""


def check_on_error(on_error: str) -> str:
    """Validate an ``on_error`` option (``"skip"`` or ``"raise"``) and return it."""
    return check_choice("on_error", on_error, ON_ERROR)


@dataclass
class LoadReport:
    """What a loader read, kept and rejected: attached to worlds as ``metadata["load_report"]``.

    ``malformed`` counts unreadable lines by problem; ``errors`` keeps the first
    :data:`MAX_KEPT_ERRORS` of them as ``{"file", "line", "problem"}``; ``dropped`` counts records
    that were well-formed but left out on purpose (blocked relation, unknown entity, ...);
    ``counts`` holds what was kept.
    """

    source: str
    on_error: str = "skip"
    files: list[str] = field(default_factory=list)
    lines: int = 0
    malformed: Counter = field(default_factory=Counter)
    errors: list[dict] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    counts: Counter = field(default_factory=Counter)

    @property
    def num_malformed(self) -> int:
        """Total number of malformed lines seen (skipped, or the one that raised)."""
        return sum(self.malformed.values())

    def bad_line(self, path: str | os.PathLike, line: int, problem: str, *, kind: str | None = None) -> None:
        """Record a malformed line; raises :class:`LoaderError` when ``on_error == "raise"``.

        ``kind`` is the short counter key (defaults to ``problem``), so many lines with the same
        problem but different details are counted together.
        """
        where = f"{path}:{line}"
        if self.on_error == "raise":
            raise LoaderError(
                f"{where}: {problem} (on_error='skip', or --on-error skip, skips malformed lines and counts them)"
            )
        self.malformed[kind or problem] += 1
        if len(self.errors) < MAX_KEPT_ERRORS:
            self.errors.append({"file": str(path), "line": line, "problem": problem})
        logger.warning("%s: skipped malformed line: %s", where, problem)

    def drop(self, reason: str, n: int = 1) -> None:
        """Count ``n`` well-formed records left out for ``reason``."""
        self.dropped[reason] += n

    def attach(self, world, dropped: Counter, path: str | os.PathLike) -> None:
        """Finish a KG load: count the builder's ``dropped`` records and the world's sizes, then
        attach the report to ``world.metadata`` with ``source`` and ``path``."""
        for reason, n in dropped.items():
            self.drop(reason, n)
        self.counts.update(
            entities=world.num_entities,
            relations=world.num_relations,
            triples=world.num_triples,
            documents=world.num_documents,
        )
        world.metadata.update(source=self.source, path=str(path), load_report=self.as_dict())

    def summary(self) -> str:
        """One line: what was read, kept, skipped by reason and dropped by reason."""
        kept = ", ".join(f"{v:,} {k}" for k, v in self.counts.items() if v) or "nothing"
        line = f"{self.source} load: read {self.lines:,} lines, kept {kept}; skipped {self.num_malformed:,} malformed"
        if self.malformed:
            line += " (" + ", ".join(f"{k}: {v:,}" for k, v in self.malformed.most_common()) + ")"
        if self.dropped:
            line += (
                f"; dropped {sum(self.dropped.values()):,} ("
                + ", ".join(f"{k}: {v:,}" for k, v in self.dropped.most_common())
                + ")"
            )
        return line

    def check_usable(self, path: str | os.PathLike, kept: int, what: str) -> None:
        """Stop a load that read nothing usable: an empty file, or one where nothing (or almost
        nothing: more than :data:`MAX_MALFORMED_SHARE` of the lines malformed) parsed.

        ``kept`` is the number of ``what`` (documents, entities) the load kept. The
        :class:`LoaderError` names the format the file looks like and the ``--source`` for it.
        """
        expected = SOURCE_FORMATS.get(self.source, f"{self.source} input")
        if self.lines == 0:
            raise LoaderError(f"{path}: the file is empty; --source {self.source} expects {expected}")
        if kept > 0 and self.num_malformed <= MAX_MALFORMED_SHARE * self.lines:
            return
        looks_like, source = sniff_format(path)
        hint = (
            f"use --source {source}"
            if source and source != self.source
            else f"check the file; --source {self.source} expects {expected}"
        )
        raise LoaderError(
            f"{path}: {self.num_malformed:,} of {self.lines:,} lines could not be read and {kept:,} {what} were kept, "
            f"so no world was built. The file looks like {looks_like}: {hint}. ({self.summary()})"
        )

    def as_dict(self) -> dict:
        """JSON-serialisable form (what goes into ``world.metadata``)."""
        return {
            "source": self.source,
            "on_error": self.on_error,
            "files": list(self.files),
            "lines": self.lines,
            "malformed": dict(self.malformed),
            "errors": list(self.errors),
            "dropped": dict(self.dropped),
            "counts": dict(self.counts),
            "summary": self.summary(),
        }


def _check_file(path: Path) -> None:
    if not path.exists():
        raise MissingFileError(f"{path}: no such file; check the path (compressed .gz/.bz2/.xz files are read as-is)")
    if path.is_dir():
        raise LoaderError(f"{path}: is a directory, expected a file")


def _decompressor(path: Path, raw: IO[bytes]) -> io.BufferedIOBase | None:
    """The stream that decompresses ``raw`` by the suffix of ``path`` (None for an uncompressed file)."""
    codec = _CODECS.get(path.suffix.lower())
    return None if codec is None else codec.open(raw, "rb")


def open_text(path: str | os.PathLike, mode: str = "r") -> IO[str]:
    """Open a UTF-8 text file for reading (``"r"``) or writing (``"w"``), compressed by suffix.

    ``.gz``, ``.bz2`` and ``.xz`` are (de)compressed transparently; anything else is plain text.
    A missing input file raises :class:`FileNotFoundError` naming the path.
    """
    p = Path(path)
    if mode not in ("r", "w"):
        raise InvalidArgumentError(f"mode must be 'r' or 'w', got {mode!r}")
    if mode == "r":
        _check_file(p)
    codec = _CODECS.get(p.suffix.lower())
    if codec is not None:
        return codec.open(p, mode + "t", encoding="utf-8")
    return open(p, mode, encoding="utf-8", newline="\n" if mode == "w" else None)


def iter_lines(
    path: str | os.PathLike, report: LoadReport | None = None, *, progress: bool = False, desc: str | None = None
) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` (1-based, newline stripped) from a possibly compressed file.

    Memory stays bounded whatever the file size. With ``progress`` a progress line tracks the bytes
    read from disk (compressed bytes for compressed files), so huge dumps show a real percentage.
    Lines that are not valid UTF-8 are reported through ``report`` (or raise without one).
    """
    p = Path(path)
    _check_file(p)
    if report is not None:
        report.files.append(str(p))
    bar = None
    with open(p, "rb") as raw:
        stream = _decompressor(p, raw)
        reader = raw if stream is None else io.BufferedReader(stream, buffer_size=1 << 20)
        if progress:
            from ...core.progress import Progress

            bar = Progress(p.stat().st_size, desc or p.name, unit="B", units="B", scale=True)
        try:
            last = 0
            for n, data in enumerate(reader, 1):
                try:
                    line = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    if report is None:
                        raise LoaderError(f"{p}:{n}: not valid UTF-8 ({exc})") from None
                    report.lines += 1
                    report.bad_line(p, n, f"not valid UTF-8 ({exc.reason} at byte {exc.start})", kind="not valid UTF-8")
                    continue
                if report is not None:
                    report.lines += 1
                if bar is not None and n % _PROGRESS_EVERY == 0:
                    pos = raw.tell()
                    bar.update(pos - last)
                    last = pos
                yield n, line.rstrip("\r\n")
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise LoaderError(
                f"{p}: cannot read ({exc}); the file may be truncated or not really {p.suffix or 'text'}"
            ) from exc
        finally:
            if bar is not None:
                bar.update(max(0, p.stat().st_size - last))
                bar.close()
            if stream is not None:
                stream.close()


def resolve_file(directory: Path, candidates: tuple[str, ...], what: str, *, required: bool = True) -> Path | None:
    """The first of ``candidates`` (each also tried with a compressed suffix) present in ``directory``.

    A missing required file raises :class:`FileNotFoundError` listing the names that were tried.
    """
    for name in candidates:
        for suffix in ("", *COMPRESSED_SUFFIXES):
            p = directory / (name + suffix)
            if p.is_file():
                return p
    if required:
        raise MissingFileError(
            f"{directory}: no {what} file found (looked for {', '.join(candidates)}, optionally .gz/.bz2/.xz); "
            "pass its path explicitly"
        )
    return None


_WIKIDATA_ID = re.compile(r"^[QP]\d+$")


def _classify_line(text: str) -> tuple[str, str | None] | None:
    """(format description, source) that one non-blank line points to, or None."""
    s = text.strip()
    if s in ("[", "]"):
        return SOURCE_FORMATS["wikidata"], "wikidata"
    cols = s.split("\t")
    if len(cols) >= 2 and _WIKIDATA_ID.match(cols[0]):
        return SOURCE_FORMATS["wikidata5m"] + " (pass their directory as --input)", "wikidata5m"
    try:
        obj = json.loads(s[:-1] if s.endswith(",") else s)
    except json.JSONDecodeError:
        return None
    if isinstance(obj, dict):
        if obj.get("type") in ("item", "property") and "id" in obj:
            return SOURCE_FORMATS["wikidata"], "wikidata"
        if "contents" in obj or ("title" in obj and "text" in obj):
            return SOURCE_FORMATS["flashrag"], "flashrag"
    return None


def sniff_format(path: str | os.PathLike) -> tuple[str, str | None]:
    """Guess what a file is from its first non-blank lines: ``(description, --source or None)``."""
    votes: Counter = Counter()
    seen = 0
    try:
        for _n, line in iter_lines(path):
            if not line.strip():
                continue
            seen += 1
            guess = _classify_line(line)
            if guess is not None:
                votes[guess] += 1
            if seen >= _SNIFF_LINES:
                break
    except LoaderError as exc:
        return f"binary or undecodable data ({exc})", None
    if seen == 0:
        return "an empty file", None
    if not votes:
        return "none of the formats searchgym reads (wikidata, wikidata5m, flashrag)", None
    return votes.most_common(1)[0][0]
