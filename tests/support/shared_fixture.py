"""Build an expensive test input once per ``pytest`` session, however many xdist workers ask for it.

``make test`` runs ``-n 2 --dist worksteal``, which splits a module's tests across both workers and may hand a
worker tests of one module, then another's, then the first's again: a ``scope="module"`` fixture is then built
once per visit (the self-play toy run three times, 8-10 s each). :func:`build_once` keeps the result in a folder
all workers of the session share (the parent of each worker's ``basetemp``), built by whichever worker comes
first under an exclusive ``flock`` while the others wait, and marked done only when complete, so a worker
killed mid-build leaves no half-built folder another would take for finished.
"""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path
from typing import Callable

import pytest

__all__ = ["build_once"]


def build_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name`` shared by this session's workers, filled by ``build(folder)`` the first time any
    worker asks (an empty folder it may write anything into; an exception propagates and the next caller
    builds afresh). Without xdist the folder lies in the session's own temporary directory."""
    root = tmp_path_factory.getbasetemp()
    if root.name.startswith("popen-gw"):  # an xdist worker: basetemp is <session>/popen-gwN
        root = root.parent
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder
