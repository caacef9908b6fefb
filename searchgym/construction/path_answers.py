"""How many answers a subgraph's target path has in its world.

A question built on a path ("the child of the father of X") asks for every node the path's relation chain reaches
from its seed, not only for the path's last node: X's father has several children, so that question has several
answers and no Proposer can write a verifiable question on it. :func:`path_answers` follows the chain through the
world (each hop in the direction the path walked it) and returns the nodes it ends at; a subgraph is a
single-answer target when there is exactly one.

:func:`question_answers` does the same for a question: it reads a question in the template form back into its seed
and relation chain (as the offline RAG verifier reads it) and follows the chain through the whole world, so what a
question asks can be compared with the path it was written on, whatever the passages its writer retrieved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..core.subgraph import Subgraph, literal_node_id
from .question_templates import read_path_question, relation_key

__all__ = ["QuestionReading", "path_answers", "question_answers", "single_answer"]


def _node_id(node) -> str:
    """An entity's id, or a literal's subgraph node id (``lit:kind:value``)."""
    entity_id = getattr(node, "id", None)
    return entity_id if entity_id is not None else literal_node_id(node.kind, node.value)


def _hop(world, frontier: set[str], ahead: bool, keep: Callable[[Any], bool]) -> set[str]:
    """The nodes one hop from ``frontier`` along the edges ``keep`` accepts, walked forward (head to tail) when
    ``ahead``, else backward. A literal ends a chain (it has no edges of its own)."""
    reached: set[str] = set()
    for node in frontier:
        if world.has_entity(node):
            edges = world.out_edges(node) if ahead else world.in_edges(node)
            reached.update(_node_id(e.target) for e in edges if keep(e))
    return reached


def path_answers(world, subgraph: Subgraph) -> set[str]:
    """The node ids the target path's relation chain reaches from its seed, each hop walked as the path walked it
    (``subgraph.forward``; all forward when it is empty). A literal ends a chain (it has no edges of its own)."""
    frontier = {subgraph.path[0]}
    forward = subgraph.forward or [True] * len(subgraph.relation_ids)
    for relation_id, ahead in zip(subgraph.relation_ids, forward):
        frontier = _hop(world, frontier, ahead, lambda e: e.relation.id == relation_id)
    return frontier


def single_answer(world, subgraph: Subgraph) -> bool:
    """True when the target path's chain reaches exactly one node (its answer) from the seed."""
    return len(path_answers(world, subgraph)) == 1


@dataclass(frozen=True)
class QuestionReading:
    """One reading of a template-form question: the entities its innermost name may be (``seeds``, every
    namesake), its hop count, and the nodes its relation chain reaches from them through the world (``answers``:
    entity ids and literal node ids)."""

    seeds: frozenset
    hops: int
    answers: frozenset


def question_answers(world, question: str) -> list[QuestionReading]:
    """The readings of ``question`` (:func:`~searchgym.construction.question_templates.read_path_question`, with
    the world's relation labels and exact entity names), each followed through every fact of ``world``; ``[]``
    when the question is not in the template form. A hop matches a triple whose relation label reads as one of
    the hop's relation keys, walked in the hop's direction."""
    keys = [relation_key(r.label) for r in world.relations()]
    out = []
    for seed_text, hops in read_path_question(question, lambda text: bool(world.find_entities(text)), keys):
        seeds = frozenset(e.id for e in world.find_entities(seed_text))
        frontier = set(seeds)
        for hop_keys, ahead in hops:
            frontier = _hop(world, frontier, ahead, lambda e: relation_key(e.relation.label) in hop_keys)
        out.append(QuestionReading(seeds, len(hops), frozenset(frontier)))
    return out
