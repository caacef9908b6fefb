"""Run an agent over task sets and score every question: the engine of ``searchgym eval``.

Each question is one ``KGSolver-v0`` rollout (the same env, prompt, protocol and judge as training).
``concurrency`` rollouts are in flight at once: whenever one finishes, the next question takes its
env, and all pending turns go to the agent in one call (one batched ``generate`` for a local
model, that many concurrent requests for an endpoint).

Every finished question is appended at once to ``eval.jsonl`` in the output folder, so a killed
run continues from it with the same command: questions already in the file are neither redone nor
written twice (a line cut by the kill is dropped and redone; a bad line anywhere else, or a question
on two lines, is refused naming file and line). The output folder is locked while a run writes it,
and ``run.json`` records every setting that can change a record (the resume fingerprint: agent,
model, sampling, seed, retriever, world, layout, ...): a rerun with other settings is refused naming
each one with both values. An endpoint that goes down stops the run with :class:`EvalInterrupted`;
the questions finished so far stay in the file.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..core.artefacts import check_output
from ..core.atomic_writes import write_text
from ..core.jsonl import JsonlFormatError, check_unique, open_append, scan_jsonl
from ..core.llm import GenerationError
from ..core.moved import moved_getattr
from ..core.output_lock import OutputLock
from ..core.progress import Progress
from ..core.renamed import renamed_kwargs, warn_renamed
from ..core.types import Task, Trajectory
from ..envs.episode import DEFAULT_DOC_MAX_CHARS, DEFAULT_MAX_TURNS
from ..errors import InvalidArgumentError, MissingFileError, SearchGymError
from ..retrieval.base import DEFAULT_TOP_K, check_layout
from ..retrieval.client import RetrievalError
from ..tasks.tasksets import TaskSet, task_key, with_search_r1_prompts
from .metrics import DEFAULT_METRICS, N_BOOT, answer_scores, check_metrics, check_record, group_records, summarize
from .task_rollouts import play_tasks, solver_envs

logger = logging.getLogger(__name__)

__all__ = [
    "EvalConfig",
    "EvalResult",
    "EvalInterrupted",
    "RecordLog",
    "record_of",
    "evaluate",
    "RECORDS_NAME",
    "SUMMARY_NAME",
]

RECORDS_NAME, SUMMARY_NAME, RUN_NAME = "eval.jsonl", "summary.json", "run.json"


class EvalInterrupted(SearchGymError, RuntimeError):
    """The agent's backend failed mid-run (e.g. the endpoint went down); finished questions are kept."""


@dataclass
class EvalConfig:
    """How questions are played and scored. ``layout="search-r1"`` inserts retrieved documents
    exactly as Search-R1 does; ``doc_max_chars="auto"`` then leaves them uncut (else 1,000 characters)."""

    metrics: tuple = field(
        default=DEFAULT_METRICS,
        metadata={
            "help": (
                "Answer metrics scored for every record: a tuple of names from searchgym.evaluation.metrics.METRICS "
                "(em, f1, cover_em, llm_judge)."
            )
        },
    )
    max_turns: int = field(
        default=DEFAULT_MAX_TURNS, metadata={"help": "Most agent turns per question before the episode is cut off."}
    )
    top_k: int = field(default=DEFAULT_TOP_K, metadata={"help": "Documents returned by each search."})
    doc_max_chars: Optional[int] | str = field(
        default="auto",
        metadata={
            "help": (
                "Cap each retrieved document at this many characters (null: uncut; auto: uncut with layout=search-r1,"
                " else 1,000)."
            )
        },
    )
    layout: str = field(
        default="searchgym",
        metadata={
            "help": (
                "Observation layout: searchgym, or search-r1 (Search-R1's exact <information> text, for comparable "
                "numbers)."
            )
        },
    )
    concurrency: int = field(
        default=16,
        metadata={
            "help": "Questions in flight at once (also concurrent requests to an endpoint); does not change any record."
        },
    )
    seed: int = field(
        default=0,
        metadata={
            "help": "Seed of each question's env reset (mixed with the task's key) and of the bootstrap intervals."
        },
    )
    n_boot: int = field(default=N_BOOT, metadata={"help": "Bootstrap resamples of the 95 % confidence intervals."})
    save_trajectories: bool = field(
        default=False,
        metadata={
            "help": "Store each full trajectory in eval.jsonl (larger files; needed to replay or diagnose games)."
        },
    )
    progress: bool = field(default=True, metadata={"help": "Show a progress bar on stderr."})

    def __post_init__(self) -> None:
        self.metrics = check_metrics(self.metrics)
        check_layout(self.layout)
        if self.doc_max_chars == "auto":
            self.doc_max_chars = None if self.layout == "search-r1" else DEFAULT_DOC_MAX_CHARS
        bad = [
            f"{name}={getattr(self, name)}"
            for name in ("concurrency", "max_turns", "top_k", "n_boot")
            if getattr(self, name) < 1
        ]
        if bad:
            raise InvalidArgumentError(f"{', '.join(bad)}: concurrency, max_turns, top_k and n_boot must be >= 1")

    def fingerprint(self) -> dict:
        """The settings a resumed run must share with the run it continues: those that change a record
        (not ``concurrency``, ``n_boot`` or ``progress``, nor the metrics, which are computed for every record)."""
        keep = ("max_turns", "top_k", "doc_max_chars", "layout", "seed", "save_trajectories")
        return {k: v for k, v in asdict(self).items() if k in keep}


