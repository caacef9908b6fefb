"""Check ``*.safetensors`` weight files before a load spends time on them.

A safetensors file is an 8-byte little-endian header length, a JSON header naming every tensor's byte
range, then the tensor bytes. Reading the header (no tensor data) is enough to catch a file that is
cut short (a partial copy or download, a full disk) or is not safetensors at all, and to say so
naming the file -- instead of a bare ``SafetensorError`` from deep inside ``from_pretrained`` after the
other files (and perhaps a base model) took their time to load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

from ..errors import InvalidArgumentError

__all__ = ["DamagedWeightsError", "check_safetensors", "check_weights_folder"]

#: safetensors itself refuses headers above 100 MB.
MAX_HEADER_BYTES = 100_000_000


class DamagedWeightsError(InvalidArgumentError):
    """A weight file is cut short or is not a safetensors file; the message names it and the fix."""


def check_safetensors(path: str | Path) -> None:
    """Raise :class:`DamagedWeightsError` naming ``path`` unless its header parses and its tensors fit the file."""
    p = Path(path)
    size = p.stat().st_size
    with open(p, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            _damaged(p, f"{size} bytes, shorter than the 8-byte header length")
        n = int.from_bytes(head, "little")
        if n > min(MAX_HEADER_BYTES, size - 8):
            _damaged(p, f"its header claims {n} bytes but the file has {size}")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            _damaged(p, "its header is not JSON")
    if not isinstance(header, dict):
        _damaged(p, "its header is not a JSON object")
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            _damaged(p, f"tensor {name!r} has no valid data_offsets")
        end = max(end, offsets[1])
    if 8 + n + end > size:
        _damaged(p, f"cut short: its tensors need {8 + n + end} bytes, the file has {size}")


def check_weights_folder(folder: str | Path) -> None:
    """:func:`check_safetensors` on every ``*.safetensors`` file of a model / adapter folder."""
    for p in sorted(Path(folder).glob("*.safetensors")):
        check_safetensors(p)


def _damaged(path: Path, why: str) -> NoReturn:
    raise DamagedWeightsError(
        f"{path} is not a valid safetensors file ({why}); the file is damaged or incomplete: copy, download or "
        f"save that model again (a damaged checkpoint: resume from an earlier one or start a fresh run)"
    )
