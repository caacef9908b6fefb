"""The cold start shipped for the bundled model: a small LoRA adapter and the commands that make it.

Training SmolLM2-135M on enough demonstrations to follow the search protocol takes longer on 2 CPU
cores than a demo may, so the package ships the adapter that :data:`RECIPE` makes (9.8 MB, fp16): an SFT on
demonstrations of both roles, a short second stage of one-step plans continuing it, and the point 0.3 of the way
from the first to the second (:func:`~searchgym.training.adapter_interpolation.interpolate_adapters`).
``benchmarks/bench_learning.py --size shipped --check-shipped`` re-runs the recipe and compares held-out accuracy.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Optional

from ..errors import MissingFileError

__all__ = [
    "SHIPPED_ADAPTER",
    "RECIPE",
    "RECIPE_DEMOS",
    "RECIPE_SFT",
    "RECIPE_SECOND_DEMOS",
    "RECIPE_SECOND_SEED",
    "RECIPE_SECOND_SFT",
    "RECIPE_INTERPOLATION_WEIGHT",
    "shipped_adapter",
    "load_cold_start",
    "ship_adapter",
    "weights_fingerprint",
]

SHIPPED_ADAPTER = Path(__file__).resolve().parent.parent / "assets" / "smollm2_cold_start"

#: the shipped adapter's first stage: demonstrations (``searchgym demos`` hop counts per role: Solver, KG Proposer,
#: answer-only Proposer, Solver and KG Proposer openings) and SFT settings (``SFTConfig`` fields): a rank-16 LoRA on
#: every linear layer (attention and MLP) without dropout, 120 steps of 8 under bfloat16 autocast where the device
#: has bf16 hardware (``mixed_precision: auto``; 79 min on one CPU thread), 9.8 MB once stored as float16. It plays
#: both roles: held-out Solver EM 1-hop 0.34, 2-hop 0.22 and KG Proposer valid 34/64 (shipped alone 2026-11-28; the
#: KG Proposer demonstrations end with ``nesting_text``). :data:`RECIPE` spells both stages as commands;
#: ``benchmarks/bench_learning.py --size shipped --check-shipped`` trains from the same dicts and scores the
#: re-made and the shipped adapter side by side on held-out questions.
RECIPE_DEMOS = {
    "solver": {1: 200, 2: 160, 3: 60},
    "proposer": {2: 240, 3: 260},
    "vanilla": {},
    "openings": {2: 250, 3: 200},
    "proposer_openings": {2: 100, 3: 80},
}
RECIPE_SFT = {
    "lora": True,
    "save_adapter": True,
    "lora_r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.0,
    "lora_target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "lr": 5e-4,
    "lr_schedule": "cosine",
    "warmup_steps": 5,
    "max_steps": 120,
    "batch_size": 8,
    "micro_batch_size": 4,
    "mixed_precision": "auto",
    "eval_every": 40,
    "save_every": 20,
    "patience": 3,
    "max_tokens": 1024,
    "val_fraction": 0.05,
}

#: the second stage (2026-11-29): the first stage plans most one-hop questions as two steps (its 1-hop accuracy
#: 0.34), so new demonstrations (seed :data:`RECIPE_SECOND_SEED`, other draws than the first's) weighted towards
#: one-step plans -- one-hop Solver episodes and openings -- with multi-hop Solver and KG Proposer ones replayed,
#: and a short SFT continuing the first stage's adapter (``lora_init``). Alone it overshoots (every question planned
#: in one step: 1-hop 0.44, 2-hop 0.03, Proposer 18/64), so the adapter shipped is the point
#: :data:`RECIPE_INTERPOLATION_WEIGHT` of the way from the first stage to it, the weight chosen on training-side
#: questions (``benchmarks/bench_plan_length.py --split training``: the most plans of the right length there, 134
#: of 160 against the first stage's 109): held-out Solver 1-hop 0.47, 2-hop 0.19, KG Proposer 38/64 (docs/sft.md)
RECIPE_SECOND_SEED = 7
RECIPE_SECOND_DEMOS = {
    "solver": {1: 120, 2: 40},
    "proposer": {2: 40, 3: 40},
    "vanilla": {},
    "openings": {1: 120},
    "proposer_openings": {},
}
RECIPE_SECOND_SFT = {
    **{k: v for k, v in RECIPE_SFT.items() if k.startswith("lora") or k == "save_adapter"},
    "lr": 2e-4,
    "lr_schedule": "constant",
    "warmup_steps": 2,
    "max_steps": 24,
    "batch_size": 8,
    "micro_batch_size": 4,
    "mixed_precision": "auto",
    "eval_every": 8,
    "save_every": 8,
    "patience": 0,
    "max_tokens": 1024,
    "val_fraction": 0.05,
}
RECIPE_INTERPOLATION_WEIGHT = 0.3


def _hops(counts: dict) -> str:
    return ",".join(f"{h}:{n}" for h, n in counts.items()) or "''"


def _sft_args(settings: dict) -> str:
    """``--set key=value`` for every setting (the CLI reads each value as YAML, so JSON spelling is exact), each
    quoted for a POSIX shell where it needs it (a list's spaces and quotes)."""
    return " ".join(f"--set {shlex.quote(f'{key}={json.dumps(value)}')}" for key, value in settings.items())


def _demos_args(counts_by_role: dict) -> str:
    return " ".join(f"--{role.replace('_', '-')} {_hops(counts)}" for role, counts in counts_by_role.items())


#: the commands that made the shipped adapter, run from the repository root
RECIPE = (
    "searchgym demos --out runs/cold_start/demos.jsonl " + _demos_args(RECIPE_DEMOS),
    "searchgym sft --model smollm2 --data runs/cold_start/demos.jsonl --output-dir runs/cold_start/sft "
    + _sft_args(RECIPE_SFT),
    f"searchgym demos --out runs/cold_start/second.jsonl --seed {RECIPE_SECOND_SEED} "
    + _demos_args(RECIPE_SECOND_DEMOS),
    "searchgym sft --model smollm2 --data runs/cold_start/second.jsonl --output-dir runs/cold_start/second "
    + "--set lora_init=runs/cold_start/sft/final "
    + _sft_args(RECIPE_SECOND_SFT),
    'python -c "from searchgym.training.adapter_interpolation import interpolate_adapters; '
    "from searchgym.training.cold_start import ship_adapter; "
    "ship_adapter(interpolate_adapters('runs/cold_start/sft/final', 'runs/cold_start/second/final', "
    f"{RECIPE_INTERPOLATION_WEIGHT}, 'runs/cold_start/mixed'))\"",
)


def shipped_adapter() -> Optional[Path]:
    """The shipped adapter folder, or None when this install has none."""
    return SHIPPED_ADAPTER if (SHIPPED_ADAPTER / "adapter_config.json").is_file() else None


def weights_fingerprint(start: str | Path) -> str:
    """What a checkpoint is, by content: a SHA-256 (16 hex digits) over the weight files of the folder ``start``
    (or of its ``policy/``), else ``start`` itself (a model name). The self-play benchmark records it for the
    checkpoint its runs start from, and the demo compares it with the adapter shipped now."""
    import hashlib

    folder = Path(start)
    if (folder / "policy").is_dir():
        folder = folder / "policy"
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    if not files:
        return str(start)
    digest = hashlib.sha256()
    for f in files:
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


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