@dataclass
class EvalResult:
    """Every question's record and the summary (per dataset, per hop, per family, overall)."""

    records: list
    summary: dict
    output_dir: Optional[Path] = None
    files: dict = field(default_factory=dict)

    @property
    def out_dir(self) -> Optional[Path]:
        """The old name of :attr:`output_dir` (docs/glossary.md); warns."""
        warn_renamed("EvalResult.out_dir", "EvalResult.output_dir", "EvalResult")
        return self.output_dir


class RecordLog:
    """The per-question JSONL: existing records by key, appends flushed.

    A torn last line (a kill mid-write) is dropped and its question redone; any other malformed line, a
    record without a ``key`` or a key on two lines raises :class:`~searchgym.core.jsonl.JsonlFormatError`
    naming the file and line (nothing after it is ever dropped). Open it while holding the run's lock.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.done: dict[str, dict] = {}
        seen: dict[str, int] = {}
        for lineno, rec in scan_jsonl(self.path, repair=True):
            key = rec.get("key")
            if not isinstance(key, str):
                raise JsonlFormatError(f"{self.path}: line {lineno} has no 'key'; fix or delete that line")
            check_unique(seen, key, lineno, self.path, "question key")
            check_record(self.path, lineno, rec)
            self.done[key] = rec
        self._f = open_append(self.path)

    def append(self, record: dict) -> None:
        """Write one record and flush it to the OS (survives a kill of this process)."""
        self._f.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._f.flush()
        self.done[record["key"]] = record

    def close(self) -> None:
        """Close the file."""
        self._f.close()


def record_of(traj: Trajectory, *, count_tokens: Callable[[str], int], trajectory: bool = False) -> dict:
    """The JSONL record of one finished Solver rollout (see docs/evaluation.md for every field)."""
    task = traj.task
    agent_text = "".join(s.text for s in traj.segments if s.source == "agent")
    rec = {
        "key": task_key(task),
        "dataset": task.metadata.get("dataset", task.source),
        "id": task.id,
        "question": task.question,
        "golds": list(task.answers),
        "prediction": traj.answer,
        **answer_scores(traj.answer, task.answers, valid=traj.valid),
        "searches": traj.num_searches,
        "turns": len(traj.turns),
        "tokens": count_tokens(agent_text),
        "invalid_format": int(bool(traj.metadata.get("invalid_turns")) or not traj.valid or traj.answer is None),
        "truncated": bool(traj.truncated and not traj.terminated),
        "hops": task.hops,
        "family": task.metadata.get("family"),
    }
    if trajectory:
        rec["trajectory"] = traj.to_dict()
    return rec


def _check_resume(out: Path, fingerprint: dict, restart: bool) -> None:
    """Refuse to continue a run in ``out`` made with other settings (naming each with both values); then
    record ``fingerprint`` in ``run.json`` (atomically). ``restart`` discards the old run first."""
    run = out / RUN_NAME
    fingerprint = json.loads(json.dumps(fingerprint))  # as it reads back (tuples become lists)
    if restart:
        for name in (RECORDS_NAME, SUMMARY_NAME, RUN_NAME):
            (out / name).unlink(missing_ok=True)
    elif not run.is_file():
        _refuse_records_without_run(out)
    else:
        try:
            old = json.loads(run.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"{run} is unreadable ({exc}); use another --out, or --restart to discard that run"
            ) from None
        if not isinstance(old, dict):
            raise InvalidArgumentError(f"{run} is not a run record; use another --out, or --restart to discard it")
        if old != fingerprint:
            was, now, missing = _flat(old), _flat(fingerprint), "(not recorded)"
            diff = "; ".join(
                f"{k}: was {json.dumps(was[k]) if k in was else missing}, "
                f"now {json.dumps(now[k]) if k in now else missing}"
                for k in sorted(set(was) | set(now))
                if was.get(k, missing) != now.get(k, missing)
            )
            raise InvalidArgumentError(
                f"{out} holds an evaluation run with other settings ({diff}); "
                f"use another --out, or --restart to discard it"
            )
    write_text(run, json.dumps(fingerprint, indent=1, sort_keys=True))


def _refuse_records_without_run(out: Path) -> None:
    """Refuse to resume records that have no ``run.json`` (deleted, or a copied ``eval.jsonl``): the settings
    they were made with are unknown, so this run could mix them with records of other settings."""
    records = out / RECORDS_NAME
    if records.is_file() and records.stat().st_size > 0:
        raise InvalidArgumentError(
            f"{records} holds records but {out / RUN_NAME} (the settings they were made with) is missing; "
            "pass --restart to discard them, or give a new --output-dir"
        )


def _flat(settings: dict, prefix: str = "") -> dict:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``: each setting of a fingerprint under its own name."""
    out: dict = {}
    for key, value in settings.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def run_fingerprint(agent: Any, config: EvalConfig, retriever: Any, world: Any, judge: Any) -> dict:
    """Everything that can change a record of this evaluation: the agent (its name and the ``settings`` it
    declares: model, sampling, seed), ``config``'s record settings, the retriever, the world and the judge."""
    return {
        "agent": getattr(agent, "name", type(agent).__name__),
        "agent_settings": dict(getattr(agent, "settings", None) or {}),
        **config.fingerprint(),
        "retriever": _describe(retriever),
        "world": _describe(world),
        "judge": _describe(judge) if "llm_judge" in config.metrics else None,
    }


