"""Task sets for ``searchgym eval``: the built-in benchmark, the atlas, FlashRAG JSONL, Search-R1 parquet.

A task-set spec is a comma-separated list of ``name=source`` items (``name`` optional):

* ``builtin`` -- the held-out benchmark of the default world (:mod:`searchgym.tasks.heldout`),
  fixed by seed and version, split by hop count and question family;
* ``atlas`` -- template questions over a seeded subgraph pool of the real-facts atlas world
  (needs ``searchgym[atlas]``; evaluated against the atlas corpus);
* ``*.jsonl`` -- FlashRAG format: ``{"id", "question", "golden_answers": [..], "metadata"?}``;
* ``*.parquet`` -- Search-R1's ``test.parquet`` (``data_source``, ``prompt``,
  ``reward_model.ground_truth.target``); its rows are grouped into one dataset per ``data_source``.

``--limit N`` keeps a seeded sample of N tasks per dataset (the same N for the same seed).
Every task carries ``metadata["dataset"]``; its record key is ``"<dataset>/<task id>"``.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from ..core.arg_checks import check_choice, check_count
from ..core.comma_lists import comma_items
from ..core.path_errors import not_there
from ..core.types import Task
from ..errors import InvalidArgumentError, MissingFileError, SearchGymError
from .sources import qa_lines

logger = logging.getLogger(__name__)

__all__ = [
    "TaskSet",
    "DatasetFormatError",
    "GOLD_FIELDS",
    "BUILTIN",
    "ATLAS",
    "load_flashrag_jsonl",
    "load_searchr1_parquet",
    "builtin_taskset",
    "atlas_taskset",
    "parse_spec",
    "load_tasksets",
    "sample_tasks",
    "task_key",
    "SEARCH_R1_PROMPT",
    "search_r1_prompt",
    "with_search_r1_prompts",
]

GOLD_FIELDS = ("golden_answers", "answers", "answer")  # accepted gold-answer fields of a JSONL line
BUILTIN, ATLAS = "builtin", "atlas"
ATLAS_TASKS, ATLAS_SEED = 200, 11  # the atlas task list: 200 subgraphs of pool seed 11
ON_ERROR = ("stop", "skip")


class DatasetFormatError(SearchGymError, ValueError):
    """A dataset file or line is malformed; the message names ``file:line`` and the fix."""


@dataclass
class TaskSet:
    """One named dataset: its tasks, how many malformed lines were skipped, and (for KG task sets)
    the world whose corpus it is meant to be searched in."""

    name: str
    tasks: list[Task]
    skipped: int = 0
    source: str = ""
    world: Any = None
    errors: list[str] = field(default_factory=list)


def task_key(task: Task) -> str:
    """The record key of a task: ``"<dataset>/<id>"`` (unique within one evaluation)."""
    return f"{task.metadata.get('dataset', task.source)}/{task.id}"


def _fail(where: str, problem: str, on_error: str, errors: list[str]) -> None:
    msg = f"{where}: {problem}"
    if on_error == "stop":
        raise DatasetFormatError(msg + " (pass --on-error skip to skip and count such lines)")
    errors.append(msg)
    logger.warning("skipping %s", msg)


def _golds(value: Any) -> Optional[list[str]]:
    """A list of non-empty gold strings from a str / list / array value, or None."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    vals = [value] if isinstance(value, (str, int, float)) and not isinstance(value, bool) else value
    if not isinstance(vals, list):
        return None
    out = [
        str(v).strip() for v in vals if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip()
    ]
    return out or None


