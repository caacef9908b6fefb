"""Loading the model a training run starts from: the device, the start weights, LoRA, and checkpoint weights.

Shared by the self-play trainer, SFT and rejection sampling (the model half of their configs is
:class:`~searchgym.training.model_config.ModelOptions`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError, MissingFileError
from ..llm.bf16_hardware import native_bfloat16, warn_if_bf16_emulated
from .model_config import ModelOptions

logger = logging.getLogger(__name__)

__all__ = [
    "apply_lora",
    "autocast_to",
    "load_lora_init",
    "load_start_policy",
    "load_weights",
    "resolve_device",
    "resolve_init",
    "resolve_mixed_precision",
]


def resolve_device(name: str):
    """``auto`` → CUDA when available, else CPU; anything else as given."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidArgumentError(f"device={name!r} but CUDA is not available; use device=cpu or device=auto")
    return dev


def resolve_mixed_precision(name: str, device) -> str:
    """``mixed_precision`` as run on ``device``: ``auto`` → bfloat16 where :func:`native_bfloat16`, else none (logged).
    An explicit bfloat16 on a device that emulates it is kept, with a warning: it is many times slower there."""
    if name == "auto":
        resolved = "bfloat16" if native_bfloat16(device) else "none"
        logger.info("mixed_precision=auto runs %s on %s", resolved, device)
        return resolved
    if name == "bfloat16":
        warn_if_bf16_emulated(
            device,
            "mixed_precision=bfloat16",
            "autocast emulates it and runs several times slower than float32; use mixed_precision=auto or none",
        )
    return name


def autocast_to(precision: str, device):
    """``torch.autocast`` to a resolved ``precision`` (:func:`resolve_mixed_precision`) on ``device``'s type, or a
    no-op context for ``none``: matmuls run in bf16, reductions such as log-softmax stay in float32, the weights and
    their gradients keep their own dtype."""
    import contextlib

    import torch

    if precision == "none":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=getattr(torch, precision))


def load_start_policy(config: Any):
    """``(model, tokenizer)`` to start training from: ``config.init`` (checked to be of ``config.model``'s
    family) or ``config.model`` itself (a name, a model folder, an adapter folder or a checkpoint)."""
    from ..llm.pretrained import load_init, open_model

    kw: dict[str, Any] = dict(
        dtype=config.dtype, cache_dir=config.model_cache_dir, gradient_checkpointing=config.gradient_checkpointing
    )
    if config.init:
        return load_init(resolve_init(config.init), base=config.model, **kw)
    return open_model(config.model, **kw)


def resolve_init(init: str) -> str:
    """``init`` as a folder: the recipes' ``shipped-cold-start`` names the adapter shipped in
    ``searchgym/assets/`` (refused with the commands that make one when this install has none)."""
    from .recipes import SHIPPED_INIT

    if init != SHIPPED_INIT:
        return init
    from .cold_start import RECIPE, shipped_adapter

    folder = shipped_adapter()
    if folder is None:
        raise MissingFileError(
            f"init={SHIPPED_INIT!r} but this install ships no cold-start adapter; make one with: {' && '.join(RECIPE)}"
        )
    return str(folder)


