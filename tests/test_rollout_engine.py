"""The static rollout engine (``TransformersGenerator(engine="static")``) against today's transformers loop.

Greedy: the same token ids and texts for mixed-length prompts, stop strings, per-row caps and multi-turn
prefix reuse. Rows that leave mid-batch, fewer slots than rows (refills) and a growing cache change no
other row's output, and no row is fed past its stop. Seeded sampling is reproducible, independent of the
batch a row is in, and draws from the same distribution as ``torch.multinomial``. bf16 weights follow
weight updates; LoRA adapters run as modules; log-probabilities are the model's.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.core.llm import GenerationConfig, GenerationError  # noqa: E402
from searchgym.llm.decoding import DecodingConfig  # noqa: E402
from searchgym.llm.rollout_engine import (  # noqa: E402
    STOP_TAIL_TOKENS,
    DecoderRunner,
    EngineConfig,
    RolloutEngine,
    StopChecker,
    auto_engine_reason,
    prefill_groups,
    row_seed,
    sample_rows,
)
from searchgym.llm.transformers_backend import TransformersGenerator  # noqa: E402
from tests.support.multiturn import QUESTIONS, SYSTEM  # noqa: E402
from tests.support.multiturn import multiturn_rollouts as _rollouts  # noqa: E402
from tests.support.scripted_lm import ScriptedLM  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer  # noqa: E402

PROMPTS = [
    "Tarsk is",
    "Merovia is a country founded in 1204 whose capital is",
    "a",
    [{"role": "user", "content": "Where was Alice Varn born?"}],
    [{"role": "user", "content": "Question: who founded Dura Labs, and in which city of Merovia?"}],
]


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def lively_model(tok, seed: int = 0):
    """The tiny Llama with its matrices scaled up: a random init at its usual scale greedily repeats one
    token, which would make matching greedy ids a weak test; this one writes varied text."""
    model = build_model(tok, seed=seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(6.0)
    return model


@pytest.fixture(scope="module")
def tiny(tok):
    return lively_model(tok)


def _pair(model, tok, **kw):
    """(today's loop, the static engine) over the same model."""
    return TransformersGenerator(model, tok, engine="hf", **kw), TransformersGenerator(
        model, tok, engine="static", **kw
    )


def _row_steps(res) -> int:
    """Rows fed per decode step, summed, when no row is fed after it stops: every sampled token but each
    row's first (from the prefill) and last (never fed)."""
    return sum(len(t) - 1 for t in res.token_ids)


@pytest.mark.parametrize("pack", [False, True], ids=["transformers-kernels", "prepacked"])
@pytest.mark.parametrize(
    "cfg",
    [
        GenerationConfig(max_new_tokens=30, temperature=0.0),
        GenerationConfig(max_new_tokens=30, temperature=0.0, stop=("re", "</answer>")),
        GenerationConfig(max_new_tokens=25, temperature=0.0, stop=("an", "st")),
    ],
)
def test_greedy_gives_todays_ids_and_texts(tiny, tok, cfg, pack):
    hf = TransformersGenerator(tiny, tok, engine="hf")
    eng = TransformersGenerator(tiny, tok, engine="static", engine_config=EngineConfig(pack=pack))
    assert eng.engine.runner.pack == pack
    ref = hf.generate_with_stats(PROMPTS, cfg)
    got = eng.generate_with_stats(PROMPTS, cfg)
    assert got.token_ids == ref.token_ids
    assert got.texts == ref.texts
    assert got.new_tokens == ref.new_tokens and got.prompt_tokens == ref.prompt_tokens
    lengths = {len(t) for t in ref.token_ids}
    if cfg.stop:
        assert len(lengths) > 1, "no stop string fired; the test would be vacuous"
        assert any(t.endswith(cfg.stop) for t in ref.texts)
    assert eng.engine_stats["row_steps"] == _row_steps(got)  # stopped rows were never fed again


def test_per_row_caps_are_honoured_inside_generation(tiny, tok):
    hf, eng = _pair(tiny, tok)
    cfg = GenerationConfig(max_new_tokens=99, temperature=0.0, stop=("an",))
    caps = [3, 17, 1, 9, 30]
    ref = hf.generate_with_stats(PROMPTS, cfg, max_new_tokens=caps)
    got = eng.generate_with_stats(PROMPTS, cfg, max_new_tokens=caps)
    assert got.token_ids == ref.token_ids and got.texts == ref.texts
    assert all(len(t) <= c for t, c in zip(got.token_ids, caps))
    assert len(got.token_ids[2]) == 1
    assert eng.engine_stats["row_steps"] == _row_steps(got)
    alone = eng.generate_with_stats(PROMPTS, cfg.with_(max_new_tokens=30))  # a cap stops a row; it does not
    assert all(a[: len(t)] == t for a, t in zip(alone.token_ids, got.token_ids))  # change what it wrote
    with pytest.raises(GenerationError, match="one per prompt"):
        eng.generate_with_stats(PROMPTS, cfg, max_new_tokens=[3])


def test_multi_turn_prefix_reuse_matches_a_full_prefill(tiny, tok):
    cfg_kw = dict(max_new_tokens=12, temperature=0.0, stop=("re",))
    full = TransformersGenerator(tiny, tok, engine="hf", decoding=DecodingConfig(prefix_cache_mb=0))
    eng = TransformersGenerator(tiny, tok, engine="static")
    assert _rollouts(eng, tok, cfg_kw) == _rollouts(full, tok, cfg_kw)
    stats = eng.prefix_cache.stats
    assert stats.reused_tokens > 0.5 * stats.prompt_tokens  # turns 2, 3 reuse all but the env tokens
    assert len(eng.prefix_cache) == len(QUESTIONS)  # one entry per rollout, earlier turns superseded
    assert eng.engine_stats["reused_tokens"] == stats.reused_tokens


def test_a_fresh_batch_prefills_its_shared_system_prompt_once(tiny, tok):
    msgs = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}] for q in QUESTIONS]
    cfg = GenerationConfig(max_new_tokens=6, temperature=0.0)
    eng = TransformersGenerator(tiny, tok, engine="static")
    got = eng.generate(msgs, cfg)
    shared = len(eng.encode(eng.render([{"role": "system", "content": SYSTEM}]))) - len(
        eng.encode("<|im_start|>assistant\n")
    )
    assert eng.prefix_cache.stats.reused_tokens >= len(QUESTIONS) * shared
    assert got == TransformersGenerator(tiny, tok, engine="hf", decoding=DecodingConfig(prefix_cache_mb=0)).generate(
        msgs, cfg
    )


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_rows_leaving_refills_and_growth_change_no_other_row(tiny, tok, temperature):
    ids = [TransformersGenerator(tiny, tok).encode(p) for p in PROMPTS if isinstance(p, str)] * 3
    caps = [2, 40, 1, 25, 5, 33, 8, 40, 3]
    seeds = [row_seed(7, i) for i in range(len(ids))]
    kw = dict(temperature=temperature, top_p=0.9, eos_ids=[tok.eos_token_id])
    wide = RolloutEngine(tiny, EngineConfig(max_batch=16, prefix_cache_mb=0))
    batched = wide.generate(ids, max_new_tokens=caps, seeds=seeds, **kw).token_ids
    narrow = RolloutEngine(tiny, EngineConfig(max_batch=2, refill=0.5, room=1, prefix_cache_mb=0, keep_cache_mb=0))
    refilled = narrow.generate(ids, max_new_tokens=caps, seeds=seeds, **kw)
    assert refilled.token_ids == batched
    assert refilled.stats["prefills"] > 1 and refilled.stats["grows"] > 0
    assert narrow.runner.cache_bytes == 0  # released after the call
    assert wide.stats.moves > 0  # rows left mid-batch and the cache was compacted
    assert wide.runner.cache_bytes > 0  # kept for the next calls (which reuse it, dirty, below)
    for i in (1, 5, 7):  # a long row alone: the rows that left around it made no difference
        alone = wide.generate([ids[i]], max_new_tokens=[caps[i]], seeds=[seeds[i]], **kw).token_ids[0]
        assert alone == batched[i]