def _describe(thing: Any) -> Any:
    """A JSON identity of a retriever / world / judge: a URL, an absolute folder, or an object's fields."""
    if thing is None:
        return None
    if isinstance(thing, (str, Path)):
        text = str(thing)
        return text if text.startswith(("http://", "https://")) else str(Path(text).resolve())
    if hasattr(thing, "num_entities"):  # a World
        return [thing.name, thing.num_entities, thing.num_triples, thing.num_documents]
    fields: dict[str, Any] = {"type": type(thing).__name__}
    for name in ("backend", "url", "num_docs", "model", "base_url", "criteria", "references"):
        value = getattr(thing, name, None)
        if isinstance(value, (str, int, float)):
            fields[name] = value
    generator = getattr(thing, "generator", None)  # an LLM judge: the model behind it
    if generator is not None:
        fields["generator"] = _describe(generator)
    return fields


@renamed_kwargs(out_dir="output_dir")
def evaluate(
    agent: Any,
    tasksets: Sequence[TaskSet],
    *,
    retriever: Any = None,
    world: Any = None,
    config: Optional[EvalConfig] = None,
    output_dir: str | Path | None = None,
    judge: Any = None,
    restart: bool = False,
    ray: Any = None,
) -> EvalResult:
    """Evaluate ``agent`` (an :class:`~searchgym.agents.eval_agents.EvalAgent`) on ``tasksets``.

    ``retriever``: a :class:`Retriever`, a saved-index path, a Search-R1 server URL, or ``None``
    (BM25 over each task set's world: the atlas world for ``atlas``, else ``world``, else the default
    world). ``judge``: an :class:`~searchgym.scoring.judge.LLMJudge` for the ``llm_judge`` metric.
    ``output_dir``: write ``eval.jsonl`` (resumable), ``summary.json``, ``summary.md`` and
    ``accuracy.png`` there. Raises :class:`EvalInterrupted` if the agent's backend fails. ``ray``: a
    :class:`~searchgym.core.ray_support.RayConfig` plays the questions on Ray actors (same records).
    """
    config = config or EvalConfig()
    if config.layout == "search-r1":
        tasksets = with_search_r1_prompts(tasksets)
    if "llm_judge" in config.metrics and judge is None:
        raise InvalidArgumentError(
            "metric llm_judge needs a judge model: pass --judge-endpoint URL (or judge=LLMJudge(...))"
        )
    fingerprint = run_fingerprint(agent, config, retriever, world, judge)
    retriever = _resolve_retriever(retriever)
    out = Path(output_dir) if output_dir is not None else None
    if out is None:
        return _evaluate(agent, tasksets, retriever, world, config, None, judge, ray, None)
    check_output(out, "eval run")
    with OutputLock(out, what="--output-dir"):  # a second run into this folder fails at once instead of doubling it
        _check_resume(out, fingerprint, restart)
        return _evaluate(agent, tasksets, retriever, world, config, out, judge, ray, RecordLog(out / RECORDS_NAME))