def apply_lora(model, config: ModelOptions):
    """``model`` with a LoRA adapter of ``config``'s rank, alpha, dropout and target modules (on its last
    ``lora_last_layers`` decoder layers only, when set)."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ImportError("lora=true needs the 'peft' package: pip install 'searchgym[llm]'") from None
    layers = None
    if config.lora_last_layers is not None:
        total = model.config.num_hidden_layers
        if not 1 <= config.lora_last_layers <= total:
            raise InvalidArgumentError(
                f"lora_last_layers={config.lora_last_layers}: {config.model} has {total} decoder layers; "
                f"use 1..{total}, or null for all of them"
            )
        layers = list(range(total - config.lora_last_layers, total))
    cfg = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.lora_target_modules),
        layers_to_transform=layers,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, cfg)


def load_lora_init(model, init: str, config: ModelOptions, fingerprint: dict) -> Path:
    """Start the LoRA adapter of ``model`` (made by :func:`apply_lora` from ``config``) from the weights of the
    adapter folder ``init`` (or ``shipped-cold-start``): continuing a LoRA fine-tune keeps the result one adapter
    of the same rank, where merging it and training a second one would double what ships. Refused, naming the
    field to change, when the adapter's rank, alpha or target modules differ from ``config``'s or it was trained
    on another model family (``fingerprint``: the base ``model``'s). Returns the folder used."""
    import json

    from ..llm.pretrained import check_same_family, read_model_meta
    from ..llm.weights_check import check_weights_folder

    folder = Path(resolve_init(init))
    cfg_path = folder / "adapter_config.json"
    if not cfg_path.is_file():
        raise MissingFileError(f"lora_init={init}: {folder} holds no adapter_config.json; give a LoRA adapter folder")
    check_weights_folder(folder)
    saved = json.loads(cfg_path.read_text())
    pairs = {
        "lora_r": (config.lora_r, saved.get("r")),
        "lora_alpha": (config.lora_alpha, saved.get("lora_alpha")),
        "lora_target_modules": (sorted(config.lora_target_modules), sorted(saved.get("target_modules") or [])),
    }
    for key, (value, other) in pairs.items():
        if value != other:
            raise InvalidArgumentError(
                f"lora_init={init}: the adapter has {key}={other}, the config {value}; set {key} to the adapter's"
            )
    expected = read_model_meta(folder).get("fingerprint")
    if expected:
        check_same_family(expected, fingerprint, what=f"adapter {folder}", against=f"model {config.model}")
    load_weights(model, folder, lora=True)
    return folder


def _adapter_setting(role: str, name) -> str:
    """How a folder or run holding ``role``'s adapter ``name`` (``None``: none) was configured, in config words."""
    if name is None:
        return f"no {role} adapter of its own ({role}_adapter=false)"
    mode = "copy" if name == role else "stacked"
    return f"a {role} adapter of its own ({role}_adapter=true, {role}_adapter_mode={mode})"


def load_weights(model, folder: Path, *, lora: bool) -> None:
    """Load the weights saved by ``save_pretrained`` in ``folder`` into ``model`` in place (with LoRA: every
    adapter, each role's own from its sub-folder; refused when the folder and the model hold other adapters)."""
    from safetensors.torch import load_file

    if lora:
        from peft import set_peft_model_state_dict

        from ..llm.role_adapters import ROLE_ADAPTERS, role_adapter, role_adapter_folders, role_adapter_names

        saved = role_adapter_folders(folder)
        for role in ROLE_ADAPTERS:
            on_disk = next((n for n in saved if n in role_adapter_names(role)), None)
            in_run = role_adapter(model, role)
            if on_disk != in_run:
                raise InvalidArgumentError(
                    f"{folder} holds {_adapter_setting(role, on_disk)} and the run "
                    f"{_adapter_setting(role, in_run)}; resume as the checkpoint was written"
                )
        set_peft_model_state_dict(model, load_file(str(folder / "adapter_model.safetensors")))
        for name, sub in saved.items():
            set_peft_model_state_dict(model, load_file(str(sub / "adapter_model.safetensors")), adapter_name=name)
        return
    files = sorted(folder.glob("model*.safetensors"))
    if not files:
        raise MissingFileError(f"{folder} holds no model*.safetensors; the checkpoint is damaged")
    state = {}
    for f in files:
        state.update(load_file(str(f)))
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {k for k in missing if "lm_head" in k}
    if set(missing) - tied or unexpected:
        raise InvalidArgumentError(
            f"checkpoint weights do not fit the model (missing {sorted(set(missing) - tied)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}); was it written for another model?"
        )
    if tied and hasattr(model, "tie_weights"):
        model.tie_weights()
