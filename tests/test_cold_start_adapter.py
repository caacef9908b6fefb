"""The cold-start adapter the package ships, and ship_adapter that makes it from an SFT run."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from searchgym.errors import MissingFileError  # noqa: E402
from searchgym.llm.pretrained import MODEL_META, open_model  # noqa: E402
from searchgym.training.cold_start import SHIPPED_ADAPTER, ship_adapter, shipped_adapter  # noqa: E402
from searchgym.training.sft import run_sft  # noqa: E402
from tests.support.tiny_lm import save_tiny  # noqa: E402
from tests.test_sft import _cfg, write_demos  # noqa: E402


def test_the_shipped_adapter_is_small_float16_and_names_its_base():
    folder = shipped_adapter()
    assert folder == SHIPPED_ADAPTER
    weights = folder / "adapter_model.safetensors"
    assert weights.stat().st_size <= 10_000_000  # issue 31: a shipped adapter of at most 10 MB
    from safetensors.torch import load_file

    assert {t.dtype for t in load_file(str(weights)).values()} == {torch.float16}
    meta = json.loads((folder / MODEL_META).read_text())
    assert meta["base_model"] == "smollm2" and meta["adapter"] and meta["dtype_shipped"] == "float16"


def test_ship_adapter_stores_float16_weights_that_load_and_match(tmp_path):
    tiny = save_tiny(tmp_path / "tiny")
    data = write_demos(tmp_path / "d.jsonl", n=8)
    res = run_sft(_cfg(tmp_path, data, model=str(tiny), lora=True, lora_r=4, save_adapter=True, epochs=1))
    dest = ship_adapter(res.final_dir, tmp_path / "shipped")
    assert sorted(p.name for p in dest.iterdir()) == ["adapter_config.json", "adapter_model.safetensors", MODEL_META]
    assert json.loads((dest / MODEL_META).read_text())["dtype_shipped"] == "float16"
    full, tok = open_model(res.final_dir)
    half, _ = open_model(str(dest))
    base, _ = open_model(str(tiny))
    ids = tok("Where was Alice Varn born?", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        a, b, c = (m(input_ids=ids).logits for m in (full, half, base))
    assert (a - c).abs().max() > 10 * (a - b).abs().max()  # the adapter matters; float16 barely moves it
    with pytest.raises(MissingFileError, match="not a saved adapter"):
        ship_adapter(tmp_path / "tiny", tmp_path / "nowhere")


def test_the_recipe_commands_parse_to_the_recipe_settings():
    """RECIPE is what a user copies; RECIPE_DEMOS / RECIPE_SFT are what the benchmark re-runs: the real
    command-line parsers must read the one as the other."""
    import shlex

    from searchgym.cli import build_parser
    from searchgym.commands.sft import resolve_sft_config
    from searchgym.training import cold_start as cs

    demos_cmd, sft_cmd, second_demos_cmd, second_sft_cmd, ship_cmd = cs.RECIPE
    parser = build_parser()
    assert cs.RECIPE_SECOND_SEED == 7  # the demonstrations the shipped second stage was trained on
    for cmd, counts_by_role, seed in ((demos_cmd, cs.RECIPE_DEMOS, 0), (second_demos_cmd, cs.RECIPE_SECOND_DEMOS, 7)):
        demos = parser.parse_args(shlex.split(cmd)[1:])
        assert demos.seed == seed
        for role, counts in counts_by_role.items():
            assert getattr(demos, role) == ",".join(f"{h}:{n}" for h, n in counts.items()), role
    first = resolve_sft_config(parser.parse_args(shlex.split(sft_cmd)[1:]))
    second = resolve_sft_config(parser.parse_args(shlex.split(second_sft_cmd)[1:]))
    for cfg, settings in ((first, cs.RECIPE_SFT), (second, cs.RECIPE_SECOND_SFT)):
        for key, value in settings.items():
            assert getattr(cfg, key) == value, key
        assert cfg.model == "smollm2"
    assert first.data == ["runs/cold_start/demos.jsonl"] and first.lora_init is None
    assert second.data == ["runs/cold_start/second.jsonl"] and second.lora_init == "runs/cold_start/sft/final"
    assert second.output_dir == "runs/cold_start/second"
    assert all(getattr(second, k) == v for k, v in cs.RECIPE_SFT.items() if k.startswith("lora"))  # its shape
    assert (
        f"interpolate_adapters('runs/cold_start/sft/final', 'runs/cold_start/second/final', "
        f"{cs.RECIPE_INTERPOLATION_WEIGHT}, 'runs/cold_start/mixed')" in ship_cmd
    )
    python, flag, code = shlex.split(ship_cmd)
    assert (python, flag) == ("python", "-c") and "ship_adapter(interpolate_adapters(" in code
    compile(code, "ship_cmd", "exec")  # a shell that runs it hands Python valid code


def test_the_rejection_sampling_size_continues_the_shipped_adapters_shape(tmp_path):
    """``bench_learning.py --size shipped-rft`` runs its round on the SFT adapter of the shipped recipe: the round's
    settings are a valid ``--source self`` config whose LoRA shape is the recipe's, so ``lora_init`` accepts it."""
    from searchgym.training.cold_start import RECIPE_SFT
    from searchgym.training.sft_config import SFTConfig
    from tests.support.selfplay_bench import benchmark_module

    bl = benchmark_module("bench_learning")
    size = bl._shipped_rft_size()
    cfg = SFTConfig(model="smollm2", lora_init=str(tmp_path / "sft" / "final"), data=["replay.jsonl"], **size["rft"])
    assert cfg.source == "self" and cfg.env_id == "KGProposer-v0" and cfg.env_kwargs["pool_hops"] == [2, 3]
    assert cfg.final_weights == "last"  # a round on a fitted adapter may never beat its start's held-out loss
    for key in ("lora_r", "lora_alpha", "lora_target_modules", "lora_dropout"):
        assert getattr(cfg, key) == RECIPE_SFT[key]
    assert set(size["replay"]) <= {"solver", "proposer"} and size["sft"] == RECIPE_SFT


