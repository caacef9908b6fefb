"""Writing a file or a whole folder so that a reader sees the old one or the new one, never half of either.

Every output the package rewrites in place (manifests, JSON results, figures, checkpoints, adapters) goes through
one of these: the new content is written under a temporary name beside the target and renamed over it, and a
crash or an error while writing leaves the target as it was and no temporary behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Callable, TypeVar

__all__ = ["write_file", "write_folder", "write_text"]

T = TypeVar("T")


def write_file(path: str | os.PathLike, write: Callable[[Path], T]) -> T:
    """Call ``write(tmp)`` on a temporary file name beside ``path``, then rename it over ``path``; returns what
    ``write`` returns. The temporary name ends in ``path``'s last suffix, so writers that choose a format by it
    (``savefig``, gzip by ``.gz``, parquet) write the right one, and it is unique per process and thread, so two
    writers never share it. On error the temporary file is removed and ``path`` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}{path.suffix}"
    try:
        result = write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return result


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` whole (:func:`write_file`); returns ``path`` as a Path."""
    write_file(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return Path(path)


def write_folder(folder: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a fresh temporary folder beside ``folder``, then put it in ``folder``'s place with
    renames (an existing ``folder`` is moved aside first and deleted after), so a crash or an error in ``write``
    leaves ``folder`` as it was; the temporary folder is removed on error. Returns ``folder`` as a Path."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
    try:
        write(tmp)
        if folder.exists():
            old = folder.parent / f".{folder.name}.old-{os.getpid()}"
            os.rename(folder, old)
            os.rename(tmp, folder)
            shutil.rmtree(old)
        else:
            os.rename(tmp, folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return folder