def test_prefill_groups_split_only_where_padding_costs_more_than_a_call():
    assert prefill_groups([5, 5, 6, 200], 32) == [(0, 3), (3, 4)]
    assert prefill_groups([10, 11, 12], 32) == [(0, 3)]
    assert prefill_groups([5, 5, 6, 200], -1) == [(0, 4)]
    assert prefill_groups([1, 50, 100, 150], 0) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert prefill_groups([], 32) == []


def test_seeded_sampling_is_reproducible_per_seed(tiny, tok):
    eng = TransformersGenerator(tiny, tok, engine="static")
    cfg = GenerationConfig(max_new_tokens=20, temperature=1.0, top_p=0.95, seed=3)
    state = torch.random.get_rng_state()
    a = eng.generate_with_stats(PROMPTS, cfg)
    assert torch.equal(state, torch.random.get_rng_state())  # no global seeding
    b = eng.generate_with_stats(PROMPTS, cfg)
    c = eng.generate_with_stats(PROMPTS, cfg.with_(seed=4))
    assert a.token_ids == b.token_ids and a.texts == b.texts
    assert a.token_ids != c.token_ids
    split = TransformersGenerator(tiny, tok, engine="static", max_batch_size=2)  # slots do not matter either
    assert split.generate_with_stats(PROMPTS, cfg).token_ids == a.token_ids


