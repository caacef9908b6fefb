"""searchgym never imports or initialises JAX (bm25s would, and JAX then preallocates 75% of a GPU).

A stand-in ``jax`` package placed first on ``sys.path`` records every import and every call that would
start a JAX backend into a log file; each scenario runs in a fresh interpreter so the real import
order is exercised.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

STANDIN_INIT = """
import os
def _record(event):
    with open(os.environ["STANDIN_JAX_LOG"], "a") as f:
        f.write(event + "\\n")
_record("imported")
def devices(*a, **k):
    _record("initialised")
    return ["standin:0"]
from . import lax  # noqa: E402
"""
STANDIN_LAX = """
import numpy as np
from . import _record
def top_k(x, k):
    _record("initialised")
    x = np.asarray(x)
    idx = np.argsort(-x, kind="stable")[..., :k]
    return np.take_along_axis(x, idx, -1), idx
"""

SEARCHGYM_WORK = """
import searchgym
from searchgym.retrieval import BM25Retriever, KGLookup, load_index
from searchgym.world.synthetic import default_world
world = default_world()
r = BM25Retriever.from_world(world)
assert r.search(world.doc_titles[0], k=2), "BM25 found nothing"
r.save(OUT + "/idx")
assert load_index(OUT + "/idx").search(world.doc_titles[1], k=1)
KGLookup(world).lookup([world.doc_titles[0]], [], "")
import gymnasium as gym
env = gym.make("KGSolver-v0")
env.reset(seed=0)
"""


def _run(tmp_path: Path, script: str, env_extra: dict | None = None) -> list[str]:
    standin = tmp_path / "standin"
    (standin / "jax").mkdir(parents=True, exist_ok=True)
    (standin / "jax" / "__init__.py").write_text(STANDIN_INIT)
    (standin / "jax" / "lax.py").write_text(STANDIN_LAX)
    log = tmp_path / "jax.log"
    log.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    env.update(env_extra or {})
    env["STANDIN_JAX_LOG"] = str(log)
    env["PYTHONPATH"] = os.pathsep.join([str(standin), str(REPO), env.get("PYTHONPATH", "")])
    code = f"OUT = {str(tmp_path)!r}\n" + textwrap.dedent(script)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return log.read_text().split()


def test_searchgym_never_imports_jax_and_user_jax_still_works(tmp_path):
    script = (
        SEARCHGYM_WORK
        + """
import os, sys
assert "jax" not in sys.modules, "searchgym imported jax"
assert not [k for k in os.environ if k.startswith(("JAX_", "XLA_"))], "searchgym set JAX settings"
with open(os.environ["STANDIN_JAX_LOG"], "a") as f:
    f.write("--user--\\n")
import jax  # the user's own JAX is untouched and works afterwards
jax.lax.top_k([3, 1, 2], 1)
"""
    )
    events = _run(tmp_path, script)
    assert events == ["--user--", "imported", "initialised"], events


def test_jax_imported_by_user_first_is_not_initialised_and_settings_kept(tmp_path):
    script = (
        """
import os, sys
import jax
before = sys.modules["jax"], sys.modules["jax.lax"]
"""
        + SEARCHGYM_WORK
        + """
assert (sys.modules["jax"], sys.modules["jax.lax"]) == before, "searchgym replaced the user's jax modules"
assert os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.9"
assert "JAX_PLATFORMS" not in os.environ and "XLA_PYTHON_CLIENT_PREALLOCATE" not in os.environ
"""
    )
    events = _run(tmp_path, script, {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.9"})
    assert events == ["imported"], f"searchgym started JAX's backend: {events}"


def test_bm25s_imported_elsewhere_first_warns(tmp_path):
    script = """
import logging, sys
records = []
class H(logging.Handler):
    def emit(self, rec):
        records.append(rec.getMessage())
logging.getLogger("searchgym").addHandler(H())
import bm25s  # someone else's import: bm25s starts the stand-in JAX itself
from searchgym.retrieval import BM25Retriever
BM25Retriever(["a"], ["t"], ["alpha beta"])
assert any("XLA_PYTHON_CLIENT_PREALLOCATE" in m for m in records), records
"""
    events = _run(tmp_path, script)
    assert events == ["imported", "initialised"], events


@pytest.mark.parametrize("module", ["searchgym.retrieval.analyzer", "searchgym.retrieval.kg"])
def test_bm25s_submodule_users_hide_jax_too(tmp_path, module):
    script = f"""
import sys
import {module} as m
from searchgym.world.synthetic import default_world
m.Analyzer() if hasattr(m, "Analyzer") else m.KGLookup(default_world())
assert "bm25s" in sys.modules and "jax" not in sys.modules
"""
    assert _run(tmp_path, script) == []
