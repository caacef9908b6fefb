"""Task sources: where Solver questions (and Proposer answer targets) come from.

* :class:`SubgraphTaskSource` turns a pool of KG subgraphs into template questions
  (:func:`searchgym.construction.question_templates.path_question`), keeping the pool's (curriculum) order.
* :class:`JsonlTaskSource` reads QA pairs (Search-R1 / FlashRAG style ``golden_answers`` accepted).
* :class:`ListTaskSource` wraps tasks built in code.

Every source is indexable in its fixed order and samples uniformly with a caller-supplied
``random.Random`` so all randomness flows from the env's seed.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Iterable, Iterator, Optional, Protocol, Sequence, runtime_checkable

from ..construction.question_templates import path_question
from ..core.jsonl import iter_lines, json_of_line
from ..core.path_errors import not_there
from ..core.subgraph import Subgraph
from ..core.types import Task
from ..errors import InvalidArgumentError, InvalidTypeError, MissingFileError, SearchGymError

__all__ = [
    "TaskSource",
    "SubgraphTaskSource",
    "JsonlTaskSource",
    "ListTaskSource",
    "task_from_subgraph",
    "TaskFormatError",
    "qa_lines",
]


class TaskFormatError(SearchGymError, ValueError):
    """A task file or record is malformed; the message names the file, line and the fix."""


@runtime_checkable
class TaskSource(Protocol):
    """Anything the envs can draw tasks from."""

    def sample(self, rng: random.Random) -> Task:
        """One task drawn with ``rng``."""

    def __len__(self) -> int:
        """Number of distinct tasks."""

    def __getitem__(self, i: int) -> Task:
        """Task ``i`` in the source's fixed order."""


def task_from_subgraph(
    subgraph: Subgraph, world=None, *, question: str | None = None, source: str = "subgraph"
) -> Task:
    """A Solver task for ``subgraph``: template question (unless given), answer + aliases as golds,
    the subgraph's waypoints, and as ``gold_titles`` its supporting documents: the page of each hop's
    head entity (the seed and the bridges, the entities whose pages state the path's facts), those that
    have a document in ``world`` (all non-literal ones when no world is given). One per hop, as
    DynaSearcher's Eq. 5 counts the hops ``i`` (for HotpotQA, by its supporting facts); the answer's own
    page states no fact of the path, so a search for it is not counted as needed (docs/fidelity.md)."""
    gold_titles = []
    for nid in subgraph.waypoint_ids:
        node = subgraph.nodes[nid]
        if node.is_literal:
            continue
        if world is not None and not (world.has_entity(nid) and world.has_document(nid)):
            continue
        gold_titles.append(node.title)
    return Task(
        id=f"{source}:{subgraph.id}",
        question=question if question is not None else path_question(subgraph),
        answers=list(dict.fromkeys(subgraph.answer_aliases)),
        subgraph=subgraph,
        waypoints=list(subgraph.waypoints),
        gold_titles=gold_titles,
        source=source,
        metadata={"hops": subgraph.hops, "answer_type": subgraph.answer_type},
    )


class _IndexedSource:
    """Shared behaviour: fixed-order indexing and uniform sampling over a list of tasks."""

    _tasks: list[Task]

    def __len__(self) -> int:
        return len(self._tasks)

    def __getitem__(self, i: int) -> Task:
        return self._tasks[i]

    def __iter__(self):
        return iter(self._tasks)

    def sample(self, rng: random.Random) -> Task:
        """A uniformly drawn task."""
        if not self._tasks:
            raise InvalidArgumentError(f"{type(self).__name__} is empty: give it at least one task")
        return self._tasks[rng.randrange(len(self._tasks))]