def load_flashrag_jsonl(path: str | Path, *, name: Optional[str] = None, on_error: str = "stop") -> TaskSet:
    """Read a FlashRAG JSONL file (``id``, ``question``, ``golden_answers``, optional ``metadata``).

    ``answers``/``answer`` are accepted instead of ``golden_answers``. A malformed line raises
    :class:`DatasetFormatError` naming ``file:line`` (``on_error="stop"``) or is skipped and counted
    (``"skip"``). A file whose lines have no gold field at all is always an error naming the
    accepted fields.
    """
    check_choice("on_error", on_error, ON_ERROR)
    p = Path(path)
    if not p.is_file():
        raise MissingFileError(
            f"dataset file {p} {not_there(p)}; pass a FlashRAG JSONL file (id, question, golden_answers)"
        )
    name = name or p.stem
    tasks: list[Task] = []
    errors: list[str] = []
    parsed = no_gold = 0
    seen: set[str] = set()
    for n, where, rec, problem in qa_lines(p):
        if problem is not None:
            _fail(where, problem, on_error, errors)
            continue
        parsed += 1
        field_name = next((k for k in GOLD_FIELDS if k in rec), None)
        if field_name is None:
            no_gold += 1
            if no_gold == parsed or on_error == "stop":  # no line so far has golds: the file's schema is wrong
                raise DatasetFormatError(
                    f"{where}: no gold answers; a dataset line needs one of the fields "
                    f'{", ".join(GOLD_FIELDS)} (FlashRAG uses "golden_answers": ["..."])'
                )
            _fail(where, f"no gold answer field ({', '.join(GOLD_FIELDS)})", on_error, errors)
            continue
        golds = _golds(rec[field_name])
        if golds is None:
            _fail(where, f"{field_name!r} must be a non-empty string or list of strings", on_error, errors)
            continue
        tid = str(rec.get("id", n))
        if tid in seen:
            _fail(where, f"duplicate id {tid!r}", on_error, errors)
            continue
        seen.add(tid)
        meta: dict = rec["metadata"] if isinstance(rec.get("metadata"), dict) else {}
        tasks.append(
            Task(
                id=tid,
                question=rec["question"].strip(),
                answers=golds,
                source="jsonl",
                metadata={**meta, "dataset": name},
            )
        )
    if not tasks:
        raise DatasetFormatError(
            f"{p}: no usable questions ({len(errors)} malformed lines); the file is empty or broken"
        )
    return TaskSet(name, tasks, skipped=len(errors), source=str(p), errors=errors)


SEARCH_R1_PROMPT = (  # Search-R1's make_prefix (scripts/data_process/nq_search.py), byte for byte, typo included
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get "
    "new information. After reasoning, if you find you lack some knowledge, you can call a search engine by "
    "<search> query </search> and it will return the top searched results between <information> and "
    "</information>. You can search as many times as your want. If you find no further external knowledge needed, "
    "you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. For "
    "example, <answer> Beijing </answer>. Question: {question}\n"
)


def search_r1_prompt(question: str) -> str:
    """Search-R1's Solver prompt for ``question`` (stripped, ``?`` appended when missing, as Search-R1 does)."""
    q = question.strip()
    if q and q[-1] != "?":
        q += "?"
    return SEARCH_R1_PROMPT.format(question=q)


def with_search_r1_prompts(tasksets: Sequence[TaskSet]) -> list[TaskSet]:
    """Copies of ``tasksets`` whose tasks carry Search-R1's prompt (kept where a task already has one,
    e.g. the rows of a Search-R1 parquet)."""
    from dataclasses import replace

    out = []
    for ts in tasksets:
        tasks = [
            t
            if t.metadata.get("solver_prompt")
            else replace(t, metadata={**t.metadata, "solver_prompt": search_r1_prompt(t.question)})
            for t in ts.tasks
        ]
        out.append(replace(ts, tasks=tasks))
    return out


def _user_prompt(prompt: Any) -> Optional[str]:
    """The user message text of a Search-R1 parquet ``prompt`` (chat messages)."""
    if hasattr(prompt, "tolist"):
        prompt = prompt.tolist()
    if isinstance(prompt, list):
        users = [str(m.get("content", "")) for m in prompt if isinstance(m, dict) and m.get("role", "user") == "user"]
        return users[-1] if users else None
    return prompt if isinstance(prompt, str) else None


