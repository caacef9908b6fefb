"""Why a path cannot be used, in words: the ``OSError`` numbers that are the user's to fix (a file in the way
of a folder, no permission, a read-only file system), not a bug. The CLI's last-resort error line and every
writer that names its own path read the same table, so one failure reads the same wherever it is met."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Optional

from ..errors import InvalidArgumentError

__all__ = ["UNUSABLE_PATH_REASONS", "not_there", "unusable_path_reason", "refuse_empty_path"]

#: errno values of a path the command was given but cannot use, and why, in words
UNUSABLE_PATH_REASONS = {
    errno.ENOTDIR: "a file is in the way of a folder",
    errno.EEXIST: "a file is in the way of a folder",  # mkdir(exist_ok=True) over a file
    errno.EISDIR: "a folder where a file was expected",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "a read-only file system",
    errno.ENAMETOOLONG: "a name longer than the file system allows",
    errno.ELOOP: "a loop of symbolic links",
}


def unusable_path_reason(exc: OSError) -> Optional[str]:
    """Why ``exc``'s path cannot be used, or None when ``exc`` is not one of :data:`UNUSABLE_PATH_REASONS`. An
    ``EEXIST`` on an existing folder is a code bug (a ``mkdir`` without ``exist_ok``), so it is not one of them."""
    if exc.errno not in UNUSABLE_PATH_REASONS:
        return None
    if exc.errno == errno.EEXIST and exc.filename is not None and os.path.isdir(exc.filename):
        return None
    return UNUSABLE_PATH_REASONS[exc.errno]


def not_there(path: "os.PathLike[str] | str", *, folder: bool = False) -> str:
    """What is wrong with a path that was to be a readable file (or, with ``folder``, a folder), as the end of a
    sentence naming it: ``does not exist``, ``is a folder, not a file``, ``is a file, not a folder`` or ``is not
    a regular file`` (a device, a pipe). A message saying "does not exist" of ``/dev/null`` or of a folder sends
    the user looking for the wrong mistake. (A path of the right kind, which the caller's check found wanting a
    moment before, ``cannot be read``.)"""
    if not os.path.lexists(path):
        return "does not exist"
    if not os.path.exists(path):
        return "is a broken link"
    if folder:
        return "is a file, not a folder" if not os.path.isdir(path) else "cannot be read"
    if os.path.isdir(path):
        return "is a folder, not a file"
    return "is not a regular file" if not os.path.isfile(path) else "cannot be read"


def refuse_empty_path(path: str, flag: str, give: str = "a folder name") -> Path:
    """``path`` as a Path; an empty (or blank) one is refused naming ``flag`` and what to ``give``: Python reads
    it as the current folder, so ``--output-dir ""`` (an unset shell variable) would write into whatever folder
    the command runs in, and ``--export ""`` would silently export nothing."""
    if not path.strip():
        raise InvalidArgumentError(f"{flag} is empty (it would mean the current folder); give {give}")
    return Path(path)
