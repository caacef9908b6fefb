"""Exclusive locks on the outputs a command appends to, so two runs never interleave one file or folder.

Two ``searchgym subgraphs build`` (or ``eval``, ``play --export``, ``train``) pointed at the same output
would both resume from it and both append: every record twice, and a file that later looks fine.
:class:`OutputLock` takes an exclusive, non-blocking ``fcntl.flock`` on a lock file beside the output
(``pool.jsonl`` → ``pool.jsonl.lock``, ``runs/eval/x`` → ``runs/eval/x.lock``) for as long as the
output is written; the holder writes its pid and command line into it, and a second writer fails at
once with :class:`OutputLockedError` naming them. The kernel drops the lock when its holder dies (even
by SIGKILL), so a lock file left by a killed run never blocks the rerun; a clean release removes it.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
from pathlib import Path
from typing import Optional, Union

from ..errors import SearchGymError

__all__ = ["OutputLock", "OutputLockedError", "lock_path"]

PathLike = Union[str, "os.PathLike[str]"]

# lock files held by shareable locks of this process: absolute path -> [fd, holders]
_SHARED: dict[str, list[int]] = {}
_GUARD = threading.RLock()  # re-entrant: __del__ may run (garbage collection) while it is held


class OutputLockedError(SearchGymError, RuntimeError):
    """Another process (or another writer in this one) holds the output's lock; the message names it."""


def lock_path(output: PathLike) -> Path:
    """The lock file of ``output``: beside it, named ``<output name>.lock``."""
    p = Path(os.path.abspath(output))
    return p.with_name(p.name + ".lock")


def _holder(fd: int) -> str:
    """Who holds the lock, from what the holder wrote into the lock file."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 4096).decode("utf-8"))
        pid, command = int(info["pid"]), str(info.get("command", ""))
    except (OSError, ValueError, KeyError, TypeError):  # the holder is still writing it, or an old format
        return "another process"
    if pid == os.getpid():
        return f"this process (pid {pid}) already"
    command = command if len(command) <= 120 else command[:117] + "..."
    return f"another process (pid {pid}: {command})" if command else f"another process (pid {pid})"


class OutputLock:
    """An exclusive lock on ``output`` (a file or a folder), held from :meth:`acquire` to :meth:`release`.

    ``what`` names the option the user would change (``--out``, ``--export``) in the error.
    ``shared_in_process``: further shareable locks on the same output within this process share the
    lock (a pickled copy of a trajectory writer appends to its original's file); other processes are
    still refused. Use as a context manager or call :meth:`acquire` / :meth:`release`.
    """

    def __init__(self, output: PathLike, *, what: str = "output", shared_in_process: bool = False) -> None:
        self.output = Path(output)
        self.path = lock_path(output)
        self.what = what
        self.shared_in_process = shared_in_process
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        """True between a successful :meth:`acquire` and :meth:`release`."""
        return self._fd is not None

    def acquire(self) -> "OutputLock":
        """Take the lock or raise :class:`OutputLockedError` at once (never waits); returns self."""
        if self._fd is not None:
            return self
        key = str(self.path)
        with _GUARD:
            shared = _SHARED.get(key) if self.shared_in_process else None
            if shared is not None:
                shared[1] += 1
                self._fd = shared[0]
                return self
            self._fd = self._lock()
            if self.shared_in_process:
                _SHARED[key] = [self._fd, 1]
        return self

    def _lock(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise OutputLockedError(
                    f"{self.output} is being written by {holder}; wait for it to finish, or give another {self.what}"
                ) from None
            except OSError as exc:
                os.close(fd)
                raise OutputLockedError(
                    f"cannot lock {self.path} ({exc.strerror}); write {self.output} on a local file system"
                ) from None
            try:  # a holder that released (and removed the file) between our open and flock: lock the new file
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        info = {"pid": os.getpid(), "command": " ".join(sys.argv)}
        os.write(fd, (json.dumps(info) + "\n").encode("utf-8"))
        return fd

    def release(self) -> None:
        """Give the lock up (idempotent); the last holder removes the lock file."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        key = str(self.path)
        with _GUARD:
            shared = _SHARED.get(key) if self.shared_in_process else None
            if shared is not None and shared[0] == fd:
                shared[1] -= 1
                if shared[1] > 0:
                    return
                del _SHARED[key]
            try:
                os.unlink(self.path)  # while still locked, so a waiting opener sees a new file and retries
            except FileNotFoundError:
                pass
            os.close(fd)

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self) -> None:  # a writer dropped without close() must not keep its output locked
        self.release()
