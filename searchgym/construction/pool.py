"""Batch extraction: a resumable, deterministic pool of subgraphs (issue 3, paper App. C: 10 threads).

:func:`build_pool` extracts subgraphs until ``n`` are accepted. Seed ``i`` (the *seed index*) is
a pure function of ``(seed, i)``: eligible entities are visited in a seeded permutation (a fresh
permutation per pass when ``n`` exceeds them). Each extraction gets its own RNG derived from
``(seed, i)``, so the pool is identical whatever ``concurrency`` is and however threads interleave.
Exactly the seed indices ``0 .. M-1`` are committed, where ``M`` is the smallest count that yields
``n`` accepted subgraphs: with ``concurrency > 1`` results are committed in index order (out-of-order
completions wait in a small buffer) and speculative extractions past ``M`` are discarded unwritten,
so every worker stays busy until the end and the output is the same as a sequential run's.

With ``out`` every accepted subgraph is appended as one JSON line (flushed per line) and every
rejection to the sidecar ``<stem>.rejections.jsonl``. Re-running with the same settings resumes:
finished seed indices (accepted or rejected) are skipped and a torn last line left by a kill is
truncated, so an interrupted run loses and duplicates nothing. Each line carries a fingerprint of
the settings (seed, extraction config, selector, world); resuming with different settings is an
error rather than a silently mixed pool. Resume is exact for any worker count, also a different
one than the interrupted run used. A build holds an exclusive lock on its ``out`` file (a second
build of the same file fails at once, naming the first), and a resume refuses a file with a seed
index or subgraph id on two lines, naming both. A selector outage (endpoint down or hung past its deadline) is
not a property of the seed: the build stops there without journaling it, and the rerun retries it.

Layout: :func:`build_pool` validates (:func:`_eligible_index`), resumes (:func:`_resume`), then
runs the extraction of each seed index (:mod:`searchgym.construction.pool_extraction`) through
:func:`_run_sequential`, :func:`_run_concurrent` or Ray (:mod:`searchgym.construction.pool_ray`);
:class:`_PoolRun` holds the outcomes and stop rules, :class:`_Journal` the files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from ..core.arg_checks import check_count
from ..core.artefacts import check_output
from ..core.jsonl import check_unique, open_append, scan_jsonl
from ..core.moved import moved_getattr
from ..core.output_lock import OutputLock
from ..core.path_errors import not_there
from ..core.progress import Progress
from ..core.renamed import renamed_kwargs
from ..core.subgraph import Subgraph
from ..errors import InvalidArgumentError, InvalidTypeError, MissingFileError, SearchGymError
from .extract import ExtractionConfig, SelectorUnavailable, extraction_index
from .pool_extraction import SeedOutcome, SeedSampler, make_extractor
from .pool_ray import run_pool_on_ray
from .selectors import HeuristicSelector

logger = logging.getLogger(__name__)

__all__ = ["PoolResult", "PoolFormatError", "build_pool", "load_pool", "rejections_path", "pool_fingerprint"]


class PoolFormatError(SearchGymError, ValueError):
    """A pool file (or its rejection sidecar) is malformed; the message names file and line."""


@dataclass
class PoolResult:
    """Outcome of :func:`build_pool`.

    ``subgraphs`` are the accepted subgraphs sorted by seed index (at most ``n``);
    ``rejections`` counts rejected seeds by reason; ``errors`` holds up to 20 sample messages
    (which seed, why). ``attempted`` is the number of seed indices processed in total,
    ``resumed`` how many of them came from an existing output file. ``stopped_early`` explains a
    run that ended before ``n`` subgraphs (attempt cap reached or the selector looked down).
    """

    subgraphs: list[Subgraph]
    rejections: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    attempted: int = 0
    resumed: int = 0
    elapsed_s: float = 0.0
    stopped_early: str | None = None
    selector_stats: dict | None = None
    path: Path | None = None

    @property
    def accepted(self) -> int:
        """Number of accepted subgraphs."""
        return len(self.subgraphs)

    def summary(self) -> str:
        """One line: accepted / attempted, rejections by reason, time."""
        rej = ", ".join(f"{k}={v}" for k, v in sorted(self.rejections.items())) or "none"
        line = (
            f"{self.accepted} subgraphs from {self.attempted} seeds ({self.resumed} resumed) in "
            f"{self.elapsed_s:.2f}s; rejections: {rej}"
        )
        if self.stopped_early:
            line += f"; stopped early: {self.stopped_early}"
        return line


def rejections_path(out: str | os.PathLike) -> Path:
    """The rejection sidecar of a pool file: ``pool.jsonl`` → ``pool.rejections.jsonl``."""
    p = Path(out)
    return p.with_name(p.stem + ".rejections.jsonl")


def _describe_selector(selector) -> dict:
    desc = getattr(selector, "describe", None)
    return desc() if callable(desc) else {"kind": type(selector).__name__}


def pool_fingerprint(world, seed: int, config: ExtractionConfig, selector) -> str:
    """Short hash of everything that determines a pool; stored on every line for safe resumes."""
    payload = {
        "seed": seed,
        "config": config.as_dict(),
        "selector": _describe_selector(selector),
        "world": [world.name, world.num_entities, world.num_relations, world.num_triples],
    }
    return hashlib.sha1(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _scan_jsonl(path: Path, *, repair: bool) -> list[tuple[int, dict]]:
    """:func:`~searchgym.core.jsonl.scan_jsonl` raising :class:`PoolFormatError`: a torn last line is cut
    with ``repair`` (a resume) and reported otherwise; any other malformed line names file and line."""
    return scan_jsonl(path, repair=repair, error=PoolFormatError)


def load_pool(path: str | os.PathLike, *, sort: bool = True) -> list[Subgraph]:
    """Read a pool JSONL file written by :func:`build_pool` (or by hand, one subgraph per line).

    Lines are sorted by seed index (then id) when ``sort``; a malformed line or a duplicate id
    raises :class:`PoolFormatError` with the line number. A missing file raises FileNotFoundError.
    """
    p = Path(path)
    if not p.is_file():
        raise MissingFileError(f"pool file {p} {not_there(p)}; build one with `searchgym subgraphs build`")
    out: list[tuple[tuple, Subgraph]] = []
    seen: dict[str, int] = {}
    for lineno, obj in _scan_jsonl(p, repair=False):
        try:
            sg = Subgraph.from_dict(obj)
        except ValueError as exc:
            raise PoolFormatError(f"{p}: line {lineno}: {exc}; fix or delete that line") from None
        check_unique(seen, sg.id, lineno, p, "subgraph id", PoolFormatError)
        idx = sg.metadata.get("seed_index")
        out.append(((idx if isinstance(idx, int) else float("inf"), sg.id, lineno), sg))
    if sort:
        out.sort(key=lambda t: t[0])
    return [sg for _k, sg in out]


def _load_existing(out: Path, fingerprint: str) -> tuple[dict[int, Subgraph], dict[int, str]]:
    """Finished seed indices of a previous run: accepted subgraphs and rejection reasons. A seed index or
    subgraph id on two lines (two runs appended at once) is refused naming both lines."""
    done: dict[int, Subgraph] = {}
    rejected: dict[int, str] = {}
    for path, accepted in ((out, True), (rejections_path(out), False)):
        seen_index: dict[int, int] = {}
        seen_id: dict[str, int] = {}
        for lineno, obj in _scan_jsonl(path, repair=True):
            meta = obj.get("metadata", obj) if accepted else obj
            fp, idx = meta.get("pool_fingerprint"), meta.get("seed_index")
            if fp != fingerprint:
                raise PoolFormatError(
                    f"{path}: line {lineno} was built with different settings (fingerprint {fp!r}, now "
                    f"{fingerprint!r}: seed, extraction config, selector or world changed); use a new --out "
                    "file or the original settings"
                )
            if not isinstance(idx, int):
                raise PoolFormatError(f"{path}: line {lineno} has no integer seed_index")
            check_unique(seen_index, idx, lineno, path, "seed_index", PoolFormatError)
            if accepted:
                check_unique(seen_id, obj.get("id"), lineno, path, "subgraph id", PoolFormatError)
                try:
                    done[idx] = Subgraph.from_dict(obj)
                except ValueError as exc:
                    raise PoolFormatError(f"{path}: line {lineno}: {exc}") from None
            else:
                rejected[idx] = str(obj.get("reason", "unknown"))
    return done, rejected


class _Journal:
    """Appends accepted subgraphs to the pool file and rejections to its sidecar (one flushed
    JSON line each), or nothing when the pool is built in memory only.

    Created before the resume reads the files: it checks that ``out`` is a pool (or new) and holds the
    pool's :class:`~searchgym.core.output_lock.OutputLock` until :meth:`close`; :meth:`open` then opens
    both files to append (a torn tail repaired first)."""

    def __init__(self, out: Path | None) -> None:
        self._out = out
        self._files: list = []
        self._lock = None
        if out is not None:
            check_output(out, "subgraph pool")
            self._lock = OutputLock(out, what="--out").acquire()

    def open(self) -> None:
        """Open the pool file and its rejection sidecar for appending."""
        if self._out is not None:
            self._files = [open_append(self._out), open_append(rejections_path(self._out))]

    def _write(self, which: int, obj: dict) -> None:
        if self._files:
            f = self._files[which]
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")
            f.flush()

    def accepted(self, sg: Subgraph) -> None:
        """Journal one accepted subgraph (its record is only built when there is a file)."""
        if self._files:
            self._write(0, sg.to_dict())

    def rejected(self, line: dict) -> None:
        """Journal one rejected seed index."""
        self._write(1, line)

    def close(self) -> None:
        """Close both files and release the lock."""
        for f in self._files:
            f.close()
        if self._lock is not None:
            self._lock.release()


class _PoolRun:
    """State of one build: finished seed indices, this run's counts, the stop conditions."""

    def __init__(
        self,
        n: int,
        accepted: dict[int, Subgraph],
        rejected: dict[int, str],
        result: PoolResult,
        journal: _Journal,
        fingerprint: str,
        abort_after: int,
        bar,
    ) -> None:
        self.n, self.accepted, self.rejected, self.result = n, accepted, rejected, result
        self.journal, self.fingerprint, self.abort_after, self.bar = journal, fingerprint, abort_after, bar
        self.new: Counter = Counter()  # this run's outcomes: "done", "accepted", and rejection reasons
        self.outage: tuple[int, SelectorUnavailable] | None = None  # (seed index, the endpoint's error)

    def is_done(self, i: int) -> bool:
        """True when seed index ``i`` already has an outcome (this run or a resumed one)."""
        return i in self.accepted or i in self.rejected

    def aborted(self) -> bool:
        """The selector failed on every seed of this run so far (at least ``abort_after`` of them)."""
        new = self.new
        return (
            self.abort_after > 0
            and new["accepted"] == 0
            and new["done"] >= self.abort_after
            and new["selector_failed"] == new["done"]
        )

    def finished(self) -> bool:
        """Enough accepted, the selector evidently broken, or its endpoint down."""
        return len(self.accepted) >= self.n or self.outage is not None or self.aborted()

    def commit(self, o: SeedOutcome) -> None:
        """Record one outcome (in seed index order) and journal it, unless it is an outage."""
        if o.outage is not None:
            self.outage = (o.index, o.outage)
            return
        self.new["done"] += 1
        if o.subgraph is not None:
            self.new["accepted"] += 1
            self.accepted[o.index] = o.subgraph
            self.journal.accepted(o.subgraph)
            if self.bar is not None:
                self.bar.update(1)
            return
        exc = o.rejection
        assert exc is not None  # an outcome without subgraph or outage is a rejection
        self.rejected[o.index] = exc.reason
        self.new[exc.reason] += 1
        self.result.rejections[exc.reason] += 1
        if len(self.result.errors) < 20:
            self.result.errors.append(f"seed index {o.index} ({o.seed_id}): {exc}")
        self.journal.rejected(
            {
                "seed_index": o.index,
                "seed": o.seed_id,
                "reason": exc.reason,
                "detail": exc.detail,
                "pool_fingerprint": self.fingerprint,
            }
        )

    def stop_reason(self, max_attempts: int) -> str | None:
        """Why the run ended before ``n`` subgraphs, or None."""
        if self.outage is not None:
            index, outage = self.outage
            return (
                f"the selector endpoint is unavailable at seed index {index} ({outage.detail}); "
                "nothing was recorded for that seed: start the endpoint and rerun the same command to resume"
            )
        if self.aborted():
            errors = self.result.errors
            return (
                f"the first {self.new['done']} seeds all failed in the selector "
                f"({errors[0] if errors else 'no detail'}); is the endpoint up?"
            )
        if len(self.accepted) < self.n:
            return f"reached max_attempts={max_attempts} seed indices with {len(self.accepted)} accepted"
        return None


