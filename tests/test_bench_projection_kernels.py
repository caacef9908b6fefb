"""``benchmarks/bench_projection_kernels.py`` times every CPU kernel over the model's projection shapes and says
when a count is wrong."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from tests.support.selfplay_bench import benchmark_module  # noqa: E402


def test_every_kernel_is_timed_at_every_batch_and_written(tmp_path):
    import torch

    bench = benchmark_module("bench_projection_kernels")
    out = tmp_path / "kernels.json"
    threads = torch.get_num_threads()
    try:
        result = bench.main(["--batches", "2", "--repeats", "1", "--out", str(out)])
    finally:  # the script sets the process's thread count; the worker's other tests keep theirs
        torch.set_num_threads(threads)
    rows = json.loads(out.read_text())["rows"]
    assert rows == result["rows"] and [r["kernel"] for r in rows] == list(bench.KERNELS)
    assert all(r["batch"] == 2 and r["layers_ms"] > 0 and r["head_ms"] > 0 for r in rows)


def test_a_count_below_one_is_refused():
    with pytest.raises(SystemExit, match="at least 1"):
        benchmark_module("bench_projection_kernels").main(["--batches", "0"])
