"""Why a held-out Proposer question was invalid, read against its target path, on the default world's held-out
targets and questions the shipped cold start and trained runs wrote for them (bench_selfplay's records)."""

from __future__ import annotations

import pytest

from searchgym.construction.path_answers import question_answers
from searchgym.construction.question_templates import path_question
from searchgym.evaluation.proposer_errors import INVALID_KINDS, count_invalid_kinds, invalid_kind, misspelled_name
from searchgym.training.learning_checks import heldout_proposer_tasks
from searchgym.world.synthetic import default_world


@pytest.fixture(scope="module")
def targets():
    world = default_world()
    return world, {t.id: t.subgraph for t in heldout_proposer_tasks(world, 64)}


# (target, a question written on it, why it is invalid): each a question a model wrote in the benchmark
WRITTEN = [
    ("h2:sg000005", "What place is the region in which the capital of Wourndal is located?", "wrong_relation"),
    ("h2:sg000050", "Who is the child of the father of Nernor Caaiv?", "several_answer_target"),
    ("h2:sg000023", "Who is the member of the child of Stotreskelle Jofaerik?", "not_template_form"),
    (
        "h2:sg000057",
        "What place is the region in which the place where Cyrankin Eirn died is located?",
        "misspelled_seed",
    ),
    ("h2:sg000081", "What is the date on which the father of Stotreskelle Trisula died?", "misspelled_seed"),
    (
        "h3:sg000139",
        "What place is the region in which the city where Shor Museum of Art has its headquarters is located?",
        "fewer_hops",
    ),
    (
        "h2:sg000182",
        "What place is the population of the head of government of the place where Ciskeirek Draskar was born?",
        "more_hops",
    ),
    (
        "h3:sg000102",
        "Who is the capital of the region in which the place where Doria Cousaesk died is located?",
        "ambiguous_question",
    ),
]


@pytest.mark.parametrize("target, question, kind", WRITTEN)
def test_a_rejected_question_is_read_against_its_path(targets, target, question, kind):
    world, subgraphs = targets
    assert invalid_kind(world, subgraphs[f"bench-v1-{target}"], question, "verifier_incorrect") == kind


def test_the_paths_own_question_is_right_so_the_passages_lacked_a_hop(targets):
    world, subgraphs = targets
    sg = subgraphs["bench-v1-h2:sg000005"]
    question = path_question(sg)
    (reading,) = question_answers(world, question)
    assert reading.answers == {sg.path[-1]} and reading.hops == 2 and sg.path[0] in reading.seeds
    assert invalid_kind(world, sg, question, "verifier_incorrect") == "not_in_passages"
    # the same question against another target (another answer) starts from another entity
    assert invalid_kind(world, subgraphs["bench-v1-h2:sg000182"], question, "verifier_incorrect") == "other_seed"
    assert question_answers(world, "Which came first, the hen or the egg?") == []


def test_filter_reasons_and_valid_questions_pass_through(targets):
    world, subgraphs = targets
    sg = subgraphs["bench-v1-h2:sg000005"]
    assert invalid_kind(world, sg, "Who is the mother?", "too_few_words") == "too_few_words"
    assert invalid_kind(world, sg, path_question(sg), None) is None
    records = [
        {"task": "bench-v1-h2:sg000005", "valid": True, "question": path_question(sg), "reason": None},
        *(
            {"task": f"bench-v1-{t}", "valid": False, "question": q, "reason": "verifier_incorrect"}
            for t, q, _ in WRITTEN
        ),
        {"task": "bench-v1-h2:sg000050", "valid": False, "question": None, "reason": "no_question"},
        {"task": "not-a-target", "valid": False, "question": "x", "reason": "verifier_incorrect"},
    ]
    counts = count_invalid_kinds(world, subgraphs, records)
    assert sum(counts.values()) == len(records) - 1  # the valid one is not counted
    assert counts["no_question"] == 1 and counts["verifier_incorrect"] == 1  # an unknown target keeps its reason
    assert {k for k in counts if k in INVALID_KINDS} == {kind for _, _, kind in WRITTEN}


def test_a_misspelled_seed_is_a_near_miss_that_reads_once_copied_right(targets):
    world, subgraphs = targets
    assert misspelled_name("the place where Cyrankin Eirn died", ["Cyrkan Eirn"]) == ("Cyrankin Eirn", "Cyrkan Eirn")
    assert misspelled_name("the place where cyrkan eirn died", ["Cyrkan Eirn"]) is None  # named, whatever the case
    assert misspelled_name("the place where Heithythia Nimen died", ["Gromarnric Nimen"]) is None  # another person
    assert misspelled_name("Who wrote it?", ["Cyrkan Eirn"]) is None
    # a near miss in a question that would not read even with the name right stays unreadable
    sg = subgraphs["bench-v1-h2:sg000057"]
    garbled = "Which place gives the winner of Cyrankin Eirn by copy?"
    assert misspelled_name(garbled, sg.nodes[sg.path[0]].names) is not None
    assert invalid_kind(world, sg, garbled, "verifier_incorrect") == "not_template_form"
