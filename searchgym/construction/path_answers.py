"""How many answers a subgraph's target path has in its world.

A question built on a path ("the child of the father of X") asks for every node the path's relation chain reaches
from its seed, not only for the path's last node: X's father has several children, so that question has several
answers and no Proposer can write a verifiable question on it. :func:`path_answers` follows the chain through the
world (each hop in the direction the path walked it) and returns the nodes it ends at; a subgraph is a
single-answer target when there is exactly one.
"""

from __future__ import annotations

from ..core.subgraph import Subgraph, literal_node_id

__all__ = ["path_answers", "single_answer"]


def _node_id(node) -> str:
    """An entity's id, or a literal's subgraph node id (``lit:kind:value``)."""
    entity_id = getattr(node, "id", None)
    return entity_id if entity_id is not None else literal_node_id(node.kind, node.value)


def path_answers(world, subgraph: Subgraph) -> set[str]:
    """The node ids the target path's relation chain reaches from its seed, each hop walked as the path walked it
    (``subgraph.forward``; all forward when it is empty). A literal ends a chain (it has no edges of its own)."""
    frontier = {subgraph.path[0]}
    forward = subgraph.forward or [True] * len(subgraph.relation_ids)
    for relation_id, ahead in zip(subgraph.relation_ids, forward):
        reached: set[str] = set()
        for node in frontier:
            if not world.has_entity(node):
                continue
            edges = world.out_edges(node) if ahead else world.in_edges(node)
            reached.update(_node_id(e.target) for e in edges if e.relation.id == relation_id)
        frontier = reached
    return frontier


def single_answer(world, subgraph: Subgraph) -> bool:
    """True when the target path's chain reaches exactly one node (its answer) from the seed."""
    return len(path_answers(world, subgraph)) == 1