def _run_sequential(work, run: _PoolRun, max_attempts: int) -> None:
    """Process seed indices 0, 1, ... in order on the calling thread."""
    for i in range(max_attempts):
        if run.finished():
            break
        if not run.is_done(i):
            run.commit(work(i))


class _RunOver(SearchGymError):
    """Raised by :class:`_StoppableSelector` inside a speculative extraction once the run returned."""


class _StoppableSelector:
    """A selector proxy that refuses new calls once ``stop`` is set (any other attribute passes through).

    Speculative extractions past the commit point are discarded; stopping their selector calls lets
    :func:`_run_concurrent` wait for its threads (at most one in-flight request each) instead of
    leaving them talking to the endpoint after :func:`build_pool` returned, where they changed the
    selector's statistics and held connections to a server the caller may already have closed.
    """

    def __init__(self, selector, stop: threading.Event) -> None:
        self._inner = selector
        self._stop = stop

    def select(self, ctx):
        """The wrapped selector's choice; :class:`_RunOver` once the run is over."""
        if self._stop.is_set():
            raise _RunOver()
        return self._inner.select(ctx)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


def _run_concurrent(work, run: _PoolRun, concurrency: int, max_attempts: int, stop: threading.Event) -> None:
    """Run ``work(i)`` for i = 0, 1, ... on ``concurrency`` threads, committing results in index order.

    ``work`` calls its selector through a :class:`_StoppableSelector` on ``stop``, which this sets on
    return. Results that complete out of order wait in a buffer until every lower index is committed
    (or was already done by a resumed run), so the committed indices are always a contiguous prefix:
    the outcome (and the output file) is the same as a sequential run, only faster, and the same for
    any worker count on resume. At most ``4 * concurrency`` indices run ahead of the commit point;
    work past the point where ``run.finished()`` becomes true is speculative and discarded unwritten.
    On return queued work is cancelled, busy extractions stop at their next selector call and the
    threads are joined, so no request outlives the call; on an interrupt (Ctrl-C) the threads are
    not waited for.
    """
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="subgraphs")
    inflight: dict = {}
    buffered: dict[int, SeedOutcome] = {}
    next_i = commit_i = 0
    interrupted = False
    try:
        while True:
            while commit_i < next_i and not run.finished():
                if run.is_done(commit_i):
                    commit_i += 1
                elif commit_i in buffered:
                    run.commit(buffered.pop(commit_i))
                    commit_i += 1
                else:
                    break
            if run.finished():
                break
            while len(inflight) < concurrency and next_i < max_attempts and next_i - commit_i < 4 * concurrency:
                if not run.is_done(next_i):
                    inflight[pool.submit(work, next_i)] = next_i
                next_i += 1
            if not inflight:
                if next_i >= max_attempts and not buffered:
                    break
                continue  # the window held only indices done by a resumed run: advance the commit point
            completed, _ = wait(inflight, return_when=FIRST_COMPLETED)
            for fut in completed:
                buffered[inflight.pop(fut)] = fut.result()
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        stop.set()
        pool.shutdown(wait=not interrupted, cancel_futures=True)


