"""Article phase of the synthetic world: one Wikipedia-like document per entity.

An article opens with a lead sentence (title, aliases, description or life dates), then states the
entity's facts in phrasings drawn from :mod:`.synthetic_text`, shuffled among filler sentences, and
closes with list sentences for the facts moved to it from other entities ("People born in X include
A and B"); those moved facts are absent from their head's own article.
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np

from ..core.progress import Progress
from . import synthetic_text as tx
from .synthetic_draft import DraftWorld
from .synthetic_name_forge import demonym
from .synthetic_schema import OCCUPATIONS, PAST_KINDS, RELATIONS, capitalize, indefinite_article, with_article

__all__ = ["documents"]

_CHUNK = 50_000  # entities whose facts are pulled out of the numpy arrays at once


def documents(g: DraftWorld, rng: random.Random, *, progress: bool = False) -> list[str]:
    """One article per entity (index-aligned with the entities), rendered from its out-facts and
    the facts moved to it, phrasings and filler drawn from ``rng``. Entities are processed in chunks
    so memory stays flat at 1M entities; ``progress`` shows a bar."""
    writer = _ArticleWriter(g, rng)
    n = len(g.kind)
    h = np.frombuffer(g.h, dtype=np.int64)
    r_all = np.frombuffer(g.r, dtype=np.int64)
    t_all = np.frombuffer(g.t, dtype=np.int64)
    hid_all = np.frombuffer(bytes(g.hid), dtype=np.uint8)
    order = np.argsort(h, kind="stable")
    ptr_arr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(h, minlength=n), out=ptr_arr[1:])
    ptr = ptr_arr.tolist()
    texts: list[str] = []
    with Progress(n, "articles", unit="doc", enabled=progress, scale=True) as bar:
        for c0 in range(0, n, _CHUNK):
            c1 = min(n, c0 + _CHUNK)
            base = ptr[c0]
            rows = order[base : ptr[c1]]
            facts = list(zip(r_all[rows].tolist(), t_all[rows].tolist(), hid_all[rows].tolist()))
            for i in range(c0, c1):
                texts.append(writer.article(i, facts[ptr[i] - base : ptr[i + 1] - base]))
            bar.update(c1 - c0)
    return texts


class _ArticleWriter:
    """Per-world tables (prose names, templates) and the steps that write one article."""

    def __init__(self, g: DraftWorld, rng: random.Random) -> None:
        self.g = g
        self.rng = rng
        titles, kind = g.titles, g.kind
        rel_pid = [pid for pid, _ in RELATIONS]
        self.head_tpl = [tx.HEAD_TEMPLATES[pid] for pid in rel_pid]
        self.tail_tpl = [tx.TAIL_TEMPLATES.get(pid, ()) for pid in rel_pid]
        self.kind_tpl = {(g.rel_row[pid], k): v for (pid, k), v in tx.KIND_TEMPLATES.items()}
        self.life_rows = {g.rel_row["P569"], g.rel_row["P570"]}
        self.dob_row, self.dod_row = g.rel_row["P569"], g.rel_row["P570"]
        self.named = [with_article(t, k) for t, k in zip(titles, kind)]  # "the Battle of X"
        title_count = Counter(titles)
        self.refs = list(self.named)  # how other articles refer to an entity: disambiguated if needed
        for city in g.cities:
            if title_count[titles[city]] > 1:
                self.refs[city] = f"{titles[city]}, {titles[g.country_of[city]]}"

    def article(self, i: int, facts: list[tuple[int, int, int]]) -> str:
        """The article of entity ``i`` from its out-facts ``(relation row, tail code, hidden)``."""
        g = self.g
        k = g.kind[i]
        title = self.named[i]
        cap_title = title[0].upper() + title[1:]
        subj = tx.SUBJECTS[("female" if g.female[i - g.people.start] else "male") if k == "person" else k]
        groups, dates = self._group_facts(k, facts)
        body = self._fact_sentences(k, title, cap_title, subj, groups)
        body += self._filler(k, title, subj)
        self.rng.shuffle(body)
        body += self._moved_facts(i, title)
        return " ".join([self._lead(i, k, title, cap_title, dates), *body])

    def _group_facts(self, k: str, facts) -> tuple[dict[int, list[str]], dict[int, str]]:
        """Facts to state, grouped by relation (tails as prose); a person's life dates apart."""
        g, refs = self.g, self.refs
        groups: dict[int, list[str]] = {}
        dates: dict[int, str] = {}
        for r, t, hidden in facts:
            if hidden:
                continue
            if t < 0:
                v = g.lit_values[-t - 1]
                if g.lit_kinds[-t - 1] == "quantity":
                    v = f"{int(v):,}"
                if k == "person" and r in self.life_rows:
                    dates[r] = v
                    continue
            else:
                v = refs[t]
            groups.setdefault(r, []).append(v)
        return groups, dates

    def _lead(self, i: int, k: str, title: str, cap_title: str, dates: dict[int, str]) -> str:
        """First sentence: title, aliases and description (for people: life dates, occupation)."""
        g = self.g
        al = g.aliases[i]
        if k == "person":
            shown = [a for a in al if a[1:3] != ". "]  # initials are aliases, not prose
            aka = f"; also known as {tx.join_names(shown)}" if shown else ""
            occ = OCCUPATIONS[g.occ[i - g.people.start]][0]
            dem = demonym(g.titles[g.country_of[i]])
            born = dates.get(self.dob_row, "?")
            if self.dod_row in dates:
                return f"{title} ({born} – {dates[self.dod_row]}{aka}) was {indefinite_article(dem)} {dem} {occ}."
            return f"{title} (born {born}{aka}) is {indefinite_article(dem)} {dem} {occ}."
        aka = f" (also known as {tx.join_names(list(al))})" if al else ""
        d = g.descs[i]
        verb = "was" if k in PAST_KINDS else "is"
        return f"{cap_title}{aka} {verb} {indefinite_article(d)} {d}."

    def _fact_sentences(self, k: str, title: str, cap_title: str, subj, groups: dict[int, list[str]]) -> list[str]:
        """One sentence per relation, in a randomly chosen phrasing, naming the subject or a pronoun."""
        rng = self.rng
        out = []
        for r, vals in groups.items():
            S, s = (cap_title, title) if rng.random() < 0.35 else (subj[0], subj[1])
            tpl = self.kind_tpl.get((r, k)) or self.head_tpl[r]
            sentence = tpl[int(rng.random() * len(tpl))].format(
                S=S, s=s, P=subj[2], p=subj[3], x=title, t=tx.join_names(vals)
            )
            out.append(capitalize(sentence))
        return out

    def _filler(self, k: str, title: str, subj) -> list[str]:
        """A few distinct factless sentences of the kind's filler pool."""
        rng = self.rng
        lo, hi = self.g.cfg.filler_sentences
        adjs, nouns = tx.FILLER_ADJECTIVES, tx.FILLER_NOUNS
        fill = tx.FILLER[k]
        m = min(len(fill), rng.randint(lo, hi))
        o = int(rng.random() * len(fill))
        return [
            f.format(
                S=subj[0],
                s=subj[1],
                P=subj[2],
                p=subj[3],
                x=title,
                adj=adjs[int(rng.random() * len(adjs))],
                noun=nouns[int(rng.random() * len(nouns))],
                n=rng.randint(3, 40),
            )
            for f in (fill[o:] + fill[:o])[:m]
        ]

    def _moved_facts(self, i: int, title: str) -> list[str]:
        """List sentences for facts stated only here, in the tail's article."""
        moved = self.g.mentions.get(i)
        if not moved:
            return []
        by_rel: dict[int, list[str]] = {}
        for r, head in moved:
            by_rel.setdefault(r, []).append(self.refs[head])
        out = []
        for r, names in by_rel.items():
            tpl = self.tail_tpl[r]
            out.append(capitalize(tpl[int(self.rng.random() * len(tpl))].format(T=title, list=tx.join_names(names))))
        return out