def test_the_sampler_draws_the_multinomial_distribution():
    from scipy.stats import chisquare

    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(1, 12, generator=gen) * 2
    n = 20000
    for temperature, top_p in ((1.0, 1.0), (0.7, 0.8)):
        u = torch.rand(n, generator=gen, dtype=torch.float64)
        draws = sample_rows(logits.expand(n, -1).contiguous(), temperature, top_p, u)
        probs = torch.softmax(logits[0] / temperature, -1)
        sp, si = probs.sort(descending=True)
        keep = sp.cumsum(-1) - sp < top_p
        expected = torch.zeros_like(probs)
        expected[si[keep]] = sp[keep] / sp[keep].sum()
        counts = torch.bincount(draws, minlength=12).double()
        assert counts[expected == 0].sum() == 0  # nothing outside the nucleus
        nz = expected > 0
        want = expected[nz].double() / expected[nz].double().sum() * counts.sum()
        assert chisquare(counts[nz].numpy(), want.numpy()).pvalue > 1e-3
    assert torch.equal(sample_rows(logits, 0.0, 1.0, None), logits.argmax(-1))


def test_logprobs_are_the_models(tiny, tok):
    gen = TransformersGenerator(tiny, tok, engine="static", engine_config=EngineConfig(logprobs=True))
    res = gen.generate_with_stats(PROMPTS[:2], GenerationConfig(max_new_tokens=8, temperature=1.0, seed=1))
    for prompt, ids, lps in zip(PROMPTS[:2], res.token_ids, gen.last_logprobs):
        full = torch.tensor([gen.encode(prompt) + ids])
        with torch.no_grad():
            logits = tiny(input_ids=full).logits[0, -len(ids) - 1 : -1].float()
        want = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
        assert torch.allclose(torch.tensor(lps), want, atol=1e-4)


