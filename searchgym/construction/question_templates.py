"""Natural-language questions from KG paths: nested relation templates.

A path ``v0 -r1-> v1 -r2-> v2`` becomes "What is <r2 phrase of <r1 phrase of v0>>?", e.g.
"What is the capital of the place in which the place where Alice Varn was born is located?".
Each relation label maps to a forward phrase (the tail described from the head) and an inverse
phrase (the head described from the tail, for edges the path walks backwards); unknown labels
fall back to "the {label} of X" / "the entity whose {label} is X".

:func:`read_path_question` is the inverse: it reads such a question back into its seed and the
relation chain from the seed outwards, so an offline reader can follow the chain hop by hop through
its materials (:class:`~searchgym.scoring.extractive_reader.ExtractiveReader`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable, Iterable, Optional

from ..core.subgraph import Subgraph, SubgraphNode
from ..errors import SearchGymError

__all__ = [
    "FORWARD_TEMPLATES",
    "INVERSE_TEMPLATES",
    "relation_key",
    "relation_phrase",
    "path_phrases",
    "path_question",
    "noun_for",
    "Hop",
    "read_path_question",
]

# forward: phrase naming the tail given the head phrase {x}
FORWARD_TEMPLATES: dict[str, str] = {
    "place of birth": "the place where {x} was born",
    "born in": "the place where {x} was born",
    "place of death": "the place where {x} died",
    "located in": "the place in which {x} is located",
    "located in the administrative territorial entity": "the region in which {x} is located",
    "country": "the country of {x}",
    "capital": "the capital of {x}",
    "capital of": "the place of which {x} is the capital",
    "headquarters location": "the city where {x} has its headquarters",
    "employer": "the employer of {x}",
    "educated at": "the institution where {x} studied",
    "alma mater": "the institution where {x} studied",
    "founded by": "the founder of {x}",
    "founder": "the founder of {x}",
    "author": "the author of {x}",
    "director": "the director of {x}",
    "spouse": "the spouse of {x}",
    "father": "the father of {x}",
    "mother": "the mother of {x}",
    "child": "a child of {x}",
    "member of": "the group that {x} is a member of",
    "country of citizenship": "the country of which {x} is a citizen",
    "inception": "the year in which {x} was founded",
    "date of birth": "the date on which {x} was born",
    "date of death": "the date on which {x} died",
    "population": "the population of {x}",
    "head of government": "the head of government of {x}",
    "official language": "the official language of {x}",
    "currency": "the currency of {x}",
    "occupation": "the occupation of {x}",
    "field of work": "the field in which {x} works",
    "notable work": "a notable work of {x}",
    "award received": "an award received by {x}",
    "manufacturer": "the manufacturer of {x}",
    "developer": "the developer of {x}",
    "publisher": "the publisher of {x}",
    "parent organization": "the parent organisation of {x}",
    "continent": "the continent on which {x} lies",
    "instance of": "the kind of thing {x} is",
    "area": "the area in square kilometres of {x}",
    "head of state": "the head of state of {x}",
    "country of origin": "the country of origin of {x}",
    "location of formation": "the place where {x} was formed",
    "member of sports team": "the team that {x} played for",
    "languages spoken, written or signed": "a language spoken by {x}",
    "conferred by": "the body that confers {x}",
    "named after": "the person after whom {x} is named",
    "part of": "the larger event that {x} was part of",
    "participant": "a participant of {x}",
    "participant in": "an event that {x} took part in",
    "performer": "the performer of {x}",
    "cast member": "a cast member of {x}",
    "creator": "the creator of {x}",
    "depicts": "what {x} depicts",
    "collection": "the collection that holds {x}",
    "based on": "the work {x} is based on",
    "organizer": "the organiser of {x}",
    "signatory": "a signatory of {x}",
    "start time": "the date on which {x} started",
    "end time": "the date on which {x} ended",
    "point in time": "the date on which {x} took place",
    "publication date": "the date on which {x} was published",
    "location": "the place where {x} took place",
}

# inverse: phrase naming the head given the tail phrase {x}
INVERSE_TEMPLATES: dict[str, str] = {
    "place of birth": "a person born in {x}",
    "born in": "a person born in {x}",
    "located in": "a place located in {x}",
    "capital": "the country whose capital is {x}",
    "headquarters location": "an organisation headquartered in {x}",
    "employer": "someone employed by {x}",
    "educated at": "someone who studied at {x}",
    "founded by": "an organisation founded by {x}",
    "author": "a work written by {x}",
    "spouse": "the spouse of {x}",
    "country": "a place in the country {x}",
}

_NOUNS = {
    "person": "Who",
    "location": "What place",
    "organisation": "Which organisation",
    "date": "When",
    "number": "What number",
}


def relation_key(label: str) -> str:
    """A relation label as the templates key it: lowercase, ``_`` as a space, single spaces."""
    return " ".join(label.lower().replace("_", " ").split())


def relation_phrase(label: str, x: str, *, forward: bool = True) -> str:
    """The noun phrase for following ``label`` from ``x`` (forward) or back to ``x`` (inverse)."""
    key = relation_key(label)
    if forward:
        return FORWARD_TEMPLATES.get(key, "the {label} of {x}").format(label=key, x=x)
    return INVERSE_TEMPLATES.get(key, "the entity whose {label} is {x}").format(label=key, x=x)


def noun_for(node: SubgraphNode) -> str:
    """Question word for an answer node of a given type (``What`` when unknown)."""
    return _NOUNS.get(node.type, "What")


def path_phrases(subgraph: Subgraph) -> list[str]:
    """The path's noun phrases from the inside out: hop ``k``'s phrase with hop ``k - 1``'s in place of its
    subject, starting from the seed's title; the last one is what :func:`path_question` asks about."""
    phrase, phrases = subgraph.nodes[subgraph.path[0]].title, []
    for label, fwd in zip(subgraph.relations, subgraph.forward):
        phrase = relation_phrase(label, phrase, forward=fwd)
        phrases.append(phrase)
    return phrases


