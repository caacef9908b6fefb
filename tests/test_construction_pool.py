"""The resumable pool builder, pool files, curriculum ordering and the SubgraphPool cursor."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from searchgym.construction import (
    ExtractionConfig,
    HeuristicSelector,
    PoolFormatError,
    SubgraphPool,
    build_pool,
    load_pool,
    order_pool,
    rejections_path,
)
from searchgym.construction.pool import pool_fingerprint
from searchgym.world import WorldBuilder
from tests.support.construction_world import build_random_world

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def world():
    return build_random_world(600, seed=11)


def dicts(subgraphs):
    return [s.to_dict() for s in subgraphs]


def lines(path):
    return Path(path).read_text().splitlines()


def test_pool_basics_and_ids(world):
    res = build_pool(world, 40, seed=3, progress=False)
    assert res.accepted == 40 and res.stopped_early is None
    assert res.attempted == 40 + sum(res.rejections.values())
    idx = [s.metadata["seed_index"] for s in res.subgraphs]
    assert idx == sorted(idx) and len(set(idx)) == 40
    assert all(s.id == f"sg{s.metadata['seed_index']:06d}" for s in res.subgraphs)
    assert all(3 <= s.hops <= 7 for s in res.subgraphs)
    assert "40 subgraphs from" in res.summary()
    with_bar = build_pool(world, 40, seed=3, progress=True, concurrency=2)
    assert dicts(with_bar.subgraphs) == dicts(res.subgraphs)


def test_deterministic_across_workers_and_runs(world):
    a = build_pool(world, 60, seed=5, progress=False)
    b = build_pool(world, 60, seed=5, progress=False, concurrency=4)
    c = build_pool(world, 60, seed=6, progress=False)
    assert dicts(a.subgraphs) == dicts(b.subgraphs)
    assert a.rejections == b.rejections and a.attempted == b.attempted
    assert dicts(a.subgraphs) != dicts(c.subgraphs)
    # a larger pool extends a smaller one with the same seed (seed index i does not depend on n)
    d = build_pool(world, 80, seed=5, progress=False)
    assert dicts(d.subgraphs[:60]) == dicts(a.subgraphs)


def test_rejections_are_counted_and_written(tmp_path):
    # a star: hubs with short spokes; most seeds dead-end before 3 hops
    b = WorldBuilder("short")
    for i in range(40):
        b.add_entity(f"E{i}", f"E {i}")
    for i in range(0, 40, 4):
        b.add_triple(f"E{i}", "r", f"E{i + 1}")
        b.add_triple(f"E{i + 1}", "s", f"E{i + 2}")
    b.add_triple("E36", "t", "E37")
    b.add_triple("E37", "t", "E38")
    b.add_triple("E38", "t", "E39")
    w = b.build()
    out = tmp_path / "short.jsonl"
    res = build_pool(w, 5, out=out, progress=False, max_attempts=30)
    assert res.accepted <= 1 and res.rejections["too_short"] >= 20
    assert "max_attempts=30" in res.stopped_early
    rej = [json.loads(x) for x in lines(rejections_path(out))]
    assert len(rej) == sum(res.rejections.values()) and {r["reason"] for r in rej} == {"too_short"}
    assert all("hop(s)" in r["detail"] for r in rej)


def test_no_eligible_relations_is_a_clear_error(tiny_world):
    with pytest.raises(ValueError, match="no eligible relation"):
        build_pool(tiny_world, 5, config=ExtractionConfig(relation_allowlist={"missing"}), progress=False)
    with pytest.raises(ValueError, match="n must be"):
        build_pool(tiny_world, -1, progress=False)
    with pytest.raises(TypeError, match="select"):
        build_pool(tiny_world, 1, selector=object(), progress=False)


def test_resume_after_torn_write_matches_uninterrupted_run(world, tmp_path):
    full = build_pool(world, 50, seed=2, out=tmp_path / "full.jsonl", progress=False)
    out = tmp_path / "pool.jsonl"
    acc, rej = lines(tmp_path / "full.jsonl"), lines(rejections_path(tmp_path / "full.jsonl"))
    # keep 17 complete lines plus half of the 18th (a kill during a write), and the first rejections
    out.write_text("\n".join(acc[:17]) + "\n" + acc[17][: len(acc[17]) // 2])
    rejections_path(out).write_text("\n".join(rej[:2]) + "\n" + rej[2][:10] if len(rej) > 2 else "")
    res = build_pool(world, 50, seed=2, out=out, progress=False)
    assert res.resumed >= 17
    assert dicts(res.subgraphs) == dicts(full.subgraphs)
    assert dicts(load_pool(out)) == dicts(full.subgraphs)
    ids = [json.loads(x)["id"] for x in lines(out)]
    assert len(ids) == len(set(ids)) == 50
    # running again is a no-op
    again = build_pool(world, 50, seed=2, out=out, progress=False)
    assert again.resumed == again.attempted == res.attempted
    assert len(lines(out)) == 50


class Interrupting(HeuristicSelector):
    """Heuristic selector that raises KeyboardInterrupt (like Ctrl-C) after ``k`` calls."""

    def __init__(self, k):
        super().__init__(0)
        self.k = k

    def select(self, ctx):
        self.k -= 1
        if self.k < 0:
            raise KeyboardInterrupt
        return super().select(ctx)


class Slow(HeuristicSelector):
    """Heuristic selector, instant for the first seed it sees (seed index 0, submitted first) and 200 ms a call
    for every other, counting the calls it is inside right now."""

    def __init__(self):
        super().__init__(0)
        self.lock = threading.Lock()
        self.active = self.calls = 0
        self.first = None

    def select(self, ctx):
        with self.lock:
            self.active += 1
            self.calls += 1
        if self.first is None:
            self.first = ctx.seed_id
        if ctx.seed_id != self.first:
            time.sleep(0.2)
        try:
            return super().select(ctx)
        finally:
            with self.lock:
                self.active -= 1


def test_build_returns_with_no_selector_call_in_flight(world):
    """CI flake: discarded speculative extractions went on calling an LLM endpoint after build_pool returned
    (their failures, once the test closed its server, changed the selector's counts after the fact)."""
    sel = Slow()
    build_pool(world, 1, seed=0, selector=sel, concurrency=4, progress=False)
    calls = sel.calls
    assert sel.active == 0
    time.sleep(0.1)
    assert sel.calls == calls


@pytest.mark.parametrize("workers", [1, 4])
def test_resume_after_keyboard_interrupt(world, tmp_path, workers):
    full = build_pool(world, 50, seed=0, progress=False)
    out = tmp_path / "pool.jsonl"
    with pytest.raises(KeyboardInterrupt):
        build_pool(world, 50, seed=0, selector=Interrupting(60), out=out, progress=False, concurrency=workers)
    done = len(lines(out))
    assert 0 < done < 50
    res = build_pool(world, 50, seed=0, out=out, progress=False, concurrency=workers)
    assert res.resumed >= done
    assert dicts(res.subgraphs) == dicts(full.subgraphs)
    assert len(lines(out)) == 50


@pytest.mark.slow
def test_resume_after_killing_the_cli_process(world, tmp_path):
    wdir = tmp_path / "world"
    world.save(wdir)
    out = tmp_path / "pool.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "searchgym.commands.subgraphs",
        "subgraphs",
        "build",
        "--world",
        str(wdir),
        "--n",
        "1000000",
        "--out",
        str(out),
        "--no-progress",
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while (not out.exists() or out.stat().st_size < 60_000) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    killed_lines = len(lines(out))
    assert killed_lines > 20
    res = build_pool(world, 300, out=out, progress=False)
    assert dicts(res.subgraphs) == dicts(build_pool(world, 300, progress=False).subgraphs)
    ids = [s.id for s in load_pool(out)]  # raises on duplicates
    assert len(ids) == len(set(ids)) >= 300


@pytest.mark.parametrize("workers", [2, 4])
def test_growing_a_concurrent_pool_resumes_past_the_first_window(world, tmp_path, workers):
    """Issue 17: `--n 50 --workers 2` then `--n 100` left 50 (the loop stopped after 4 x workers done indices)."""
    out = tmp_path / "pool.jsonl"
    build_pool(world, 50, seed=4, out=out, progress=False, concurrency=workers)
    res = build_pool(world, 100, seed=4, out=out, progress=False, concurrency=workers)
    assert res.accepted == 100 and res.stopped_early is None
    assert dicts(res.subgraphs) == dicts(build_pool(world, 100, seed=4, progress=False).subgraphs)
    assert len(lines(out)) == 100


def _kill_cli_at(cmd, out: Path, at_lines: int) -> None:
    """Start the pool CLI and SIGKILL it once ``out`` has at least ``at_lines`` lines."""
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if out.exists() and out.read_bytes().count(b"\n") >= at_lines:
                break
            time.sleep(0.005)  # a whole build takes under a second: a slower poll can miss it
        assert proc.poll() is None, proc.stderr.read().decode()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_sigkill_and_resume_gives_the_uninterrupted_file(world, tmp_path, workers):
    """Kill the CLI at several points with 1, 2 and 4 workers; the resumed file equals an uninterrupted run's."""
    wdir = tmp_path / "world"
    world.save(wdir)
    n = 1500  # ~4 subgraphs a millisecond: the kills land mid-build, not after it
    reference = tmp_path / "reference.jsonl"
    build_pool(world, n, seed=1, out=reference, progress=False)
    out = tmp_path / "pool.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "searchgym.commands.subgraphs",
        "subgraphs",
        "build",
        "--world",
        str(wdir),
        "--n",
        str(n),
        "--seed",
        "1",
        "--out",
        str(out),
        "--no-progress",
        "--concurrency",
        str(workers),
    ]
    for at in (5, 60, 150):
        _kill_cli_at(cmd, out, at)
    assert 5 <= len(lines(out)) < n
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert dicts(load_pool(out)) == dicts(load_pool(reference))
    assert lines(out) == lines(reference)
    assert sorted(lines(rejections_path(out))) == sorted(lines(rejections_path(reference)))


