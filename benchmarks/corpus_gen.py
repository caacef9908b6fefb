"""Seeded synthetic corpus for retrieval benchmarks: Zipfian vocabulary, English stopwords at the top.

Word ranks follow Zipf's law (exponent ``s``) over ``vocab_size`` made-up pronounceable words;
the 33 most frequent ranks are bm25s's English stopwords, so, as in English text, about a third
of tokens are stopwords. Documents have 60-100 words; queries are 3-8 words drawn from one
document (so every query has at least one relevant document) with at least one non-stopword.
"""

from __future__ import annotations

import numpy as np

from searchgym.retrieval.bm25s_import import import_bm25s

SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou", "ee")]


def _stopwords() -> tuple[str, ...]:
    """bm25s's English stopwords (bm25s imported with JAX hidden, so no GPU memory is taken)."""
    return tuple(import_bm25s().stopwords.STOPWORDS_EN)


def make_vocab(size: int, rng: np.random.Generator) -> list[str]:
    """``size`` distinct words: bm25s English stopwords first, then random 2-4 syllable words."""
    words = list(_stopwords())
    seen = set(words)
    while len(words) < size:
        n = int(rng.integers(2, 5))
        w = "".join(SYLLABLES[i] for i in rng.integers(0, len(SYLLABLES), n))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def make_corpus(
    num_docs: int, *, seed: int = 0, vocab_size: int = 50_000, s: float = 1.0, min_len: int = 60, max_len: int = 100
):
    """Return ``(doc_ids, titles, texts, vocab)`` for a reproducible synthetic corpus."""
    rng = np.random.default_rng(seed)
    vocab = np.array(make_vocab(vocab_size, rng), dtype=object)
    p = 1.0 / np.arange(1, vocab_size + 1) ** s
    cdf = np.cumsum(p / p.sum())
    lengths = rng.integers(min_len, max_len + 1, num_docs)
    ptr = np.concatenate([[0], np.cumsum(lengths)])
    ranks = np.searchsorted(cdf, rng.random(int(ptr[-1])), side="right").clip(max=vocab_size - 1)
    words = vocab[ranks]
    texts = [" ".join(words[ptr[i] : ptr[i + 1]]) for i in range(num_docs)]
    title_words = vocab[rng.integers(33, vocab_size, (num_docs, 2))]
    titles = [f"{a.title()} {b.title()}" for a, b in title_words]
    doc_ids = [f"d{i}" for i in range(num_docs)]
    return doc_ids, titles, texts, vocab


def make_queries(texts, n: int, *, seed: int = 1, min_words: int = 3, max_words: int = 8) -> list[str]:
    """``n`` queries of 3-8 words, each drawn (without replacement) from one random document."""
    stop = set(_stopwords())
    rng = np.random.default_rng(seed)
    out: list[str] = []
    while len(out) < n:
        words = texts[int(rng.integers(0, len(texts)))].split()
        m = int(rng.integers(min_words, max_words + 1))
        picked = [words[i] for i in sorted(rng.choice(len(words), m, replace=False))]
        if any(w not in stop for w in picked):  # a query of stopwords only searches nothing
            out.append(" ".join(picked))
    return out