def _eligible_index(world, n, concurrency: int, selector, config: ExtractionConfig):
    """Validate the arguments of :func:`build_pool`; return the world's extraction index."""
    check_count("n", n, least=0, hint="subgraphs to accept")
    check_count("concurrency", concurrency)
    if not callable(getattr(selector, "select", None)):
        raise InvalidTypeError(f"selector must have a select(context) -> int method, got {type(selector).__name__}")
    idx = extraction_index(world, config)
    if idx.num_eligible_relations == 0:
        raise InvalidArgumentError(
            f"world {world.name!r} has no eligible relation (relations: {world.num_relations}, blocklist: "
            f"{len(config.relation_blocklist)}, allowlist: {len(config.relation_allowlist) or 'all'}); "
            "relax --relation-blocklist/--relation-allowlist or use another world"
        )
    if len(idx.eligible_seeds) == 0:
        raise InvalidArgumentError(f"world {world.name!r} has no entity with an eligible edge to start a path from")
    limit = getattr(getattr(selector, "generator", None), "concurrency", None)
    if isinstance(limit, int) and limit < concurrency:
        logger.warning(
            "the selector's generator allows %d concurrent requests but the pool runs %d extractions at once: "
            "requests will queue; create the generator with concurrency >= that",
            limit,
            concurrency,
        )
    return idx