def test_resume_with_other_settings_is_refused(world, tmp_path):
    out = tmp_path / "pool.jsonl"
    build_pool(world, 5, seed=1, out=out, progress=False)
    with pytest.raises(PoolFormatError, match="different settings"):
        build_pool(world, 5, seed=2, out=out, progress=False)
    with pytest.raises(PoolFormatError, match="different settings"):
        build_pool(world, 5, seed=1, out=out, progress=False, config=ExtractionConfig(max_hops=5))
    assert pool_fingerprint(world, 1, ExtractionConfig(), HeuristicSelector(1)) != pool_fingerprint(
        world, 1, ExtractionConfig(), HeuristicSelector(2)
    )


def test_load_pool_errors_name_the_line(world, tmp_path):
    with pytest.raises(FileNotFoundError, match="searchgym subgraphs build"):
        load_pool(tmp_path / "missing.jsonl")
    good = lines(build_pool(world, 3, out=tmp_path / "g.jsonl", progress=False).path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good[0] + "\n{not json\n" + good[1] + "\n")
    with pytest.raises(PoolFormatError, match="line 2"):
        load_pool(bad)
    bad.write_text(good[0] + "\n" + good[0] + "\n")
    with pytest.raises(PoolFormatError, match="line 2: duplicate subgraph id"):
        load_pool(bad)
    bad.write_text(good[0] + "\n" + '{"id": "x"}\n')
    with pytest.raises(PoolFormatError, match="line 2: malformed subgraph record: field 'nodes' is missing; fix or"):
        load_pool(bad)
    wrong = {**json.loads(good[1]), "path": "S1 S2"}  # a string path once read as five one-letter node ids
    bad.write_text(good[0] + "\n" + json.dumps(wrong) + "\n")
    with pytest.raises(PoolFormatError, match="line 2: .* field 'path' is a str, not a list; fix or delete that line"):
        load_pool(bad)
    bad.write_text(good[0] + "\n" + good[1][:30])
    with pytest.raises(PoolFormatError, match="line 2 is truncated"):
        load_pool(bad)
    # a corrupt line in the middle is never silently dropped on resume either
    mid = tmp_path / "mid.jsonl"
    mid.write_text(good[0] + "\ngarbage\n" + good[1] + "\n")
    with pytest.raises(PoolFormatError, match="line 2"):
        build_pool(world, 3, out=mid, progress=False)


