"""Pool building and evaluation fanned out over a local 2-worker Ray instance: the same results as
the local run for the same seed, a worker killed mid-build loses and duplicates nothing."""

from __future__ import annotations

import json
import os

import pytest

ray = pytest.importorskip("ray", reason="needs the ray extra (pip install -e '.[ray]')")

from searchgym.agents.eval_agents import AgentSpec, make_agent  # noqa: E402
from searchgym.construction.extract import ExtractionConfig  # noqa: E402
from searchgym.construction.pool import build_pool, load_pool  # noqa: E402
from searchgym.construction.selectors import HeuristicSelector  # noqa: E402
from searchgym.core.ray_support import RayConfig  # noqa: E402
from searchgym.evaluation.runner import EvalConfig, evaluate  # noqa: E402
from searchgym.tasks.tasksets import load_tasksets  # noqa: E402

RAY = RayConfig(workers=2, chunk=60)


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


class KillOnceSelector(HeuristicSelector):
    """A heuristic selector whose Ray worker process dies the first time it reaches a given seed.
    The marker file makes it once per test; the driver process (a local build) is never killed."""

    def __init__(self, marker: str, driver_pid: int) -> None:
        super().__init__(0)
        self.marker, self.driver_pid, self.calls = marker, driver_pid, 0

    def select(self, context):
        self.calls += 1
        if os.getpid() != self.driver_pid and self.calls == 40 and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)  # the worker process dies mid-chunk
        return super().select(context)


def dicts(pool):
    return [sg.to_dict() for sg in pool]


def test_pool_on_ray_equals_the_local_pool(default_world, tmp_path):
    local = build_pool(default_world, 300, seed=5, progress=False, out=tmp_path / "local.jsonl")
    remote = build_pool(default_world, 300, seed=5, progress=False, out=tmp_path / "ray.jsonl", ray=RAY)
    assert dicts(remote.subgraphs) == dicts(local.subgraphs)
    assert (tmp_path / "ray.jsonl").read_text() == (tmp_path / "local.jsonl").read_text()
    assert remote.rejections == local.rejections and remote.attempted == local.attempted


def test_ray_worker_killed_mid_build_loses_and_duplicates_nothing(default_world, tmp_path):
    marker = str(tmp_path / "killed")
    local = build_pool(
        default_world, 200, seed=1, progress=False, selector=KillOnceSelector(str(tmp_path / "never"), os.getpid())
    )
    remote = build_pool(
        default_world,
        200,
        seed=1,
        progress=False,
        out=tmp_path / "pool.jsonl",
        selector=KillOnceSelector(marker, os.getpid()),
        ray=RAY,
    )
    assert os.path.exists(marker)  # a worker really died
    assert dicts(remote.subgraphs) == dicts(local.subgraphs)
    ids = [json.loads(line)["id"] for line in (tmp_path / "pool.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 200
    assert dicts(load_pool(tmp_path / "pool.jsonl")) == dicts(local.subgraphs)


def test_ray_build_resumes_a_local_partial_run_with_inverse_edges(default_world, tmp_path):
    """Also the Ray path with inverse edges (backward hops in the walks a worker sends back)."""
    config = ExtractionConfig(allow_inverse_edges=True, min_hops=2)
    out = tmp_path / "pool.jsonl"
    build_pool(default_world, 90, seed=2, progress=False, out=out, config=config)
    resumed = build_pool(default_world, 250, seed=2, progress=False, out=out, ray=RAY, config=config)
    full = build_pool(default_world, 250, seed=2, progress=False, config=config)
    assert resumed.resumed > 0 and dicts(resumed.subgraphs) == dicts(full.subgraphs)
    assert any(not all(sg.forward) for sg in resumed.subgraphs)  # inverse hops really crossed the process boundary


def test_eval_on_ray_equals_the_local_eval(default_world, tmp_path):
    tasksets = load_tasksets("builtin", limit=16, seed=0)
    agent = make_agent(AgentSpec("scripted"), world=default_world)
    config = EvalConfig(concurrency=4, progress=False, n_boot=200)
    local = evaluate(agent, tasksets, world=default_world, config=config, output_dir=tmp_path / "local")
    ray_config = RayConfig(workers=2, chunk=4)  # 4 chunks over both actors, committed in question order
    remote = evaluate(agent, tasksets, world=default_world, config=config, output_dir=tmp_path / "ray", ray=ray_config)
    assert remote.records == local.records
    assert remote.summary["overall"] == local.summary["overall"]