def _evaluate(
    agent: Any,
    tasksets: Sequence[TaskSet],
    retriever: Any,
    world: Any,
    config: EvalConfig,
    out: Optional[Path],
    judge: Any,
    ray: Any,
    log: Optional[RecordLog],
) -> EvalResult:
    """The body of :func:`evaluate` (with the output folder locked and its records loaded, if any)."""
    done: dict[str, dict] = dict(log.done) if log is not None else {}
    todo_total = sum(1 for ts in tasksets for t in ts.tasks if task_key(t) not in done)
    total = sum(len(ts.tasks) for ts in tasksets)
    bar = _progress(total, total - todo_total, config.progress, resumable=log is not None)
    sink = _RecordSink(agent, config, judge, done, log, bar)
    t0 = time.perf_counter()
    try:
        for ts in tasksets:
            todo = [t for t in ts.tasks if task_key(t) not in done]
            if not todo:
                continue
            try:
                _play_taskset(agent, ts, todo, world, retriever, config, ray, sink)
            except (GenerationError, RetrievalError) as exc:
                raise _interrupted(exc, tasksets, done, log) from exc
    finally:
        sink.close()
    elapsed = time.perf_counter() - t0
    records = [done[task_key(t)] for ts in tasksets for t in ts.tasks]
    summary = build_summary(
        records, tasksets, config, agent_name=getattr(agent, "name", ""), elapsed=elapsed, new=todo_total
    )
    result = EvalResult(records, summary, out)
    if out is not None:
        from .report import write_reports

        result.files = write_reports(summary, out)
    return result


class _RecordSink:
    """Turns finished rollouts into records (with the LLM judge's verdicts when that metric is on) and
    keeps them: in ``done`` by key, appended to the run's :class:`RecordLog`, counted on the progress bar."""

    def __init__(
        self, agent: Any, config: EvalConfig, judge: Any, done: dict[str, dict], log: Optional[RecordLog], bar: Any
    ) -> None:
        self.agent, self.config, self.judge = agent, config, judge
        self.done, self.log, self.bar = done, log, bar

    def __call__(self, trajs: list[Trajectory]) -> None:
        config = self.config
        recs = [record_of(t, count_tokens=self.agent.count_tokens, trajectory=config.save_trajectories) for t in trajs]
        if self.judge is not None and "llm_judge" in config.metrics:
            verdicts = self.judge.judge_batch(
                [(t.task.question, t.answer if t.valid else None, t.task.answers) for t in trajs]
            )
            for r, v in zip(recs, verdicts):
                r["llm_judge"] = float(bool(v.correct) and not v.error)
                r["llm_judge_error"] = v.error
        for r in recs:
            self.done[r["key"]] = r
            if self.log is not None:
                self.log.append(r)
        if self.bar is not None:
            self.bar.update(len(recs))

    def close(self) -> None:
        """Close the progress bar and the record file."""
        if self.bar is not None:
            self.bar.close()
        if self.log is not None:
            self.log.close()


