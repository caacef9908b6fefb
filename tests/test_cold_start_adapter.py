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
    from searchgym.training.cold_start import RECIPE, RECIPE_DEMOS, RECIPE_SFT

    demos_cmd, sft_cmd, ship_cmd = RECIPE
    parser = build_parser()
    demos = parser.parse_args(shlex.split(demos_cmd)[1:])
    for role, counts in RECIPE_DEMOS.items():
        assert getattr(demos, role) == ",".join(f"{h}:{n}" for h, n in counts.items())
    cfg = resolve_sft_config(parser.parse_args(shlex.split(sft_cmd)[1:]))
    for key, value in RECIPE_SFT.items():
        assert getattr(cfg, key) == value, key
    assert cfg.model == "smollm2" and cfg.data == ["runs/cold_start/demos.jsonl"]
    assert "ship_adapter('runs/cold_start/sft/final')" in ship_cmd


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
