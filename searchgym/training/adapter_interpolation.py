"""A point between two LoRA adapters of one run: weight-space interpolation (WiSE-FT) of a fine-tune and its start.

A short second SFT stage can overshoot: on the shipped cold start, a stage of one-step plans taught the Solver to
plan *every* question in one step, where the first stage planned one-hop questions in two (docs/sft.md). The
model tells the hop counts apart at either end -- what moves is the threshold -- so a point on the straight line
between the two sets of weights moves the threshold part of the way (Wortsman et al., 2022, "Robust fine-tuning of
zero-shot models": interpolating a fine-tuned model with its start keeps what each does well). The interpolation
runs along the LoRA factors, ``A = (1 - w) A_start + w A_end`` and the same for ``B``, so the result is again a rank-r
adapter of the same size; when ``end`` was trained from ``start`` (``lora_init``), the factors stay close and the
product ``B A`` follows the straight line up to a term in ``w (1 - w)`` of the factors' small changes. The weight is
chosen off the held-out sets (``benchmarks/bench_plan_length.py --split training``).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InvalidArgumentError, MissingFileError

__all__ = ["interpolate_adapters"]

_WEIGHTS = "adapter_model.safetensors"
_CONFIG = "adapter_config.json"
#: adapter settings that must agree for the two factor sets to lie in one space
_SHAPE_KEYS = ("r", "lora_alpha", "target_modules", "use_rslora", "use_dora")


def _adapter_config(folder: Path) -> dict:
    if not (folder / _CONFIG).is_file() or not (folder / _WEIGHTS).is_file():
        raise MissingFileError(
            f"{folder} is not a saved LoRA adapter (needs {_CONFIG} and {_WEIGHTS}); train with searchgym sft --lora "
            "--save-adapter"
        )
    return json.loads((folder / _CONFIG).read_text())


def interpolate_adapters(start: str | Path, end: str | Path, weight: float, dest: str | Path) -> Path:
    """Write to ``dest`` the adapter ``(1 - weight) * start + weight * end``, tensor by tensor, in float32 (so
    ``ship_adapter`` rounds it once), with ``start``'s config and a ``searchgym_model.json`` that records the two
    ends and the weight. The folder is put in place whole (:func:`~searchgym.core.atomic_writes.write_folder`, as
    ``extract_lora`` does): ``dest`` is the old folder or the new one, never half of either. ``weight`` 0 is
    ``start``, 1 is ``end``. Raises a one-line error when either folder is not an adapter, when their shapes differ
    (rank, alpha, targets, tensor names or sizes), or when ``weight`` is outside [0, 1] (an extrapolation is not a
    point between two trained models). Returns ``dest``."""
    import torch
    from safetensors.torch import load_file, save_file

    from ..core.atomic_writes import write_folder
    from ..llm.pretrained import MODEL_META

    if not 0.0 <= weight <= 1.0:
        raise InvalidArgumentError(f"weight={weight}: use a value in [0, 1] (0 is the start adapter, 1 the end one)")
    start, end, dest = Path(start), Path(end), Path(dest)
    a_cfg, b_cfg = _adapter_config(start), _adapter_config(end)
    differ = [k for k in _SHAPE_KEYS if _norm(a_cfg.get(k)) != _norm(b_cfg.get(k))]
    if differ:
        raise InvalidArgumentError(
            f"{start} and {end} are adapters of different shapes ({', '.join(differ)} differ); interpolate two "
            "adapters of one run (train the second with lora_init set to the first)"
        )
    a, b = load_file(str(start / _WEIGHTS)), load_file(str(end / _WEIGHTS))
    if a.keys() != b.keys() or any(a[k].shape != b[k].shape for k in a):
        raise InvalidArgumentError(f"{start} and {end} hold different tensors; interpolate two adapters of one run")
    mixed = {k: torch.lerp(a[k].float(), b[k].float(), weight).contiguous() for k in a}
    meta = json.loads((start / MODEL_META).read_text()) if (start / MODEL_META).is_file() else {}
    meta.pop("dtype_shipped", None)  # the float32 result is not what was shipped
    meta["interpolation"] = {"start": str(start), "end": str(end), "weight": weight}

    def write(folder: Path) -> None:
        (folder / _CONFIG).write_text(json.dumps(a_cfg, indent=2))
        save_file(mixed, str(folder / _WEIGHTS))
        (folder / MODEL_META).write_text(json.dumps(meta, indent=1))

    return write_folder(dest, write)


def _norm(value):
    """Config values compared as sets where order carries no meaning (peft stores ``target_modules`` as a set)."""
    return sorted(value) if isinstance(value, (list, tuple, set)) else value
