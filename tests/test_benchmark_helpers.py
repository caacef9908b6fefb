"""Issue 30: benchmarks and examples run outside a checkout's test suite, and the benchmark helpers that
replaced the test-suite stubs do what the benchmarks rely on."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from benchmarks.scripted_endpoint import DelayedScript, scripted_endpoint
from searchgym.core.llm import GenerationConfig
from searchgym.llm.openai_client import OpenAICompatibleGenerator
from searchgym.llm.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[1]
# an import statement of the tests package, also inside a script a benchmark runs in a child process
TESTS_IMPORT = re.compile(r"^\s*(from\s+tests[.\s]|import\s+tests\b)", re.M)


def test_no_example_or_benchmark_imports_the_test_suite():
    files = sorted((ROOT / "benchmarks").rglob("*.py")) + sorted((ROOT / "examples").rglob("*.py"))
    assert len(files) > 20
    offenders = [str(f.relative_to(ROOT)) for f in files if TESTS_IMPORT.search(f.read_text(encoding="utf-8"))]
    assert not offenders, f"import from searchgym or a benchmarks/ helper instead of tests/: {offenders}"
    assert TESTS_IMPORT.search('CLIENT = """\nimport json\nfrom tests.support.x import y\n"""')  # the check bites


def _timed_batch(concurrency: int, delay: float) -> tuple[list[str], float, int]:
    reply = lambda prompt: "<think>look</think>\n<search> Alice Varn </search>"  # noqa: E731
    with scripted_endpoint(reply, delay=delay, concurrency=concurrency) as server:
        gen = OpenAICompatibleGenerator(server.url, "scripted", timeout=30, max_retries=0, concurrency=4)
        t0 = time.monotonic()
        texts = gen.generate(
            [[{"role": "user", "content": f"q{i}"}] for i in range(4)], GenerationConfig(stop=("</search>",))
        )
        elapsed = time.monotonic() - t0
        gen.close()
        return texts, elapsed, server.requests


def test_scripted_endpoint_serves_requests_at_once_through_the_real_server():
    texts, together, n = _timed_batch(concurrency=4, delay=0.5)
    # the server dropped the stop string and named it in stop_reason; the client put it back
    assert texts == ["<think>look</think>\n<search> Alice Varn </search>"] * 4 and n == 4
    _, in_turn, _ = _timed_batch(concurrency=1, delay=0.5)
    assert in_turn >= 2.0 and together < 1.5, (together, in_turn)


def test_server_concurrency_is_validated():
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        OpenAIServer(DelayedScript(lambda p: "x"), "m", concurrency=0)
    with pytest.raises(ValueError, match="delay must be >= 0"):
        DelayedScript(lambda p: "x", delay=-1)


def test_machine_info_names_the_kernel_relevant_isa_of_this_cpu():
    # the same "Intel(R) Xeon(R) Processor" name has hidden CPUs with and without AMX: figures state the features
    from benchmarks.machine import ISA_FLAGS, cpu_isa, machine_info, machine_line

    flags = Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0].split()
    assert cpu_isa() == [f for f in ISA_FLAGS if f in flags]
    assert machine_info()["isa"] == cpu_isa()
    assert all(f in machine_line() for f in cpu_isa())