def _play_taskset(
    agent: Any,
    ts: TaskSet,
    todo: list[Task],
    world: Any,
    retriever: Any,
    config: EvalConfig,
    ray: Any,
    on_done: Callable[[list[Trajectory]], None],
) -> None:
    """Play a task set's unfinished questions over its world (locally, or on Ray actors)."""
    from ..envs.resources import resolve_world

    ts_world = ts.world if ts.world is not None else world
    if ts_world is None and retriever is None and ts.source.endswith((".jsonl", ".json", ".parquet")):
        logger.warning(
            "task set %s has no --retriever: searching the default world's corpus; pass the "
            "Search-R1 retrieval server URL or an index folder for real QA data",
            ts.name,
        )
    ts_world = resolve_world(ts_world)
    if ray is not None:
        from .ray_eval import play_tasks_on_ray

        play_tasks_on_ray(ray, agent, ts_world, retriever, config, todo, on_done)
    else:
        envs = solver_envs(ts_world, retriever, config, todo[0], min(config.concurrency, len(todo)))
        play_tasks(agent, envs, todo, on_done, seed=config.seed)


def _interrupted(
    exc: Exception, tasksets: Sequence[TaskSet], done: dict[str, dict], log: Optional[RecordLog]
) -> EvalInterrupted:
    """The error that stops a run whose agent backend or retriever failed, saying what is kept."""
    n_done = sum(1 for t in (t for s in tasksets for t in s.tasks) if task_key(t) in done)
    where = (
        f"; the {n_done} finished questions are kept in {log.path} -- rerun the same command to resume" if log else ""
    )
    what = "retriever" if isinstance(exc, RetrievalError) else "agent's backend"
    return EvalInterrupted(f"the {what} failed after {n_done} questions: {exc}{where}")


def _resolve_retriever(retriever: Any) -> Any:
    """A URL → :class:`RemoteRetriever`; a folder → its saved index; otherwise as given."""
    if isinstance(retriever, (str, Path)):
        text = str(retriever)
        if text.startswith(("http://", "https://")):
            from ..retrieval.client import RemoteRetriever

            return RemoteRetriever(text)
        if Path(text).is_dir():
            from ..retrieval.factory import load_index

            return load_index(text)
        raise MissingFileError(
            f"retriever {text!r} is neither an http(s) URL nor an index folder (build one with `searchgym index build`)"
        )
    return retriever


def build_summary(
    records: Sequence[dict],
    tasksets: Sequence[TaskSet],
    config: EvalConfig,
    *,
    agent_name: str = "",
    elapsed: float = 0.0,
    new: int = 0,
) -> dict:
    """The JSON summary: per dataset (with per-hop and per-family splits) and overall."""
    m, nb, seed = config.metrics, config.n_boot, config.seed
    datasets = {}
    by_ds = group_records(records, "dataset")
    for ts in tasksets:
        recs = by_ds.get(ts.name, [])
        entry = {**summarize(recs, m, n_boot=nb, seed=seed), "skipped": ts.skipped, "source": ts.source}
        for key in ("hops", "family"):
            groups = group_records(recs, key)
            if groups:
                entry[f"by_{key}"] = {str(k): summarize(v, m, n_boot=nb, seed=seed) for k, v in groups.items()}
        datasets[ts.name] = entry
    return {
        "searchgym_eval": 1,
        "agent": agent_name,
        "metrics": list(m),
        "config": asdict(config),
        "records": RECORDS_NAME,
        "datasets": datasets,
        "overall": summarize(records, m, n_boot=nb, seed=seed),
        "timing": {
            "seconds": round(elapsed, 3),
            "questions_this_run": new,
            "questions_per_s": round(new / elapsed, 3) if elapsed > 0 and new else None,
        },
    }


def _progress(total: int, initial: int, enabled: bool, *, resumable: bool) -> Progress:
    """The questions' progress line (counted even when not shown, for the Ctrl-C message)."""
    hint = "rerun the same command to resume" if resumable else "nothing was saved (no --out)"
    return Progress(total, "eval", unit="question", initial=initial, enabled=enabled, resume_hint=hint)


__getattr__ = moved_getattr(__name__)