def load_searchr1_parquet(path: str | Path, *, name: Optional[str] = None, on_error: str = "stop") -> list[TaskSet]:
    """Read Search-R1's ``test.parquet``; one :class:`TaskSet` per ``data_source`` (``name`` prefixes them).

    The question is the ``question`` column when present, else the text after ``Question:`` in the
    ``prompt``; the prompt's user text is kept as the task's ``solver_prompt`` (the Solver sees exactly
    what Search-R1 trained on); golds are ``reward_model.ground_truth.target``. Rows are identified by
    ``extra_info.index`` (else their row number); malformed rows name ``file:row``.
    """
    check_choice("on_error", on_error, ON_ERROR)
    p = Path(path)
    if not p.is_file():
        raise MissingFileError(f"dataset file {p} {not_there(p)}; pass Search-R1's test.parquet")
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("reading .parquet needs pyarrow: pip install 'searchgym[eval]'") from None
    rows = _parquet_rows(pq, p)
    if rows and not ({"data_source", "reward_model"} <= set(rows[0])):
        raise DatasetFormatError(
            f"{p}: not a Search-R1 parquet; needs columns data_source, prompt (or question) and "
            f"reward_model.ground_truth.target, found {sorted(rows[0])}"
        )
    by_source: dict[str, list[Task]] = {}
    errors: list[str] = []
    seen: set[tuple[str, str]] = set()  # (dataset, id): an eval run keys its records by them
    for n, row in enumerate(rows):
        where = f"{p}:row {n}"
        prompt = _user_prompt(row.get("prompt"))
        question = row.get("question") if isinstance(row.get("question"), str) else None
        if question is None and prompt and "Question:" in prompt:
            question = prompt.rsplit("Question:", 1)[1].strip()
        if not question:
            _fail(where, "no question (neither a question column nor 'Question:' in the prompt)", on_error, errors)
            continue
        rm = row.get("reward_model") or {}
        gt = rm.get("ground_truth") if isinstance(rm, dict) else None
        golds = _golds(gt.get("target") if isinstance(gt, dict) else gt)
        if golds is None:
            _fail(where, "no gold answers in reward_model.ground_truth.target", on_error, errors)
            continue
        source = str(row.get("data_source") or "searchr1")
        dataset = f"{name}:{source}" if name else source
        extra = row.get("extra_info")
        extra = extra if isinstance(extra, dict) else {}
        tid = str(extra.get("index", n))
        if (dataset, tid) in seen:  # two rows of one key: a run recording both could never resume
            _fail(where, f"duplicate extra_info.index {tid!r} in {dataset}", on_error, errors)
            continue
        seen.add((dataset, tid))
        by_source.setdefault(dataset, []).append(
            Task(
                id=tid,
                question=question.strip(),
                answers=golds,
                source="searchr1",
                metadata={"dataset": dataset, **({"solver_prompt": prompt} if prompt else {})},
            )
        )
    if not by_source:
        raise DatasetFormatError(
            f"{p}: no usable rows ({len(errors)} malformed); pass Search-R1's test.parquet or a file of its columns"
        )
    # malformed rows are counted once, on the file's first dataset
    return [
        TaskSet(ds, tasks, skipped=len(errors) if i == 0 else 0, source=str(p), errors=errors if i == 0 else [])
        for i, (ds, tasks) in enumerate(by_source.items())
    ]


def _parquet_rows(pq: Any, p: Path) -> list[dict]:
    """Every row of the parquet file ``p`` as a dict; a file pyarrow cannot read (not parquet, damaged, cut
    short) is one line naming it instead of pyarrow's traceback."""
    import pyarrow as pa

    try:
        return pq.read_table(p).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise DatasetFormatError(
            f"{p} is not a readable parquet file ({exc}); pass Search-R1's test.parquet, or a .jsonl of QA pairs"
        ) from None


def builtin_taskset(world: Any = None, *, version: Optional[str] = None) -> TaskSet:
    """The built-in held-out benchmark of the default world (see :mod:`searchgym.tasks.heldout`)."""
    from . import heldout

    version = version or heldout.BENCHMARK_VERSION
    tasks = [_with_dataset(t, BUILTIN) for t in heldout.builtin_benchmark(world, version=version)]
    return TaskSet(BUILTIN, tasks, source=f"builtin {version}", world=world)