@pytest.mark.parametrize("hardware", [True, False])
def test_bf16_rollouts_warn_where_the_cpu_emulates_bf16(tok, monkeypatch, caplog, hardware):
    """bf16 rollouts on a CPU without bf16 hardware still run, and say once that float32 is faster there."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: hardware)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    gen = TransformersGenerator(build_model(tok, seed=5), tok, engine="static", rollout_dtype="bfloat16")
    with caplog.at_level("WARNING", logger="searchgym.llm.bf16_hardware"):
        out = gen.generate_with_stats(PROMPTS, GenerationConfig(max_new_tokens=4, temperature=0.0))
    assert gen.engine.runner.dtype == torch.bfloat16 and all(len(t) for t in out.token_ids)
    warned = [r.getMessage() for r in caplog.records if "no bf16 matmul hardware" in r.getMessage()]
    assert len(warned) == (0 if hardware else 1) and all("rollout_dtype=float32" in w for w in warned)


def test_bf16_rollouts_follow_weight_updates(tok):
    model = build_model(tok, seed=5)
    gen = TransformersGenerator(model, tok, engine="static", rollout_dtype="bfloat16")
    cfg = GenerationConfig(max_new_tokens=10, temperature=0.0)
    first = gen.generate_with_stats(PROMPTS, cfg)
    runner = gen.engine.runner
    assert runner.dtype == torch.bfloat16 and all(len(t) for t in first.token_ids)
    with torch.inference_mode():  # the bf16 forward stays close to the float32 one
        runner.refresh()
        runner.allocate(1, 64)
        ids = gen.encode(PROMPTS[1])
        low = runner.prefill(0, [ids], [0])[0]
        runner.release()
        high = model(input_ids=torch.tensor([ids])).logits[0, -1]
    assert (low - high).abs().max() < 0.05 * high.abs().max()
    with torch.no_grad():  # an optimiser step: the bf16 copies and the prefix store must follow
        for p in model.parameters():
            p.add_(0.05 * torch.sign(p))
    after = gen.generate_with_stats(PROMPTS, cfg)
    fresh = TransformersGenerator(model, tok, engine="static", rollout_dtype="bfloat16").generate_with_stats(
        PROMPTS, cfg
    )
    assert after.token_ids == fresh.token_ids != first.token_ids


def trained_lora_model(tok):
    """The tiny Llama with a LoRA adapter on q/v whose B matrices are drawn (at init they are zero: no effect)."""
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(
        build_model(tok, seed=2), peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5, generator=torch.Generator().manual_seed(0))
    return model


@pytest.mark.parametrize("fold", [True, False])
def test_lora_adapters_folded_or_called_as_modules_decode_as_peft_does(tok, fold):
    """Folded into the base weights (the default) or called as modules, a LoRA model decodes what transformers'
    loop over the PEFT model decodes: with the adapter, with it switched off, and after an in-place update of it
    (an optimiser step), which the folded weights pick up."""
    from searchgym.llm.rollout_engine import EngineConfig

    model = trained_lora_model(tok)
    cfg = GenerationConfig(max_new_tokens=16, temperature=0.0)
    hf = TransformersGenerator(model, tok, engine="hf")
    eng = TransformersGenerator(model, tok, engine="static", engine_config=EngineConfig(fold_lora=fold))
    with_adapter = eng.generate_with_stats(PROMPTS, cfg).token_ids
    assert with_adapter == hf.generate_with_stats(PROMPTS, cfg).token_ids
    assert any(key[0] == "lora" for key in eng.engine.runner.weights._derived_cache) == fold
    with model.disable_adapter():
        without = eng.generate_with_stats(PROMPTS, cfg).token_ids
        assert without == hf.generate_with_stats(PROMPTS, cfg).token_ids
    assert without != with_adapter
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.mul_(-1.0)
    moved = eng.generate_with_stats(PROMPTS, cfg).token_ids
    assert moved == hf.generate_with_stats(PROMPTS, cfg).token_ids != with_adapter


@pytest.mark.parametrize("stops", [("</search>", "</answer>"), ("é",), ("<a", "b ")])
def test_stop_checks_skip_tokens_that_end_no_stop_string_with_the_same_answers(tok, stops):
    """Asked after every token (as the engine asks), the check that decodes only tails whose last token can end a
    stop string answers as decoding every tail does, on byte-level pieces that split multi-byte characters."""
    import random

    checker = StopChecker(tok, stops)
    ascii_ends = all(33 <= ord(s[-1]) <= 126 for s in stops)
    assert (checker.enders is not None) == ascii_ends
    if ascii_ends:
        assert 0 < len(checker.enders) < len(tok)

    def decoded_hit(tokens):
        tail = tok.decode(list(tokens[-STOP_TAIL_TOKENS:]), skip_special_tokens=True)
        return any(s in tail for s in stops)

    rng = random.Random(0)
    pieces = [tok.encode(t, add_special_tokens=False) for t in ("x <search>q</search>", "é> </answer>", "<a b c", "ü")]
    hits = 0
    for _ in range(400):
        seq: list[int] = []
        for _ in range(rng.randrange(1, 5)):
            seq += rng.choice(pieces) if rng.random() < 0.5 else [rng.randrange(len(tok)) for _ in range(3)]
        for n in range(1, len(seq) + 1):
            want = decoded_hit(seq[:n])
            assert checker.hit(seq[:n]) == want, (stops, seq[:n])
            if want:  # the engine stops the row here
                hits += 1
                break
    assert hits > 50


def test_engine_choice_and_refusals(tiny, tok):
    scripted = ScriptedLM([[5, 6]], len(tok), tok.eos_token_id)
    assert DecoderRunner.unsupported(tiny) is None
    assert "model type" in DecoderRunner.unsupported(scripted)
    with pytest.raises(ValueError, match="engine='static' cannot run this model.*engine='hf'"):
        TransformersGenerator(scripted, tok, engine="static")
    auto = TransformersGenerator(scripted, tok, engine="auto")
    assert auto.engine_name == "hf" and auto.engine is None
    assert TransformersGenerator(tiny, tok, engine="auto").engine_name == "static"
    assert TransformersGenerator(tiny, tok).engine_name == "static"  # the default: "auto"
    assert TransformersGenerator(tiny, tok, engine="hf").engine_name == "hf"
    assert auto_engine_reason(torch.device("cuda")) is None  # measured on an H200 (rollout_gpu_episodes.json)
    assert "no measurement on mps" in auto_engine_reason(torch.device("mps"))
    with pytest.raises(ValueError, match="engine='paged'"):
        TransformersGenerator(tiny, tok, engine="paged")
    with pytest.raises(ValueError, match="needs engine='static'"):
        TransformersGenerator(tiny, tok, engine="hf", rollout_dtype="bfloat16")
    with pytest.raises(ValueError, match="rollout dtype"):
        EngineConfig(dtype="int8")
    with pytest.raises(ValueError, match="refill"):
        EngineConfig(refill=0.0)
    with pytest.raises(ValueError, match="split_prefill"):
        EngineConfig(split_prefill=-2)
