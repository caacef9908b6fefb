"""Text analysis shared by the lexical retrievers: split, lowercase, drop stopwords, stem.

The rules are bm25s's defaults (``(?u)\\b\\w\\w+\\b`` tokens, lower case, bm25s's English stopword
list, the PyStemmer English stemmer) so an index built here scores like one built with
``bm25s.tokenize(..., stopwords="en", stemmer=Stemmer.Stemmer("english"))``. Unlike
``bm25s.tokenize`` the vocabulary ids are assigned in first-seen order, so the same corpus always
gives the same index files, and query analysis never mutates shared state, so one analyzer can
serve many threads.
"""

from __future__ import annotations

import re
import threading
from typing import Iterable, Sequence

from ..core.progress import progress_iter
from ..errors import InvalidArgumentError
from .bm25s_import import import_bm25s

TOKEN_PATTERN = r"(?u)\b\w\w+\b"

__all__ = ["Analyzer", "TOKEN_PATTERN"]


class Analyzer:
    """Turns text into stemmed terms; ``corpus_ids`` builds a vocabulary, ``terms`` analyses a query.

    ``stopwords``: ``"en"`` (bm25s's English list), ``None`` (keep every word) or an explicit list.
    ``stemmer``: a PyStemmer language name such as ``"english"``, or ``None`` for no stemming.
    """

    def __init__(self, stopwords: str | Sequence[str] | None = "en", stemmer: str | None = "english") -> None:
        if stopwords is not None and not isinstance(stopwords, str):
            words = list(stopwords) if isinstance(stopwords, Iterable) and not isinstance(stopwords, bytes) else None
            if words is None or not all(isinstance(w, str) for w in words):
                raise InvalidArgumentError(
                    f"stopwords must be a language code like 'en', a list of words or None, got {stopwords!r:.80}"
                )
            stopwords = words
        if stemmer is not None and not isinstance(stemmer, str):
            raise InvalidArgumentError(f"stemmer must be a language name like 'english' or None, got {stemmer!r:.80}")
        import_bm25s()  # bm25s's package import, with JAX hidden, before its submodule
        from bm25s.tokenization import _infer_stopwords

        self.stopwords_spec = stopwords if isinstance(stopwords, (str, type(None))) else list(stopwords)
        self.stemmer_name = stemmer
        try:
            self._stopwords = frozenset(_infer_stopwords(self.stopwords_spec))
        except ValueError as exc:  # an unknown language code: bm25s's message lists the known ones
            raise InvalidArgumentError(f"stopwords={stopwords!r}: {exc}") from None
        self._split = re.compile(TOKEN_PATTERN).findall
        self._local = threading.local()
        if stemmer is not None:
            self._new_stemmer()  # fail now, not at the first query, on an unknown language

    def config(self) -> dict:
        """JSON-serialisable settings, stored in index manifests so a loaded index analyses alike."""
        return {"pattern": TOKEN_PATTERN, "stopwords": self.stopwords_spec, "stemmer": self.stemmer_name}

    @classmethod
    def from_config(cls, cfg: dict) -> "Analyzer":
        """Rebuild the analyzer recorded by :meth:`config`."""
        if cfg.get("pattern") != TOKEN_PATTERN:
            raise InvalidArgumentError(
                f"index was built with token pattern {cfg.get('pattern')!r}, this version uses {TOKEN_PATTERN!r}"
            )
        return cls(stopwords=cfg.get("stopwords"), stemmer=cfg.get("stemmer"))

    def _new_stemmer(self):
        import Stemmer  # PyStemmer

        try:
            return Stemmer.Stemmer(self.stemmer_name)
        except KeyError:
            raise InvalidArgumentError(
                f"unknown stemmer language {self.stemmer_name!r}; choose one of {sorted(Stemmer.algorithms())} or None"
            ) from None

    def _stem_word(self):
        # PyStemmer objects are not thread-safe: one per thread.
        st = getattr(self._local, "stemmer", None)
        if st is None:
            st = self._local.stemmer = self._new_stemmer()
        return st.stemWord

    def terms(self, text: str) -> list[str]:
        """The stemmed, stopword-free terms of ``text`` in order (duplicates kept)."""
        words = [w for w in self._split(text.lower()) if w not in self._stopwords]
        if self.stemmer_name is None:
            return words
        stem = self._stem_word()
        return [stem(w) for w in words]

    def corpus_ids(
        self, texts: Iterable[str], *, total: int | None = None, progress: bool = False
    ) -> tuple[list[list[int]], dict[str, int]]:
        """Analyse a corpus: per-document term ids and the vocabulary ``term -> id`` (first-seen order).

        A cache from surface word to term id makes this one dict lookup per token after warm-up.
        """
        vocab: dict[str, int] = {}
        word_ids: dict[str, int] = {}
        stops = self._stopwords
        split = self._split
        stem = self._stem_word() if self.stemmer_name is not None else None
        out: list[list[int]] = []
        for text in progress_iter(texts, total, "analyse", unit="doc", enabled=progress, scale=True):
            ids = []
            for w in split(text.lower()):
                tid = word_ids.get(w)
                if tid is None:
                    if w in stops:
                        continue
                    term = stem(w) if stem is not None else w
                    tid = vocab.get(term)
                    if tid is None:
                        tid = vocab[term] = len(vocab)
                    word_ids[w] = tid
                ids.append(tid)
            out.append(ids)
        return out, vocab
