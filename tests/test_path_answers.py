"""construction.path_answers: every node a target path's relation chain reaches, so targets whose question can
have no single answer ("the child of the father of X": X's siblings) are told apart from single-answer ones."""

from __future__ import annotations

from searchgym.construction.path_answers import path_answers, single_answer
from searchgym.core.subgraph import Subgraph, SubgraphNode
from tests.support.env_helpers import tiny_subgraph


def _chain(world, path, relation_ids, forward=()):
    nodes = {n: SubgraphNode(n, world.title(n), (), "person") for n in path}
    return Subgraph(
        id="t",
        seed=path[0],
        path=list(path),
        relations=list(relation_ids),
        relation_ids=list(relation_ids),
        nodes=nodes,
        forward=list(forward),
    )


def _siblings(world):
    """A person, their father and two of the father's children (the person among them or not)."""
    for person in world.entity_ids:
        fathers = [e.target.id for e in world.out_edges(person) if e.relation.id == "P22"]
        for father in fathers:
            children = sorted({e.target.id for e in world.out_edges(father) if e.relation.id == "P40"})
            if len(children) >= 2:
                return person, father, children
    raise AssertionError("the default world has no father with two children")


def test_a_path_that_returns_to_a_family_has_every_sibling_as_an_answer(default_world):
    person, father, children = _siblings(default_world)
    other = next(c for c in children if c != person)
    sg = _chain(default_world, [person, father, other], ["P22", "P40"])
    assert path_answers(default_world, sg) == set(children) and not single_answer(default_world, sg)
    # walked the other way round, "the father of X" from a child is one node
    up = _chain(default_world, [other, father], ["P22"])
    assert path_answers(default_world, up) == {father} and single_answer(default_world, up)
    # a hop walked backwards follows the edge into the node: the father, reached from one child
    back = _chain(default_world, [father, other], ["P22"], forward=[False])
    assert other in path_answers(default_world, back)


def test_the_tiny_target_path_has_one_answer(tiny_world):
    sg = tiny_subgraph()
    assert path_answers(tiny_world, sg) == {sg.path[-1]} and single_answer(tiny_world, sg)


def test_every_held_out_target_reaches_its_own_answer(default_world):
    from searchgym.training.learning_checks import heldout_proposer_tasks

    tasks = heldout_proposer_tasks(default_world, 64)
    ends = [path_answers(default_world, t.subgraph) for t in tasks]
    assert all(t.subgraph.path[-1] in e for t, e in zip(tasks, ends))
    assert 0 < sum(len(e) > 1 for e in ends) < len(tasks)  # the set mixes both kinds (the benchmark reports each)
