"""The :class:`World`: one knowledge graph plus one text corpus, stored compactly.

Storage is columnar so a world of a million entities, five million triples and a million
documents fits comfortably in memory on a small machine: entity and document fields live in
plain Python lists, triples in three numpy arrays with CSR (compressed sparse row) indexes for
out- and in-edges, and lookup tables (title/alias → entities) are built lazily on first use.
Value objects (:class:`Entity`, :class:`Edge`, ...) are materialised only when asked for.

Build a world with :class:`WorldBuilder`; persist it with :func:`save_world` / :func:`load_world`
(or :meth:`World.save` / :meth:`World.load`): :mod:`searchgym.world.storage` reads and writes the
tables (:class:`~searchgym.world.storage.WorldColumns`), this module turns them into a World and back.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import fields
from pathlib import Path
from typing import Iterable, Iterator, Sequence, Sized
from typing import Literal as _Lit

import numpy as np

from ..errors import InvalidArgumentError, NotFoundError, SearchGymError
from .model import Document, Edge, Entity, Literal, Node, Relation, Triple, WorldStats
from .shared import LockFreePickling
from .storage import VERSION, WorldColumns, WorldFormatError, read_columns, write_columns

logger = logging.getLogger(__name__)

__all__ = ["World", "WorldBuilder", "WorldError", "load_world", "normalize_name", "save_world"]


class WorldError(SearchGymError, ValueError):
    """Raised for inconsistent world content: an unknown id, a dangling triple, a duplicate id."""


def normalize_name(name: str) -> str:
    """Case-folded, whitespace-collapsed form of a name, used for case-insensitive lookup."""
    return " ".join(name.casefold().split())


def _add_row(table: dict, key: str, row: int) -> None:
    """Record that ``key`` names entity ``row`` (an int for one entity, a list for several)."""
    cur = table.get(key)
    if cur is None:
        table[key] = row
    elif cur.__class__ is int:
        if cur != row:
            table[key] = [cur, row]
    elif cur[-1] != row:  # rows arrive in ascending order; find_entities removes repeats
        cur.append(row)


def _rows(value) -> "tuple[int, ...] | list[int]":
    """The entity rows of a name-table value (see :func:`_add_row`)."""
    return (value,) if value.__class__ is int else value


def csr_index(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Group row indices by ``keys`` (values in ``[0, n)``): returns (ptr, order)."""
    order = np.argsort(keys, kind="stable").astype(np.int64)
    counts = np.bincount(keys, minlength=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, order


def _check_columns(
    entity_cols: tuple[Sized, ...],
    relation_cols: tuple[Sized, ...],
    literal_cols: tuple[Sized, ...],
    doc_cols: tuple[Sized, ...],
    triples: np.ndarray,
) -> None:
    """Raise :class:`WorldError` when a table's columns differ in length or a triple points outside the
    entity, relation or literal table."""
    for table, cols in (
        ("entity", entity_cols),
        ("relation", relation_cols),
        ("literal", literal_cols),
        ("document", doc_cols),
    ):
        if len({len(c) for c in cols}) > 1:
            raise WorldError(f"{table} columns have different lengths")
    if len(triples):
        n_ent, n_rel, n_lit = len(entity_cols[0]), len(relation_cols[0]), len(literal_cols[0])
        h, r, t = triples[:, 0], triples[:, 1], triples[:, 2]
        if h.min() < 0 or h.max() >= n_ent:
            raise WorldError("a triple head is outside the entity table")
        if r.min() < 0 or r.max() >= n_rel:
            raise WorldError("a triple relation is outside the relation table")
        if t.max() >= n_ent or (-t - 1).max() >= n_lit:
            raise WorldError("a triple tail is outside the entity/literal tables")


class World(LockFreePickling):
    """A knowledge graph and a corpus that search agents explore.

    Entities, relations and documents are addressed by their string ids. Triples point from an
    entity through a relation to an entity or a typed :class:`Literal`. Use
    :class:`WorldBuilder` to create one, or a loader / generator from :mod:`searchgym.world`.
    """

    def __init__(
        self,
        *,
        name: str,
        entity_ids: list[str],
        titles: list[str],
        aliases: list[tuple[str, ...]],
        descriptions: list[str],
        types: list[str],
        relation_ids: list[str],
        relation_labels: list[str],
        literal_values: list[str],
        literal_kinds: list[str],
        triples: np.ndarray,
        doc_ids: list[str],
        doc_titles: list[str],
        doc_texts: list[str],
        doc_entities: np.ndarray,
        metadata: dict | None = None,
    ) -> None:
        triples = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
        _check_columns(
            (entity_ids, titles, aliases, descriptions, types),
            (relation_ids, relation_labels),
            (literal_values, literal_kinds),
            (doc_ids, doc_titles, doc_texts, doc_entities),
            triples,
        )
        self.name = name
        self.metadata: dict = dict(metadata or {})
        self._ent_ids = entity_ids
        self._titles = titles
        self._aliases = aliases
        self._descs = descriptions
        self._types = types
        self._rel_ids = relation_ids
        self._rel_labels = relation_labels
        self._lit_values = literal_values
        self._lit_kinds = literal_kinds
        self._triples = triples
        self._doc_ids = doc_ids
        self._doc_titles = doc_titles
        self._doc_texts = doc_texts
        self._doc_ent = np.asarray(doc_entities, dtype=np.int64)
        self._index_ids()
        self._index_edges()
        self._lock = threading.Lock()
        self._doc_index: dict[str, int] | None = None
        self._exact: dict[str, int | list[int]] | None = None
        self._folded: dict[str, int | list[int]] | None = None

    def _index_ids(self) -> None:
        """Id -> row tables of entities and relations (a repeated id is a :class:`WorldError`) and of literals."""
        self._ent_index = {e: i for i, e in enumerate(self._ent_ids)}
        if len(self._ent_index) != len(self._ent_ids):
            raise WorldError("duplicate entity ids")
        self._rel_index = {r: i for i, r in enumerate(self._rel_ids)}
        if len(self._rel_index) != len(self._rel_ids):
            raise WorldError("duplicate relation ids")
        self._lit_index = {(k, v): i for i, (v, k) in enumerate(zip(self._lit_values, self._lit_kinds))}

    def _index_edges(self) -> None:
        """CSR indexes of each entity's out-edges, in-edges (entity tails) and linked documents."""
        n_ent = len(self._ent_ids)
        triples = self._triples
        heads = triples[:, 0]
        self._out_ptr, self._out_order = csr_index(heads, n_ent)
        tails = triples[:, 2]
        ent_tail_rows = np.nonzero(tails >= 0)[0]
        in_ptr, in_order = csr_index(tails[ent_tail_rows], n_ent)
        self._in_ptr, self._in_order = in_ptr, ent_tail_rows[in_order]
        linked = np.nonzero(self._doc_ent >= 0)[0]
        dptr, dorder = csr_index(self._doc_ent[linked], n_ent)
        self._doc_ptr, self._doc_order = dptr, linked[dorder]

    # ------------------------------------------------------------------ sizes
    @property
    def num_entities(self) -> int:
        """Number of entities (KG nodes other than literals)."""
        return len(self._ent_ids)

    @property
    def num_relations(self) -> int:
        """Number of distinct relations."""
        return len(self._rel_ids)

    @property
    def num_triples(self) -> int:
        """Number of facts, literal-valued ones included."""
        return int(self._triples.shape[0])

    @property
    def num_documents(self) -> int:
        """Number of corpus documents."""
        return len(self._doc_ids)

    def __repr__(self) -> str:
        return (
            f"World({self.name!r}, entities={self.num_entities}, relations={self.num_relations}, "
            f"triples={self.num_triples}, documents={self.num_documents})"
        )

    # --------------------------------------------------------------- entities
    @property
    def entity_ids(self) -> Sequence[str]:
        """Entity ids in storage order (index ``i`` ↔ :meth:`entity_at` ``(i)``)."""
        return self._ent_ids

    def has_entity(self, entity_id: str) -> bool:
        """Whether ``entity_id`` names an entity of this world."""
        return entity_id in self._ent_index

    def entity_index(self, entity_id: str) -> int:
        """Storage index of an entity id; raises :class:`KeyError` naming the id if unknown."""
        try:
            return self._ent_index[entity_id]
        except KeyError:
            raise NotFoundError(
                f"unknown entity id {entity_id!r} in world {self.name!r}; "
                "look entities up by name with World.find_entities()"
            ) from None

    def entity_at(self, index: int) -> Entity:
        """The entity stored at ``index``."""
        return Entity(
            self._ent_ids[index],
            self._titles[index],
            tuple(self._aliases[index]),
            self._descs[index],
            self._types[index],
        )

    def entity(self, entity_id: str) -> Entity:
        """The entity with id ``entity_id`` (KeyError if unknown)."""
        return self.entity_at(self.entity_index(entity_id))

    def title(self, entity_id: str) -> str:
        """Canonical title of an entity, without materialising it."""
        return self._titles[self.entity_index(entity_id)]

    def entities(self) -> Iterator[Entity]:
        """Every entity, in storage order."""
        for i in range(self.num_entities):
            yield self.entity_at(i)

    def _name_tables(self) -> tuple[dict[str, "int | list[int]"], dict[str, "int | list[int]"]]:
        """Lazily built name → entity-row tables (exact and normalised). A name held by one entity
        maps to its row, a shared name to a list of rows: at a million entities this keeps the
        tables small and quick to build."""
        if self._exact is None:
            with self._lock:
                if self._exact is None:
                    exact: dict[str, int | list[int]] = {}
                    for i, t in enumerate(self._titles):
                        _add_row(exact, t, i)
                    for i, al in enumerate(self._aliases):
                        for n in al:
                            _add_row(exact, n, i)
                    folded: dict[str, int | list[int]] = {}
                    for n, rows in exact.items():
                        key = normalize_name(n)
                        cur = folded.get(key)
                        folded[key] = rows if cur is None else [*_rows(cur), *_rows(rows)]
                    self._folded = folded
                    self._exact = exact
        assert self._folded is not None
        return self._exact, self._folded

    def find_entities(self, name: str, *, case_insensitive: bool = True) -> list[Entity]:
        """Entities whose title or an alias equals ``name``.

        Exact matches come first; with ``case_insensitive`` (default) matches after case-folding
        and whitespace collapsing follow. Several entities may share a name: all are returned,
        title matches before alias matches, then in storage order.
        """
        exact, folded = self._name_tables()
        idx = sorted(set(_rows(exact.get(name, ()))))
        norm = normalize_name(name)
        if case_insensitive:
            seen = set(idx)
            idx += sorted({i for i in _rows(folded.get(norm, ())) if i not in seen})
        idx.sort(key=lambda i: (self._titles[i] != name, normalize_name(self._titles[i]) != norm))
        return [self.entity_at(i) for i in idx]

    # -------------------------------------------------------------- relations
    def relation(self, relation_id: str) -> Relation:
        """The relation with id ``relation_id`` (KeyError if unknown)."""
        try:
            i = self._rel_index[relation_id]
        except KeyError:
            raise NotFoundError(f"unknown relation id {relation_id!r} in world {self.name!r}") from None
        return Relation(self._rel_ids[i], self._rel_labels[i])

    def relations(self) -> list[Relation]:
        """Every relation, in storage order."""
        return [Relation(i, lab) for i, lab in zip(self._rel_ids, self._rel_labels)]

    # ------------------------------------------------------------------ edges
    def _node(self, code: int) -> Node:
        if code >= 0:
            return self.entity_at(int(code))
        return self.literal_at(code)

    def _edge(self, src: int, row: int, direction: _Lit["out", "in"]) -> Edge:
        h, r, t = self._triples[row]
        rel = Relation(self._rel_ids[r], self._rel_labels[r])
        target = self._node(t) if direction == "out" else self.entity_at(int(h))
        return Edge(self.entity_at(src), rel, target, direction)

    def out_rows(self, index: int) -> np.ndarray:
        """Triple rows whose head is the entity at ``index`` (fast path for graph algorithms)."""
        return self._out_order[self._out_ptr[index] : self._out_ptr[index + 1]]

    def in_rows(self, index: int) -> np.ndarray:
        """Triple rows whose tail is the entity at ``index``."""
        return self._in_order[self._in_ptr[index] : self._in_ptr[index + 1]]

    @property
    def triple_array(self) -> np.ndarray:
        """``(N, 3)`` int64 array of (head index, relation index, tail code); tail code ``< 0`` is
        literal ``-code-1``. Read-only view for fast graph algorithms."""
        view = self._triples.view()
        view.flags.writeable = False
        return view

    def relation_at(self, index: int) -> Relation:
        """The relation stored at ``index``."""
        return Relation(self._rel_ids[index], self._rel_labels[index])

    def node_at(self, code: int) -> Node:
        """The entity (``code >= 0``) or literal (``code < 0``) a tail code refers to."""
        return self._node(code)

    def literal_at(self, code: int) -> Literal:
        """The literal a (negative) tail code refers to: literal ``-code-1``."""
        if code >= 0:
            raise InvalidArgumentError(f"tail code {code} names an entity; literal codes are negative")
        j = -int(code) - 1
        return Literal(self._lit_values[j], self._lit_kinds[j])

    def out_edges(self, entity_id: str) -> list[Edge]:
        """Facts with ``entity_id`` as head, in insertion order."""
        i = self.entity_index(entity_id)
        return [self._edge(i, int(row), "out") for row in self.out_rows(i)]

    def in_edges(self, entity_id: str) -> list[Edge]:
        """Facts with ``entity_id`` as (entity) tail, seen from that entity."""
        i = self.entity_index(entity_id)
        return [self._edge(i, int(row), "in") for row in self.in_rows(i)]

    def neighbors(self, entity_id: str, direction: _Lit["out", "in", "both"] = "both") -> list[Edge]:
        """Out-edges, in-edges or both (out first) of an entity."""
        if direction not in ("out", "in", "both"):
            raise InvalidArgumentError(f"direction must be 'out', 'in' or 'both', got {direction!r}")
        edges: list[Edge] = []
        if direction in ("out", "both"):
            edges += self.out_edges(entity_id)
        if direction in ("in", "both"):
            edges += self.in_edges(entity_id)
        return edges

    def degree(self, entity_id: str) -> int:
        """Number of out-edges plus in-edges of an entity."""
        i = self.entity_index(entity_id)
        return int(self._out_ptr[i + 1] - self._out_ptr[i] + self._in_ptr[i + 1] - self._in_ptr[i])

    def triples(self) -> Iterator[Triple]:
        """Every fact as a :class:`Triple`, in storage order."""
        for h, r, t in self._triples:
            tail: str | Literal
            if t >= 0:
                tail = self._ent_ids[t]
            else:
                j = -int(t) - 1
                tail = Literal(self._lit_values[j], self._lit_kinds[j])
            yield Triple(self._ent_ids[h], self._rel_ids[r], tail)

    # -------------------------------------------------------------- documents
    def _doc(self, i: int) -> Document:
        e = int(self._doc_ent[i])
        return Document(self._doc_ids[i], self._doc_titles[i], self._doc_texts[i], self._ent_ids[e] if e >= 0 else None)

    @property
    def doc_ids(self) -> Sequence[str]:
        """Document ids in storage order."""
        return self._doc_ids

    @property
    def doc_titles(self) -> Sequence[str]:
        """Document titles in storage order (index-aligned with :attr:`doc_texts`)."""
        return self._doc_titles

    @property
    def doc_texts(self) -> Sequence[str]:
        """Document bodies in storage order; what retrievers index."""
        return self._doc_texts

    def document_at(self, index: int) -> Document:
        """The document stored at ``index``."""
        return self._doc(index)

    def document(self, doc_id: str) -> Document:
        """The document with id ``doc_id`` (KeyError if unknown)."""
        if self._doc_index is None:
            with self._lock:
                if self._doc_index is None:
                    self._doc_index = {d: i for i, d in enumerate(self._doc_ids)}
        try:
            return self._doc(self._doc_index[doc_id])
        except KeyError:
            raise NotFoundError(f"unknown document id {doc_id!r} in world {self.name!r}") from None

    def documents(self) -> Iterator[Document]:
        """Every document, in storage order."""
        for i in range(self.num_documents):
            yield self._doc(i)

    def documents_of(self, entity_id: str) -> list[Document]:
        """Documents linked to an entity (usually its article)."""
        i = self.entity_index(entity_id)
        return [self._doc(int(j)) for j in self._doc_order[self._doc_ptr[i] : self._doc_ptr[i + 1]]]

    def has_document(self, entity_id: str) -> bool:
        """Whether at least one document is linked to the entity."""
        i = self.entity_index(entity_id)
        return bool(self._doc_ptr[i + 1] > self._doc_ptr[i])

    # --------------------------------------------------------------- analysis
    def to_networkx(self, *, include_literals: bool = True):
        """A ``networkx.MultiDiGraph`` view: entity-id nodes (plus ``lit:<i>`` literal nodes),
        edges keyed by relation id with a ``label`` attribute. Meant for analysis of small and
        medium worlds; the World itself is the fast path."""
        import networkx as nx

        g = nx.MultiDiGraph(name=self.name)
        for i, eid in enumerate(self._ent_ids):
            g.add_node(eid, title=self._titles[i], type=self._types[i])
        for h, r, t in self._triples:
            if t >= 0:
                tail = self._ent_ids[t]
            elif include_literals:
                j = -int(t) - 1
                tail = f"lit:{j}"
                g.add_node(tail, title=self._lit_values[j], type=self._lit_kinds[j], literal=True)
            else:
                continue
            g.add_edge(self._ent_ids[h], tail, key=self._rel_ids[r], label=self._rel_labels[r])
        return g

    def stats(self, top: int = 10) -> WorldStats:
        """Counts and distributions that describe the world (see :class:`WorldStats`)."""
        rel_counts = (
            np.bincount(self._triples[:, 1], minlength=self.num_relations) if self.num_triples else np.zeros(0, int)
        )
        order = np.argsort(-rel_counts, kind="stable")[:top]
        out_deg = np.diff(self._out_ptr) if self.num_entities else np.zeros(1, int)
        return WorldStats(
            name=self.name,
            entities=self.num_entities,
            relations=self.num_relations,
            triples=self.num_triples,
            literal_triples=int((self._triples[:, 2] < 0).sum()) if self.num_triples else 0,
            documents=self.num_documents,
            linked_documents=int((self._doc_ent >= 0).sum()),
            entity_types=dict(Counter(self._types).most_common()),
            top_relations=[(self._rel_labels[i], int(rel_counts[i])) for i in order if rel_counts[i] > 0],
            mean_out_degree=float(out_deg.mean()) if len(out_deg) else 0.0,
            max_out_degree=int(out_deg.max()) if len(out_deg) else 0,
        )

    # ------------------------------------------------------------ persistence
    def columns(self) -> WorldColumns:
        """The world's tables as stored (shared with the world, not copied: treat them as read-only)."""
        return WorldColumns(
            name=self.name,
            metadata=self.metadata,
            entity_ids=self._ent_ids,
            titles=self._titles,
            aliases=self._aliases,
            descriptions=self._descs,
            types=self._types,
            relation_ids=self._rel_ids,
            relation_labels=self._rel_labels,
            literal_values=self._lit_values,
            literal_kinds=self._lit_kinds,
            triples=self._triples,
            doc_ids=self._doc_ids,
            doc_titles=self._doc_titles,
            doc_texts=self._doc_texts,
            doc_entities=self._doc_ent,
        )

    @classmethod
    def from_columns(cls, columns: WorldColumns) -> "World":
        """A world over ``columns`` (checked as the constructor checks them; :class:`WorldError` if inconsistent)."""
        return cls(**{f.name: getattr(columns, f.name) for f in fields(columns)})

    def save(self, path, *, progress: bool = False, version: int | None = None) -> None:
        """Write the world to directory ``path`` (created if needed) in the documented format
        (the current version unless ``version`` names an older one that is still read)."""
        save_world(self, path, progress=progress, version=VERSION if version is None else version)

    @classmethod
    def load(cls, path, *, progress: bool = False) -> "World":
        """Read a world saved by :meth:`save`; raises :class:`~searchgym.world.storage.WorldFormatError`
        naming the file and the problem if the directory is missing, partial or corrupt."""
        return load_world(path, progress=progress)


class WorldBuilder:
    """Accumulates entities, relations, triples and documents, then freezes them into a World.

    Triples and documents may reference entities added later (streamed dumps arrive in any
    order); references are resolved in :meth:`build`. Dangling references either raise or are
    dropped and counted (``drop_dangling``), never silently kept.
    """

    def __init__(self, name: str = "world", *, metadata: dict | None = None) -> None:
        self.name = name
        self.metadata = dict(metadata or {})
        self._ent_index: dict[str, int] = {}
        self._ent_ids: list[str] = []
        self._titles: list[str] = []
        self._aliases: list[tuple[str, ...]] = []
        self._descs: list[str] = []
        self._types: list[str] = []
        self._rel_index: dict[str, int] = {}
        self._rel_ids: list[str] = []
        self._rel_labels: list[str] = []
        self._lit_index: dict[tuple[str, str], int] = {}
        self._lit_values: list[str] = []
        self._lit_kinds: list[str] = []
        self._t_head: list[str] = []
        self._t_rel: list[int] = []
        self._t_tail: list[str | int] = []  # entity id (str) or literal index (int)
        self._doc_ids: list[str] = []
        self._doc_id_set: set[str] = set()
        self._doc_titles: list[str] = []
        self._doc_texts: list[str] = []
        self._doc_ent: list[str | None] = []
        self.dropped: Counter = Counter()

    def has_entity(self, entity_id: str) -> bool:
        """Whether an entity with this id was added."""
        return entity_id in self._ent_index

    @property
    def num_entities(self) -> int:
        """Entities added so far."""
        return len(self._ent_ids)

    def add_entity(
        self, entity_id: str, title: str, aliases: Iterable[str] = (), description: str = "", type: str = "other"
    ) -> None:
        """Add an entity; a repeated id raises :class:`WorldError`."""
        if entity_id in self._ent_index:
            raise WorldError(f"duplicate entity id {entity_id!r}")
        if not title:
            raise WorldError(f"entity {entity_id!r} has an empty title")
        self._ent_index[entity_id] = len(self._ent_ids)
        self._ent_ids.append(entity_id)
        self._titles.append(title)
        self._aliases.append(tuple(a for a in dict.fromkeys(aliases) if a and a != title))
        self._descs.append(description)
        self._types.append(type)

    def add_relation(self, relation_id: str, label: str | None = None) -> None:
        """Add a relation (idempotent for the same id)."""
        if relation_id not in self._rel_index:
            self._rel_index[relation_id] = len(self._rel_ids)
            self._rel_ids.append(relation_id)
            self._rel_labels.append(label or relation_id)

    def add_triple(self, head: str, relation: str, tail: "str | Literal") -> None:
        """Add a fact; the relation is auto-registered (label = id) if not added before."""
        if relation not in self._rel_index:
            self.add_relation(relation)
        self._t_head.append(head)
        self._t_rel.append(self._rel_index[relation])
        if isinstance(tail, Literal):
            key = (tail.kind, tail.value)
            j = self._lit_index.get(key)
            if j is None:
                j = self._lit_index[key] = len(self._lit_values)
                self._lit_values.append(tail.value)
                self._lit_kinds.append(tail.kind)
            self._t_tail.append(j)
        else:
            self._t_tail.append(tail)

    def add_document(self, doc_id: str, title: str, text: str, entity: str | None = None) -> None:
        """Add a corpus document, optionally linked to an entity id."""
        if doc_id in self._doc_id_set:
            raise WorldError(f"duplicate document id {doc_id!r}")
        self._doc_id_set.add(doc_id)
        self._doc_ids.append(doc_id)
        self._doc_titles.append(title)
        self._doc_texts.append(text)
        self._doc_ent.append(entity)

    def _triple_rows(self, drop_dangling: bool) -> np.ndarray:
        """The added triples as ``(head row, relation row, tail code)``, dangling ones dropped and counted
        (``drop_dangling``) or refused naming the first."""
        idx = self._ent_index
        n = len(self._t_head)
        rows = np.empty((n, 3), dtype=np.int64)
        keep = np.ones(n, dtype=bool)
        for k, (h, r, t) in enumerate(zip(self._t_head, self._t_rel, self._t_tail)):
            hi = idx.get(h)
            ti: int | None = -t - 1 if isinstance(t, int) else idx.get(t)
            if hi is None or ti is None:
                if not drop_dangling:
                    missing = h if hi is None else t
                    raise WorldError(
                        f"triple ({h}, {self._rel_ids[r]}, {t}) references unknown entity {missing!r}; "
                        "add the entity or build(drop_dangling=True)"
                    )
                keep[k] = False
                self.dropped["dangling_triple"] += 1
                continue
            rows[k] = (hi, r, ti)
        return rows[keep]

    def _document_links(self, drop_dangling: bool) -> np.ndarray:
        """The entity row each added document describes (-1: none); a link to an unknown entity is dropped
        and counted (``drop_dangling``) or refused."""
        idx = self._ent_index
        doc_ent = np.full(len(self._doc_ids), -1, dtype=np.int64)
        for k, e in enumerate(self._doc_ent):
            if e is None:
                continue
            ei = idx.get(e)
            if ei is None:
                if not drop_dangling:
                    raise WorldError(f"document {self._doc_ids[k]!r} links to unknown entity {e!r}")
                self.dropped["dangling_document_link"] += 1
                continue
            doc_ent[k] = ei
        return doc_ent

    def build(self, *, drop_dangling: bool = False, dedupe: bool = True) -> World:
        """Freeze into a :class:`World`.

        ``drop_dangling``: triples/document links naming unknown entities are dropped and counted
        in :attr:`dropped` (otherwise :class:`WorldError` names the first one). ``dedupe`` removes
        repeated identical triples.
        """
        rows = self._triple_rows(drop_dangling)
        if dedupe and len(rows):
            _, first = np.unique(rows, axis=0, return_index=True)
            if len(first) != len(rows):
                self.dropped["duplicate_triple"] += len(rows) - len(first)
                rows = rows[np.sort(first)]
        doc_ent = self._document_links(drop_dangling)
        if self.dropped:
            logger.info("world %s: dropped %s", self.name, dict(self.dropped))
        return World(
            name=self.name,
            entity_ids=self._ent_ids,
            titles=self._titles,
            aliases=self._aliases,
            descriptions=self._descs,
            types=self._types,
            relation_ids=self._rel_ids,
            relation_labels=self._rel_labels,
            literal_values=self._lit_values,
            literal_kinds=self._lit_kinds,
            triples=rows,
            doc_ids=self._doc_ids,
            doc_titles=self._doc_titles,
            doc_texts=self._doc_texts,
            doc_entities=doc_ent,
            metadata={**self.metadata, "dropped": dict(self.dropped)} if self.dropped else self.metadata,
        )


def save_world(world: World, path, *, progress: bool = False, version: int = VERSION) -> None:
    """Write ``world`` to directory ``path`` in format ``version`` (see :mod:`searchgym.world.storage`)."""
    write_columns(world.columns(), path, progress=progress, version=version)


def load_world(path, *, progress: bool = False) -> World:
    """Read a world directory written by :func:`save_world`; raises
    :class:`~searchgym.world.storage.WorldFormatError` naming the file and the fix when it is missing,
    partial, corrupt, or holds tables that do not form a consistent world."""
    columns = read_columns(path, progress=progress)
    try:
        return World.from_columns(columns)
    except WorldError as exc:
        raise WorldFormatError(f"{Path(path)}: {exc}; rebuild the world") from None