def test_interpolate_adapters_lies_on_the_line_between_two_adapters_of_one_run(tmp_path):
    """WiSE-FT along the factors: weight 0 is the start adapter, 1 the end one, 0.25 a quarter of the way for every
    tensor; the result loads as an ordinary adapter whose output lies between the two ends' on a prompt, its metadata
    names both ends, and bad input is refused in one line naming the fix."""
    from safetensors.torch import load_file

    from searchgym.errors import InvalidArgumentError
    from searchgym.training.adapter_interpolation import interpolate_adapters

    tiny = save_tiny(tmp_path / "tiny")
    data = write_demos(tmp_path / "d.jsonl", n=8)
    kw = dict(model=str(tiny), lora=True, lora_r=4, lora_alpha=8, lora_dropout=0.0, save_adapter=True, epochs=1)
    first = run_sft(_cfg(tmp_path / "first", data, **kw))
    second = run_sft(_cfg(tmp_path / "second", data, lora_init=first.final_dir, lr=3e-2, **kw))
    a = load_file(f"{first.final_dir}/adapter_model.safetensors")
    b = load_file(f"{second.final_dir}/adapter_model.safetensors")
    assert any(not torch.equal(a[k], b[k]) for k in a)  # the second stage moved the weights
    for w in (0.0, 0.25, 1.0):
        mixed = interpolate_adapters(first.final_dir, second.final_dir, w, tmp_path / f"mix{w}")
        m = load_file(str(mixed / "adapter_model.safetensors"))
        files = sorted(p.name for p in mixed.iterdir())
        assert files == ["adapter_config.json", "adapter_model.safetensors", MODEL_META]  # no temporary left
        assert m.keys() == a.keys()
        assert all(torch.allclose(m[k], a[k] + w * (b[k] - a[k]), atol=1e-6) for k in a)
    meta = json.loads((tmp_path / "mix0.25" / MODEL_META).read_text())
    assert meta["interpolation"] == {"start": first.final_dir, "end": second.final_dir, "weight": 0.25}
    ids = torch.tensor([[5, 9, 14, 3]])
    with torch.no_grad():
        ends = [open_model(str(d))[0](input_ids=ids).logits for d in (first.final_dir, second.final_dir)]
        mid = open_model(str(tmp_path / "mix0.25"))[0](input_ids=ids).logits
    assert (mid - ends[0]).abs().max() < (ends[1] - ends[0]).abs().max()  # nearer the start, yet moved
    assert (mid - ends[0]).abs().max() > 0
    with pytest.raises(InvalidArgumentError, match=r"weight=1.5: use a value in \[0, 1\]"):
        interpolate_adapters(first.final_dir, second.final_dir, 1.5, tmp_path / "bad")
    other = run_sft(_cfg(tmp_path / "other", data, **{**kw, "lora_r": 2}))
    with pytest.raises(InvalidArgumentError, match="different shapes .*r differ.*lora_init"):
        interpolate_adapters(first.final_dir, other.final_dir, 0.5, tmp_path / "bad")
    with pytest.raises(MissingFileError, match="not a saved LoRA adapter"):
        interpolate_adapters(tiny, second.final_dir, 0.5, tmp_path / "bad")


def test_the_shipped_size_re_makes_the_second_stage_and_the_interpolation(tmp_path):
    """``bench_learning.py --size shipped`` re-makes what is shipped: the second stage's settings are a valid SFT
    config continuing the first stage's LoRA shape, with the recipe's seed and weight; the rejection-sampling size
    keeps continuing the first stage, as it was measured."""
    from searchgym.training import cold_start as cs
    from searchgym.training.sft_config import SFTConfig
    from tests.support.selfplay_bench import benchmark_module

    bl = benchmark_module("bench_learning")
    second = bl._shipped_size()["second"]
    assert second == dict(
        seed=cs.RECIPE_SECOND_SEED, demos=cs.RECIPE_SECOND_DEMOS, sft=cs.RECIPE_SECOND_SFT, weight=0.3
    )
    cfg = SFTConfig(model="smollm2", lora_init=str(tmp_path / "sft" / "final"), data=["s.jsonl"], **second["sft"])
    cfg.validate()
    assert all(getattr(cfg, k) == v for k, v in cs.RECIPE_SFT.items() if k.startswith("lora"))
    assert "second" not in bl._shipped_rft_size()
