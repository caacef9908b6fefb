"""A seeded random world for construction tests and benchmarks (until/besides the synthetic world).

Deterministic for a given seed: entities of several types, relations with skewed frequencies
(a few generic, many specific), literal dates and quantities, documents for most entities.
"""

from __future__ import annotations

import random

from searchgym.world import Literal, WorldBuilder

RELATIONS = [
    ("instance_of", "instance of", 6.0),
    ("part_of", "part of", 3.0),
    ("located_in", "located in", 3.0),
    ("born_in", "place of birth", 2.0),
    ("employer", "employer", 1.5),
    ("member_of", "member of", 1.5),
    ("founded_by", "founded by", 1.0),
    ("capital", "capital", 0.5),
    ("spouse", "spouse", 0.5),
    ("award", "award received", 0.8),
    ("author", "author", 0.8),
    ("sibling", "sibling", 0.4),
]
TYPES = ["person", "location", "organisation", "work", "other"]


def build_random_world(
    num_entities: int = 300,
    *,
    seed: int = 0,
    out_degree: tuple[int, int] = (2, 6),
    doc_fraction: float = 0.8,
    name: str = "random",
):
    """A random world with ``num_entities`` entities (ids ``Q0..``) built from ``seed``."""
    rng = random.Random(seed)
    b = WorldBuilder(name)
    for rid, label, _w in RELATIONS:
        b.add_relation(rid, label)
    b.add_relation("inception", "inception")
    b.add_relation("population", "population")
    weights = [w for _r, _l, w in RELATIONS]
    for i in range(num_entities):
        b.add_entity(f"Q{i}", f"Entity {i}", aliases=[f"E-{i}"], type=TYPES[i % len(TYPES)])
    for i in range(num_entities):
        for _ in range(rng.randint(*out_degree)):
            j = rng.randrange(num_entities)
            if j != i:
                b.add_triple(f"Q{i}", rng.choices(RELATIONS, weights)[0][0], f"Q{j}")
        if rng.random() < 0.3:
            b.add_triple(f"Q{i}", "inception", Literal(str(rng.randint(1000, 2000)), "date"))
        if rng.random() < 0.1:
            b.add_triple(f"Q{i}", "population", Literal(str(rng.randint(10, 10**6)), "quantity"))
        if rng.random() < doc_fraction:
            b.add_document(f"D{i}", f"Entity {i}", f"Entity {i} is entity number {i}.", entity=f"Q{i}")
    return b.build()
