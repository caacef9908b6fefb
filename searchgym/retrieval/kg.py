"""DynaSearcher-style knowledge-graph lookup tool (docs/game.md, protocol).

The agent asks with entity names and relation phrases (``{"entity": [...], "relation": [...]}``);
:class:`KGLookup` resolves each name to entities (exact title/alias, then case-insensitive, then
fuzzy), gathers their one-hop triples in both directions and ranks them by the number of words
they share with the asked entities, relations and query (stopwords ignored), as DynaSearcher
does. The result is capped at ``max_triples`` (100) lines and ``max_tokens`` (1024) tokens, where
a token is a whitespace-separated word of the formatted line (a cheap, tokenizer-free proxy that
over-counts nothing: model tokens are at least as many).

Lines read ``(Head, relation label, Tail)``; :func:`format_triples` joins them for the observation.
"""

from __future__ import annotations

import difflib
import logging
import re
import threading
from typing import Sequence

import numpy as np

from ..core.arg_checks import check_count, check_number
from ..errors import InvalidArgumentError, InvalidTypeError
from ..world.shared import LockFreePickling
from ..world.world import normalize_name
from .bm25s_import import import_bm25s

logger = logging.getLogger(__name__)

__all__ = ["KGLookup", "format_triples", "NO_TRIPLES"]

NO_TRIPLES = "No matching knowledge-graph triples."
_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def format_triples(lines: Sequence[str]) -> str:
    """The observation text for a KG lookup: one triple per line, or :data:`NO_TRIPLES`."""
    return "\n".join(lines) if lines else NO_TRIPLES


