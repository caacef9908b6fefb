"""Writing a whole folder so that a reader sees the old one or the new one, never half of either."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

__all__ = ["write_folder"]


def write_folder(folder: str | os.PathLike, write: Callable[[Path], None]) -> Path:
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