def path_question(subgraph: Subgraph) -> str:
    """The nested template question whose answer is the subgraph's answer node.

    Only the seed ``v0`` is named; every intermediate node is described by its relation, so the
    question never contains an intermediate title nor the answer (unless the seed's own name
    contains it, which :func:`searchgym.scoring.question_filters.check_question` catches).
    """
    phrase = path_phrases(subgraph)[-1]
    answer = subgraph.answer_node
    word = noun_for(answer)
    if word in ("What", "When"):  # "When is the date on which …" reads badly
        return f"What is {phrase}?"
    return f"{word} is {phrase}?"


Hop = tuple[frozenset, bool]
"""One hop of a read question: the relation keys its phrase may stand for (several labels share a
phrase: "place of birth" and "born in") and whether it is walked forward (head to tail)."""

_MAX_READINGS = 16  # a question of nested phrases has few readings; this bounds pathological ones
#: the most distinct nested phrases read from one question (a real one has a few per hop); a question that needs
#: more has no reading, instead of a recursion per phrase (RecursionError near 1,000) costing O(n) each
_MAX_PHRASES = 256
_HOLE = "\x00"


_ARTICLES = ("the ", "an ", "a ")


def _article_variants(prefix: str) -> tuple[str, ...]:
    """``prefix`` with its leading article swapped for each of the others ("an award received by" also
    reads "the award received by" and "a award received by"): the article says nothing about the relation,
    and a question writer (a model, a person) picks it freely. Uniqueness is not read from it: a phrase that
    reaches several nodes makes the question ambiguous whichever article it has."""
    for article in _ARTICLES:
        if prefix.startswith(article):
            rest = prefix[len(article) :]
            return tuple(other + rest for other in _ARTICLES)
    return (prefix,)


