"""Prefix KV reuse: a prompt that extends an earlier prompt + completion prefills only its new tokens,
and the texts are those of a full prefill (greedy and seeded sampling), over multi-turn rollouts,
mixed batches, weight updates and a bounded store."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.core.llm import GenerationConfig  # noqa: E402
from searchgym.llm.decoding import DecodingConfig  # noqa: E402
from searchgym.llm.kv_reuse import PrefixKVStore  # noqa: E402
from searchgym.llm.transformers_backend import TransformersGenerator  # noqa: E402
from tests.support.multiturn import QUESTIONS, SYSTEM  # noqa: E402
from tests.support.multiturn import multiturn_rollouts as _rollouts  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def tiny(tok):
    return build_model(tok)


@pytest.fixture(params=["hf", "static"])
def engine(request):
    """Both decoding loops reuse prefixes: transformers' (dynamic cache) and the static rollout engine."""
    return request.param


@pytest.mark.parametrize(
    "cfg_kw",
    [dict(max_new_tokens=12, temperature=0.0), dict(max_new_tokens=12, temperature=1.0, top_p=0.9, stop=("e",))],
)
def test_multi_turn_rollouts_match_a_full_prefill(tiny, tok, cfg_kw):
    full = TransformersGenerator(tiny, tok, decoding=DecodingConfig(cache="dynamic", prefix_cache_mb=0))
    reuse = TransformersGenerator(tiny, tok, decoding=DecodingConfig(cache="dynamic"))
    assert full.prefix_cache is None
    assert _rollouts(reuse, tok, cfg_kw) == _rollouts(full, tok, cfg_kw)
    stats = reuse.prefix_cache.stats
    assert stats.reused_tokens > 0.5 * stats.prompt_tokens  # turns 2 and 3 reuse all but the env tokens
    assert len(reuse.prefix_cache) == len(QUESTIONS)  # one entry per rollout: earlier turns were superseded


def test_a_shared_system_prompt_is_reused_across_different_questions(tiny, tok, engine):
    gen = TransformersGenerator(tiny, tok, engine=engine)
    cfg = GenerationConfig(max_new_tokens=4, temperature=0.0)
    msgs = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}] for q in QUESTIONS]
    first = gen.generate(msgs[:1], cfg)
    rest = gen.generate(msgs[1:], cfg)
    system_turn = gen.encode(gen.render([{"role": "system", "content": SYSTEM}]))
    shared = len(system_turn) - len(
        gen.encode("<|im_start|>assistant\n")
    )  # the system turn, without the generation prompt
    assert gen.prefix_cache.stats.reused_tokens >= 2 * shared  # the system prompt was not prefilled again
    ref = TransformersGenerator(tiny, tok, engine=engine, decoding=DecodingConfig(prefix_cache_mb=0)).generate(
        msgs, cfg
    )
    assert first + rest == ref


def test_a_fresh_batch_prefills_its_shared_system_prompt_once(tiny, tok, engine):
    gen = TransformersGenerator(tiny, tok, engine=engine)
    cfg = GenerationConfig(max_new_tokens=6, temperature=0.0)
    msgs = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}] for q in QUESTIONS]
    got = gen.generate(msgs, cfg)
    shared = len(gen.encode(gen.render([{"role": "system", "content": SYSTEM}]))) - len(
        gen.encode("<|im_start|>assistant\n")
    )
    assert gen.prefix_cache.stats.reused_tokens >= len(QUESTIONS) * shared  # every row took the system turn's KV
    assert got == TransformersGenerator(tiny, tok, engine=engine, decoding=DecodingConfig(prefix_cache_mb=0)).generate(
        msgs, cfg
    )


def test_a_batch_mixing_cached_and_fresh_rows_of_different_lengths(tiny, tok, engine):
    gen = TransformersGenerator(tiny, tok, engine=engine)
    ref = TransformersGenerator(tiny, tok, engine=engine, decoding=DecodingConfig(prefix_cache_mb=0))
    cfg = GenerationConfig(max_new_tokens=10, temperature=0.0)
    long = tok(
        "Merovia is a country founded in 1204 whose capital is Tarsk, home of Alice Varn and Bob Varn",
        add_special_tokens=False,
    )["input_ids"]
    out = gen.generate_with_stats([long], cfg)
    extended = long + list(out.token_ids[0]) + tok(" and then", add_special_tokens=False)["input_ids"]
    batch = [extended, tok("Tarsk is", add_special_tokens=False)["input_ids"], long[:20] + [5, 6, 7]]
    assert gen.generate_with_stats(batch, cfg).texts == ref.generate_with_stats(batch, cfg).texts
    assert gen.prefix_cache.stats.reused_tokens >= len(long) + len(out.token_ids[0]) - 1 + 20


def test_a_weight_update_empties_the_store(tok, engine):
    model = build_model(tok, seed=3)
    gen = TransformersGenerator(model, tok, engine=engine)
    cfg = GenerationConfig(max_new_tokens=8, temperature=0.0)
    prompt = tok("Alice Varn was born in Tarsk, a city of Merovia founded in 1204", add_special_tokens=False)[
        "input_ids"
    ]
    first = gen.generate_with_stats([prompt], cfg)
    with torch.no_grad():  # what an optimiser step does: an in-place update
        for p in model.parameters():
            p.add_(0.05 * torch.sign(p))
    follow = [prompt + list(first.token_ids[0]) + prompt[:6]]
    got = gen.generate_with_stats(follow, cfg).texts
    assert gen.prefix_cache.stats.invalidations == 1
    assert (
        got
        == TransformersGenerator(model, tok, engine=engine, decoding=DecodingConfig(prefix_cache_mb=0))
        .generate_with_stats(follow, cfg)
        .texts
    )


def test_the_store_stays_within_its_memory_bound(tiny, tok, engine):
    store = PrefixKVStore(tiny, max_bytes=0)
    assert len(store) == 0
    gen = TransformersGenerator(tiny, tok, engine=engine, decoding=DecodingConfig(prefix_cache_mb=1))
    gen.prefix_cache.max_bytes = 60_000  # a few hundred tokens of this 2-layer model
    cfg = GenerationConfig(max_new_tokens=6, temperature=0.0)
    for q in QUESTIONS * 3:
        gen.generate([f"{q} {SYSTEM}"], cfg)
        assert gen.prefix_cache.nbytes <= 60_000
    assert gen.prefix_cache.stats.evicted_rows > 0


def test_a_negative_budget_is_refused():
    with pytest.raises(ValueError, match="prefix_cache_mb"):
        DecodingConfig(prefix_cache_mb=-1)