# ----------------------------------------------------------------------------- curriculum


def test_order_pool(world):
    sgs = build_pool(world, 30, progress=False).subgraphs
    cur = order_pool(sgs, "curriculum")
    counts = [s.node_count for s in cur]
    assert counts == sorted(counts, reverse=True)
    for a, b in zip(cur, cur[1:]):
        if a.node_count == b.node_count:
            assert a.id < b.id
    sh1, sh2 = order_pool(sgs, "shuffle", seed=1), order_pool(sgs, "shuffle", seed=1)
    assert [s.id for s in sh1] == [s.id for s in sh2] != [s.id for s in sgs]
    assert [s.id for s in order_pool(sgs, "shuffle", seed=2)] != [s.id for s in sh1]
    assert order_pool(sgs, "none") == list(sgs)
    with pytest.raises(ValueError, match="curriculum"):
        order_pool(sgs, "random")


def test_subgraph_pool_cursor_state_and_split(world, tmp_path):
    sgs = build_pool(world, 12, out=tmp_path / "p.jsonl", progress=False).subgraphs
    pool = SubgraphPool.from_file(tmp_path / "p.jsonl")
    assert len(pool) == 12 and [s.id for s in pool] == [s.id for s in order_pool(sgs, "curriculum")]
    first = pool.take(5)
    state = json.loads(json.dumps(pool.state_dict()))
    rest = pool.take(10)  # wraps into epoch 1
    assert pool.epoch == 1 and pool.position == 3
    assert [s.id for s in rest[7:]] == [s.id for s in first[:3]]  # curriculum repeats per epoch
    other = SubgraphPool(sgs)
    other.load_state_dict(state)
    assert [s.id for s in other.take(10)] == [s.id for s in rest]
    with pytest.raises(ValueError, match="different pool"):
        SubgraphPool(sgs[:-1]).load_state_dict(state)
    with pytest.raises(ValueError, match="state dict"):
        other.load_state_dict({"epoch": 0})
    # shuffled pools reshuffle every epoch, reproducibly
    sh = SubgraphPool(sgs, order="shuffle", seed=4)
    e0, e1 = [s.id for s in sh.take(12)], [s.id for s in sh.take(12)]
    assert sorted(e0) == sorted(e1) and e0 != e1
    train, held = pool.split(0.25, seed=0)
    assert len(held) == 3 and len(train) == 9
    assert not {s.id for s in train} & {s.id for s in held}
    assert [s.id for s in pool.split(0.25, seed=0)[1]] == [s.id for s in held]
    with pytest.raises(ValueError):
        pool.split(1.5)
    with pytest.raises(ValueError, match="at least one"):
        SubgraphPool([])


def test_default_world_pool_of_1000(default_world, tmp_path):
    """Issue 3 'done when': a 1,000-subgraph pool builds from the default world and resumes."""
    out = tmp_path / "pool.jsonl"
    res = build_pool(default_world, 1000, out=out, progress=False)
    assert res.accepted == 1000 and res.stopped_early is None
    assert {s.hops for s in res.subgraphs} == {3, 4, 5, 6, 7}
    assert len({s.answer_type for s in res.subgraphs}) >= 4
    text = out.read_text().splitlines()
    out.write_text("\n".join(text[:400]) + "\n" + text[400][:50])
    again = build_pool(default_world, 1000, out=out, progress=False)
    assert dicts(again.subgraphs) == dicts(res.subgraphs)


def test_moved_pool_names_raise_an_error_naming_their_new_home():
    """One seed index's extraction lives in pool_extraction (pool_ray uses it without importing pool)."""
    import searchgym.construction.pool as pool

    for name in ("make_walker", "make_outcome"):
        with pytest.raises(AttributeError, match=f"from searchgym.construction.pool_extraction import {name}"):
            getattr(pool, name)
