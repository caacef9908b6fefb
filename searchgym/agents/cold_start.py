"""The cold start shipped for the bundled model: a small LoRA adapter and the commands that make it.

Training SmolLM2-135M on enough demonstrations to follow the search protocol takes longer on 2 CPU
cores than a demo may, so the package ships the adapter that :data:`RECIPE` makes (under 2 MB, fp16).
``benchmarks/bench_learning.py --size mini --check-shipped`` re-runs the recipe and compares held-out
accuracy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..errors import MissingFileError

__all__ = ["SHIPPED_ADAPTER", "RECIPE", "shipped_adapter", "load_cold_start"]

SHIPPED_ADAPTER = Path(__file__).resolve().parent.parent / "assets" / "smollm2_cold_start"

#: the commands that made the shipped adapter (run from the repository root; the adapter's weights are
#: then stored as float16). ``benchmarks/bench_learning.py --size mini --check-shipped`` runs the same
#: recipe and scores the re-made and the shipped adapter side by side on held-out questions.
RECIPE = (
    "searchgym demos --out runs/cold_start/demos.jsonl --solver 1:150,2:60 --proposer 2:16 --vanilla ''",
    "searchgym sft --model smollm2 --data runs/cold_start/demos.jsonl --lora --save-adapter "
    "--output-dir runs/cold_start/sft --set lora_r=8 --set lr=4e-4 --set batch_size=8 --set micro_batch_size=4 "
    "--set eval_every=100 --set max_tokens=1024",
)


def shipped_adapter() -> Optional[Path]:
    """The shipped adapter folder, or None when this install has none."""
    return SHIPPED_ADAPTER if (SHIPPED_ADAPTER / "adapter_config.json").is_file() else None


def load_cold_start(adapter: str | Path | None = None, *, dtype: str = "float32"):
    """``(model, tokenizer)``: the bundled model with the cold-start adapter merged in."""
    from .pretrained import open_model

    folder = Path(adapter) if adapter is not None else shipped_adapter()
    if folder is None:
        raise MissingFileError(f"no cold-start adapter at {SHIPPED_ADAPTER}; make one with: {' && '.join(RECIPE)}")
    return open_model(str(folder), dtype=dtype)
