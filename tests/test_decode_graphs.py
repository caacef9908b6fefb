"""The rollout engine's GPU path: fixed-shape decode steps (replayed as CUDA graphs on a GPU).

On a CPU the same fixed-shape steps run eagerly (``decode_steps="fixed"``): every shape fixed by the
slot bucket and the cache's columns, padding slots writing the trash column. They must give the exact
steps' token ids at temperature 0 -- with stops, per-row caps, rows leaving, refills, a growing cache,
prefix reuse and weight updates -- and the same seeded samples. The CUDA-graph replay itself runs
where a GPU is present (skipped elsewhere).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.core.llm import GenerationConfig  # noqa: E402
from searchgym.llm.decode_graphs import FixedShapeDecode, bucket_size  # noqa: E402
from searchgym.llm.rollout_engine import EngineConfig, RolloutEngine, row_seed  # noqa: E402
from searchgym.llm.transformers_backend import TransformersGenerator  # noqa: E402
from tests.support.tiny_lm import build_tokenizer  # noqa: E402
from tests.test_rollout_engine import PROMPTS, lively_model, trained_lora_model  # noqa: E402

CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def tiny(tok):
    return lively_model(tok)


def _ids(tok, tiny):
    return [TransformersGenerator(tiny, tok, engine="hf").encode(p) for p in PROMPTS if isinstance(p, str)] * 3


def test_buckets_are_powers_of_two_capped_by_the_slots():
    assert [bucket_size(a, 40) for a in (1, 2, 3, 5, 16, 17, 33, 40)] == [1, 2, 4, 8, 16, 32, 40, 40]
    assert bucket_size(3, 3) == 3
    with pytest.raises(ValueError, match="active=0"):
        bucket_size(0, 4)
    with pytest.raises(ValueError, match="active=5"):
        bucket_size(5, 4)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_fixed_shape_steps_give_the_exact_steps_tokens(tiny, tok, temperature):
    ids = _ids(tok, tiny)
    caps = [2, 40, 1, 25, 5, 33, 8, 40, 3]
    seeds = [row_seed(3, i) for i in range(len(ids))]
    kw = dict(temperature=temperature, top_p=0.9, eos_ids=[tok.eos_token_id])
    exact = RolloutEngine(tiny, EngineConfig(max_batch=16, prefix_cache_mb=0))
    assert exact.decode_steps == "exact" and exact.fixed is None  # the CPU default
    want = exact.generate(ids, max_new_tokens=caps, seeds=seeds, **kw).token_ids
    fixed = RolloutEngine(tiny, EngineConfig(max_batch=16, prefix_cache_mb=0, decode_steps="fixed"))
    got = fixed.generate(ids, max_new_tokens=caps, seeds=seeds, **kw)
    assert got.token_ids == want
    assert got.stats["moves"] > 0  # rows left mid-batch: live counts crossed bucket sizes
    # fewer slots than rows (refills, the longest prompts last)
    narrow = RolloutEngine(
        tiny, EngineConfig(max_batch=3, refill=0.34, prefix_cache_mb=0, keep_cache_mb=0, decode_steps="fixed")
    )
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = narrow.generate(
        [ids[i] for i in order], max_new_tokens=[caps[i] for i in order], seeds=[seeds[i] for i in order], **kw
    )
    assert out.token_ids == [want[i] for i in order]
    assert out.stats["prefills"] > 1
    assert out.stats["grows"] == 0  # sized for every row up front: a graph's cache never has to grow
    assert out.stats["captures"] == 0  # eager: nothing captured


def test_one_fixed_shape_cache_serves_calls_of_other_batch_sizes_and_lengths(tiny, tok):
    """A CUDA graph holds the slot cache's address: calls with fewer rows, shorter prompts or smaller caps reuse
    the kept cache (all ``max_batch`` slots, columns in whole quanta), so their graphs replay, not recapture."""
    from searchgym.llm.rollout_engine import FIXED_COLUMN_QUANTUM

    ids = _ids(tok, tiny)
    engine = RolloutEngine(tiny, EngineConfig(max_batch=8, prefix_cache_mb=0, keep_cache_mb=0, decode_steps="fixed"))
    exact = RolloutEngine(tiny, EngineConfig(max_batch=8, prefix_cache_mb=0))
    first = None
    for rows, cap in ((ids[:8], 12), (ids[:2], 5), (ids[3:4], 20), (ids[:5], 1)):
        kw = dict(max_new_tokens=[cap] * len(rows), temperature=0.0, top_p=1.0, seeds=[0] * len(rows))
        out = engine.generate(rows, eos_ids=[tok.eos_token_id], **kw)
        assert out.token_ids == exact.generate(rows, eos_ids=[tok.eos_token_id], **kw).token_ids
        cache = engine.runner.cache
        assert cache.slots == 8 and cache.columns % FIXED_COLUMN_QUANTUM == 0
        first = first or id(cache.kv)
        assert id(cache.kv) == first  # kept although keep_cache_mb=0 (that bounds the exact steps' cache)


def test_compiled_fixed_shape_steps_trace_whole_and_give_the_exact_steps_tokens(tiny, tok):
    """``compile_steps`` traces the fixed-shape step with ``torch.compile`` (here the ``eager`` backend: the trace,
    without code generation) as one graph, dynamic in the slots, and decodes the exact steps' tokens; a weight
    update in place recompiles nothing. Exact steps have nothing to compile: refused by name."""
    ids = _ids(tok, tiny)
    caps = [2, 30, 1, 25, 5, 30, 8, 30, 3]
    kw = dict(temperature=0.0, top_p=1.0, seeds=[0] * len(ids), eos_ids=[tok.eos_token_id])
    want = RolloutEngine(tiny, EngineConfig(max_batch=16, prefix_cache_mb=0)).generate(ids, max_new_tokens=caps, **kw)
    cfg = EngineConfig(max_batch=16, prefix_cache_mb=0, decode_steps="fixed", compile_steps="eager", pack=False)
    from torch._dynamo.utils import counters

    engine = RolloutEngine(tiny, cfg)
    before = counters["stats"]["unique_graphs"]
    got = engine.generate(ids, max_new_tokens=caps, **kw)
    assert got.token_ids == want.token_ids
    graphs = counters["stats"]["unique_graphs"] - before
    assert 1 <= graphs <= 2  # one slot-dynamic graph (and one for a single slot, which torch specialises)
    layers = engine.runner.weights.layers
    with torch.no_grad():
        for p in tiny.parameters():
            p.mul_(1.0)  # an optimiser step in place: same memory, same bound calls
    assert engine.generate(ids, max_new_tokens=caps, **kw).token_ids == want.token_ids
    assert engine.runner.weights.layers is layers
    assert counters["stats"]["unique_graphs"] - before == graphs  # nothing traced again
    with pytest.raises(ValueError, match="compile_steps='inductor' compiles the fixed-shape steps.*'fixed'"):
        RolloutEngine(tiny, EngineConfig(decode_steps="exact", compile_steps="inductor"))


def test_fixed_shape_steps_through_the_generator_with_stops_reuse_and_weight_updates(tok):
    model = lively_model(tok, seed=4)
    hf = TransformersGenerator(model, tok, engine="hf")
    fixed = TransformersGenerator(model, tok, engine="static", engine_config=EngineConfig(decode_steps="fixed"))
    cfg = GenerationConfig(max_new_tokens=30, temperature=0.0, stop=("re", "</answer>"))
    first = fixed.generate_with_stats(PROMPTS, cfg)
    assert first.token_ids == hf.generate_with_stats(PROMPTS, cfg).token_ids
    assert len({len(t) for t in first.token_ids}) > 1  # stops fired: rows left at different steps
    # the next turn of each prompt: a stored prefix is reused, only the rest prefilled
    turn2 = [p + t + " and then" for p, t in zip(PROMPTS, first.texts) if isinstance(p, str)]
    again = fixed.generate_with_stats(turn2, cfg)
    assert fixed.engine_stats["reused_tokens"] > 0
    assert again.token_ids == hf.generate_with_stats(turn2, cfg).token_ids
    version = fixed.engine.runner.weights.version
    with torch.no_grad():  # an optimiser step: the weights are rebound (graphs would be captured again)
        for p in model.parameters():
            p.add_(0.05 * torch.sign(p))
    after = fixed.generate_with_stats(PROMPTS, cfg)
    assert fixed.engine.runner.weights.version > version
    assert after.token_ids == hf.generate_with_stats(PROMPTS, cfg).token_ids != first.token_ids


def test_an_update_in_place_keeps_the_binding_and_a_replaced_weight_moves_it(tok):
    """Graphs read weights by address: an optimiser step on the very tensors the layers read keeps the binding
    (graphs replay and see the new values); a weight replaced by another tensor advances it (graphs recaptured)."""
    model = lively_model(tok, seed=5)
    hf = TransformersGenerator(model, tok, engine="hf")
    fixed = TransformersGenerator(
        model, tok, engine="static", engine_config=EngineConfig(decode_steps="fixed", pack=False)
    )
    cfg = GenerationConfig(max_new_tokens=20, temperature=0.0)
    first = fixed.generate_with_stats(PROMPTS, cfg).token_ids
    weights = fixed.engine.runner.weights
    version = weights.version
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.sign(p))
    fixed.clear_prefix_cache()
    after = fixed.generate_with_stats(PROMPTS, cfg).token_ids
    assert weights.version == version  # same addresses: nothing to capture again
    assert after == hf.generate_with_stats(PROMPTS, cfg).token_ids != first
    layer = model.model.layers[0].mlp.down_proj
    layer.weight = torch.nn.Parameter(layer.weight.detach().clone())
    fixed.clear_prefix_cache()
    fixed.generate_with_stats(PROMPTS, cfg)
    assert weights.version > version


def test_fixed_shape_steps_follow_an_adapter_toggle(tok):
    model = trained_lora_model(tok)
    cfg = GenerationConfig(max_new_tokens=16, temperature=0.0)
    hf = TransformersGenerator(model, tok, engine="hf")
    fixed = TransformersGenerator(model, tok, engine="static", engine_config=EngineConfig(decode_steps="fixed"))
    with_adapter = fixed.generate_with_stats(PROMPTS, cfg).token_ids
    assert with_adapter == hf.generate_with_stats(PROMPTS, cfg).token_ids
    version = fixed.engine.runner.weights.version
    with model.disable_adapter():  # what a captured graph must not miss: the weights are rebound
        fixed.clear_prefix_cache()
        hf.clear_prefix_cache()
        without = fixed.generate_with_stats(PROMPTS, cfg).token_ids
        assert without == hf.generate_with_stats(PROMPTS, cfg).token_ids != with_adapter
    assert fixed.engine.runner.weights.version > version


def test_a_rotary_embedding_that_checks_lengths_on_the_host_runs_exact_steps(tok):
    model = lively_model(tok, seed=6)
    model.model.rotary_emb.rope_type = "dynamic"
    assert RolloutEngine(model).decode_steps == "exact"
    with pytest.raises(ValueError, match="'dynamic' rotary embedding.*decode_steps='exact'"):
        RolloutEngine(model, EngineConfig(decode_steps="fixed"))


def test_graphs_need_cuda_and_the_settings_are_checked(tiny):
    if not CUDA:
        with pytest.raises(ValueError, match="decode_steps='graphs' needs a CUDA device.*'fixed'"):
            RolloutEngine(tiny, EngineConfig(decode_steps="graphs"))
        engine = RolloutEngine(tiny, EngineConfig(decode_steps="fixed"))
        with pytest.raises(ValueError, match="CUDA graphs need a CUDA device"):
            FixedShapeDecode(engine.runner, graphs=True)
    with pytest.raises(ValueError, match="decode_steps='paged'"):
        EngineConfig(decode_steps="paged")
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="memory_fraction"):
            EngineConfig(memory_fraction=bad)


@pytest.mark.skipif(not CUDA, reason="CUDA graphs need a GPU")
def test_cuda_graphs_replay_the_exact_steps_and_bound_the_cache(tok):
    model = lively_model(tok, seed=1).to("cuda")
    ids = _ids(tok, model)
    caps = [2, 40, 1, 25, 5, 33, 8, 40, 3]
    seeds = [row_seed(3, i) for i in range(len(ids))]
    kw = dict(temperature=0.0, top_p=1.0, eos_ids=[tok.eos_token_id])
    exact = RolloutEngine(model, EngineConfig(max_batch=16, decode_steps="exact")).generate(
        ids, max_new_tokens=caps, seeds=seeds, **kw
    )
    graphs = RolloutEngine(model, EngineConfig(max_batch=16))
    assert graphs.decode_steps == "graphs"  # the default on CUDA
    got = graphs.generate(ids, max_new_tokens=caps, seeds=seeds, **kw)
    assert got.token_ids == exact.token_ids
    assert 1 <= got.stats["captures"] <= 5 and graphs.fixed.replays > 0  # buckets 16, 8, 4, 2, 1 at most
    tight = RolloutEngine(model, EngineConfig(max_batch=16, memory_fraction=1e-9))
    with pytest.raises(ValueError, match="does not fit in memory_fraction"):
        tight.generate(ids, max_new_tokens=caps, seeds=seeds, **kw)