def atlas_taskset(n: int = ATLAS_TASKS, *, seed: int = ATLAS_SEED) -> TaskSet:
    """Template questions over a seeded ``n``-subgraph pool of the atlas world (3-7 hops), with the
    atlas world attached so they are searched in its corpus."""
    n = check_count("n", n)
    seed = check_count("seed", seed, least=0)
    from ..construction import build_pool
    from ..world.atlas import build_atlas
    from .sources import task_from_subgraph

    try:
        world = build_atlas()
    except ImportError:
        world = build_atlas(include_wiki_summaries=False)  # the summaries package is optional
    pool = build_pool(world, n, seed=seed, progress=False).subgraphs
    tasks = [_with_dataset(task_from_subgraph(sg, world, source=ATLAS), ATLAS) for sg in pool]
    return TaskSet(ATLAS, tasks, source=f"atlas pool seed {seed}", world=world)


def _with_dataset(task: Task, name: str) -> Task:
    task.metadata = {**task.metadata, "dataset": name}
    return task


def parse_spec(spec: str | Sequence[str]) -> list[tuple[Optional[str], str]]:
    """``"builtin,nq=nq.jsonl"`` → ``[(None, "builtin"), ("nq", "nq.jsonl")]``."""
    items = comma_items(
        spec,
        none="no task set given; use builtin, atlas, a FlashRAG .jsonl or a Search-R1 .parquet",
        gap=f"--tasks {spec!r} has an empty item between commas; drop the extra comma",
    )
    out: list[tuple[Optional[str], str]] = []
    for item in items:
        name, eq, src = (part.strip() for part in item.partition("="))
        if eq and not (name and src):
            raise InvalidArgumentError(
                f"task set {item!r} has an empty {'name' if not name else 'path'} around '='; "
                "write name=path.jsonl, or the path alone"
            )
        out.append((name, src) if eq else (None, item))
    return out


def sample_tasks(tasks: list[Task], limit: Optional[int], seed: int) -> list[Task]:
    """A seeded sample of ``limit`` tasks in their original order (all of them when ``limit`` is None)."""
    limit = check_count("limit", limit, optional=True, hint="None: every task")
    if limit is None or limit >= len(tasks):
        return list(tasks)
    keep = sorted(random.Random(seed).sample(range(len(tasks)), limit))
    return [tasks[i] for i in keep]


def load_tasksets(
    spec: str | Sequence[str], *, limit: Optional[int] = None, seed: int = 0, on_error: str = "stop", world: Any = None
) -> list[TaskSet]:
    """Every task set of ``spec`` (see the module docstring), each sampled to ``limit`` with ``seed``."""
    check_count("limit", limit, optional=True, hint="None: every task")
    check_choice("on_error", on_error, ON_ERROR)
    sets: list[TaskSet] = []
    for name, src in parse_spec(spec):
        if src == BUILTIN:
            loaded = [builtin_taskset(world)]
        elif src == ATLAS:
            loaded = [atlas_taskset()]
        elif src.endswith(".parquet"):
            loaded = load_searchr1_parquet(src, name=name, on_error=on_error)
            name = None  # names already carry the data_source
        elif src.endswith((".jsonl", ".json")):
            loaded = [load_flashrag_jsonl(src, name=name, on_error=on_error)]
        else:
            raise InvalidArgumentError(
                f"unknown task set {src!r}; use builtin, atlas, name=path.jsonl (FlashRAG) or path.parquet (Search-R1)"
            )
        for ts in loaded:
            if name and ts.name != name:
                ts.name = name
                ts.tasks = [_with_dataset(t, name) for t in ts.tasks]
            ts.tasks = sample_tasks(ts.tasks, limit, seed)
            sets.append(ts)
    names = [s.name for s in sets]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InvalidArgumentError(f"two task sets are named {dup}; name them apart, e.g. --tasks a=x.jsonl,b=y.jsonl")
    return sets