class KGLookup(LockFreePickling):
    """One-hop triple lookup over a :class:`~searchgym.world.World`'s knowledge graph.

    ``fuzzy_cutoff``: minimum similarity (0-1: the best of difflib's ratio, word Jaccard, and
    0.75-1 when every asked word is in the name) for a fuzzy entity match; ``max_matches``: entities kept per asked
    name; ``max_scan``: one-hop rows scored per entity (hubs are pre-ranked by relation overlap so
    the best rows survive the cut). The name index is built on first fuzzy use and is thread-safe.
    """

    def __init__(self, world, *, fuzzy_cutoff: float = 0.75, max_matches: int = 3, max_scan: int = 5000) -> None:
        check_number("fuzzy_cutoff", fuzzy_cutoff)
        if not 0.0 < fuzzy_cutoff <= 1.0:
            raise InvalidArgumentError(f"fuzzy_cutoff must be in (0, 1], got {fuzzy_cutoff}")
        max_matches = check_count("max_matches", max_matches, hint="entities kept per asked name")
        max_scan = check_count("max_scan", max_scan, hint="one-hop rows scored per entity")
        import_bm25s()  # bm25s's package import, with JAX hidden, before its submodule
        from bm25s.stopwords import STOPWORDS_EN

        self.world = world
        self.fuzzy_cutoff = fuzzy_cutoff
        self.max_matches = max_matches
        self.max_scan = max_scan
        self._stop = frozenset(STOPWORDS_EN)
        self._lock = threading.Lock()
        self._token_rows: dict[str, list[int]] | None = None
        self._tokens_by_initial: dict[str, list[str]] | None = None
        self._rel_words = [
            set(_words(world.relation_at(r).label)) | set(_words(world.relation_at(r).id))
            for r in range(world.num_relations)
        ]

    # ------------------------------------------------------- entity matching
    def _name_index(self) -> tuple[dict[str, list[int]], dict[str, list[str]]]:
        if self._token_rows is None:
            with self._lock:
                if self._token_rows is None:
                    rows: dict[str, list[int]] = {}
                    for i in range(self.world.num_entities):
                        for name in self.world.entity_at(i).names:
                            for tok in set(_words(name)):
                                lst = rows.setdefault(tok, [])
                                if not lst or lst[-1] != i:
                                    lst.append(i)
                    by_initial: dict[str, list[str]] = {}
                    for tok in rows:
                        by_initial.setdefault(tok[0], []).append(tok)
                    self._tokens_by_initial = by_initial
                    self._token_rows = rows
        assert self._tokens_by_initial is not None
        return self._token_rows, self._tokens_by_initial

    def _similarity(self, asked: str, row: int) -> float:
        asked_words = set(_words(asked))
        best = 0.0
        for name in self.world.entity_at(row).names:
            n = normalize_name(name)
            name_words = set(_words(n))
            jac = len(asked_words & name_words) / max(1, len(asked_words | name_words))
            # a partial name ("Varn" for "Alice Varn") matches, fuller coverage ranking higher
            part = (
                0.75 + 0.25 * len(asked_words) / len(name_words) if asked_words and asked_words <= name_words else 0.0
            )
            best = max(best, jac, part, difflib.SequenceMatcher(None, asked, n).ratio())
        return best

    def match_entities(self, name: str) -> list[int]:
        """Entity rows an asked name refers to, best first (at most ``max_matches``).

        Exact and case-/whitespace-insensitive title or alias matches win outright (all of them
        up to the cap: same-name entities are all returned); otherwise candidates sharing a word
        (or a close spelling of a word) with the name are scored by similarity.
        """
        if not isinstance(name, str):
            raise InvalidTypeError(f"entity name is {type(name).__name__}, expected str")
        asked = normalize_name(name)
        if not asked:
            return []
        exact = self.world.find_entities(name)
        if exact:
            return [self.world.entity_index(e.id) for e in exact[: self.max_matches]]
        token_rows, by_initial = self._name_index()
        toks = list(dict.fromkeys(_words(asked)))
        found: list[str] = []
        for t in toks:
            if t in token_rows:
                found.append(t)
            elif len(t) >= 3:
                found += difflib.get_close_matches(t, by_initial.get(t[0], ()), n=3, cutoff=0.8)
        if not found:
            return []
        cands: dict[int, None] = {}
        for t in sorted(set(found), key=lambda t: len(token_rows[t])):  # rarest words first
            for r in token_rows[t][:2000]:
                cands[r] = None
            if len(cands) >= 2000:
                break
        scored = [(s, r) for r in cands if (s := self._similarity(asked, r)) >= self.fuzzy_cutoff]
        scored.sort(key=lambda x: (-x[0], x[1]))
        return [r for _, r in scored[: self.max_matches]]

    # ------------------------------------------------------------- lookup
    def _node_title(self, code: int) -> str:
        node = self.world.node_at(int(code))
        return node.title

    def lookup(
        self,
        entities: Sequence[str],
        relations: Sequence[str] = (),
        query: str = "",
        *,
        max_triples: int = 100,
        max_tokens: int = 1024,
    ) -> list[str]:
        """Formatted one-hop triples of the asked entities, most relevant first.

        Relevance = number of distinct non-stopword words a triple ``(head, relation, tail)``
        shares with the asked entity names, relation phrases and ``query``; ties keep the asked
        entity order, then out-edges before in-edges in storage order. Capped at ``max_triples``
        lines and ``max_tokens`` whitespace tokens in total.
        """
        for label, value in (("entities", entities), ("relations", relations)):
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise InvalidTypeError(f"{label} must be a list of strings, got {value!r}")
        if not isinstance(query, str):
            raise InvalidTypeError(f"query must be a string, got {type(query).__name__}")
        if max_triples < 1 or max_tokens < 1:
            raise InvalidArgumentError("max_triples and max_tokens must be >= 1")
        asked = {w for w in _words(" ".join([*entities, *relations, query])) if w not in self._stop}
        rel_score = np.array([len(ws & asked) for ws in self._rel_words], dtype=np.int64)
        triples = self.world.triple_array
        seen: set[int] = set()
        ranked: list[tuple[int, int, int]] = []  # (-score, order, row)
        order = 0
        for name in entities:
            for ent in self.match_entities(name):
                rows = np.concatenate([self.world.out_rows(ent), self.world.in_rows(ent)])
                if len(rows) > self.max_scan:
                    pre = np.argsort(-rel_score[triples[rows, 1]], kind="stable")[: self.max_scan]
                    rows = rows[np.sort(pre)]
                for row in rows.tolist():
                    order += 1
                    if row in seen:
                        continue
                    seen.add(row)
                    h, r, t = triples[row]
                    words = set(_words(self.world.entity_at(int(h)).title)) | set(_words(self._node_title(t)))
                    ranked.append((-(int(rel_score[r]) + len(words & asked)), order, row))
        ranked.sort()
        out: list[str] = []
        used = 0
        for _, _, row in ranked:
            h, r, t = triples[row]
            line = (
                f"({self.world.entity_at(int(h)).title}, {self.world.relation_at(int(r)).label}, {self._node_title(t)})"
            )
            n = len(line.split())
            if used + n > max_tokens:
                break
            out.append(line)
            used += n
            if len(out) >= max_triples:
                break
        return out
