"""Value types of a world: entities, relations, literals, triples, documents and edges.

They are small frozen dataclasses so that they can be hashed, compared and passed between
threads freely. The :class:`~searchgym.world.world.World` stores its data in compact arrays and
materialises these objects only on access.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal as _Lit
from typing import Union

from ..errors import InvalidArgumentError

ENTITY_TYPES = ("person", "location", "organisation", "work", "event", "award", "concept", "other")
LITERAL_KINDS = ("date", "quantity", "string")


@dataclass(frozen=True)
class Entity:
    """A knowledge-graph node with a canonical title, aliases, a description and a coarse type."""

    id: str
    title: str
    aliases: tuple[str, ...] = ()
    description: str = ""
    type: str = "other"

    @property
    def names(self) -> tuple[str, ...]:
        """Canonical title followed by every alias: the strings that may name this entity."""
        return (self.title, *self.aliases)


@dataclass(frozen=True)
class Relation:
    """A relation (edge label) such as ``born in``; ``id`` is stable, ``label`` is human text."""

    id: str
    label: str


@dataclass(frozen=True)
class Literal:
    """A typed literal value that can only be the tail of a triple: a date, quantity or string."""

    value: str
    kind: str = "string"

    def __post_init__(self) -> None:
        if self.kind not in LITERAL_KINDS:
            raise InvalidArgumentError(f"literal kind must be one of {LITERAL_KINDS}, got {self.kind!r}")

    @property
    def title(self) -> str:
        """Literals are named by their value, so they can stand where an entity title would."""
        return self.value


Node = Union[Entity, Literal]


@dataclass(frozen=True)
class Triple:
    """A fact ``(head, relation, tail)``; ``head`` and ``relation`` are ids, ``tail`` an id or a Literal."""

    head: str
    relation: str
    tail: Union[str, Literal]

    @property
    def tail_is_literal(self) -> bool:
        """True when the tail is a typed literal rather than an entity id."""
        return isinstance(self.tail, Literal)


@dataclass(frozen=True)
class Document:
    """A corpus document, optionally linked to the entity it describes."""

    id: str
    title: str
    text: str
    entity: str | None = None


@dataclass(frozen=True)
class Edge:
    """One triple seen from one of its endpoints.

    ``source`` is the entity the edge was read from; ``target`` the node at the other end.
    ``direction`` is ``"out"`` when ``source`` is the triple's head, ``"in"`` when it is the tail.
    """

    source: Entity
    relation: Relation
    target: Node
    direction: _Lit["out", "in"] = "out"

    @property
    def target_is_literal(self) -> bool:
        """True when the far end is a literal value (only ever an out-edge's tail)."""
        return isinstance(self.target, Literal)

    def as_triple(self) -> Triple:
        """The underlying fact in head → tail order, whichever side it was read from."""
        if self.direction == "out":
            tail = self.target if isinstance(self.target, Literal) else self.target.id
            return Triple(self.source.id, self.relation.id, tail)
        assert isinstance(self.target, Entity)
        return Triple(self.target.id, self.relation.id, self.source.id)


@dataclass
class WorldStats:
    """Summary counts of a world, as printed by ``searchgym world stats``."""

    name: str
    entities: int
    relations: int
    triples: int
    literal_triples: int
    documents: int
    linked_documents: int
    entity_types: dict[str, int] = field(default_factory=dict)
    top_relations: list[tuple[str, int]] = field(default_factory=list)
    mean_out_degree: float = 0.0
    max_out_degree: int = 0

    def as_dict(self) -> dict:
        """A JSON-serialisable dict of every field."""
        from dataclasses import asdict

        return asdict(self)
