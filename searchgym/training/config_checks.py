"""Checks every training config runs when it is built (:class:`~searchgym.training.sft_config.SFTConfig`,
:class:`~searchgym.training.selfplay_config.TrainConfig`), so a bad value is refused before a model loads.

NaN passes every ``x < 0`` range check and a device string is parsed only by torch once the weights are in
memory: :func:`check_shared_fields` refuses both, and ``env_kwargs`` the env would not take
(:func:`~searchgym.envs.env_kwargs.check_env_kwargs`), in one line naming the field and the fix.
"""

from __future__ import annotations

import math
import re
from dataclasses import fields
from typing import Any

from ..envs.env_kwargs import check_env_kwargs
from ..errors import InvalidArgumentError

__all__ = ["TORCH_DEVICE_TYPES", "check_shared_fields", "refuse_non_finite_fields", "check_device"]

#: the device types ``torch.device`` parses, each optionally ``:N`` (``auto`` is searchgym's: CUDA when available)
TORCH_DEVICE_TYPES = (
    "cpu", "cuda", "mps", "xpu", "hip", "meta", "hpu", "mtia", "maia", "xla", "lazy", "ipu", "mkldnn", "opengl",
    "opencl", "ideep", "ve", "fpga", "vulkan", "privateuseone",
)  # fmt: skip
_DEVICE = re.compile(rf"({'|'.join(TORCH_DEVICE_TYPES)})(:\d+)?")


def check_shared_fields(config: Any) -> None:
    """The checks :class:`SFTConfig` and :class:`~searchgym.training.selfplay_config.TrainConfig` share: finite
    floats, a device torch can parse, ``env_kwargs`` the env takes. Configs call it when they are built, so a bad
    value is refused before a model loads."""
    refuse_non_finite_fields(config)
    check_device(config.device)
    check_env_kwargs(config.env_id, config.env_kwargs)


def refuse_non_finite_fields(config: Any) -> None:
    """Refuse a NaN or infinite number in any field of the dataclass ``config``, and a float field holding no number:
    NaN passes every ``x < 0`` range check, so without this ``lr=nan`` would train (to NaN weights) and
    ``epochs=nan`` fail after the model loads; an optional float (``min_reward``) given as text stays text."""
    for f in fields(config):
        value = getattr(config, f.name)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if (number and not math.isfinite(value)) or ("float" in str(f.type) and value is not None and not number):
            raise InvalidArgumentError(f"{f.name}={value!r} is not a finite number; give one (--set {f.name}=...)")


def check_device(device: Any) -> None:
    """Refuse a ``device`` torch cannot parse (it would fail only once the model is loaded): ``auto``, or a torch
    device type with an optional index (``cpu``, ``cuda``, ``cuda:1``, ``mps``, ...)."""
    if device != "auto" and not (isinstance(device, str) and _DEVICE.fullmatch(device)):
        raise InvalidArgumentError(f"device={device!r} is not a device; use auto, cpu, cuda, cuda:N or mps")
