"""File checksums: a streaming SHA-256, and a small cache of the files of a folder already verified.

Hashing a multi-GB folder on every load costs seconds. A file whose ``(size, mtime_ns, ctime_ns,
inode, device)`` are unchanged since it was verified has not been written since (any write moves
its mtime and ctime, and nobody can set a ctime back), so :class:`VerifiedCache` keeps each verified
file's stat key in ``.searchgym-verified.json`` beside it and skips hashing it next time. The cache
is bound to a *scope* -- the digest of the manifest that lists the expected checksums -- so a
rewritten manifest invalidates it. What a cache cannot see is damage that bypasses the file system
(bit rot on the disk): deleting the cache file makes the next load hash everything again.

A folder whose manifest lists no checksums (written by an older searchgym) is checked against what
was recorded the first time it was seen (trust on first use), so later damage is still caught.
The cache is an optimisation only: when it cannot be written (a read-only folder) every load hashes.
Standard library only; the lowest floor of the package.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

from .atomic_writes import write_text

logger = logging.getLogger(__name__)

__all__ = ["CACHE_NAME", "VerifiedCache", "bytes_sha256", "sha256_file", "stat_key"]

CACHE_NAME = ".searchgym-verified.json"
_BLOCK = 1 << 20


def sha256_file(path) -> str:
    """Hex SHA-256 of the file at ``path``, read in 1 MiB blocks (constant memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def bytes_sha256(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def stat_key(path) -> list[int]:
    """What changes whenever the file at ``path`` is written or replaced: size, mtime and ctime
    (nanoseconds), inode and device."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


class VerifiedCache:
    """The files of ``folder`` verified under ``scope`` (see the module docstring)."""

    def __init__(self, folder, scope: str) -> None:
        self.folder = Path(folder)
        self.scope = scope
        self.path = self.folder / CACHE_NAME
        self.first_seen = 0  # files recorded without an expected checksum (trust on first use)
        self.hashed_bytes = 0  # bytes hashed by check(): 0 when every file was known
        self._files: dict[str, dict] = {}
        self._dirty = False
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:  # unreadable or damaged: verify everything again
            logger.debug("ignoring the checksum cache %s (%s)", self.path, exc)
            return
        if isinstance(data, dict) and data.get("scope") == scope and isinstance(data.get("files"), dict):
            self._files = {k: v for k, v in data["files"].items() if isinstance(v, dict)}

    def record(self, name: str, sha256: str) -> None:
        """Remember that ``name``, as it is now on disk, has checksum ``sha256``."""
        self._files[name] = {"sha256": sha256, "stat": stat_key(self.folder / name)}
        self._dirty = True

    def check(self, name: str, expected: str | None) -> bool:
        """Whether ``folder/name`` is intact: its bytes hash to ``expected`` or, when ``expected`` is
        None, to the checksum recorded when the file was first seen (a file never seen is recorded
        now and passes). No hashing when its stat key is the one recorded with that checksum."""
        entry = self._files.get(name)
        want = expected if expected is not None else (entry or {}).get("sha256")
        if entry is not None and entry.get("sha256") == want and entry.get("stat") == stat_key(self.folder / name):
            return True
        got = sha256_file(self.folder / name)
        self.hashed_bytes += (self.folder / name).stat().st_size
        if want is None:
            self.first_seen += 1
        elif got != want:
            return False
        self.record(name, got)
        return True

    def save(self) -> bool:
        """Write the cache beside the files (atomically); False when the folder is not writable."""
        if not self._dirty:
            return True
        try:
            write_text(self.path, json.dumps({"scope": self.scope, "files": self._files}))
        except OSError as exc:
            logger.debug("cannot write the checksum cache %s (%s): the next load verifies again", self.path, exc)
            return False
        self._dirty = False
        return True
