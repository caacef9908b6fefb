"""Why a KG Proposer's question was invalid, read against the path it was written on.

The RAG verifier says only ``verifier_incorrect``: its reader found no single answer in the materials. Whether the
question asked the wrong thing or its writer failed to retrieve what it asked about needs the target path:
:func:`invalid_kind` reads the question back into a seed and a relation chain (as the offline verifier does,
:func:`~searchgym.construction.path_answers.question_answers`) and follows it through the whole world, then
compares it with the target. A Proposer whose invalid questions are mostly ``wrong_relation`` needs to learn to
word relations, not to search; one whose questions are ``fewer_hops`` writes them short of the path.

Kinds (:data:`INVALID_KINDS`, checked in this order):

* ``several_answer_target``: the target path itself reaches several nodes from its seed ("the child of the father
  of X": every sibling), so no question on it has a single answer;
* ``misspelled_seed``: the question cannot be read, has a near miss of the seed's name ("Cyrankin Eirn" for "Cyrkan
  Eirn", :func:`misspelled_name`), and can be read with the name copied right: a name copied wrong, which sampling
  a small model at temperature 1 does to made-up names, not a wording the reader cannot follow;
* ``not_template_form``: the question cannot be read as a relation chain from a named seed (the verifier fell back
  to reading it by word overlap);
* ``other_seed``: it starts from another entity than the path's seed;
* ``fewer_hops`` / ``more_hops``: its chain is shorter / longer than the path;
* ``wrong_relation``: as many hops from the right seed, and the chain misses the answer (a relation worded as
  another, or walked the wrong way: "the capital of X" for "the place X is the capital of");
* ``ambiguous_question``: the chain reaches the answer and other nodes too;
* ``not_in_passages``: the chain reaches exactly the answer in the world: the question is right, and its writer's
  retrieved passages do not state every hop.

A question rejected by a rule filter keeps the filter's reason (``too_few_words``, ``answer_leak``, ...).
"""

from __future__ import annotations

import re
from collections import Counter
from difflib import SequenceMatcher
from typing import Iterable, Mapping, Optional

from ..construction.path_answers import path_answers, question_answers
from ..core.subgraph import Subgraph

__all__ = ["INVALID_KINDS", "NEAR_MISS_RATIO", "count_invalid_kinds", "invalid_kind", "misspelled_name"]

#: what :func:`invalid_kind` returns for a question the verifier judged incorrect, in the order it checks them
INVALID_KINDS = (
    "several_answer_target",
    "misspelled_seed",
    "not_template_form",
    "other_seed",
    "fewer_hops",
    "more_hops",
    "wrong_relation",
    "ambiguous_question",
    "not_in_passages",
)


#: how alike (``difflib`` ratio, 0-1) a run of the question's words must be to a name to count as that name
#: misspelled: "Cyrankin Eirn" for "Cyrkan Eirn" is 0.83, "Stotreskelle Trisula" for "Stotreskelle Trisova" 0.90;
#: two people of the default world who share a surname, "Gromarnric Nimen" and "Heithythia Nimen", 0.44
NEAR_MISS_RATIO = 0.8

_WORD = re.compile(r"[\w'-]+")


def misspelled_name(text: str, names: Iterable[str], ratio: float = NEAR_MISS_RATIO) -> Optional[tuple[str, str]]:
    """Where ``text`` names none of ``names`` exactly (case-insensitive, as whole words) but has a near miss of one:
    the near miss as written in ``text`` and the name it misses (the most alike run of as many words, at least
    ``ratio`` alike); None when a name is there or nothing comes close."""
    spans = list(_WORD.finditer(text))
    lowered = [m.group().lower() for m in spans]
    best: tuple[float, str, str] = (ratio, "", "")
    for name in names:
        want = [w.lower() for w in _WORD.findall(name)]
        k = len(want)
        for i in range(len(lowered) - k + 1) if k else ():
            if lowered[i : i + k] == want:
                return None
            alike = SequenceMatcher(None, " ".join(want), " ".join(lowered[i : i + k])).ratio()
            if alike >= best[0] and alike > 0:
                best = (alike, text[spans[i].start() : spans[i + k - 1].end()], name)
    return (best[1], best[2]) if best[1] else None


def invalid_kind(world, subgraph: Subgraph, question: Optional[str], reason: Optional[str]) -> Optional[str]:
    """Why ``question``, written on ``subgraph``'s target path and rejected for ``reason``, was invalid: one of
    :data:`INVALID_KINDS` when the verifier judged it incorrect, else ``reason`` itself (a rule filter's, or
    None for a valid question)."""
    if reason != "verifier_incorrect":
        return reason
    if len(path_answers(world, subgraph)) > 1:
        return "several_answer_target"
    readings = question_answers(world, question or "")
    if not readings:
        miss = misspelled_name(question or "", subgraph.nodes[subgraph.path[0]].names)
        if miss and question_answers(world, (question or "").replace(*miss)):  # readable with the name copied right
            return "misspelled_seed"
        return "not_template_form"
    answer, seed, hops = subgraph.path[-1], subgraph.path[0], len(subgraph.relation_ids)
    if any(r.answers == {answer} for r in readings):
        return "not_in_passages"
    if any(answer in r.answers for r in readings):
        return "ambiguous_question"
    from_seed = [r for r in readings if seed in r.seeds]
    if not from_seed:
        return "other_seed"
    if all(r.hops < hops for r in from_seed):
        return "fewer_hops"
    if all(r.hops > hops for r in from_seed):
        return "more_hops"
    return "wrong_relation"


def count_invalid_kinds(
    world, subgraphs: Mapping[str, Subgraph], records: Iterable[Mapping], *, key: str = "task"
) -> dict[str, int]:
    """Kind -> count over the invalid ones of ``records`` (Proposer records with ``valid``, ``question``, ``reason``
    and, under ``key``, the id of the subgraph the question was written on: ``task`` in the held-out evaluation's
    records, ``target`` in the trainer's metrics log; a record whose id is not in ``subgraphs`` counts as its
    ``reason``), most common first."""
    kinds: Counter = Counter()
    for r in records:
        if r.get("valid"):
            continue
        sg = subgraphs.get(str(r.get(key)))
        reason = r.get("reason")
        kinds[str(invalid_kind(world, sg, r.get("question"), reason) if sg is not None else reason)] += 1
    return dict(kinds.most_common())
