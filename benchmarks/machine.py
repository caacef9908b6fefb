"""What machine a benchmark ran on, stated the same way by every script in this folder."""

from __future__ import annotations

import json
import os
import platform
import subprocess


def cpu_model() -> str:
    """The CPU model name from ``lscpu`` (falls back to the platform string)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or platform.machine() or "unknown"
    for line in out.splitlines():
        if line.startswith("Model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


#: the instruction-set features that decide this package's CPU kernels, as ``/proc/cpuinfo`` spells them: the
#: same model name can hide different ones under a hypervisor (an "Intel(R) Xeon(R) Processor" with or without AMX)
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16")


def cpu_isa() -> list[str]:
    """Which of :data:`ISA_FLAGS` this CPU has (empty where ``/proc/cpuinfo`` cannot be read)."""
    try:
        with open("/proc/cpuinfo") as fh:
            flags = next((line.split(":", 1)[1].split() for line in fh if line.startswith("flags")), [])
    except OSError:
        return []
    return [f for f in ISA_FLAGS if f in flags]


def machine_info() -> dict:
    """CPU model, its kernel-relevant ISA features, core count, total memory (GB) and Python version, for result
    JSON files."""
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": cpu_model(),
        "isa": cpu_isa(),
        "cores": os.cpu_count(),
        "memory_gb": round(mem_gb, 1),
        "python": platform.python_version(),
    }


def machine_line() -> str:
    """``"<CPU model> (<ISA features>), <N> cores"`` for printed tables."""
    isa = " ".join(cpu_isa())
    return f"{cpu_model()}{f' ({isa})' if isa else ''}, {os.cpu_count()} cores"


def add_device_argument(parser) -> None:
    """``--device cpu|cuda`` (default cpu): every side of a comparison runs on that one device."""
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu", help="device every measured side runs on (default cpu)"
    )


def device_info(device: str) -> dict:
    """What ``device`` is, for result JSON files: the GPU's name and memory, or the CPU model and cores.

    Raises SystemExit naming the fix when CUDA is asked for but torch cannot see a GPU."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SystemExit(
                "--device cuda: torch sees no CUDA GPU here (torch %s); run with --device cpu" % torch.__version__
            )
        props = torch.cuda.get_device_properties(0)
        return {
            "device": "cuda",
            "name": props.name,
            "memory_gb": round(props.total_memory / 2**30, 1),
            "torch": torch.__version__,
            "host": machine_line(),
        }
    return {"device": "cpu", "name": cpu_model(), "cores": os.cpu_count()}


def write_result(result: dict, out: str | None, default_name: str) -> str:
    """Write ``result`` as JSON to ``out`` (default ``benchmarks/results/<default_name>``), atomically (a run killed
    while writing leaves the previous file whole); return the path."""
    from pathlib import Path

    path = Path(out) if out else Path(__file__).resolve().parent / "results" / default_name
    from searchgym.core.atomic_writes import write_text

    return str(write_text(path, json.dumps(result, indent=2) + "\n"))
