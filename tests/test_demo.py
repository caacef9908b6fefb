"""`searchgym demo` imports matplotlib only to draw its one picture."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from searchgym.cli import main
code = main(sys.argv[1:])
print("MPL", any(m == "matplotlib" or m.startswith("matplotlib.") for m in sys.modules), code)
"""


def _run(tmp_path, *extra):
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            "demo",
            "--agent",
            "scripted",
            "--games",
            "1",
            "--pool-size",
            "20",
            "--out",
            str(tmp_path),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_demo_without_picture_never_imports_matplotlib(tmp_path):
    stdout = _run(tmp_path / "a", "--no-picture")
    assert "MPL False 0" in stdout and "not drawn" in stdout
    assert (tmp_path / "a" / "trajectories.jsonl").is_file() and not (tmp_path / "a" / "subgraph.png").exists()


def test_demo_draws_its_picture_by_default(tmp_path):
    stdout = _run(tmp_path / "b")
    assert "MPL True 0" in stdout and (tmp_path / "b" / "subgraph.png").stat().st_size > 0