def _resume(out_path: Path | None, fingerprint: str) -> tuple[dict[int, Subgraph], dict[int, str]]:
    """Finished seed indices of an earlier run writing ``out_path`` (nothing without a file)."""
    if out_path is None:
        return {}, {}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    accepted, rejected = _load_existing(out_path, fingerprint)
    if accepted or rejected:
        logger.info(
            "resuming %s: %d accepted, %d rejected seed indices already done", out_path, len(accepted), len(rejected)
        )
    return accepted, rejected


@renamed_kwargs(workers="concurrency")
def build_pool(
    world,
    n: int,
    *,
    seed: int = 0,
    selector=None,
    config: ExtractionConfig | None = None,
    out: str | os.PathLike | None = None,
    concurrency: int = 1,
    progress: bool = True,
    max_attempts: int | None = None,
    abort_after_selector_failures: int = 50,
    ray=None,
) -> PoolResult:
    """Extract subgraphs until ``n`` are accepted (see module doc for determinism and resume).

    ``selector`` defaults to ``HeuristicSelector(seed)``; use ``concurrency=10`` with an
    :class:`~searchgym.construction.selectors.LLMSelector` (I/O bound, as the paper's 10
    threads). ``max_attempts`` caps processed seed indices (default ``20 * n + 1000``). When a
    seed's selector calls all fail because the endpoint is down (timeout, unreachable, HTTP
    5xx/429) the run stops at once, records nothing for that seed and says so in
    ``stopped_early``: rerunning resumes and retries it. Bad replies (unparseable, out of range)
    are ``selector_failed`` rejections; if the first ``abort_after_selector_failures`` processed
    seeds are all such rejections the run stops early too. Raises ValueError when the world has
    no eligible relation or no entity with an eligible edge. ``ray``: a
    :class:`~searchgym.core.ray_support.RayConfig` fans the extraction out over Ray actors (same pool).
    """
    seed = check_count("seed", seed, least=0)
    max_attempts = check_count("max_attempts", max_attempts, least=0, optional=True, hint="None: 20 * n + 1000")
    abort_after_selector_failures = check_count("abort_after_selector_failures", abort_after_selector_failures, least=0)
    config = config or ExtractionConfig()
    selector = selector if selector is not None else HeuristicSelector(seed)
    idx = _eligible_index(world, n, concurrency, selector, config)
    max_attempts = max_attempts if max_attempts is not None else 20 * n + 1000
    fingerprint = pool_fingerprint(world, seed, config, selector)
    t0 = time.perf_counter()
    out_path = Path(out) if out is not None else None
    journal = _Journal(out_path)  # locks the pool file first: a second build of it fails at once
    try:
        accepted, rejected = _resume(out_path, fingerprint)
        result = PoolResult([], Counter(rejected.values()), resumed=len(accepted) + len(rejected), path=out_path)
        journal.open()
        hint = "rerun the same command to resume" if out_path is not None else None
        bar = Progress(
            n, "subgraphs", unit="subgraph", initial=min(n, len(accepted)), enabled=progress, resume_hint=hint
        )
        run = _PoolRun(n, accepted, rejected, result, journal, fingerprint, abort_after_selector_failures, bar)
        try:
            if ray is not None:
                run_pool_on_ray(ray, world, selector, config, idx.eligible_seeds, seed, fingerprint, run, max_attempts)
            else:
                stop = threading.Event()  # set when a concurrent run is over: its speculative extractions stop
                polled = selector if concurrency == 1 else _StoppableSelector(selector, stop)
                work = make_extractor(world, polled, config, SeedSampler(idx.eligible_seeds, seed), seed, fingerprint)
                if concurrency == 1:
                    _run_sequential(work, run, max_attempts)
                else:
                    _run_concurrent(work, run, concurrency, max_attempts, stop)
        finally:
            bar.close()
    finally:
        journal.close()
    _summarise(result, run, selector, max_attempts, time.perf_counter() - t0)
    return result


def _summarise(result: PoolResult, run: _PoolRun, selector, max_attempts: int, elapsed_s: float) -> None:
    """Fill ``result`` from a finished run: why it stopped early (``result.stopped_early``, also in its
    :meth:`~PoolResult.summary`; logged at INFO only, so a command that prints the summary and its error line
    does not say it a third time), the subgraphs in seed index order, the counts, the time and the selector's
    statistics."""
    result.stopped_early = run.stop_reason(max_attempts)
    if result.stopped_early:
        logger.info("build_pool: %s", result.stopped_early)
    result.subgraphs = [run.accepted[i] for i in sorted(run.accepted)][: run.n]
    result.attempted = len(run.accepted) + len(run.rejected)
    result.elapsed_s = elapsed_s
    stats = getattr(selector, "stats", None)
    result.selector_stats = stats() if callable(stats) else None


__getattr__ = moved_getattr(__name__)  # make_walker / make_outcome moved to searchgym.construction.pool_extraction
