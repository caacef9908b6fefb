"""Writing a file or a whole folder so that a reader sees the old one or the new one, never half of either.

Every output the package rewrites in place (manifests, JSON results, figures, checkpoints, adapters) goes through
one of these: the new content is written under a temporary name beside the target and renamed over it, and a
crash or an error while writing leaves the target as it was and no temporary behind. A writer killed outright
(SIGKILL, power loss) cannot clean up: its temporary (named with its pid) is removed by the next write of the same
target once that pid is gone and the temporary is older than :data:`STALE_AFTER_S`, and a folder it had moved aside
but not yet replaced is put back.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, TypeVar

__all__ = ["write_file", "write_folder", "write_text"]

T = TypeVar("T")

#: a dead writer's temporary is swept only when it is older than this (seconds): on a shared file system the pid
#: may belong to a live writer on another machine, which finishes well within it
STALE_AFTER_S = 600.0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _stale(entry: Path, pid: int) -> bool:
    try:
        age = time.time() - entry.lstat().st_mtime
    except FileNotFoundError:  # another writer swept it first
        return False
    return pid != os.getpid() and age > STALE_AFTER_S and not _pid_alive(pid)


def _sweep_stale(target: Path) -> None:
    """Remove the temporaries of ``target`` that writers killed outright left beside it, and put back a folder
    such a writer had moved aside (``.name.old-PID``) when ``target`` itself is missing."""
    pattern = re.compile(rf"^\.{re.escape(target.name)}\.(tmp|old)-(\d+)(?:[-.].*)?$")
    try:
        entries = list(target.parent.iterdir())
    except FileNotFoundError:
        return
    for entry in entries:
        m = pattern.match(entry.name)
        if not m or not _stale(entry, int(m.group(2))):
            continue
        if m.group(1) == "old" and not target.exists():
            os.rename(entry, target)  # killed between moving the old folder aside and putting the new one in
        elif entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def write_file(path: str | os.PathLike, write: Callable[[Path], T]) -> T:
    """Call ``write(tmp)`` on a temporary file name beside ``path``, then rename it over ``path``; returns what
    ``write`` returns. The temporary name ends in ``path``'s last suffix, so writers that choose a format by it
    (``savefig``, gzip by ``.gz``, parquet) write the right one, and it is unique per process and thread, so two
    writers never share it. On error the temporary file is removed and ``path`` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale(path)
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
    _sweep_stale(folder)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-{os.getpid()}-", dir=folder.parent))
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
