"""An offline, deterministic, model-free reader for RAG verification (docs/game.md, self-play game **decision**).

:class:`ExtractiveReader` answers a question from materials only, so the self-play game runs
without any model. It reads like a cautious multi-hop reader:

0. **Following a chain.** A question in the form of the template questions
   (:func:`~searchgym.construction.question_templates.path_question`: "What place is the capital of the region in
   which X is located?") is read back into its seed and relation chain
   (:func:`~searchgym.construction.question_templates.read_path_question`) and followed hop by hop through the facts
   the materials state: a sentence that names both ends of a world triple states it (a name stands
   for each of its namesakes; the triple says which one the sentence speaks of). The answer is the
   one node the chain ends at; ``""`` when a hop is stated nowhere in the materials or the chain
   ends at several nodes (an ambiguous question). Other questions are read by steps 1-3.
1. **Linking.** Every entity title/alias and every literal value of the world that occurs in the
   materials (whole words, leftmost-longest, case-insensitive except that a mention must not
   start lowercase; names made only of stop words are skipped) is a candidate answer; so are
   date/number strings found by pattern. In ``Doc i (Title: "T") text`` materials the titled
   entity counts as mentioned in each of its document's sentences (documents refer to their
   subject by pronoun).
2. **Chaining.** Entities named in the question are anchors. Two candidates mentioned in the same
   sentence are linked; the link carries the words that also occur in the question from the
   sentence and from the labels of the world's relations between the two (documents paraphrase:
   "is governed from" states *capital*), minus the names of the two endpoints (and, when
   traversed, the description words of the node it leaves). Two world nodes with no fact
   between them are not linked (a list such as "Places in X include A, B and C" does not relate
   A to B); values the world does not know (a date found by pattern) link on the sentence alone. A beam search
   over simple paths from the anchors collects, for each candidate, the largest multiset of
   question words covered along one chain (a word counts as often as the question uses it) — the answer of "the
   capital of the country where Tarsk is
   located" is reached through ``located`` and ``capital``, a distractor through fewer.
3. **Scoring.** score = covered words + ½ × question words in the candidate's description not
   yet covered + ½ for a matching answer type read from the question's first words (who →
   person, where/place → location, when/year → date, how many/population → number). Anchors never answer. Ties:
   fewer hops, then first mention.

Without anchors it falls back to sentence-level word overlap. It returns ``""`` when no
candidate scores above zero. Same input, same output: no randomness, stable orderings.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

from ..construction.question_templates import read_path_question, relation_key
from ..core.text_scan import split_doc_headers
from ..errors import InvalidArgumentError
from ..world.shared import LockFreePickling

logger = logging.getLogger(__name__)

_SENT_RE = re.compile(r"(?<=[.!?;])\s+|\n+")
_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_LITERAL_RES = (
    (re.compile(rf"\b\d{{1,2}} (?:{_MONTHS}) \d{{1,4}}\b"), "date"),
    (re.compile(rf"\b(?:{_MONTHS}) \d{{1,2}}, \d{{1,4}}\b"), "date"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "date"),
    (re.compile(r"\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b|\b\d+\.\d+\b|\b\d+\b"), "number"),
)
_STOP = frozenset(
    "a an the of in on at to for from by with and or is was were are be been being as that this these those "
    "which who whom whose what when where why how did does do has have had it its their his her he she they "
    "them there here than then also into about after before during under over one name named same other "
    "not no yes s".split()
)
_WH_WORDS = 5  # answer-type cues are read from the question's first words ("What is the population ...")
_TYPE_CUES = (
    (("who", "whom", "whose", "person", "someone"), ("person",)),
    (("where", "city", "country", "place", "location", "town", "region"), ("location",)),
    (("when", "year", "date", "day"), ("date",)),
    (("many", "much", "number", "population", "area"), ("number", "quantity")),
    (("organisation", "organization", "company", "institution", "university", "club", "band"), ("organisation",)),
)


@dataclass(frozen=True)
class _Cand:
    """A linkable name: what to answer, its type, its description words."""

    answer: str
    type: str
    desc_words: frozenset
    code: Optional[int] = None  #: world node code (entity index >= 0, literal < 0), None if unknown
    codes: tuple = ()  #: every world node the name may denote (namesakes share a title), ``code`` first


def _is_word_char(ch: str) -> bool:
    return ch.isalnum()


def _extend(covered: frozenset, words, q_counts: Counter) -> frozenset:
    """Add each word once more to ``covered`` (a set of ``(word, i)`` pairs), up to the number of
    times the question uses it, so a chain can use "located" as often as the question says it."""
    have = Counter(word for word, _ in covered)
    extra = {(word, have[word] + 1) for word in words if have[word] < q_counts[word]}
    return covered | extra if extra else covered


def _digits(value: str) -> str:
    """Digit-group separators removed, so "8,539" and "8539" name the same number."""
    return value.replace(",", "") if value.replace(",", "").replace(".", "", 1).isdigit() else value


class ExtractiveReader(LockFreePickling):
    """Offline reader over ``world``'s names; see the module docstring for the method.

    ``max_hops`` bounds chain length, ``beam`` the paths kept per hop. The name automaton is
    built on first use (thread-safe) and reused.
    """

    def __init__(self, world, *, max_hops: int = 6, beam: int = 256, min_name_chars: int = 3) -> None:
        if max_hops < 1 or beam < 1:
            raise InvalidArgumentError("max_hops and beam must be >= 1")
        self.world = world
        self.max_hops = max_hops
        self.beam = beam
        self.min_name_chars = min_name_chars
        self._automaton: Any = None  # ahocorasick.Automaton once built (False: the world has no names)
        self._literals: dict[str, _Cand] = {}
        self._lock = threading.Lock()
        self._stem: Any = None  # Stemmer.Stemmer, made on first use
        self._rel_keys: Optional[list[str]] = None  # the world's relation labels as template keys

    # ------------------------------------------------------------------ linking
    def _build(self) -> Any:
        import ahocorasick

        from ..world.model import Literal

        w = self.world
        auto = ahocorasick.Automaton()
        names: dict[str, _Cand] = {}
        owners: dict[str, dict[int, None]] = {}  # name -> every entity bearing it (namesakes), in order
        ents = [w.entity_at(i) for i in range(w.num_entities)]
        cands = [_Cand(e.title, e.type, frozenset(self._words(e.description)), i) for i, e in enumerate(ents)]
        # titles first, then aliases: a title is never shadowed by another entity's alias
        for pick in (lambda e: (e.title,), lambda e: e.aliases):
            for ent, cand in zip(ents, cands):
                for n in pick(ent):
                    key = " ".join(n.lower().split())
                    if len(key) >= self.min_name_chars and not set(key.split()) <= _STOP:
                        names.setdefault(key, cand)
                        owners.setdefault(key, {})[cand.code] = None  # type: ignore[index]
        names = {key: replace(cand, codes=tuple(owners[key])) for key, cand in names.items()}
        tails = w.triple_array[:, 2] if w.num_triples else []
        for code in sorted({int(c) for c in tails if c < 0}, reverse=True):
            lit = w.node_at(code)
            assert isinstance(lit, Literal)
            key = " ".join(lit.value.lower().split())
            cand = _Cand(lit.value, "number" if lit.kind == "quantity" else lit.kind, frozenset(), code, (code,))
            self._literals.setdefault(_digits(key), cand)
            if key and key not in names and (len(key) >= self.min_name_chars or key.isdigit()):
                names[key] = cand
        for key, cand in names.items():
            auto.add_word(key, (key, cand))
        if names:
            auto.make_automaton()
        return auto if names else None

    def _words(self, text: str) -> list[str]:
        if self._stem is None:
            import Stemmer

            self._stem = Stemmer.Stemmer("english")
        toks = [t for t in _WORD_RE.findall(text.lower()) if t not in _STOP]
        return self._stem.stemWords(toks)

    def _link(self, text: str) -> list[tuple[int, int, _Cand]]:
        """Non-overlapping mentions ``(start, end, candidate)``, leftmost-longest."""
        if self._automaton is None:
            with self._lock:
                if self._automaton is None:
                    self._automaton = self._build() or False
        low = text.lower()
        found: list[tuple[int, int, _Cand]] = []
        if self._automaton:
            for end, (key, cand) in self._automaton.iter(low):
                start = end - len(key) + 1
                if (start > 0 and _is_word_char(low[start - 1])) or (
                    end + 1 < len(low) and _is_word_char(low[end + 1])
                ):
                    continue
                if text[start].islower():  # names are proper nouns: "born" is not the place "Born"
                    continue
                found.append((start, end + 1, cand))
        for rx, kind in _LITERAL_RES:
            for m in rx.finditer(text):
                known = self._literals.get(_digits(m.group(0).lower()))  # "8,539" is the literal 8539
                code = known.code if known is not None else None
                codes = (code,) if code is not None else ()
                found.append((m.start(), m.end(), _Cand(m.group(0), kind, frozenset(), code, codes)))
        found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
        out, last_end = [], -1
        for f in found:
            if f[0] >= last_end:
                out.append(f)
                last_end = f[1]
        return out

    def _kg_words(self, a: _Cand, b: _Cand) -> set:
        """Words of the labels of KG relations between two co-mentioned nodes.

        A sentence that names both ends of a fact usually states that fact, often paraphrased
        ("is governed from" for *capital*); the relation's label supplies the words the question
        uses. Only pairs that co-occur in the materials are looked up, so the reader still answers
        from the materials alone.
        """
        if a.code is None or b.code is None or (a.code < 0 and b.code < 0):
            return set()
        T = self.world.triple_array
        words: set = set()
        for head, tail in ((a.code, b.code), (b.code, a.code)):
            if head < 0:
                continue
            rows = self.world.out_rows(head)
            for r in T[rows[T[rows, 2] == tail], 1]:
                words.update(self._words(self.world.relation_at(int(r)).label))
        return words

    # ------------------------------------------------------------------ reading
    def _sentences(self, materials: list[str]) -> list[tuple[Optional[_Cand], str]]:
        """``(title candidate or None, sentence)`` for every sentence of every material."""
        out = []
        for material in materials:
            parts = split_doc_headers(material)  # re.split of Doc\s+\d+\s*\(Title:\s*"(.*?)"\)\s*, linear
            # split() alternates [before, title1, body1, title2, body2, ...]
            chunks = [(None, parts[0])] + [(parts[i], parts[i + 1]) for i in range(1, len(parts) - 1, 2)]
            for title, body in chunks:
                tcand = None
                if title:
                    linked = self._link(title)
                    if len(linked) == 1 and linked[0][1] - linked[0][0] == len(title.strip()):
                        tcand = linked[0][2]
                for sent in _SENT_RE.split(body):
                    if sent.strip():
                        out.append((tcand, sent.strip()))
        return out

    def answer(self, question: str, materials: list[str]) -> str:
        """The best-supported candidate's name, or ``""`` when nothing in the materials fits."""
        chained = self._follow_chain(question, materials)
        if chained is not None:
            return chained
        q = self._read_question(question)
        ev = self._gather(materials, q)
        if not ev.cands:
            return ""
        return self._pick(ev, q, self._coverage(ev, q))

    # ------------------------------------------------------------------ step 0: a relation chain
    def _entity_named(self, text: str) -> Optional[_Cand]:
        """The entity ``text`` names exactly (one mention spanning all of it), else None."""
        linked = self._link(text)
        if len(linked) == 1 and linked[0][:2] == (0, len(text)):
            cand = linked[0][2]
            return cand if cand.code is not None and cand.code >= 0 else None
        return None

    def _relation_keys(self) -> list[str]:
        if self._rel_keys is None:
            self._rel_keys = [relation_key(self.world.relation_at(i).label) for i in range(self.world.num_relations)]
        return self._rel_keys

    def _facts(self, materials: list[str]) -> tuple[dict, dict]:
        """The facts the materials state: a sentence that names both ends of a world triple states it.

        A name stands for each of its namesakes; the world's triples say which one a sentence speaks of.
        Returns ``(forward, backward)``: ``(head code, relation key) -> {tail code: answer text}`` and
        ``(tail code, relation key) -> {head code: answer text}``, each in first-mention order.
        """
        T = self.world.triple_array
        keys = self._relation_keys()
        forward: dict[tuple[int, str], dict[int, str]] = {}
        backward: dict[tuple[int, str], dict[int, str]] = {}
        for tcand, sent in self._sentences(materials):
            nodes: dict[int, str] = {}  # code -> its answer text (a title, or a literal as written)
            for c in ([tcand] if tcand is not None else []) + [c for _, _, c in self._link(sent)]:
                for code in c.codes:
                    nodes.setdefault(code, self.world.entity_at(code).title if code >= 0 else c.answer)
            for a, a_text in nodes.items():
                if a < 0:
                    continue
                rows = self.world.out_rows(a)
                tails = T[rows, 2]
                for b, b_text in nodes.items():
                    for r in T[rows[tails == b], 1] if b != a else ():
                        forward.setdefault((a, keys[int(r)]), {}).setdefault(b, b_text)
                        backward.setdefault((b, keys[int(r)]), {}).setdefault(a, a_text)
        return forward, backward

    def _follow_chain(self, question: str, materials: list[str]) -> Optional[str]:
        """Step 0: a question in the template form
        (:func:`~searchgym.construction.question_templates.path_question`) is read into its seed and relation
        chain, and the chain is followed hop by hop through the facts the materials state. None when the
        question has no such reading (steps 1-3 read it). The answer when the chains end at exactly one node;
        ``""`` when they end nowhere (the materials do not support an answer) or at several (an ambiguous
        question: "an award received by X" with two awards)."""
        readings = read_path_question(question, lambda t: self._entity_named(t) is not None, self._relation_keys())
        if not readings:
            return None
        forward, backward = self._facts(materials)
        ends: dict[int, str] = {}
        for seed_text, hops in readings:
            seed = self._entity_named(seed_text)
            frontier: dict[int, str] = dict.fromkeys(seed.codes, seed_text) if seed is not None else {}
            for keys, ahead in hops:
                table = forward if ahead else backward
                nxt: dict[int, str] = {}
                for code in frontier:
                    for key in sorted(keys):
                        for other, text in table.get((code, key), {}).items():
                            nxt.setdefault(other, text)
                frontier = nxt
            for code, text in frontier.items():
                ends.setdefault(code, text)
        logger.debug("extractive reader chains of %r end at %s", question, list(ends.values()))
        return next(iter(ends.values())) if len(ends) == 1 else ""

    def _read_question(self, question: str) -> _QuestionTerms:
        """Step 2's anchors and question words, and step 3's answer-type cues."""
        q_linked = [c for _, _, c in self._link(question)]
        anchor_words = {word for c in q_linked for word in self._words(c.answer)}
        q_raw = set(_WORD_RE.findall(question.lower())[:_WH_WORDS])  # the wh-phrase names the answer type
        q_list = [t for t in self._words(question) if t not in anchor_words]
        return _QuestionTerms(
            mentions={c.answer.lower() for c in q_linked},
            words=set(q_list),
            counts=Counter(q_list),  # "located in … located in" asks for two such hops
            answer_types={t for cues, types in _TYPE_CUES if q_raw & set(cues) for t in types},
        )

    def _gather(self, materials: list[str], q: _QuestionTerms) -> _Evidence:
        """Steps 1 and 2's links: candidates, sentence-level hits and the pairwise links between them."""
        ev = _Evidence()
        for tcand, sent in self._sentences(materials):
            mentioned = [c for _, _, c in self._link(sent)]
            if tcand is not None:
                mentioned.insert(0, tcand)
            keys = ev.add_mentions(mentioned, self._words)
            if not keys:
                continue
            swords = set(self._words(sent))
            for k in keys:
                own = frozenset(swords & q.words - ev.name_words[k] - ev.cands[k].desc_words)
                if len(own) > len(ev.sentence_hits.get(k, ())):
                    ev.sentence_hits[k] = own
            for a in keys:
                for b in keys:
                    if a < b:
                        self._link_pair(ev, a, b, swords, q)
        return ev

    def _link_pair(self, ev: _Evidence, a: str, b: str, swords: set, q: _QuestionTerms) -> None:
        """Link two candidates of one sentence by the question words the sentence and their facts carry."""
        ca, cb = ev.cands[a], ev.cands[b]
        kg = self._kg_words(ca, cb)
        if ca.code is not None and cb.code is not None and not kg:
            return  # co-mentioned world nodes with no fact between them (a list): no link
        w = frozenset((swords | kg) & q.words - ev.name_words[a] - ev.name_words[b])
        if (a, b) not in ev.links or len(w) > len(ev.links[(a, b)]):
            ev.links[(a, b)] = w  # the most informative sentence linking the pair

    def _coverage(self, ev: _Evidence, q: _QuestionTerms) -> dict[str, tuple[frozenset, int]]:
        """Per candidate, the largest question-word cover along one chain from an anchor and its hops
        (without anchors: its best sentence's cover, 0 hops)."""
        anchors = [k for k in ev.cands if k in q.mentions]
        if not anchors:
            return {
                k: (_extend(frozenset(), w, q.counts), 0) for k, w in ev.sentence_hits.items() if k not in q.mentions
            }
        best: dict[str, tuple[frozenset, int]] = {}  # key -> (covered question words, hops)
        adj: dict[str, list[tuple[str, frozenset]]] = {}
        for (a, b), w in sorted(ev.links.items()):
            adj.setdefault(a, []).append((b, w))
            adj.setdefault(b, []).append((a, w))
        frontier: list[tuple[frozenset, str, tuple[str, ...]]] = [(frozenset(), a, (a,)) for a in anchors]
        for hop in range(1, self.max_hops + 1):
            nxt: list[tuple[frozenset, str, tuple[str, ...]]] = []
            for covered, node, path in frontier:
                for other, w in adj.get(node, ()):
                    if other in path or other in q.mentions:
                        continue
                    # words describing where we come from say what *it* is, not how we got here
                    cov = _extend(covered, w - ev.cands[node].desc_words, q.counts)
                    nxt.append((cov, other, path + (other,)))
                    prev = best.get(other)
                    if prev is None or len(cov) > len(prev[0]):
                        best[other] = (cov, hop)
            nxt.sort(key=lambda s: (-len(s[0]), s[2]))
            frontier = nxt[: self.beam]
            if not frontier:
                break
        return best

    def _pick(self, ev: _Evidence, q: _QuestionTerms, best: dict[str, tuple[frozenset, int]]) -> str:
        """Step 3: the top-scoring candidate of the answer type the question asks for, or ``""``."""

        def score(k: str) -> float:
            c, (cov, _) = ev.cands[k], best[k]
            s = len(cov) + 0.5 * len((q.words & c.desc_words) - {word for word, _ in cov})
            if c.type in q.answer_types:
                s += 0.5
            return s

        pool = list(best)
        typed = [k for k in pool if ev.cands[k].type in q.answer_types]
        if typed:  # the wh-phrase names the answer type: a candidate of another type cannot be the answer
            pool = typed
        ranked = sorted(pool, key=lambda k: (-score(k), best[k][1], ev.order[k]))
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("extractive reader ranking: %s", [(k, score(k), sorted(best[k][0])) for k in ranked[:5]])
        if not ranked or score(ranked[0]) <= 0:
            return ""
        return ev.cands[ranked[0]].answer


