"""The cold start shipped for the bundled model: a small LoRA adapter and the commands that make it.

Training SmolLM2-135M on enough demonstrations to follow the search protocol takes longer on 2 CPU
cores than a demo may, so the package ships the adapter that :data:`RECIPE` makes (under 2 MB, fp16).
``benchmarks/bench_learning.py --size shipped --check-shipped`` re-runs the recipe and compares held-out accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from ..errors import MissingFileError

__all__ = [
    "SHIPPED_ADAPTER",
    "RECIPE",
    "RECIPE_DEMOS",
    "RECIPE_SFT",
    "shipped_adapter",
    "load_cold_start",
    "ship_adapter",
]

SHIPPED_ADAPTER = Path(__file__).resolve().parent.parent / "assets" / "smollm2_cold_start"

#: the shipped adapter's demonstrations (``searchgym demos`` hop counts per role) and SFT settings
#: (``SFTConfig`` fields): LoRA rank 8 on the attention projections without dropout, cheap on CPU and
#: 1.8 MB once stored as float16. :data:`RECIPE` spells them as commands; ``benchmarks/bench_learning.py
#: --size shipped --check-shipped`` trains from the same two dicts and scores the re-made and the shipped
#: adapter side by side on held-out questions.
RECIPE_DEMOS = {"solver": {1: 160}, "proposer": {}, "vanilla": {}}
RECIPE_SFT = {
    "lora": True,
    "save_adapter": True,
    "max_steps": 20,
    "lr": 4e-4,
    "batch_size": 8,
    "micro_batch_size": 4,
    "lora_r": 8,
    "lora_dropout": 0.0,
    "eval_every": 20,
    "save_every": 20,
    "max_tokens": 1024,
    "val_fraction": 0.05,
}


def _hops(counts: dict) -> str:
    return ",".join(f"{h}:{n}" for h, n in counts.items()) or "''"


def _sft_args(settings: dict) -> str:
    """``--set key=value`` for every setting (the CLI reads each value as YAML, so JSON spelling is exact)."""
    return " ".join(f"--set {key}={json.dumps(value)}" for key, value in settings.items())


#: the commands that made the shipped adapter, run from the repository root
RECIPE = (
    "searchgym demos --out runs/cold_start/demos.jsonl "
    + " ".join(f"--{role} {_hops(counts)}" for role, counts in RECIPE_DEMOS.items()),
    "searchgym sft --model smollm2 --data runs/cold_start/demos.jsonl --output-dir runs/cold_start/sft "
    + _sft_args(RECIPE_SFT),
    "python -c \"from searchgym.training.cold_start import ship_adapter; ship_adapter('runs/cold_start/sft/final')\"",
)


def shipped_adapter() -> Optional[Path]:
    """The shipped adapter folder, or None when this install has none."""
    return SHIPPED_ADAPTER if (SHIPPED_ADAPTER / "adapter_config.json").is_file() else None


def load_cold_start(adapter: str | Path | None = None, *, dtype: str = "float32"):
    """``(model, tokenizer)``: the bundled model with the cold-start adapter merged in."""
    from ..llm.pretrained import open_model

    folder = Path(adapter) if adapter is not None else shipped_adapter()
    if folder is None:
        raise MissingFileError(f"no cold-start adapter at {SHIPPED_ADAPTER}; make one with: {' && '.join(RECIPE)}")
    return open_model(str(folder), dtype=dtype)


_SHIPPED_FILES = ("adapter_config.json", "adapter_model.safetensors")


def ship_adapter(adapter: str | Path, dest: str | Path = SHIPPED_ADAPTER, *, dtype: str = "float16") -> Path:
    """Copy the LoRA adapter folder ``adapter`` (``searchgym sft --save-adapter``'s ``final/``) to ``dest``
    with its weights stored as ``dtype`` (float16 halves the size: a rank-8 adapter on SmolLM2's attention
    projections is 1.8 MB), its config and its ``searchgym_model.json`` (which records ``dtype_shipped``).
    The tokenizer is not copied: the adapter names its base model, which brings its own. Returns ``dest``."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from ..llm.pretrained import MODEL_META

    src, dest = Path(adapter), Path(dest)
    missing = [f for f in (*_SHIPPED_FILES, MODEL_META) if not (src / f).is_file()]
    if missing:
        raise MissingFileError(
            f"{src} is not a saved adapter (missing {', '.join(missing)}); "
            "train with searchgym sft --lora --save-adapter"
        )
    meta = json.loads((src / MODEL_META).read_text())
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src / "adapter_config.json", dest / "adapter_config.json")
    weights = {
        k: v.to(getattr(torch, dtype)).contiguous()
        for k, v in load_file(str(src / "adapter_model.safetensors")).items()
    }
    save_file(weights, str(dest / "adapter_model.safetensors"))
    (dest / MODEL_META).write_text(json.dumps({**meta, "dtype_shipped": dtype}, indent=1))
    return dest
