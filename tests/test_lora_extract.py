"""A LoRA adapter extracted from a full fine-tune reproduces the fine-tune when its change has the rank kept,
approximates it (with the kept energy reported) when it does not, and refuses a fine-tune of another model."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from searchgym.errors import SearchGymError  # noqa: E402
from searchgym.llm.pretrained import MODEL_META, open_model  # noqa: E402
from searchgym.llm.tiny_models import save_tiny  # noqa: E402
from searchgym.training.lora_extract import extract_lora  # noqa: E402


def _tune(base_dir, output_dir, rank: int, seed: int = 1):
    """A "fine-tune" of the tiny model: every attention/MLP projection moved by a random rank-``rank`` change."""
    model, tok = open_model(str(base_dir))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.Linear) and name.rsplit(".", 1)[-1].endswith("_proj"):
                out_f, in_f = module.weight.shape
                b = torch.randn(out_f, rank, generator=g) * 0.05
                a = torch.randn(rank, in_f, generator=g) * 0.05
                module.weight += b @ a
    model.save_pretrained(output_dir)
    tok.save_pretrained(output_dir)
    return model


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_exact_when_the_change_has_the_kept_rank(tmp_path):
    base = save_tiny(tmp_path / "base")
    tuned = _tune(base, tmp_path / "tuned", rank=4)
    report = extract_lora(tmp_path / "tuned", tmp_path / "adapter", base=str(base), rank=4)
    assert report.energy_kept > 0.9999 and report.layers > 0 and not report.untargeted_changed
    merged, _ = open_model(str(tmp_path / "adapter"))  # an ordinary adapter folder: open_model merges it
    ids = torch.randint(0, merged.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(_logits(merged, ids), _logits(tuned, ids), atol=1e-4, rtol=1e-4)
    meta = json.loads((tmp_path / "adapter" / MODEL_META).read_text())
    assert meta["adapter"] is True and meta["base_model"] == str(base) and meta["extract"]["rank"] == 4


def test_a_lower_rank_approximates_and_says_what_it_lost(tmp_path):
    base = save_tiny(tmp_path / "base")
    tuned = _tune(base, tmp_path / "tuned", rank=8)
    report = extract_lora(tmp_path / "tuned", tmp_path / "adapter", base=str(base), rank=2)
    assert 0.0 < report.worst_energy_kept <= report.energy_kept < 0.999
    base_model, _ = open_model(str(base))
    merged, _ = open_model(str(tmp_path / "adapter"))
    ids = torch.randint(0, merged.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    gap_base = (_logits(base_model, ids) - _logits(tuned, ids)).norm()
    gap_lora = (_logits(merged, ids) - _logits(tuned, ids)).norm()
    assert gap_lora < gap_base  # closer to the fine-tune than the base is


def test_untargeted_changes_are_reported(tmp_path):
    base = save_tiny(tmp_path / "base")
    model, tok = open_model(str(base))
    with torch.no_grad():
        model.get_input_embeddings().weight[0] += 1.0
    model.save_pretrained(tmp_path / "tuned")
    tok.save_pretrained(tmp_path / "tuned")
    report = extract_lora(tmp_path / "tuned", tmp_path / "adapter", base=str(base), rank=2)
    assert any("embed" in n for n in report.untargeted_changed)


def test_another_model_is_refused(tmp_path):
    base = save_tiny(tmp_path / "base", seed=0)
    other, tok = open_model(str(base))
    other.config.num_hidden_layers = other.config.num_hidden_layers  # same family ...
    tok.add_tokens(["<zzz-new-token>"])  # ... but another tokenizer vocabulary
    other.resize_token_embeddings(len(tok))
    other.save_pretrained(tmp_path / "other")
    tok.save_pretrained(tmp_path / "other")
    with pytest.raises(SearchGymError, match="another model"):
        extract_lora(tmp_path / "other", tmp_path / "adapter", base=str(base), rank=2)
    assert not (tmp_path / "adapter").exists()
