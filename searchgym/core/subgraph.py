"""The subgraph record: what one self-play task is grounded in (kg-paths-wcr §3.2, docs/game.md, subgraphs).

A :class:`Subgraph` holds a target path ``v0 -r1-> v1 ... -rK-> vK`` from a seed entity to the
answer, plus distractor branches that diverge from intermediate path nodes. It is plain data
(JSON round-trip with :meth:`Subgraph.to_dict` / :meth:`Subgraph.from_dict`) so pools can be
written to JSONL, resumed, and read by envs, reward wrappers and plots without the world.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ..errors import InvalidArgumentError

ANSWER_TYPES = ("person", "location", "organisation", "date", "number", "other")


def literal_node_id(kind: str, value: str) -> str:
    """Stable node id for a literal answer (literals have no entity id)."""
    return f"lit:{kind}:{value}"


@dataclass(frozen=True)
class SubgraphNode:
    """A node of a subgraph: an entity (``is_literal`` False) or a literal value."""

    id: str
    title: str
    aliases: tuple[str, ...] = ()
    type: str = "other"
    is_literal: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        """Title followed by aliases."""
        return (self.title, *self.aliases)


@dataclass(frozen=True)
class SubgraphEdge:
    """A directed, labelled edge between two subgraph node ids (direction as in the KG)."""

    head: str
    relation_id: str
    relation: str
    tail: str


@dataclass
class Branch:
    """A distractor branch: leaves the target path at ``path[diverge_at]`` and follows ``nodes``."""

    diverge_at: int
    nodes: list[str]
    relations: list[str]
    relation_ids: list[str]


@dataclass
class Subgraph:
    """A KG-grounded task skeleton: target path, distractors, answer and waypoints.

    ``path`` lists node ids ``v0 … vK`` (``v0`` = seed, ``vK`` = answer); ``relations[i]`` labels
    the edge ``path[i] → path[i+1]`` and ``forward[i]`` says whether it follows the KG direction
    (False when the path walks an edge backwards). Waypoints are ``v0 … v(K-1)``: seed included,
    answer excluded (docs/game.md, subgraphs).
    """

    id: str
    seed: str
    path: list[str]
    relations: list[str]
    relation_ids: list[str]
    nodes: dict[str, SubgraphNode]
    distractors: list[Branch] = field(default_factory=list)
    forward: list[bool] = field(default_factory=list)
    answer_type: str = "other"
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.path) != len(self.relations) + 1:
            raise InvalidArgumentError("a path of K hops needs K+1 nodes and K relations")
        if not self.forward:
            self.forward = [True] * len(self.relations)
        missing = [n for n in self.path if n not in self.nodes]
        if missing:
            raise InvalidArgumentError(f"path nodes missing from node table: {missing}")

    # -------------------------------------------------------------- derived
    @property
    def hops(self) -> int:
        """Number of edges K on the target path."""
        return len(self.relations)

    @property
    def answer_node(self) -> SubgraphNode:
        """The answer node ``vK``."""
        return self.nodes[self.path[-1]]

    @property
    def answer(self) -> str:
        """The answer a*: canonical title of ``vK``."""
        return self.answer_node.title

    @property
    def answer_aliases(self) -> list[str]:
        """Every gold string for the answer: title then aliases."""
        return list(self.answer_node.names)

    @property
    def waypoint_ids(self) -> list[str]:
        """Node ids of ``v0 … v(K-1)``."""
        return list(self.path[:-1])

    @property
    def waypoints(self) -> list[str]:
        """Titles of ``v0 … v(K-1)`` (the strings WCR matches)."""
        return [self.nodes[n].title for n in self.path[:-1]]

    @property
    def bridge_names(self) -> list[str]:
        """Names (titles and aliases) of the bridge entities: every node the target path passes through between its
        seed and its answer (``v1 … v(K-1)``), which a question must not name and an answer that stops short does."""
        return [n for node in self.path[1:-1] for n in self.nodes[node].names]

    @property
    def node_count(self) -> int:
        """Distinct nodes on the target path and distractor branches."""
        return len(self.nodes)

    def edges(self) -> list[SubgraphEdge]:
        """Every edge of the subgraph (target path then distractors), in KG direction."""
        out: list[SubgraphEdge] = []
        for i, (rid, lab) in enumerate(zip(self.relation_ids, self.relations)):
            a, b = self.path[i], self.path[i + 1]
            h, t = (a, b) if self.forward[i] else (b, a)
            out.append(SubgraphEdge(h, rid, lab, t))
        for br in self.distractors:
            prev = self.path[br.diverge_at]
            for node, rid, lab in zip(br.nodes, br.relation_ids, br.relations):
                out.append(SubgraphEdge(prev, rid, lab, node))
                prev = node
        return out

    def describe(self) -> str:
        """Human/LLM-readable listing: the target path, then each distractor branch."""
        name = lambda n: self.nodes[n].title  # noqa: E731
        lines = ["Target path:"]
        for e in self.edges()[: self.hops]:
            lines.append(f"  ({name(e.head)}) -[{e.relation}]-> ({name(e.tail)})")
        for j, br in enumerate(self.distractors, 1):
            lines.append(f"Distractor branch {j} (from {name(self.path[br.diverge_at])}):")
            prev = self.path[br.diverge_at]
            for node, lab in zip(br.nodes, br.relations):
                lines.append(f"  ({name(prev)}) -[{lab}]-> ({name(node)})")
                prev = node
        return "\n".join(lines)

    # ---------------------------------------------------------------- JSON
    def to_dict(self) -> dict:
        """JSON-serialisable form (one pool line).

        Written out field by field (same keys, order and values as ``dataclasses.asdict`` plus
        list-typed aliases) because ``asdict``'s generic deep copy dominated pool writing time.
        """
        return {
            "id": self.id,
            "seed": self.seed,
            "path": list(self.path),
            "relations": list(self.relations),
            "relation_ids": list(self.relation_ids),
            "nodes": {
                k: {
                    "id": v.id,
                    "title": v.title,
                    "aliases": list(v.aliases),
                    "type": v.type,
                    "is_literal": v.is_literal,
                }
                for k, v in self.nodes.items()
            },
            "distractors": [
                {
                    "diverge_at": b.diverge_at,
                    "nodes": list(b.nodes),
                    "relations": list(b.relations),
                    "relation_ids": list(b.relation_ids),
                }
                for b in self.distractors
            ],
            "forward": list(self.forward),
            "answer_type": self.answer_type,
            "metadata": copy.deepcopy(self.metadata),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Subgraph":
        """Inverse of :meth:`to_dict`; raises ValueError on a malformed record (a missing field, or a field of
        the wrong type: ``list("abc")`` would otherwise read a string path as three node ids)."""
        _check_field_types(d)
        try:
            nodes = {k: SubgraphNode(**{**v, "aliases": tuple(v.get("aliases", ()))}) for k, v in d["nodes"].items()}
            return cls(
                id=d["id"],
                seed=d["seed"],
                path=list(d["path"]),
                relations=list(d["relations"]),
                relation_ids=list(d["relation_ids"]),
                nodes=nodes,
                distractors=[Branch(**b) for b in d.get("distractors", [])],
                forward=list(d.get("forward", [])),
                answer_type=d.get("answer_type", "other"),
                metadata=dict(d.get("metadata", {})),
            )
        except KeyError as exc:
            raise InvalidArgumentError(f"malformed subgraph record: field {exc} is missing") from None
        except TypeError as exc:
            raise InvalidArgumentError(f"malformed subgraph record: {exc}") from None


#: the fields of a subgraph record that must be lists, and those that must be JSON objects
_LIST_FIELDS = ("path", "relations", "relation_ids", "distractors", "forward")
_OBJECT_FIELDS = ("nodes", "metadata")


def _check_field_types(d: object) -> None:
    """Refuse a record that is not a JSON object, or whose list / object fields hold another type, naming the
    field and its type (the constructor's own checks would report a string path as a wrong node count)."""
    if not isinstance(d, dict):
        raise InvalidArgumentError(f"malformed subgraph record: a {type(d).__name__}, not a JSON object")
    for names, kind, ok in ((_LIST_FIELDS, "list", list), (_OBJECT_FIELDS, "JSON object", dict)):
        for name in names:
            if name in d and not isinstance(d[name], ok):
                raise InvalidArgumentError(
                    f"malformed subgraph record: field {name!r} is a {type(d[name]).__name__}, not a {kind}"
                )
