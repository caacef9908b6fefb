"""Open a policy from anything searchgym writes, and check that two models belong to the same family.

:func:`open_model` accepts, besides what :func:`~searchgym.llm.bundled_model.load_policy` takes ('smollm2',
a Hugging Face folder, a cached hub id):

* an ``searchgym sft`` output folder (``final/`` is an ordinary model folder),
* a LoRA adapter folder (``adapter_config.json``) -- its base model (recorded in
  ``searchgym_model.json`` by ``searchgym sft --save-adapter``, else the adapter's own
  ``base_model_name_or_path``) is loaded and the adapter merged into it,
* a trainer or SFT checkpoint (``checkpoints/step_N``; its ``policy/`` folder).

:func:`load_init` is what ``searchgym train --init`` uses: it opens the init model and refuses it,
naming the differing keys, when its architecture or tokenizer differs from the configured ``model``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from ..errors import InvalidArgumentError, MissingFileError, SearchGymError
from .role_adapters import attach_adapters, role_adapter_folders
from .weights_check import check_weights_folder

logger = logging.getLogger(__name__)

MODEL_META = "searchgym_model.json"  # written next to every model / adapter searchgym sft saves


class IncompatibleModelError(SearchGymError, ValueError):
    """A model (checkpoint, adapter, init) belongs to another model family or tokenizer than expected."""


def _policy_folder(path: Path) -> Path:
    """The model folder inside ``path`` (a checkpoint's ``policy/`` or ``path`` itself)."""
    if (
        (path / "policy").is_dir()
        and not (path / "config.json").is_file()
        and not (path / "adapter_config.json").is_file()
    ):
        return path / "policy"
    return path


def read_model_meta(folder: str | Path) -> dict:
    """The ``searchgym_model.json`` record of a saved model/adapter ({} if it has none)."""
    p = Path(folder) / MODEL_META
    return json.loads(p.read_text()) if p.is_file() else {}


def adapter_base(folder: Path) -> str:
    """The base model an adapter folder was trained on."""
    base = read_model_meta(folder).get("base_model")
    if base:
        return str(base)
    cfg = json.loads((folder / "adapter_config.json").read_text())
    if not cfg.get("base_model_name_or_path"):
        raise InvalidArgumentError(
            f"{folder} is a LoRA adapter without a recorded base model; add base_model to {folder / MODEL_META}"
        )
    return str(cfg["base_model_name_or_path"])


def open_model(name_or_path: str, *, dtype: str = "float32", cache_dir=None, gradient_checkpointing: bool = False):
    """``(model, tokenizer)`` for a model name/folder, an adapter folder (merged) or a checkpoint; offline."""
    from .bundled_model import load_policy

    p = Path(str(name_or_path)).expanduser()
    folder = _policy_folder(p) if p.is_dir() else None
    if folder is None or not (folder / "adapter_config.json").is_file():
        return load_policy(
            str(folder or name_or_path), dtype=dtype, cache_dir=cache_dir, gradient_checkpointing=gradient_checkpointing
        )
    from peft import PeftModel

    check_weights_folder(folder)  # before the base model takes its time to load
    base = adapter_base(folder)
    model, tok = load_policy(base, dtype=dtype, cache_dir=cache_dir)
    expected = read_model_meta(folder).get("fingerprint")
    if expected:
        check_same_family(
            expected, model_fingerprint(model.config, tok), what=f"adapter {folder}", against=f"its base {base}"
        )
    model = attach_adapters(model, folder)
    if isinstance(model, PeftModel):  # adapters per role (proposer_adapter): kept apart, each role plays with its own
        logger.info("LoRA adapters %s of %s: one per role", folder, base)
        return model, tok
    model.requires_grad_(True)  # peft froze the base weights; the merged model is an ordinary, trainable one
    logger.info("merged LoRA adapter %s into %s", folder, base)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    return model, tok


def tokenizer_digest(tokenizer) -> str:
    """Short hash of the tokenizer's vocabulary (token -> id), independent of padding settings."""
    vocab = sorted(tokenizer.get_vocab().items())
    return hashlib.sha256(json.dumps(vocab, ensure_ascii=False).encode()).hexdigest()[:16]


def model_fingerprint(model_config, tokenizer) -> dict:
    """What two models must share for one's weights to continue the other's training."""
    return {
        "model_type": getattr(model_config, "model_type", None),
        "vocab_size": getattr(model_config, "vocab_size", None),
        "hidden_size": getattr(model_config, "hidden_size", None),
        "num_hidden_layers": getattr(model_config, "num_hidden_layers", None),
        "tokenizer": tokenizer_digest(tokenizer),
    }


def check_same_family(expected: dict, got: dict, *, what: str, against: str) -> None:
    """Raise :class:`IncompatibleModelError` naming every key where ``got`` differs from ``expected``."""
    diff = sorted(k for k in set(expected) | set(got) if expected.get(k) != got.get(k))
    if diff:
        detail = ", ".join(f"{k}: {what}={got.get(k)!r} vs {expected.get(k)!r}" for k in diff)
        raise IncompatibleModelError(
            f"{what} is from another model than {against} ({detail}); use a checkpoint made from the same base "
            f"model, or set model= to the model it was trained from"
        )


def base_fingerprint(name_or_path: str, *, dtype: str = "float32", cache_dir=None) -> dict:
    """Fingerprint of a model from its config and tokenizer alone (no weights loaded)."""
    from transformers import AutoConfig, AutoTokenizer

    from .bundled_model import resolve_model_path

    p = Path(str(name_or_path)).expanduser()
    if p.is_dir():
        folder = _policy_folder(p)
        meta = read_model_meta(folder)
        if (folder / "adapter_config.json").is_file():
            if meta.get("fingerprint"):
                return meta["fingerprint"]
            return base_fingerprint(adapter_base(folder), dtype=dtype, cache_dir=cache_dir)
        path = str(folder)
    else:
        path = resolve_model_path(str(name_or_path), cache_dir=cache_dir, dtype=dtype)
    cfg = AutoConfig.from_pretrained(path, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return model_fingerprint(cfg, tok)


def load_init(init: str, *, base: str, dtype: str = "float32", cache_dir=None, gradient_checkpointing: bool = False):
    """Open ``init`` (SFT output, adapter or checkpoint) after checking it is of the same family as ``base``."""
    p = Path(init).expanduser()
    if not p.exists():
        raise MissingFileError(
            f"init={init!r} does not exist; give the `searchgym sft` output folder "
            f"(<output_dir>/final) or a checkpoint folder"
        )
    if p.is_dir():
        check_weights_folder(_policy_folder(p))
        if role_adapter_folders(_policy_folder(p)):
            raise InvalidArgumentError(
                f"init={init!r} holds a LoRA adapter per role (a proposer_adapter run); a run starts from one set of "
                "weights: evaluate it, or start from the run's own start (its config.yaml's init)"
            )
    expected = base_fingerprint(base, dtype=dtype, cache_dir=cache_dir)
    model, tok = open_model(init, dtype=dtype, cache_dir=cache_dir, gradient_checkpointing=gradient_checkpointing)
    check_same_family(expected, model_fingerprint(model.config, tok), what=f"init {init}", against=f"model={base!r}")
    logger.info("policy initialised from %s", init)
    return model, tok


def resolve_checkpoint(model: str) -> str:
    """A trainer checkpoint folder (``.../step_00000010``) → its ``policy`` model folder; else as given. For the
    backends that load model folders only (vLLM): a checkpoint holding a LoRA adapter is refused, naming the fix."""
    p = Path(model).expanduser()
    if p.is_dir() and not (p / "config.json").is_file() and (p / "policy" / "config.json").is_file():
        return str(p / "policy")
    if p.is_dir() and (p / "policy" / "adapter_config.json").is_file():
        raise InvalidArgumentError(
            f"{p} holds a LoRA adapter, which vLLM cannot load; evaluate it with --agent transformers "
            f"(which merges it on load), or merge it into its base model (peft merge_and_unload) yourself"
        )
    return model
