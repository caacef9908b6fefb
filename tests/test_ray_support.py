"""Ray fan-out settings and the error without the ray extra (no Ray needed)."""

from __future__ import annotations

import sys

import pytest

from searchgym.cli import main as cli_main
from searchgym.core.ray_support import RayConfig, require_ray


def test_without_ray_the_error_says_how_to_install(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(RuntimeError, match=r"pip install 'searchgym\[ray\]'"):
        require_ray()
    assert (
        cli_main(
            [
                "subgraphs",
                "build",
                "--synthetic",
                "--n",
                "5",
                "--out",
                str(tmp_path / "p.jsonl"),
                "--ray",
                "--no-progress",
            ]
        )
        == 2
    )
    assert "searchgym[ray]" in capsys.readouterr().err


def test_ray_config_checks():
    assert RayConfig().address is None and RayConfig("ray://head:10001").workers == 2
    with pytest.raises(ValueError, match="workers >= 1"):
        RayConfig(workers=0)
    with pytest.raises(ValueError, match="chunk >= 0"):
        RayConfig(chunk=-1)
