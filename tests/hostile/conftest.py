"""Fixtures of the hostile tests: a saved world, the eval fixtures, and a real second process holding a lock."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EVAL_FIXTURES = ROOT / "tests" / "fixtures" / "eval"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}

HOLDER = """
import sys
from searchgym.core.output_lock import OutputLock
lock = OutputLock(sys.argv[1]).acquire()
print("locked", flush=True)
sys.stdin.read()  # hold the lock until the test closes our stdin (or kills us)
"""


@pytest.fixture(scope="session")
def saved_tiny(tiny_world, tmp_path_factory):
    """The tiny world saved as a world folder."""
    from searchgym.world import save_world

    path = tmp_path_factory.mktemp("world") / "tiny"
    save_world(tiny_world, path)
    return path


@contextmanager
def lock_held_by_another_process(output: Path):
    """A real second Python process that holds ``output``'s :class:`OutputLock` until the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(output)],
        cwd=ROOT,
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()
