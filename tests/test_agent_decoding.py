"""The decoding loop's caches: the static KV cache (and its compiled step) gives the dynamic cache's texts.

Greedy: identical text. Sampling with the same seed: identical draws, hence identical text; with
different seeds: the same first-token distribution (a two-sample chi-square test on the bundled
SmolLM2). Host checks every k steps must not change what a row keeps (EOS, stop strings).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.core.llm import GenerationConfig  # noqa: E402
from searchgym.llm.decoding import DecodingConfig  # noqa: E402
from searchgym.llm.transformers_backend import TransformersGenerator  # noqa: E402
from tests.support.scripted_lm import ScriptedLM  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer  # noqa: E402

PROMPTS = [
    "Tarsk is",
    "Merovia is a country founded in 1204 whose capital is",
    "a",
    [{"role": "user", "content": "Where was Alice Varn born?"}],
]
VARIANTS = {
    "static": DecodingConfig(cache="static"),
    "static-bucketed-check5": DecodingConfig(cache="static", bucket=True, check_every=5),
    "dynamic-check8": DecodingConfig(cache="dynamic", check_every=8),
}


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def tiny(tok):
    return build_model(tok)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("temperature,top_p,stop", [(0.0, 1.0, ()), (1.0, 1.0, ()), (1.0, 0.9, ("e", "</answer>"))])
def test_variants_give_the_dynamic_caches_texts(tiny, tok, variant, temperature, top_p, stop):
    cfg = GenerationConfig(max_new_tokens=40, temperature=temperature, top_p=top_p, stop=stop, seed=11)
    ref = TransformersGenerator(tiny, tok, decoding=DecodingConfig(cache="dynamic")).generate_with_stats(PROMPTS, cfg)
    gen = TransformersGenerator(tiny, tok, decoding=VARIANTS[variant])
    got = gen.generate_with_stats(PROMPTS, cfg)
    assert got.texts == ref.texts
    assert got.new_tokens == ref.new_tokens
    if stop:
        assert any(t.endswith("e") for t in ref.texts), "the stop string never fired; the test would be vacuous"
    again = gen.generate_with_stats(PROMPTS, cfg)  # the kept static cache is reset, not reused dirty
    assert again.texts == ref.texts


def test_static_cache_is_reused_across_calls_of_one_shape(tiny, tok):
    gen = TransformersGenerator(tiny, tok, decoding=DecodingConfig(cache="static", bucket=True))
    cfg = GenerationConfig(max_new_tokens=8, temperature=0.0)
    gen.generate(PROMPTS, cfg)
    caches = dict(gen._static._caches)
    gen.generate(PROMPTS[:3], cfg)  # 3 rows pad to the same 8-row, 256-token bucket
    assert gen._static._caches.keys() == caches.keys() and all(gen._static._caches[k] is v for k, v in caches.items())
    assert next(iter(caches)) == (8, 256)


def test_delayed_host_checks_keep_eos_and_stop_cuts_exact(tok):
    """EOS and stop strings that fire between two host checks cut the row exactly where they fired."""
    texts = [
        "<answer> Ostrel </answer> trailing words after the stop",
        "short then eos",
        "<search> a query that never closes and keeps going on",
    ]
    scripts = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    cfg = GenerationConfig(max_new_tokens=30, stop=("</answer>", "</search>"), temperature=0)
    outs = []
    for every in (1, 3, 8, 64):
        model = ScriptedLM(scripts, len(tok), tok.eos_token_id)
        gen = TransformersGenerator(model, tok, decoding=DecodingConfig(cache="dynamic", check_every=every))
        outs.append(gen.generate_with_stats(["p1", "p2", "p3"], cfg))
    assert outs[0].texts[:2] == ["<answer> Ostrel </answer>", "short then eos"]
    assert all(o.texts == outs[0].texts and o.new_tokens == outs[0].new_tokens for o in outs)


def test_bad_decoding_config_is_a_clear_error():
    with pytest.raises(ValueError, match="cache='paged'.*auto, dynamic, static"):
        DecodingConfig(cache="paged")
    with pytest.raises(ValueError, match="check_every"):
        DecodingConfig(check_every=0)
    with pytest.raises(ValueError, match="needs cache='static'"):
        DecodingConfig(cache="dynamic", compile=True)


def test_auto_picks_static_compiled_on_cuda_and_dynamic_on_cpu():
    assert DecodingConfig().resolve(torch.device("cpu")) == ("dynamic", False, 1, False)
    assert DecodingConfig().resolve(torch.device("cuda")) == ("static", True, 8, True)
    assert DecodingConfig(compile=False).resolve(torch.device("cuda")) == ("static", False, 1, False)


@pytest.mark.slow
def test_compiled_static_step_gives_the_same_texts_on_cpu(tiny, tok):
    """torch.compile of the one-token step: one graph, no graph break, same greedy and sampled text."""
    import torch._dynamo

    cfg = GenerationConfig(max_new_tokens=12, temperature=1.0, seed=5)
    torch._dynamo.reset()  # clears the compile caches but not the process-wide counters: count from here
    counters = torch._dynamo.utils.counters
    graphs_before = counters["stats"]["unique_graphs"]
    breaks_before = sum(counters["graph_break"].values())
    ref = TransformersGenerator(tiny, tok, engine="hf").generate(PROMPTS, cfg)
    gen = TransformersGenerator(
        tiny, tok, decoding=DecodingConfig(cache="static", compile=True, compile_mode="default")
    )
    assert gen.generate(PROMPTS, cfg) == ref
    assert gen.generate(PROMPTS, cfg.with_(temperature=0.0)) == TransformersGenerator(tiny, tok, engine="hf").generate(
        PROMPTS, cfg.with_(temperature=0.0)
    )
    assert sum(counters["graph_break"].values()) == breaks_before, dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] - graphs_before == 1  # the second call reused the compiled step


# ------------------------------------------------------------------ the bundled SmolLM2
@pytest.fixture(scope="module")
def smollm():
    pytest.importorskip("gguf")
    from searchgym.llm.bundled_model import load_policy

    return load_policy("smollm2")


CHATS = [
    [{"role": "user", "content": q}]
    for q in ("What is the capital of France?", "Name a river in Germany.", "Who wrote Hamlet? Answer briefly.")
]


@pytest.mark.slow
def test_smollm2_static_cache_greedy_and_seeded_sampling_match(smollm):
    model, tok = smollm
    dyn = TransformersGenerator(model, tok, decoding=DecodingConfig(cache="dynamic"))
    sta = TransformersGenerator(model, tok, decoding=DecodingConfig(cache="static", bucket=True, check_every=4))
    for cfg in (
        GenerationConfig(max_new_tokens=16, temperature=0.0, stop=("\n",)),
        GenerationConfig(max_new_tokens=16, temperature=1.0, seed=3),
    ):
        assert sta.generate(CHATS, cfg) == dyn.generate(CHATS, cfg)


@pytest.mark.slow
def test_smollm2_static_cache_samples_the_same_distribution(smollm):
    """First new token over 160 draws per side with disjoint seeds: a two-sample chi-square test."""
    from collections import Counter

    from scipy.stats import chi2_contingency

    model, tok = smollm
    prompt = "My favourite colour is"  # raw text: a short prompt keeps 3 x 160 prefills cheap
    cfg = GenerationConfig(max_new_tokens=1, temperature=1.0)
    counts = []
    for decoding, seed in ((DecodingConfig(cache="dynamic"), 100), (DecodingConfig(cache="static", bucket=True), 200)):
        gen = TransformersGenerator(model, tok, decoding=decoding, max_batch_size=160)
        counts.append(Counter(gen.generate([prompt] * 160, cfg.with_(seed=seed))))
    common = sorted(w for w in set(counts[0]) | set(counts[1]) if counts[0][w] + counts[1][w] >= 10)
    assert len(common) >= 2, f"too peaked to test: {counts}"
    table = [[c[w] for w in common] + [sum(v for k, v in c.items() if k not in common)] for c in counts]
    table = [[row[j] for j in range(len(row)) if table[0][j] + table[1][j] > 0] for row in table]
    assert chi2_contingency(table).pvalue > 1e-3, (common, table)
    # and the test has power: a different temperature is a different distribution
    hot = TransformersGenerator(model, tok, decoding=DecodingConfig(cache="static"), max_batch_size=160)
    c_hot = Counter(hot.generate([prompt] * 160, cfg.with_(seed=300, temperature=3.0)))
    hot_table = [
        [counts[0][w] for w in common] + [sum(v for k, v in counts[0].items() if k not in common)],
        [c_hot[w] for w in common] + [sum(v for k, v in c_hot.items() if k not in common)],
    ]
    assert chi2_contingency(hot_table).pvalue < 1e-3