def _records(owner: str, name: str, items: object, kind: type) -> list:
    """``items`` as a list, refused in one line naming ``owner``'s argument ``name`` unless it is a list (or other
    iterable, not a string) of ``kind`` records: a string would become one task per character, a list of other
    things fail only when the first episode reads its question."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise InvalidTypeError(f"{owner}({name}=...) takes a list of {kind.__name__} records, got {items!r:.80}")
    records = list(items)
    bad = next((r for r in records if not isinstance(r, kind)), None)
    if bad is not None:
        raise InvalidTypeError(
            f"{owner}({name}=...) takes a list of {kind.__name__} records, found a {type(bad).__name__}: {bad!r:.80}"
        )
    return records


class ListTaskSource(_IndexedSource):
    """Tasks given in code, in the given order."""

    def __init__(self, tasks: Iterable[Task]) -> None:
        self._tasks = _records("ListTaskSource", "tasks", tasks, Task)
        if not self._tasks:
            raise InvalidArgumentError("ListTaskSource needs at least one Task")


class SubgraphTaskSource(_IndexedSource):
    """Template questions over a subgraph pool, in the pool's order (curriculum order if the pool
    was ordered with ``order_pool(..., "curriculum")``). ``world`` (optional) decides which path
    titles count as gold supporting documents."""

    def __init__(self, pool: Sequence[Subgraph], world=None) -> None:
        self.subgraphs = _records("SubgraphTaskSource", "pool", pool, Subgraph)
        if not self.subgraphs:
            raise InvalidArgumentError(
                "SubgraphTaskSource needs a non-empty subgraph pool (build one with searchgym.construction.build_pool)"
            )
        self._tasks = [task_from_subgraph(sg, world) for sg in self.subgraphs]


def _answers_of(rec: dict, where: str) -> list[str]:
    for key in ("answers", "golden_answers", "answer"):
        if key in rec:
            val = rec[key]
            vals = [val] if isinstance(val, str) else val
            if not isinstance(vals, list) or not all(isinstance(v, str) for v in vals):
                raise TaskFormatError(f"{where}: {key!r} must be a string or a list of strings")
            vals = [v for v in vals if v.strip()]
            if not vals:
                raise TaskFormatError(f"{where}: {key!r} is empty; give at least one gold answer")
            return vals
    raise TaskFormatError(f'{where}: no gold answer; add an "answer", "answers" or "golden_answers" field')


def qa_lines(path: Path) -> Iterator[tuple[int, str, dict, Optional[str]]]:
    """Each non-blank line of a QA JSON-lines file as ``(line number, "file:line", record, problem)``;
    ``problem`` is None for a JSON object with a non-empty string ``"question"``, else what is wrong
    (then ``record`` is ``{}`` if the line is not a JSON object)."""
    for n, raw, _complete in iter_lines(path):
        where = f"{path}:{n}"
        try:
            rec = json_of_line(raw)
        except ValueError as exc:  # not UTF-8, or not JSON
            yield n, where, {}, f"not valid JSON ({exc}); each line must be one JSON object"
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("question"), str) or not rec["question"].strip():
            yield n, where, rec if isinstance(rec, dict) else {}, 'needs a non-empty string "question" field'
            continue
        yield n, where, rec, None


class JsonlTaskSource(_IndexedSource):
    """QA pairs from a JSON-lines file, one object per line:
    ``{"question": str, "answer" | "answers" | "golden_answers": str | [str], "id"?,
    "waypoints"?: [str], "supporting_titles"?: [str], "evidence"?: str}``."""

    def __init__(self, path: str | Path) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidTypeError(f"JsonlTaskSource takes the path of a JSONL file of QA pairs, got {path!r}")
        self.path = Path(path)
        if not self.path.is_file():
            raise MissingFileError(f"task file {self.path} {not_there(self.path)}; pass a JSONL file of QA pairs")
        self._tasks = []
        for n, where, rec, problem in qa_lines(self.path):
            if problem is not None:
                raise TaskFormatError(f"{where}: {problem}")
            self._tasks.append(
                Task(
                    id=str(rec.get("id", f"{self.path.stem}:{n}")),
                    question=rec["question"].strip(),
                    answers=_answers_of(rec, where),
                    waypoints=[str(w) for w in rec.get("waypoints", [])],
                    gold_titles=[str(t) for t in rec.get("supporting_titles", rec.get("gold_titles", []))],
                    evidence=rec.get("evidence"),
                    source="jsonl",
                )
            )
        if not self._tasks:
            raise TaskFormatError(f"{self.path}: no tasks found; the file is empty")
