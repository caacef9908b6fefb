"""The decode step's projections on each CPU kernel torch offers, from weights that are not in cache.

A decode step of SmolLM2-135M multiplies ``batch`` rows by every projection of its 30 layers (q/k/v fused 576 ->
960, o 576 -> 576, gate/up fused 576 -> 3072, down 1536 -> 576) and by the LM head (576 -> 49152): 538 MB of fp32
weights, read from memory once per step since they do not fit in any cache. A microbenchmark that multiplies one
weight over and over measures it from cache instead and flatters every kernel; this one allocates all 30 layers'
weights (random, the model's shapes) and times whole passes over them, as a step meets them, and, in the same run,
the same FLOPs on the first layer's weights alone, which stay in cache. For each batch it prints per kernel the
layers' and the head's milliseconds, GFLOP/s and the GB/s of weights streamed, and the in-cache GFLOP/s:

- ``F.linear``: transformers' path (MKL / oneDNN behind ``addmm``);
- ``mkldnn_pack``: oneDNN on weights prepacked for the batch (what the rollout engine runs on CPU);
- ``mkl_pack``: MKL's packed sgemm (``torch.ops.mkl._mkl_linear``).

    .venv/bin/python benchmarks/bench_projection_kernels.py                 # batches 1, 16, 40; about a minute
    .venv/bin/python benchmarks/bench_projection_kernels.py --batches 1 64

Writes ``benchmarks/results/projection_kernels_cpu.json``. One torch thread unless ``--threads``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import machine_info, write_result  # noqa: E402

#: (in, out) of one decoder layer's projections as the rollout engine runs them (q/k/v and gate/up fused)
LAYER_SHAPES = [(576, 960), (576, 576), (576, 3072), (1536, 576)]
LAYERS, HEAD = 30, (576, 49152)
KERNELS = ("F.linear", "mkldnn_pack", "mkl_pack")


def kernel(name: str, weight, rows: int):
    """``x -> x @ weight.T`` on kernel ``name`` (weights packed for ``rows`` where the kernel packs)."""
    import torch
    import torch.nn.functional as F

    if name == "F.linear":
        return lambda x: F.linear(x, weight)
    if name == "mkldnn_pack":  # the rollout engine's own kernel
        from searchgym.llm.decoder_weights import packed_linear, prepack_linear

        return packed_linear(prepack_linear(weight, rows))
    packed = torch.ops.mkl._mkl_reorder_linear_weight(weight, rows)
    return lambda x: torch.ops.mkl._mkl_linear(x, packed, weight, None, rows)


def measure(name: str, rows: int, weights: list, head, repeats: int) -> dict:
    """Milliseconds of the layers' projections and of the head at ``rows`` rows on kernel ``name``."""
    import torch

    calls = [[kernel(name, w, rows) for w in layer] for layer in weights]
    head_call = kernel(name, head, rows)
    inputs = [torch.randn(rows, k) for k, _ in LAYER_SHAPES]

    def layers() -> None:
        for layer in calls:
            for call, x in zip(layer, inputs):
                call(x)

    def first_layer_again() -> None:  # the same FLOPs on one layer's weights, which stay in cache
        for _ in range(LAYERS):
            for call, x in zip(calls[0], inputs):
                call(x)

    layers(), head_call(inputs[0]), first_layer_again()  # warm-up (packing, allocator)
    t0 = time.perf_counter()
    for _ in range(repeats):
        layers()
    layer_s = (time.perf_counter() - t0) / repeats
    t0 = time.perf_counter()
    for _ in range(repeats):
        first_layer_again()
    cached_s = (time.perf_counter() - t0) / repeats
    t0 = time.perf_counter()
    for _ in range(repeats):
        head_call(inputs[0])
    head_s = (time.perf_counter() - t0) / repeats
    params = LAYERS * sum(k * n for k, n in LAYER_SHAPES)
    return {
        "kernel": name,
        "batch": rows,
        "layers_ms": round(layer_s * 1e3, 1),
        "head_ms": round(head_s * 1e3, 1),
        "layers_gflop_s": round(2 * rows * params / layer_s / 1e9, 1),
        "cached_layers_ms": round(cached_s * 1e3, 1),
        "cached_gflop_s": round(2 * rows * params / cached_s / 1e9, 1),
        "layers_gb_s": round(4 * params / layer_s / 1e9, 2),
        "head_gb_s": round(4 * HEAD[0] * HEAD[1] / head_s / 1e9, 2),
    }


def main(argv=None) -> dict:
    """Every kernel at every batch; prints a table and writes the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16, 40], help="rows per step (default 1 16 40)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--repeats", type=int, default=5, help="timed passes per kernel and batch (default 5)")
    ap.add_argument("--out", default=None, help="result JSON (default benchmarks/results/projection_kernels_cpu.json)")
    args = ap.parse_args(argv)
    if min(args.batches) < 1 or args.threads < 1 or args.repeats < 1:
        raise SystemExit("--batches, --threads and --repeats must be at least 1")
    import torch

    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    weights = [[torch.randn(n, k, generator=gen) * 0.02 for k, n in LAYER_SHAPES] for _ in range(LAYERS)]
    head = torch.randn(HEAD[1], HEAD[0], generator=gen) * 0.02
    rows = []
    for b in args.batches:
        for name in KERNELS:
            r = measure(name, b, weights, head, args.repeats)
            rows.append(r)
            print(
                f"batch {b:3d} {name:12s} layers {r['layers_ms']:7.1f} ms ({r['layers_gflop_s']:5.1f} GFLOP/s, "
                f"{r['layers_gb_s']:5.2f} GB/s; from cache {r['cached_gflop_s']:5.1f} GFLOP/s)  "
                f"head {r['head_ms']:6.1f} ms ({r['head_gb_s']:5.2f} GB/s)",
                flush=True,
            )
    result = {
        "benchmark": "bench_projection_kernels",
        "machine": machine_info(),
        "torch": torch.__version__,
        "threads": args.threads,
        "shapes": {"layer": LAYER_SHAPES, "layers": LAYERS, "head": HEAD},
        "rows": rows,
    }
    print("wrote", write_result(result, args.out, "projection_kernels_cpu.json"))
    return result


if __name__ == "__main__":
    main()