@lru_cache(maxsize=64)
def _patterns(extra_labels: tuple[str, ...]) -> tuple[tuple[str, str, bool, frozenset], ...]:
    """``(prefix, suffix, forward, relation keys)`` of every phrase, lowercased, most specific first; each
    phrase also with its leading article swapped (:func:`_article_variants`)."""
    keys = sorted(set(FORWARD_TEMPLATES) | set(INVERSE_TEMPLATES) | {relation_key(x) for x in extra_labels})
    grouped: dict[tuple[str, str, bool], set] = {}
    for key in keys:
        for forward in (True, False):
            prefix, _, suffix = relation_phrase(key, _HOLE, forward=forward).lower().partition(_HOLE)
            for variant in _article_variants(prefix):
                grouped.setdefault((variant, suffix, forward), set()).add(key)
    ordered = sorted(grouped.items(), key=lambda kv: (-len(kv[0][0]) - len(kv[0][1]), kv[0]))
    return tuple((p, s, f, frozenset(k)) for (p, s, f), k in ordered)


def _wh_re() -> re.Pattern:
    """The start of a template question, ``"What is "``: group 1 is the whitespace after "is"."""
    words = sorted({w.lower() for w in _NOUNS.values()} | {"what"}, key=len, reverse=True)
    return re.compile(rf"^\s*(?:{'|'.join(map(re.escape, words))})\s+is(\s+)", re.IGNORECASE)


_WH_RE = _wh_re()


class _TooNested(SearchGymError):
    """A question with more than :data:`_MAX_PHRASES` nested phrases to read (caught: it has no reading)."""


def _asked_phrase(question: str) -> Optional[str]:
    r"""The phrase of a ``"What is <phrase>?"`` question, exactly as group 1 of
    ``^\s*(?:<wh words>)\s+is\s+(.+?)\s*\?\s*$`` (IGNORECASE, DOTALL), or None where that does not match.

    In linear time: that lazy group rescanned a run of whitespace from each of its characters (O(n²)). The
    phrase ends at the last non-space before the final ``?``; when only the ``?`` follows "is", the pattern took
    the last of two or more spaces before it as the phrase.
    """
    m = _WH_RE.match(question)
    if m is None:
        return None
    asked = question.rstrip()  # str.isspace() is exactly re's \s
    if not asked.endswith("?"):
        return None
    mark, start = len(asked) - 1, m.end()
    if mark > start:  # question[start] is not a space: the phrase runs to the last non-space before the "?"
        return question[start : len(asked[:-1].rstrip())]
    if mark == start and m.end(1) - m.start(1) >= 2:
        return question[start - 1 : start]
    return None


def read_path_question(
    question: str, is_name: Callable[[str], bool], labels: Iterable[str] = ()
) -> list[tuple[str, list[Hop]]]:
    """Read a question in :func:`path_question`'s form back into ``(seed name, hops)`` readings.

    ``hops`` run from the seed outwards (the path's order). ``is_name(text)`` says whether ``text`` is
    exactly one entity name (the reader's own name index decides). ``labels`` adds relation labels the
    templates do not know (read through the fallback phrases). A question not in that form, or one
    whose innermost phrase is not a name, has no reading: ``[]``. Readings come in a stable order,
    at most 16 of them (nested phrases can be ambiguous; the caller tries them in order). A question whose
    reading would look at more than 256 distinct nested phrases (``_MAX_PHRASES``; hundreds of hops) has none.
    """
    phrase = _asked_phrase(question or "")
    if phrase is None:
        return []
    patterns = _patterns(tuple(sorted(set(labels))))
    memo: dict[str, list[tuple[str, list[Hop]]]] = {}
    started = 0

    def read(text: str) -> list[tuple[str, list[Hop]]]:
        nonlocal started
        if text in memo:
            return memo[text]
        started += 1
        if started > _MAX_PHRASES:
            raise _TooNested
        out: list[tuple[str, list[Hop]]] = []
        low = text.lower()
        for prefix, suffix, forward, keys in patterns:
            if len(out) >= _MAX_READINGS:
                break
            if len(low) > len(prefix) + len(suffix) and low.startswith(prefix) and low.endswith(suffix):
                inner = text[len(prefix) : len(text) - len(suffix)]
                if inner != inner.strip():
                    continue
                for seed, hops in read(inner):
                    out.append((seed, hops + [(keys, forward)]))
        if is_name(text):
            out.append((text, []))
        memo[text] = out[:_MAX_READINGS]
        return memo[text]

    try:
        readings = read(" ".join(phrase.split()))
    except _TooNested:
        return []
    return [(seed, hops) for seed, hops in readings if hops]
