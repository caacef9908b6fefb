"""GPU checks (marked ``gpu``; skipped without CUDA, the vLLM ones also without vLLM).

* the transformers backend's CUDA default -- static cache + step compiled with CUDA graphs -- gives
  the dynamic cache's greedy text and reproducible sampling, and reuses its graphs across calls;
* vLLM in-process: generation, and weight sync after an update (the engine then generates exactly what
  the updated model does; pushing the old weights back restores the old outputs).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.core.llm import GenerationConfig  # noqa: E402
from searchgym.llm.decoding import DecodingConfig  # noqa: E402
from searchgym.llm.transformers_backend import TransformersGenerator  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer, save_tiny  # noqa: E402

pytestmark = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
PROMPTS = ["Tarsk is", [{"role": "user", "content": "Where was Alice Varn born?"}], "Merovia", "a"]
GREEDY = GenerationConfig(max_new_tokens=24, temperature=0.0)


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@needs_cuda
def test_cuda_default_is_static_compiled_and_matches_the_dynamic_cache(tok):
    model = build_model(tok).to("cuda")
    fast = TransformersGenerator(model, tok)
    assert (fast._cache_kind, fast._compiled) == ("static", True)
    slow = TransformersGenerator(model, tok, decoding=DecodingConfig(cache="dynamic"))
    assert fast.generate(PROMPTS, GREEDY) == slow.generate(PROMPTS, GREEDY)
    sampled = GenerationConfig(max_new_tokens=24, temperature=1.0, seed=3, stop=("e",))
    first = fast.generate(PROMPTS, sampled)
    assert fast.generate(PROMPTS, sampled) == first  # graphs replayed, cache reset: same draws
    assert fast.generate(PROMPTS[:3], GREEDY) == slow.generate(PROMPTS[:3], GREEDY)  # same bucket, fewer rows


@needs_cuda
def test_vllm_in_process_generation_and_weight_sync(tmp_path, tok):
    pytest.importorskip("vllm")
    from searchgym.llm.vllm_backend import VLLMGenerator

    path = save_tiny(tmp_path / "tiny", seed=0)
    gen = VLLMGenerator(str(path), dtype="float32", gpu_memory_utilization=0.2, max_model_len=512)
    try:
        before = gen.generate(PROMPTS, GREEDY)
        assert all(isinstance(t, str) for t in before) and any(before)
        updated = build_model(tok, seed=1)
        want = TransformersGenerator(updated.to("cuda"), tok).generate(PROMPTS, GREEDY)
        gen.load_weights(updated.state_dict())
        after = gen.generate(PROMPTS, GREEDY)
        assert after != before
        assert after == want
        gen.load_weights(build_model(tok, seed=0).state_dict())
        assert gen.generate(PROMPTS, GREEDY) == before
    finally:
        gen.close()
