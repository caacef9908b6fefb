"""Whether a device multiplies bfloat16 in hardware, asked before choosing bf16 for speed.

Where it does not, PyTorch emulates bf16 and it is a large loss, not a gain. Measured on a 2-core AMD EPYC Zen 3
(AVX2, no AVX-512 BF16), one thread: a bf16 GEMM ran 0.8 GFLOP/s against 58.5 in float32
(``benchmarks/bench_rollout.py``'s floors), bf16 rollouts of SmolLM2-135M decoded 3.6x slower than float32 at
batch 16, and a forward+backward under bf16 autocast took 106 s for one 384-token sequence against 30 s for four
in float32. The SFT trainer's ``mixed_precision: auto`` and :func:`warn_if_bf16_emulated` (SFT and the rollout
engine) read this answer.
"""

from __future__ import annotations

import logging

__all__ = ["native_bfloat16", "warn_if_bf16_emulated"]

logger = logging.getLogger(__name__)


def native_bfloat16(device) -> bool:
    """Whether ``device`` multiplies bfloat16 matrices in hardware: a CUDA GPU that supports bf16, or a CPU with
    AVX-512 BF16 or AMX tiles (the module docstring has what emulated bf16 costs)."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device.type == "cpu":
        probes = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
        return any(bool(probe()) for probe in probes if probe is not None)
    return False


def warn_if_bf16_emulated(device, what: str, cost_and_fix: str) -> None:
    """Log one warning when ``what`` (a bf16 setting the user asked for) meets a ``device`` without bf16 hardware:
    it still runs, and the warning says what it costs there and which setting to use instead."""
    if not native_bfloat16(device):
        logger.warning(
            "%s on %s, which has no bf16 matmul hardware (AVX-512 BF16, AMX or a bf16 GPU): %s",
            what,
            device,
            cost_and_fix,
        )
