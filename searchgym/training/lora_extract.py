"""A LoRA adapter from a full fine-tune: the truncated SVD of each weight's change.

A full fine-tune of SmolLM2-135M is 540 MB; the package may ship a few MB. For every targeted linear layer the
change ``ΔW = W_tuned - W_base`` is replaced by its best rank-``r`` approximation (Eckart–Young: the top ``r``
singular triplets, ``B = U_r diag(S_r)``, ``A = V_r^T``, scaling 1), written as an ordinary peft adapter that
:func:`searchgym.llm.pretrained.open_model` merges on load. Weights outside the targets (embeddings, norms)
keep the base values; :class:`ExtractReport` says how much of each change the rank kept, so a user sees the
cost of the compression before scoring it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core.renamed import renamed_kwargs
from ..errors import InvalidArgumentError

__all__ = ["ALL_LINEAR", "ExtractReport", "extract_lora"]

#: every linear layer of a Llama-style decoder block (SmolLM2's attention and MLP projections)
ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class ExtractReport:
    """What :func:`extract_lora` kept: the rank, the targeted layers, the share of the change's squared
    Frobenius norm the rank keeps (overall and the worst layer), and the weights it could not carry."""

    rank: int
    layers: int
    energy_kept: float  # sum over layers of ||ΔW_r||² / sum of ||ΔW||²
    worst_layer: str
    worst_energy_kept: float
    untargeted_changed: list = field(default_factory=list)  # parameters that changed but are not carried
    output_dir: str = ""

    def as_dict(self) -> dict:
        """Plain data (JSON)."""
        return asdict(self)


def _linear_targets(model, targets: tuple) -> dict:
    import torch

    return {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and name.rsplit(".", 1)[-1] in targets
    }


@renamed_kwargs(out_dir="output_dir")
def extract_lora(
    tuned: str | Path,
    output_dir: str | Path,
    *,
    base: str = "smollm2",
    rank: int = 16,
    target_modules: tuple = ALL_LINEAR,
) -> ExtractReport:
    """Write to ``output_dir`` a rank-``rank`` LoRA adapter over ``base`` approximating the model folder ``tuned``
    (a full fine-tune of ``base``), with the ``searchgym_model.json`` record an adapter from ``searchgym sft``
    carries (base model, fingerprint). Raises :class:`InvalidArgumentError` when ``tuned`` is not a fine-tune
    of ``base`` (another architecture or tokenizer) or when no targeted layer exists."""
    import torch
    from peft import LoraConfig, get_peft_model

    from ..core.atomic_writes import write_folder
    from ..llm.pretrained import MODEL_META, check_same_family, model_fingerprint, open_model, read_model_meta

    if rank < 1:
        raise InvalidArgumentError(f"rank={rank} must be >= 1")
    tuned_model, tok = open_model(str(tuned))
    base_model, base_tok = open_model(base)
    check_same_family(
        model_fingerprint(base_model.config, base_tok),
        model_fingerprint(tuned_model.config, tok),
        what=f"fine-tune {tuned}",
        against=f"base {base}",
    )
    tuned_params = dict(tuned_model.named_parameters())
    base_linears = _linear_targets(base_model, tuple(target_modules))
    if not base_linears:
        raise InvalidArgumentError(f"no linear layer named {', '.join(target_modules)} in {base}")
    factors: dict = {}
    kept = total = 0.0
    worst = ("", 1.0)
    with torch.no_grad():
        for name, module in base_linears.items():
            delta = (tuned_params[f"{name}.weight"].float() - module.weight.float()).contiguous()
            u, s, vh = torch.linalg.svd(delta, full_matrices=False)
            r = min(rank, s.numel())
            energy = float((s**2).sum())
            layer_kept = float((s[:r] ** 2).sum())
            kept, total = kept + layer_kept, total + energy
            share = layer_kept / energy if energy > 0 else 1.0
            if share < worst[1]:
                worst = (name, share)
            factors[name] = (u[:, :r] * s[:r], vh[:r].clone())  # B (out x r), A (r x in): B @ A = ΔW_r
        carried = {f"{n}.weight" for n in base_linears}
        untargeted = sorted(
            n
            for n, p in base_model.named_parameters()
            if n not in carried and n in tuned_params and not torch.equal(p, tuned_params[n])
        )
    del tuned_model, tuned_params
    peft_model = get_peft_model(
        base_model, LoraConfig(r=rank, lora_alpha=rank, lora_dropout=0.0, target_modules=list(target_modules))
    )
    with torch.no_grad():
        for name, module in peft_model.get_base_model().named_modules():
            if name in factors:
                b, a = factors[name]
                module.lora_A["default"].weight.copy_(a)
                module.lora_B["default"].weight.copy_(b)
    report = ExtractReport(
        rank=rank,
        layers=len(factors),
        energy_kept=kept / total if total > 0 else 1.0,
        worst_layer=worst[0],
        worst_energy_kept=worst[1],
        untargeted_changed=untargeted,
        output_dir=str(output_dir),
    )
    meta = {
        **read_model_meta(tuned),
        "kind": "searchgym-lora-extract",
        "base_model": base,
        "fingerprint": model_fingerprint(base_model.config, base_tok),
        "adapter": True,
        "extracted_from": str(tuned),
        "extract": report.as_dict(),
    }

    def write(tmp: Path) -> None:
        peft_model.save_pretrained(str(tmp))
        base_tok.save_pretrained(tmp)
        (tmp / MODEL_META).write_text(json.dumps(meta, indent=1))

    write_folder(output_dir, write)
    return report
