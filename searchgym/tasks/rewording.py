"""The same path question in other words: relation phrasings and sentence shapes the templates never use.

:func:`~searchgym.construction.question_templates.path_question` writes every question one way ("What place is the
capital of the region in which X is located?"). A model trained only on those learns to parse the
template, not to search: the shipped cold-start adapter answered 39 % of held-out 1-hop questions in
the benchmark's wording and 22 % of the same questions reworded. This module rewords a KG-grounded
task without changing its path or its answer:

* **Relation phrasings**: for each relation label (every relation of the default synthetic world;
  other labels get generic phrasings) two disjoint sets of noun-phrase templates, ``"train"`` and
  ``"heldout"``, none of them the template's own phrase. A phrasing with ``{x}'s`` is possessive
  ("{x}'s birthplace") and applies only where ``{x}`` is a name (or a possessive chain of one), so a
  clause never takes ``'s``; every set has non-possessive phrasings too. Possessives are held-out only.
* **Sentence shapes** (:data:`SHAPES`), also split: ``"train"`` has the question word first
  ("Which person is ...?"), imperatives ("Name ...", "Tell me ...") and a two-sentence form ("Let X be
  <all hops but the last>. What is <last hop of X>?"); ``"heldout"`` has the question word last
  ("... is who?"), an embedded question ("Do you know who ... is?"), "Can you identify ...?" and
  another two-sentence form ("Think of ... . Who is <last hop of that one>?"), and leans on possessives
  ("Z's mother's employer").

:func:`reword` draws one wording of a split for a subgraph from ``random.Random`` seeded by
(split, seed, task id) (:func:`~searchgym.core.rng_state.stable_seed`): the same inputs give the same
question in every process. A wording is kept only if it passes the Solver-question rule filters
(:data:`SOLVER_QUESTION_FILTERS`, i.e. :func:`~searchgym.scoring.question_filters.check_question` without the
trajectory rules) and names neither the answer (any alias) nor a bridge entity (:func:`question_leaks`)
outside the seed's own name (:func:`wording_problem`); otherwise the next draw is tried, and after
:data:`MAX_ATTEMPTS` the task keeps its template question.

:func:`reword_task` applies a wording to a task: ``"template"`` (unchanged), ``"train"``,
``"heldout"`` or ``"varied"`` (the template with probability :data:`P_TEMPLATE`, else a train wording:
what demonstrations and RL tasks use). Reworded held-out tasks keep their id and answers; their
``source`` gains ``-reworded`` so evaluation records of both wordings live side by side.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace
from typing import Iterable, Optional

from ..construction.question_templates import path_question, relation_key
from ..core.arg_checks import check_choice
from ..core.rng_state import stable_seed
from ..core.subgraph import Subgraph
from ..core.types import Task, Trajectory
from ..errors import InvalidArgumentError
from ..scoring.question_filters import FilterConfig, check_question

__all__ = [
    "SPLITS",
    "WORDINGS",
    "TRAINING_WORDINGS",
    "DEFAULT_TRAINING_WORDING",
    "SHAPES",
    "FORWARD_REWORDINGS",
    "INVERSE_REWORDINGS",
    "P_TEMPLATE",
    "MAX_ATTEMPTS",
    "SOLVER_QUESTION_FILTERS",
    "relation_rewordings",
    "question_leaks",
    "wording_problem",
    "reword",
    "reword_task",
    "reword_tasks",
]

SPLITS: tuple[str, ...] = ("train", "heldout")
#: what :func:`reword_task` accepts
WORDINGS: tuple[str, ...] = ("template", "varied", "train", "heldout")
#: the wordings training tasks may take (demonstrations, RL tasks): held-out wordings are for scoring only
TRAINING_WORDINGS: tuple[str, ...] = ("varied", "template", "train")
#: training tasks' default: the template or a train wording per task, which teaches searching, not template parsing
DEFAULT_TRAINING_WORDING = "varied"
#: share of ``"varied"`` tasks that keep the template question (the benchmark's and the Proposer's wording)
P_TEMPLATE = 1 / 3
#: draws tried before a task keeps its template question
MAX_ATTEMPTS = 8
#: the rule filters a Solver question must pass: :func:`check_question`'s text rules (length, SSP's substring
#: test for the answer) without the rules about the Proposer's rollout (searches, information) and without the
#: 10-word minimum (a 1-hop template question has 6-8 words). Aliases are checked as whole words by
#: :func:`question_leaks` instead: as substrings, an alias "CIT" would reject every "city".
SOLVER_QUESTION_FILTERS = FilterConfig(
    min_words=0, min_searches=0, require_information=False, forbid_duplicate_queries=False
)

# (train, heldout) noun-phrase templates naming the tail of a relation from its head {x}; "{x}'s" marks a
# possessive (held-out only). None is the relation's template phrase (templates.FORWARD_TEMPLATES).
FORWARD_REWORDINGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "place of birth": (
        ("the birthplace of {x}", "the town in which {x} was born", "the place {x} was born in"),
        ("{x}'s native town", "the native town of {x}", "the place of birth of {x}"),
    ),
    "place of death": (
        ("the place of death of {x}", "the town in which {x} died", "the place {x} died in"),
        ("{x}'s place of passing", "the town where {x} passed away"),
    ),
    "country of citizenship": (
        ("the country {x} is a citizen of", "the country whose citizenship {x} holds"),
        ("{x}'s country of citizenship", "the state that {x} is a national of"),
    ),
    "date of birth": (
        ("the birth date of {x}", "the day {x} was born"),
        ("{x}'s date of birth", "the day on which {x} came into the world"),
    ),
    "date of death": (
        ("the death date of {x}", "the day {x} died"),
        ("{x}'s date of death", "the day on which {x} passed away"),
    ),
    "educated at": (
        ("the school {x} attended", "the institution that educated {x}"),
        ("{x}'s alma mater", "the school that {x} went to"),
    ),
    "employer": (
        ("the organisation {x} worked for", "the organisation that employed {x}"),
        ("{x}'s employer", "the organisation that had {x} on its staff"),
    ),
    "member of": (
        ("the group {x} belongs to", "the organisation that counts {x} as a member"),
        ("{x}'s group", "the body that {x} has joined"),
    ),
    "member of sports team": (
        ("the club {x} played for", "the team that fielded {x}"),
        ("{x}'s club", "the side that {x} turned out for"),
    ),
    "award received": (
        ("an award given to {x}", "a prize that {x} won"),
        ("one of {x}'s awards", "an honour bestowed on {x}"),
    ),
    "spouse": (
        ("the person married to {x}", "the husband or wife of {x}"),
        ("{x}'s marriage partner", "the person whom {x} wed"),
    ),
    "child": (
        ("a son or daughter of {x}", "one of the children of {x}"),
        ("one of {x}'s children", "an offspring of {x}"),
    ),
    "father": (
        ("the man who fathered {x}", "the dad of {x}"),
        ("{x}'s father", "the man whose child is {x}"),
    ),
    "mother": (
        ("the woman who gave birth to {x}", "the mum of {x}"),
        ("{x}'s mother", "the woman whose child is {x}"),
    ),
    "languages spoken, written or signed": (
        ("a language that {x} spoke", "a tongue {x} could speak"),
        ("one of {x}'s languages", "a language known to {x}"),
    ),
    "participant in": (
        ("an event in which {x} participated", "an event {x} was involved in"),
        ("an event with {x} among its participants", "an event at which {x} was present"),
    ),
    "located in the administrative territorial entity": (
        ("the region that contains {x}", "the administrative region of {x}", "the area within which {x} lies"),
        ("{x}'s region", "the territory that {x} is part of", "the administrative unit containing {x}"),
    ),
    "capital": (
        ("the capital city of {x}", "the seat of government of {x}"),
        ("{x}'s capital", "the city that {x} is governed from"),
    ),
    "capital of": (
        ("the territory whose capital is {x}", "the region governed from {x}"),
        ("the land that has {x} as its capital", "the area administered from {x}"),
    ),
    "official language": (
        ("the language used officially in {x}", "the official tongue of {x}"),
        ("{x}'s official language", "the language that {x} uses for official business"),
    ),
    "population": (
        ("the number of inhabitants of {x}", "the number of people living in {x}"),
        ("{x}'s population", "the count of residents of {x}"),
    ),
    "area": (
        ("the size of {x} in square kilometres", "the surface area of {x}"),
        ("{x}'s area", "the number of square kilometres that {x} covers"),
    ),
    "inception": (
        ("the founding year of {x}", "the year {x} was established"),
        ("{x}'s year of founding", "the year that saw the creation of {x}"),
    ),
    "founded by": (
        ("the person who founded {x}", "the one who established {x}"),
        ("{x}'s founder", "the person who set up {x}"),
    ),
    "headquarters location": (
        ("the city in which {x} is headquartered", "the location of the head office of {x}"),
        ("{x}'s headquarters city", "the city that is home to the main office of {x}"),
    ),
    "country": (
        ("the country that {x} is in", "the country in which {x} lies"),
        ("{x}'s country", "the nation that {x} belongs to"),
    ),
    "location of formation": (
        ("the place in which {x} was founded", "the town where {x} came together"),
        ("{x}'s place of formation", "the place that saw the formation of {x}"),
    ),
    "head of state": (
        ("the chief of state of {x}", "the person serving as head of state in {x}"),
        ("{x}'s head of state", "the person who holds the highest office of state in {x}"),
    ),
    "head of government": (
        ("the leader of the government of {x}", "the person who heads the government of {x}"),
        ("{x}'s head of government", "the person in charge of governing {x}"),
    ),
    "author": (
        ("the writer of {x}", "the person who wrote {x}"),
        ("{x}'s author", "the person by whom {x} was written"),
    ),
    "publisher": (
        ("the company that published {x}", "the publishing house of {x}"),
        ("{x}'s publisher", "the firm that brought out {x}"),
    ),
    "publication date": (
        ("the publication date of {x}", "the date {x} came out"),
        ("{x}'s date of publication", "the date when {x} first appeared in print"),
    ),
    "director": (
        ("the person who directed {x}", "the one who directed {x}"),
        ("{x}'s director", "the person behind the direction of {x}"),
    ),
    "cast member": (
        ("an actor in {x}", "someone who acted in {x}"),
        ("one of {x}'s cast", "a person who appears in {x}"),
    ),
    "based on": (
        ("the work that {x} adapts", "the source work of {x}"),
        ("{x}'s source material", "the original work behind {x}"),
    ),
    "performer": (
        ("the artist who performed {x}", "the musician who recorded {x}"),
        ("{x}'s performer", "the act heard on {x}"),
    ),
    "country of origin": (
        ("the country that produced {x}", "the country {x} comes from"),
        ("{x}'s country of origin", "the nation where {x} was made"),
    ),
    "creator": (
        ("the person who created {x}", "the artist who made {x}"),
        ("{x}'s creator", "the person responsible for making {x}"),
    ),
    "collection": (
        ("the museum that holds {x}", "the collection where {x} is kept"),
        ("the collection {x} belongs to", "the institution that owns {x}"),
    ),
    "depicts": (
        ("the subject of {x}", "the thing shown in {x}"),
        ("{x}'s subject", "what is portrayed in {x}"),
    ),
    "location": (
        ("the venue of {x}", "the place in which {x} was held"),
        ("{x}'s location", "the site of {x}"),
    ),
    "point in time": (
        ("the date of {x}", "the day {x} happened"),
        ("{x}'s date", "the time at which {x} occurred"),
    ),
    "start time": (
        ("the start date of {x}", "the day {x} began"),
        ("{x}'s starting date", "the date when {x} got under way"),
    ),
    "end time": (
        ("the end date of {x}", "the day {x} finished"),
        ("{x}'s closing date", "the date when {x} came to an end"),
    ),
    "part of": (
        ("the event that included {x}", "the wider event containing {x}"),
        ("{x}'s parent event", "the broader conflict or event that {x} belonged to"),
    ),
    "participant": (
        ("someone who took part in {x}", "a party involved in {x}"),
        ("one of {x}'s participants", "a contender in {x}"),
    ),
    "signatory": (
        ("a party that signed {x}", "one of the signers of {x}"),
        ("one of {x}'s signatories", "a party whose signature is on {x}"),
    ),
    "organizer": (
        ("the organisation that organises {x}", "the body that runs {x}"),
        ("{x}'s organiser", "the group responsible for staging {x}"),
    ),
    "conferred by": (
        ("the organisation that awards {x}", "the body presenting {x}"),
        ("{x}'s awarding body", "the institution that hands out {x}"),
    ),
    "named after": (
        ("the person {x} is named for", "the namesake of {x}"),
        ("{x}'s eponym", "the person honoured in the name of {x}"),
    ),
}

# (train, heldout) templates naming the head of a relation from its tail {x} (a path walking the edge backwards)
INVERSE_REWORDINGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "place of birth": (
        ("someone whose birthplace is {x}", "a native of {x}"),
        ("one of {x}'s natives", "somebody from {x} by birth"),
    ),
    "capital": (
        ("the country governed from {x}", "the state that has {x} as its capital"),
        ("the nation whose seat of power is {x}", "the country with {x} as capital city"),
    ),
    "headquarters location": (
        ("an organisation based in {x}", "a company with its head office in {x}"),
        ("an organisation whose main office is in {x}", "a body that has its base in {x}"),
    ),
    "employer": (
        ("a person who worked for {x}", "an employee of {x}"),
        ("one of {x}'s employees", "a member of staff of {x}"),
    ),
    "educated at": (
        ("a former student of {x}", "a person educated at {x}"),
        ("one of {x}'s alumni", "a graduate of {x}"),
    ),
    "founded by": (
        ("an organisation that {x} established", "a body started by {x}"),
        ("one of {x}'s foundations", "an organisation whose founder is {x}"),
    ),
    "author": (
        ("a book by {x}", "a work that {x} wrote"),
        ("one of {x}'s works", "a text authored by {x}"),
    ),
    "spouse": FORWARD_REWORDINGS["spouse"],
    "country": (
        ("a place located in {x}", "a place within the country {x}"),
        ("one of {x}'s places", "a locality inside {x}"),
    ),
}

# labels neither table knows ({label} is the relation key)
_GENERIC_FORWARD = (
    ("the {label} associated with {x}", "the {label} that belongs to {x}"),
    ("{x}'s {label}", "the {label} linked to {x}"),
)
_GENERIC_INVERSE = (
    ("something that has {x} as its {label}", "an entity whose {label} is given as {x}"),
    ("an entity with {label} {x}", "whatever lists {x} as its {label}"),
)

#: sentence shapes per split; ``{Wh}`` / ``{wh}``: the question word for the answer's type, ``{np}``: the
#: whole noun phrase, ``{inner}``: all hops but the last, ``{outer}``: the last hop of the placeholder
SHAPES: dict[str, dict[str, str]] = {
    "train": {
        "wh_first": "{Wh} is {np}?",
        "name": "Name {np}.",
        "tell": "Tell me {np}.",
        "let_x": "Let X be {inner}. {Wh} is {outer}?",
    },
    "heldout": {
        "wh_last": "{NP} is {wh}?",
        "do_you_know": "Do you know {wh} {np} is?",
        "identify": "Can you identify {np}?",
        "think_of": "Think of {inner}. {Wh} is {outer}?",
    },
}
_PLACEHOLDER = {"let_x": "X", "think_of": "that one"}
_WH_FIRST = {
    "person": ("Who", "Which person"),
    "location": ("What place", "Which place"),
    "organisation": ("Which organisation", "What organisation"),
}
_WH_LAST = {"person": "who", "location": "which place", "organisation": "which organisation"}
#: held-out draws use a possessive phrasing with this chance wherever one applies (a name or a possessive chain)
_P_POSSESSIVE = 0.6
_POSSESSIVE = "{x}'s"
_SEED_MARK = "\u00a7"  # §
_FUNCTION_WORDS = frozenset("the a an of in on at to for by and or".split())


def relation_rewordings(label: str, split: str, *, forward: bool = True) -> tuple[str, ...]:
    """The noun-phrase templates (with ``{x}``) of ``split`` for following ``label`` forward (or back)."""
    if split not in SPLITS:
        raise InvalidArgumentError(f"split must be 'train' or 'heldout', got {split!r}")
    key = relation_key(label)
    table, generic = (FORWARD_REWORDINGS, _GENERIC_FORWARD) if forward else (INVERSE_REWORDINGS, _GENERIC_INVERSE)
    pair = table.get(key)
    if pair is None:
        pair = (
            tuple(t.replace("{label}", key) for t in generic[0]),
            tuple(t.replace("{label}", key) for t in generic[1]),
        )
    return pair[SPLITS.index(split)]


def _possessive(x: str) -> str:
    return x + ("'" if x.endswith("s") else "'s")


def _apply(template: str, x: str) -> str:
    """``template`` with ``x`` put in (``{x}'s`` as the English possessive of ``x``)."""
    return template.replace(_POSSESSIVE, _possessive(x)).replace("{x}", x)


def _render_hops(hops: list[tuple[str, bool]], start: str, split: str, rng: random.Random) -> str:
    """The noun phrase for following ``hops`` (label, forward) from ``start`` (a name), one phrasing per hop
    drawn with ``rng``; possessive phrasings only where the phrase so far is a name or a possessive chain."""
    phrase, name_like = start, True
    for label, forward in hops:
        options = relation_rewordings(label, split, forward=forward)
        possessive = [t for t in options if _POSSESSIVE in t] if name_like else []
        plain = [t for t in options if _POSSESSIVE not in t]
        use_possessive = bool(possessive) and rng.random() < _P_POSSESSIVE
        template = rng.choice(possessive if use_possessive else plain)
        name_like = use_possessive and template.startswith(_POSSESSIVE)
        phrase = _apply(template, phrase)
    return phrase


def _draw(subgraph: Subgraph, split: str, rng: random.Random) -> tuple[str, str]:
    """One ``(shape name, question)`` of ``split`` for ``subgraph``."""
    hops = list(zip(subgraph.relations, subgraph.forward))
    seed_name = subgraph.nodes[subgraph.path[0]].title
    kind = subgraph.answer_node.type
    shape = rng.choice(sorted(SHAPES[split]))
    frame = SHAPES[split][shape]
    wh_first = rng.choice(_WH_FIRST.get(kind, ("What",)))
    if shape in _PLACEHOLDER:
        inner = _render_hops(hops[:-1], seed_name, split, rng)
        outer = _render_hops(hops[-1:], _PLACEHOLDER[shape], split, rng)
        return shape, frame.format(inner=inner, outer=outer, Wh=wh_first)
    np = _render_hops(hops, seed_name, split, rng)
    return shape, frame.format(np=np, NP=np[:1].upper() + np[1:], Wh=wh_first, wh=_WH_LAST.get(kind, "what"))


def question_leaks(question: str, subgraph: Subgraph) -> list[str]:
    """The names of ``subgraph``'s answer (title and aliases) and bridge entities (every node between the seed
    and the answer) that stand in ``question`` as whole words, case-insensitive: what a question must not say.
    Names made only of function words (an alias "The" of "The Works") are not names a question can avoid."""
    low = question.lower()
    return [
        name
        for name in dict.fromkeys(subgraph.answer_aliases + subgraph.bridge_names)
        if set(name.lower().split()) - _FUNCTION_WORDS
        and re.search(rf"(?<!\w){re.escape(name.strip().lower())}(?!\w)", low)
    ]


def _seed_masked(question: str, subgraph: Subgraph) -> str:
    """``question`` with the seed's name replaced by a sign no name contains."""
    return question.replace(subgraph.nodes[subgraph.path[0]].title, _SEED_MARK)


def wording_problem(question: str, task: Task) -> Optional[str]:
    """Why ``question`` cannot stand for KG task ``task``, or None when it may: a rule filter's reason code
    (:data:`SOLVER_QUESTION_FILTERS`), or ``"bridge_leak"`` when it names a bridge entity (:func:`question_leaks`).

    The seed is the one name every wording of a path question says, so both checks read the question with the
    seed's name masked: a seed whose own name contains the answer (a club named after its home town) leaks in
    every wording, the template's included, and that is the task's affair, not the wording's."""
    sg = task.subgraph
    if sg is None:
        raise InvalidArgumentError(f"task {task.id!r} has no KG subgraph: only path questions can be reworded")
    masked = _seed_masked(question, sg)
    result = check_question(
        masked, task.answers, Trajectory(role="solver", task=task, prompt=""), SOLVER_QUESTION_FILTERS
    )
    if not result.ok:
        return result.reason
    leaked = question_leaks(masked, sg)
    if leaked:
        return "answer_leak" if set(leaked) & set(sg.answer_aliases) else "bridge_leak"
    return None


def reword(task: Task, split: str, *, seed: int = 0) -> Optional[tuple[str, str]]:
    """``(shape, question)``: ``task``'s question in a wording of ``split`` (``"train"`` or ``"heldout"``),
    drawn from (split, seed, task id); None when no draw of :data:`MAX_ATTEMPTS` passes :func:`wording_problem`
    or differs from the template question."""
    if split not in SPLITS:
        raise InvalidArgumentError(f"split must be 'train' or 'heldout', got {split!r}")
    sg = task.subgraph
    if sg is None:
        raise InvalidArgumentError(f"task {task.id!r} has no KG subgraph: only path questions can be reworded")
    template = path_question(sg)
    for attempt in range(MAX_ATTEMPTS):
        shape, question = _draw(sg, split, random.Random(stable_seed("reword", split, seed, task.id, attempt)))
        if question != template and wording_problem(question, task) is None:
            return shape, question
    return None


def reword_task(task: Task, wording: str, *, seed: int = 0) -> Task:
    """A copy of KG task ``task`` in ``wording`` (:data:`WORDINGS`): ``"template"`` returns it unchanged;
    ``"train"`` / ``"heldout"`` a wording of that split; ``"varied"`` the template question with probability
    :data:`P_TEMPLATE` (drawn from seed and task id), else a train wording. ``metadata`` records ``wording``
    (the split used, ``"template"`` when the task kept its question), ``wording_shape`` and
    ``template_question``; held-out copies get ``source`` ``<source>-reworded`` (distinct evaluation keys)."""
    check_choice("wording", wording, WORDINGS)
    if wording == "template":
        return task
    split = wording
    if wording == "varied":
        keep = random.Random(stable_seed("varied", seed, task.id)).random() < P_TEMPLATE
        if keep:
            return replace(task, metadata={**task.metadata, "wording": "template"})
        split = "train"
    drawn = reword(task, split, seed=seed)
    shape, question = drawn if drawn is not None else ("template", task.question)
    meta = {
        **task.metadata,
        "wording": split if drawn is not None else "template",
        "wording_shape": shape,
        "template_question": task.question,
    }
    source = f"{task.source}-reworded" if split == "heldout" else task.source
    return replace(task, question=question, source=source, metadata=meta)


def reword_tasks(tasks: Iterable[Task], wording: str, *, seed: int = 0) -> list[Task]:
    """:func:`reword_task` over ``tasks`` (tasks without a subgraph are an error unless ``wording`` is
    ``"template"``)."""
    return [reword_task(t, wording, seed=seed) for t in tasks]