@dataclass
class _QuestionTerms:
    """What the reader takes from a question: the names it mentions (lowercased; they anchor chains and
    never answer), its stemmed content words (``counts``: how often each occurs) and the answer types
    its first words ask for."""

    mentions: set[str]
    words: set[str]
    counts: Counter
    answer_types: set[str]


@dataclass
class _Evidence:
    """Candidates read from the materials, keyed by lowercased answer (``order``: first mention), with
    each one's own name words, its best sentence's question words, and the links between candidates."""

    cands: dict[str, _Cand] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)
    name_words: dict[str, set] = field(default_factory=dict)  # each candidate's own name words, stemmed once
    links: dict[tuple[str, str], frozenset] = field(default_factory=dict)
    sentence_hits: dict[str, frozenset] = field(default_factory=dict)

    def add_mentions(self, mentioned: list[_Cand], words: Callable[[str], list[str]]) -> list[str]:
        """Register a sentence's candidates (new ones in mention order); their distinct keys, in order."""
        keys: list[str] = []
        for c in mentioned:
            k = c.answer.lower()
            if k not in self.cands:
                self.cands[k], self.order[k], self.name_words[k] = c, len(self.order), set(words(k))
            if k not in keys:
                keys.append(k)
        return keys


__all__ = ["ExtractiveReader"]
