"""Subgraph extraction: kg-paths-wcr Algorithm 1 (App. A.4) over a :class:`~searchgym.world.World`.

Stage 1 expands a target path from a seed ``v0``: at node ``v_t`` the candidate edges are its
out-edges filtered by the relation blocklist/allowlist and the degenerate-path rules below; with
no candidate the path stops; otherwise at most ``max_candidates`` of them (a seeded sample when
there are more) are shown to a :class:`~searchgym.construction.selectors.Selector`, which answers
an index or ``0`` to stop. A failed selector call is retried ``max_retries`` times; if every
attempt fails the seed is rejected (``selector_failed``) rather than accepting a path an outage
cut short. The path is capped at ``max_hops``; a path shorter than ``min_hops`` is rejected
(``too_short``), and the caller counts the rejection.

A selector that plans a length (``target_length``) gets ``plan_retries`` more tries from the same
seed when a path ends short of its plan (a literal, a dead end, a declined figure); the longest path is kept and
``metadata["hops_planned"]`` records the plan, so pool statistics report planned vs realised.

Stage 2 adds ``D ~ Uniform{num_distractors}`` distractor branches, each diverging at ``v_k`` with
``k ~ Uniform(1, K-1)`` and expanded by seeded random choice over the same filtered candidates
(never re-entering a node of the subgraph) for ``Uniform{distractor_hops}`` hops. A divergence node
with no candidate left is replaced by another path node (seeded order), so D branches are placed
whenever the path has room for them; ``metadata["distractors_planned"]`` keeps D.

Degenerate-path rules (docs/game.md, subgraphs, issue 3):

* no node is visited twice, and self-loops are never candidates;
* a literal can only be the last node: choosing a literal ends the path (``allow_literal_answers``
  switches literal answers off entirely);
* no shortcut to the seed: from the second hop on, nodes adjacent to the seed (by an out- or an
  in-edge, literals included) are not candidates, so the answer is never trivially the seed's
  neighbour (e.g. by an inverse edge).

Everything random flows from the ``rng`` argument (and the selector's own seed), so the same
seed, selector and config give the same subgraph.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import weakref
from dataclasses import asdict, dataclass, field
from typing import Callable, Collection, NamedTuple, Sequence

import numpy as np

from ..core.subgraph import Branch, Subgraph, SubgraphNode, literal_node_id
from ..errors import InvalidArgumentError, SearchGymError
from ..world.world import csr_index
from .selectors import Candidate, SelectionContext, SelectorError

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_RELATION_BLOCKLIST",
    "ExtractionConfig",
    "Rejected",
    "REJECTION_REASONS",
    "SelectorUnavailable",
    "extract_subgraph",
    "walk_subgraph",
    "subgraph_from_walk",
    "build_subgraph",
    "Walk",
    "STOP_REASONS",
    "eligible_seeds",
    "answer_type",
    "answer_type_of",
]

#: Generic or administrative Wikidata relations that make poor reasoning hops (ids and labels;
#: a relation is blocked when its id or its label is listed). The paper filters "overly generic
#: relations" without publishing its list; this is a conservative default.
DEFAULT_RELATION_BLOCKLIST: tuple[str, ...] = (
    "P31",
    "instance of",
    "P373",
    "Commons category",
    "P910",
    "topic's main category",
    "P1343",
    "described by source",
    "P18",
    "image",
    "P1424",
    "topic's main template",
    "P5008",
    "on focus list of Wikimedia project",
    "P6104",
    "maintained by WikiProject",
)

#: Every ``Rejected.reason`` code.
REJECTION_REASONS = ("unknown_seed", "no_eligible_relations", "no_candidates", "too_short", "selector_failed")

_ENTITY_ANSWER_TYPES = {
    "person": "person",
    "location": "location",
    "organisation": "organisation",
    "organization": "organisation",
}
_LITERAL_ANSWER_TYPES = {"date": "date", "quantity": "number", "string": "other"}


def answer_type(node_type: str, is_literal: bool) -> str:
    """Answer type (person/location/organisation/date/number/other) of an entity type or literal kind."""
    return (_LITERAL_ANSWER_TYPES if is_literal else _ENTITY_ANSWER_TYPES).get(node_type, "other")


def answer_type_of(node: SubgraphNode) -> str:
    """Answer type (person/location/organisation/date/number/other) of a subgraph node."""
    return answer_type(node.type, node.is_literal)


class Rejected(SearchGymError):
    """A seed yielded no acceptable subgraph; ``reason`` is one of :data:`REJECTION_REASONS`.

    Rejections are expected outcomes (a dead-end seed, a short path, a selector outage) and are
    counted by the pool builder, never silently dropped.
    """

    def __init__(self, reason: str, detail: str = "", seed_id: str | None = None) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        self.seed_id = seed_id

    def __reduce__(self):
        return (Rejected, (self.reason, self.detail, self.seed_id))


class SelectorUnavailable(SearchGymError):
    """Every attempt of a selector call failed because the endpoint is down (timeout, unreachable,
    HTTP 5xx/429). Not a property of the seed: the pool builder stops and does not journal it, so a
    resumed run retries that seed once the endpoint is back."""

    def __init__(self, detail: str, seed_id: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.seed_id = seed_id

    def __reduce__(self):
        return (SelectorUnavailable, (self.detail, self.seed_id))


def _range_pair(name: str, value, lo_min: int) -> tuple[int, int]:
    try:
        lo, hi = (int(v) for v in value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"ExtractionConfig.{name} must be a (low, high) pair of ints, got {value!r}"
        ) from None
    if lo < lo_min or hi < lo:
        raise InvalidArgumentError(f"ExtractionConfig.{name} must satisfy {lo_min} <= low <= high, got {value!r}")
    return lo, hi


@dataclass(frozen=True)
class ExtractionConfig:
    """Settings of Algorithm 1 (defaults: the paper's App. B.1 configuration).

    ``relation_blocklist`` / ``relation_allowlist`` name relations by id or label; an empty
    allowlist allows everything not blocked. ``num_distractors`` and ``distractor_hops`` are
    inclusive ``(low, high)`` ranges sampled uniformly (``distractors`` is accepted as an alias of
    ``num_distractors``, the name earlier versions documented). ``allow_inverse_edges`` lets the target
    path also walk edges backwards (off by default: the paper follows out-edges); distractor
    branches always follow out-edges. ``retry_backoff`` seconds (doubled per attempt) are slept
    between failed selector calls. ``plan_retries``: when the selector plans a path length
    (``target_length(context)``, as :class:`HeuristicSelector` does) and a path ends short of it (at a
    literal, a dead end, or where the selector declined a bare figure), the path is re-drawn from the same seed up
    to this many times (the
    selector sees ``context.trial``); the longest attempt is kept. 0 keeps the first path.
    """

    min_hops: int = field(default=3, metadata={"help": "Shortest target path, in edges (the question's hop count)."})
    max_hops: int = field(default=7, metadata={"help": "Longest target path, in edges."})
    max_candidates: int = field(
        default=10, metadata={"help": "Most candidate edges shown to the selector at each step."}
    )
    max_retries: int = field(
        default=5, metadata={"help": "Retries of a failed selector call (an LLM selector's error or unusable reply)."}
    )
    num_distractors: tuple[int, int] = field(
        default=(1, 3),
        metadata={"help": "Inclusive (low, high) range of distractor branches added to a subgraph, drawn uniformly."},
    )
    distractor_hops: tuple[int, int] = field(
        default=(1, 2),
        metadata={"help": "Inclusive (low, high) range of each distractor branch's length in edges, drawn uniformly."},
    )
    relation_blocklist: Collection[str] = field(
        default_factory=lambda: frozenset(DEFAULT_RELATION_BLOCKLIST),
        metadata={"help": "Relations (ids or labels) never walked."},
    )
    relation_allowlist: Collection[str] = field(
        default_factory=frozenset, metadata={"help": "If not empty, the only relations walked (ids or labels)."}
    )
    allow_literal_answers: bool = field(
        default=True, metadata={"help": "Let a path end at a literal (a date, a number) as its answer."}
    )
    allow_inverse_edges: bool = field(
        default=False,
        metadata={"help": "Let the target path also walk edges backwards (off: the paper follows out-edges only)."},
    )
    retry_backoff: float = field(
        default=0.0, metadata={"help": "Seconds slept before retrying a failed selector call, doubled per attempt."}
    )
    plan_retries: int = field(
        default=4,
        metadata={
            "help": (
                "When a path ends short of the selector's planned length, re-draw it up to this many times and keep "
                "the longest (0: keep the first)."
            )
        },
    )
    distractors: tuple[int, int] | None = field(
        default=None, metadata={"help": "Alias of num_distractors (the name in older docs); null: unused."}
    )

    def __post_init__(self) -> None:
        if self.distractors is not None:
            object.__setattr__(self, "num_distractors", self.distractors)
            object.__setattr__(self, "distractors", None)
        if not isinstance(self.min_hops, int) or self.min_hops < 1:
            raise InvalidArgumentError(f"ExtractionConfig.min_hops must be an int >= 1, got {self.min_hops!r}")
        if not isinstance(self.max_hops, int) or self.max_hops < self.min_hops:
            raise InvalidArgumentError(
                f"ExtractionConfig.max_hops ({self.max_hops!r}) must be an int >= min_hops ({self.min_hops})"
            )
        if self.max_candidates < 1:
            raise InvalidArgumentError(f"ExtractionConfig.max_candidates must be >= 1, got {self.max_candidates}")
        if self.max_retries < 0:
            raise InvalidArgumentError(f"ExtractionConfig.max_retries must be >= 0, got {self.max_retries}")
        if self.retry_backoff < 0:
            raise InvalidArgumentError(f"ExtractionConfig.retry_backoff must be >= 0, got {self.retry_backoff}")
        if not isinstance(self.plan_retries, int) or self.plan_retries < 0:
            raise InvalidArgumentError(f"ExtractionConfig.plan_retries must be an int >= 0, got {self.plan_retries!r}")
        object.__setattr__(self, "num_distractors", _range_pair("num_distractors", self.num_distractors, 0))
        object.__setattr__(self, "distractor_hops", _range_pair("distractor_hops", self.distractor_hops, 1))
        for name in ("relation_blocklist", "relation_allowlist"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise InvalidArgumentError(
                    f"ExtractionConfig.{name} must be a collection of relation ids/labels, not a string"
                )
            object.__setattr__(self, name, frozenset(value or ()))

    def as_dict(self) -> dict:
        """JSON-serialisable form (sorted lists for the relation sets), used in pool fingerprints."""
        d = asdict(self)
        d.pop("distractors")
        d["relation_blocklist"] = sorted(self.relation_blocklist)
        d["relation_allowlist"] = sorted(self.relation_allowlist)
        d["num_distractors"] = list(self.num_distractors)
        d["distractor_hops"] = list(self.distractor_hops)
        return d


class _Index:
    """Per-(world, config) arrays: eligible-relation mask, eligible out-degree, relation counts."""

    def __init__(self, world, config: ExtractionConfig) -> None:
        self.world = world
        self.config = config
        tri = world.triple_array
        self.heads, self.rels, self.tails = tri[:, 0], tri[:, 1], tri[:, 2]
        rels = world.relations()
        self.rel_ids = [r.id for r in rels]
        self.rel_labels = [r.label for r in rels]
        ok = np.array(
            [not (r.id in config.relation_blocklist or r.label in config.relation_blocklist) for r in rels], dtype=bool
        )
        if config.relation_allowlist:
            ok &= np.array(
                [r.id in config.relation_allowlist or r.label in config.relation_allowlist for r in rels], dtype=bool
            )
        self.rel_ok = ok if len(rels) else np.zeros(0, dtype=bool)
        n_ent = world.num_entities
        self.num_triples = max(1, world.num_triples)
        self.rel_freq = np.bincount(self.rels, minlength=len(rels)).tolist() if len(rels) else []
        edge_ok = self.rel_ok[self.rels] & (self.tails != self.heads) if len(self.rels) else np.zeros(0, bool)
        if not config.allow_literal_answers:
            edge_ok &= self.tails >= 0
        # CSR of eligible out-edges (triple order kept within a head), as compact int32/int64 arrays
        ok_rows = np.nonzero(edge_ok)[0]
        out_ptr, order = csr_index(self.heads[ok_rows], n_ent)
        order = ok_rows[order]
        counts = np.diff(out_ptr)
        self._out_ptr = out_ptr.tolist()
        self._out_rel = self.rels[order].astype(np.int32)
        self._out_tail = self.tails[order]
        self.elig_out = counts.tolist()
        seeds_mask = counts > 0
        self._in_ptr: list[int] = []
        if config.allow_inverse_edges and len(self.rels):
            ent_rows = ok_rows[self.tails[ok_rows] >= 0]
            in_ptr, order = csr_index(self.tails[ent_rows], n_ent)
            order = ent_rows[order]
            self._in_ptr = in_ptr.tolist()
            self._in_rel = self.rels[order].astype(np.int32)
            self._in_head = self.heads[order]
            seeds_mask = seeds_mask | (np.diff(in_ptr) > 0)
        self.eligible_seeds = np.nonzero(seeds_mask)[0]
        self.num_eligible_relations = int(np.unique(self.rels[edge_ok]).size) if len(self.rels) else 0
        self._has_doc: dict[int, bool] = {}
        self._nodes: dict[int, SubgraphNode] = {}

    def candidates(self, c: int, exclude: set, banned: set | None, inverse: bool) -> list[tuple[int, int, bool]]:
        """Filtered candidate edges of entity ``c`` as (relation row, target code, forward)."""
        a, b = self._out_ptr[c], self._out_ptr[c + 1]
        out: list[tuple[int, int, bool]] = []
        if b > a:
            for ri, ti in zip(self._out_rel[a:b].tolist(), self._out_tail[a:b].tolist()):
                if ti not in exclude and (banned is None or ti not in banned):
                    out.append((ri, ti, True))
        if inverse:
            a, b = self._in_ptr[c], self._in_ptr[c + 1]
            for ri, hi in zip(self._in_rel[a:b].tolist(), self._in_head[a:b].tolist()):
                if hi not in exclude and (banned is None or hi not in banned):
                    out.append((ri, hi, False))
        return out

    def has_document(self, code: int) -> bool:
        """Whether entity ``code`` has a linked document (memoised)."""
        v = self._has_doc.get(code)
        if v is None:
            v = self._has_doc[code] = self.world.has_document(self.world.entity_ids[code])
        return v

    def seed_neighbours(self, c: int) -> set:
        """Codes adjacent to entity ``c`` in either direction (literal tails included)."""
        nb = set(self.tails[self.world.out_rows(c)].tolist())
        nb.update(self.heads[self.world.in_rows(c)].tolist())
        return nb

    def title(self, code: int) -> str:
        """Display title of an entity or literal code."""
        if code >= 0:
            return self.world.title(self.world.entity_ids[code])
        return self.world.node_at(code).value

    def node(self, code: int) -> SubgraphNode:
        """The subgraph node for an entity or literal code (memoised: the record is immutable, so
        every subgraph through that node shares it)."""
        n = self._nodes.get(code)
        if n is None:
            if code >= 0:
                e = self.world.entity_at(code)
                n = SubgraphNode(e.id, e.title, tuple(e.aliases), e.type, False)
            else:
                lit = self.world.node_at(code)
                n = SubgraphNode(literal_node_id(lit.kind, lit.value), lit.value, (), lit.kind, True)
            self._nodes[code] = n
        return n

    def candidate(self, ri: int, ti: int, forward: bool) -> Candidate:
        """A :class:`Candidate` for the selector."""
        if ti >= 0:
            eid = self.world.entity_ids[ti]
            return Candidate(
                self.rel_ids[ri],
                self.rel_labels[ri],
                eid,
                self.world.title(eid),
                False,
                forward,
                self.has_document(ti),
                self.elig_out[ti],
                self.rel_freq[ri],
                self.num_triples,
            )
        lit = self.world.node_at(ti)
        return Candidate(
            self.rel_ids[ri],
            self.rel_labels[ri],
            literal_node_id(lit.kind, lit.value),
            lit.value,
            True,
            forward,
            False,
            0,
            self.rel_freq[ri],
            self.num_triples,
        )


_INDEX_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_INDEX_LOCK = threading.Lock()


def extraction_index(world, config: ExtractionConfig) -> _Index:
    """The cached :class:`_Index` of (world, config); built once per pair."""
    with _INDEX_LOCK:
        per_world = _INDEX_CACHE.setdefault(world, {})
        idx = per_world.get(config)
        if idx is None:
            idx = per_world[config] = _Index(world, config)
            logger.debug("extraction index for %s: %d eligible seeds", world.name, len(idx.eligible_seeds))
        return idx


def eligible_seeds(world, config: ExtractionConfig | None = None) -> list[str]:
    """Ids of entities with at least one eligible candidate edge (where a path can start)."""
    idx = extraction_index(world, config or ExtractionConfig())
    ids = world.entity_ids
    return [ids[i] for i in idx.eligible_seeds.tolist()]


class _TargetPath(NamedTuple):
    """A stage-1 target path as index codes: ``path`` ``v0 … vK``, the ``rel_rows`` and ``forward``
    flags of its K edges, and why it stopped (``max_hops``, ``dead_end``, ``selector``, ``literal``)."""

    path: list[int]
    rel_rows: list[int]
    forward: list[bool]
    stop: str


class _CodeBranch(NamedTuple):
    """A distractor branch as index codes, leaving the path at ``path[diverge_at]``."""

    diverge_at: int
    nodes: list[int]
    rel_rows: list[int]


def _ask(selector, ctx: SelectionContext, config: ExtractionConfig, stats: dict) -> int:
    """One selector decision with up to ``max_retries`` retries.

    When every attempt fails, raises :class:`SelectorUnavailable` if the last failure was an
    outage (the endpoint, not the seed, is at fault) and ``Rejected("selector_failed")`` otherwise.
    """
    last: SelectorError | None = None
    n = len(ctx.candidates)
    for attempt in range(config.max_retries + 1):
        ctx.attempt = attempt
        stats["calls"] += 1
        try:
            choice = selector.select(ctx)
            if isinstance(choice, bool) or not isinstance(choice, (int, np.integer)) or not 0 <= choice <= n:
                raise SelectorError(f"selector returned {choice!r}, expected an int in 0..{n}", "out_of_range")
            return int(choice)
        except SelectorError as exc:
            last = exc
            stats["failures"] += 1
            logger.debug("selector attempt %d failed at %s depth %d: %s", attempt + 1, ctx.seed_id, ctx.depth, exc)
            if config.retry_backoff and attempt < config.max_retries:
                time.sleep(config.retry_backoff * (2**attempt))
    assert last is not None  # max_retries >= 0: the loop ran and every attempt failed
    detail = f"{config.max_retries + 1} selector attempts failed at depth {ctx.depth} ({last.kind}: {last})"
    if last.outage:
        raise SelectorUnavailable(detail, ctx.seed_id)
    raise Rejected("selector_failed", detail, ctx.seed_id)


def _path_line(prev: str, label: str, title: str, forward: bool) -> str:
    return f"({prev}) -[{label}]-> ({title})" if forward else f"({prev}) <-[{label}]- ({title})"


def _planned_length(selector, seed_id: str, config: ExtractionConfig) -> int | None:
    """The path length the selector plans for this seed (``target_length``), or None if it plans none."""
    plan = getattr(selector, "target_length", None)
    if not callable(plan):
        return None
    return int(plan(SelectionContext([], "", [], 0, config.min_hops, config.max_hops, seed_id)))


def _expand_path(
    idx: "_Index",
    v0: int,
    seed_id: str,
    selector,
    config: ExtractionConfig,
    rng: random.Random,
    stats: dict,
    trial: int,
) -> _TargetPath:
    """Stage 1 from entity ``v0``: one walk chosen by the selector."""
    path = [v0]
    rel_rows: list[int] = []
    forward: list[bool] = []
    visited = {v0}
    path_lines: list[str] = []
    titles = [idx.title(v0)]
    banned: set | None = None
    stop = "max_hops"
    for depth in range(config.max_hops):
        cur = path[-1]
        if depth == 1:
            banned = idx.seed_neighbours(v0)
        cands = idx.candidates(cur, visited, banned, config.allow_inverse_edges)
        if not cands:
            if depth == 0:
                raise Rejected("no_candidates", f"seed {seed_id!r} has no eligible edge", seed_id)
            stop = "dead_end"
            break
        if len(cands) > config.max_candidates:
            picked = sorted(rng.sample(range(len(cands)), config.max_candidates))
            cands = [cands[i] for i in picked]
        shown = [idx.candidate(ri, ti, fw) for ri, ti, fw in cands]
        ctx = SelectionContext(
            list(path_lines), titles[-1], shown, depth, config.min_hops, config.max_hops, seed_id, trial=trial
        )
        choice = _ask(selector, ctx, config, stats)
        if choice == 0:
            stop = "selector"
            break
        ri, ti, fw = cands[choice - 1]
        path.append(ti)
        rel_rows.append(ri)
        forward.append(fw)
        visited.add(ti)
        path_lines.append(_path_line(titles[-1], idx.rel_labels[ri], shown[choice - 1].target_title, fw))
        titles.append(shown[choice - 1].target_title)
        if ti < 0:
            stop = "literal"
            break
    return _TargetPath(path, rel_rows, forward, stop)


def _grow_branch(
    idx: "_Index", start: int, length: int, in_graph: set, rng: random.Random
) -> tuple[list[int], list[int]]:
    """One distractor branch of up to ``length`` hops from ``start`` (adds its nodes to ``in_graph``)."""
    cur = start
    b_nodes: list[int] = []
    b_rels: list[int] = []
    for _step in range(length):
        cands = idx.candidates(cur, in_graph, None, False)
        if not cands:
            break
        ri, ti, _fw = cands[rng.randrange(len(cands))]
        b_nodes.append(ti)
        b_rels.append(ri)
        in_graph.add(ti)
        cur = ti
        if ti < 0:
            break
    return b_nodes, b_rels


class Walk(NamedTuple):
    """What one extraction chose, as world codes (entity index, or a negative literal code) and
    relation rows: everything :func:`subgraph_from_walk` needs to build the :class:`Subgraph`.

    Compact and picklable, so pool workers in other processes can hand a walk back cheaply
    (:mod:`searchgym.construction.walk_codec`) and the receiver builds the same subgraph.
    ``branches`` holds ``(diverge_at, node codes, relation rows)``; ``stop`` is one of
    :data:`STOP_REASONS`; ``hops_planned`` is None when the selector plans no length.
    """

    path: list[int]
    rel_rows: list[int]
    forward: list[bool]
    branches: Sequence[tuple[int, list[int], list[int]]]
    stop: str
    selector_calls: int
    selector_failures: int
    distractors_planned: int
    hops_planned: int | None


#: Every ``Walk.stop`` (why stage 1 ended): the plan or ``max_hops``, no candidate left, the
#: selector answered 0, or the path reached a literal.
STOP_REASONS = ("max_hops", "dead_end", "selector", "literal")


def walk_subgraph(
    world,
    seed_id: str,
    selector,
    config: ExtractionConfig | None = None,
    rng: random.Random | int | None = None,
) -> Walk:
    """Algorithm 1 from ``seed_id`` as a :class:`Walk` (codes only; see :func:`extract_subgraph`)."""
    config = config or ExtractionConfig()
    if rng is None or isinstance(rng, int):
        rng = random.Random(0 if rng is None else rng)
    idx = _seed_index(world, seed_id, config)
    stats = {"calls": 0, "failures": 0}
    planned = _planned_length(selector, seed_id, config)
    v0 = world.entity_index(seed_id)
    walk = _longest_walk(
        lambda trial: _expand_path(idx, v0, seed_id, selector, config, rng, stats, trial), planned, config.plan_retries
    )
    hops = len(walk.rel_rows)
    if hops < config.min_hops:
        raise Rejected(
            "too_short",
            f"path from {seed_id!r} has {hops} hop(s) (stopped: {walk.stop}); need >= {config.min_hops}",
            seed_id,
        )
    n_branches = rng.randint(*config.num_distractors)
    branches = _distractor_branches(idx, walk.path, n_branches, config, rng)
    return Walk(
        walk.path,
        walk.rel_rows,
        walk.forward,
        branches,
        walk.stop,
        stats["calls"],
        stats["failures"],
        n_branches,
        planned,
    )


def _seed_index(world, seed_id: str, config: ExtractionConfig) -> _Index:
    """The extraction index of (world, config), once the seed is known to exist and some relation is eligible."""
    if not world.has_entity(seed_id):
        raise Rejected("unknown_seed", f"no entity with id {seed_id!r} in world {world.name!r}", seed_id)
    idx = extraction_index(world, config)
    if idx.num_eligible_relations == 0:
        raise Rejected(
            "no_eligible_relations",
            f"world {world.name!r} has no relation left after the blocklist/allowlist; relax them",
            seed_id,
        )
    return idx


def _longest_walk(walk: Callable[[int], _TargetPath], planned: int | None, plan_retries: int) -> _TargetPath:
    """Stage 1 (``walk(trial)``), re-drawn up to ``plan_retries`` times while the path ends short of the
    selector's ``planned`` length (None: no plan, one walk); the longest walk wins, the earliest among equals."""
    best = walk(0)
    for trial in range(1, plan_retries + 1 if planned is not None else 1):
        if planned is None or len(best.rel_rows) >= planned:
            break
        candidate = walk(trial)
        if len(candidate.rel_rows) > len(best.rel_rows):
            best = candidate
    return best


def _distractor_branches(
    idx: _Index, path: list[int], n_branches: int, config: ExtractionConfig, rng: random.Random
) -> list[_CodeBranch]:
    """Stage 2: up to ``n_branches`` distractor branches off the path's inner nodes, as codes."""
    hops = len(path) - 1
    branches: list[_CodeBranch] = []
    in_graph = set(path)
    for _ in range(n_branches):
        if hops < 2:
            break
        first_k = rng.randint(1, hops - 1)
        others = [k for k in range(1, hops) if k != first_k]
        rng.shuffle(others)
        length = rng.randint(*config.distractor_hops)
        for k in (first_k, *others):  # a divergence node with nothing left to add: try another
            b_nodes, b_rels = _grow_branch(idx, path[k], length, in_graph, rng)
            if b_nodes:
                branches.append(_CodeBranch(k, b_nodes, b_rels))
                break
    return branches


def subgraph_from_walk(
    world, seed_id: str, walk: Walk, config: ExtractionConfig | None = None, *, subgraph_id: str | None = None
) -> Subgraph:
    """The :class:`Subgraph` of a :class:`Walk` over ``world`` (node records shared per code)."""
    return build_subgraph(extraction_index(world, config or ExtractionConfig()), seed_id, walk, subgraph_id)


def build_subgraph(
    idx: _Index, seed_id: str, walk: Walk, subgraph_id: str | None = None, extra_metadata: dict | None = None
) -> Subgraph:
    """:func:`subgraph_from_walk` given the world's :func:`extraction_index` (for callers that build
    many subgraphs: the pool builder looks the index up once and adds its ``extra_metadata``)."""
    record = idx._nodes.__getitem__
    try:
        path_nodes = list(map(record, walk.path))
        branch_nodes = [list(map(record, bn)) for _k, bn, _br in walk.branches]
    except KeyError:  # codes seen for the first time: build and memoise their records
        path_nodes = [idx.node(c) for c in walk.path]
        branch_nodes = [[idx.node(c) for c in bn] for _k, bn, _br in walk.branches]
    nodes = {n.id: n for n in path_nodes}
    for bn in branch_nodes:
        for n in bn:
            nodes.setdefault(n.id, n)
    labels, rel_ids = idx.rel_labels, idx.rel_ids
    metadata = {
        "stop": walk.stop,
        "selector_calls": walk.selector_calls,
        "selector_failures": walk.selector_failures,
        "distractors_planned": walk.distractors_planned,
        "hops_planned": walk.hops_planned,
    }
    if extra_metadata:
        metadata.update(extra_metadata)
    return Subgraph(
        id=subgraph_id or f"sg:{seed_id}",
        seed=seed_id,
        path=[n.id for n in path_nodes],
        relations=[labels[r] for r in walk.rel_rows],
        relation_ids=[rel_ids[r] for r in walk.rel_rows],
        nodes=nodes,
        distractors=[
            Branch(k, [n.id for n in bnodes], [labels[r] for r in br], [rel_ids[r] for r in br])
            for (k, _bn, br), bnodes in zip(walk.branches, branch_nodes)
        ],
        forward=list(walk.forward),
        answer_type=answer_type_of(path_nodes[-1]),
        metadata=metadata,
    )


def extract_subgraph(
    world,
    seed_id: str,
    selector,
    config: ExtractionConfig | None = None,
    rng: random.Random | int | None = None,
    *,
    subgraph_id: str | None = None,
) -> Subgraph:
    """Run Algorithm 1 from ``seed_id`` and return the :class:`Subgraph`.

    Raises :class:`Rejected` with reason ``unknown_seed`` (no such entity),
    ``no_eligible_relations`` (the block/allowlists leave no relation in this world),
    ``no_candidates`` (the seed has no eligible edge), ``too_short`` (fewer than ``min_hops``
    hops) or ``selector_failed`` (every attempt of a selector call failed).
    """
    walk = walk_subgraph(world, seed_id, selector, config, rng)
    return subgraph_from_walk(world, seed_id, walk, config, subgraph_id=subgraph_id)
