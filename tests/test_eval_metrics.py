"""Answer metrics against hand cases of Search-R1's / FlashRAG's published behaviour, and the bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from searchgym.core.answers import cover_exact_match, exact_match, normalize_answer, token_f1
from searchgym.evaluation.metrics import answer_scores, bootstrap_ci, check_metrics, paired_diff_ci, summarize


# Expected values worked out by hand from Search-R1's qa_em.normalize_answer (lower → drop
# string.punctuation → articles to spaces → collapse whitespace), which FlashRAG copies.
@pytest.mark.parametrize(
    "raw, norm",
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("  the   Beatles!! ", "beatles"),
        ("U.S.A.", "usa"),
        ("Rock-'n'-Roll", "rocknroll"),  # hyphen and quotes are ASCII punctuation: removed, not spaced
        ("An apple a day", "apple day"),
        ("theatre", "theatre"),  # articles only as whole words
        ("Café Müller", "café müller"),  # non-ASCII letters kept, lowercased
        ("l’Orange", "l’orange"),  # the typographic apostrophe is not in string.punctuation
        ("1,204", "1204"),
        ("A", ""),  # an article alone normalises to nothing
        (None, ""),
    ],
)
def test_normalize_answer_matches_search_r1(raw, norm):
    assert normalize_answer(raw) == norm


def test_exact_match_hand_cases():
    assert exact_match("the Republic of Merovia.", ["Merovia", "Republic of Merovia"])  # any alias
    assert exact_match("U.S.A", "usa")
    assert not exact_match("Ostrel city", ["Ostrel"])
    assert not exact_match("", [""])  # searchgym: an empty prediction is never correct


def test_token_f1_is_flashrag_f1():
    assert token_f1("Ostrel city", ["Ostrel"]) == pytest.approx(2 / 3)
    assert token_f1("the city of Ostrel", ["Ostrel", "city Ostrel"]) == pytest.approx(0.8)  # max over golds
    # HotpotQA/FlashRAG rule: yes / no / noanswer score 0 unless both sides are equal
    assert token_f1("yes", ["no"]) == 0.0
    assert token_f1("yes it is", ["yes"]) == 0.0
    assert token_f1("no", ["No."]) == 1.0
    assert token_f1(None, ["Ostrel"]) == 0.0


def test_cover_em_is_search_r1_subem():
    assert cover_exact_match("It is Ostrel, in Merovia", ["Ostrel"])
    assert cover_exact_match("Parisian", ["Paris"])  # plain substring, as subem_check
    assert not cover_exact_match("Parisian", ["Paris"], whole_words=True)
    assert not cover_exact_match("", ["Paris"])


def test_answer_scores_zero_for_no_or_invalid_answer():
    assert answer_scores(None, ["x"]) == {"em": 0.0, "f1": 0.0, "cover_em": 0.0}
    assert answer_scores("x", ["x"], valid=False)["em"] == 0.0
    assert answer_scores("x", ["x"]) == {"em": 1.0, "f1": 1.0, "cover_em": 1.0}


def test_env_judge_and_eval_share_one_definition():
    from searchgym.scoring import judge

    assert (
        judge.exact_match is exact_match and judge.token_f1 is token_f1 and judge.normalize_answer is normalize_answer
    )


def test_bootstrap_interval():
    ci = bootstrap_ci([1.0] * 10)
    assert ci == {"mean": 1.0, "lo": 1.0, "hi": 1.0, "n": 10}
    ci = bootstrap_ci([0.0, 1.0] * 100, seed=3)
    assert ci["lo"] < 0.5 < ci["hi"] and ci["hi"] - ci["lo"] < 0.2
    assert bootstrap_ci([0.0, 1.0] * 100, seed=3) == ci  # seeded
    wide = bootstrap_ci([0.0, 1.0] * 5, seed=3)
    assert wide["hi"] - wide["lo"] > ci["hi"] - ci["lo"]  # fewer questions, wider interval


def _resampled_percentile_ci(x, n_boot=1000, seed=0, level=0.95):
    """The hand-written resampler bootstrap_ci used before scipy.stats.bootstrap (issue 30): 200 rows of
    ``rng.integers(0, n, (200, n))`` at a time, means, ``np.quantile`` of them."""
    x = np.asarray(x, dtype=float)
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [x[rng.integers(0, len(x), size=(min(200, n_boot - k), len(x)))].mean(axis=1) for k in range(0, n_boot, 200)]
    )
    a = (1 - level) / 2
    return np.quantile(means, a), np.quantile(means, 1 - a)


@pytest.mark.parametrize("n", [2, 7, 100, 1001])
def test_bootstrap_interval_is_the_one_reported_before_the_switch_to_scipy(n):
    rng = np.random.default_rng(n)
    for x in (rng.integers(0, 2, n).astype(float), rng.random(n)):
        for seed, n_boot, level in ((0, 1000, 0.95), (7, 450, 0.9)):
            ci = bootstrap_ci(x, seed=seed, n_boot=n_boot, level=level)
            lo, hi = _resampled_percentile_ci(x, n_boot, seed, level)
            assert ci["lo"] == pytest.approx(lo, abs=1e-12) and ci["hi"] == pytest.approx(hi, abs=1e-12)


def test_bootstrap_interval_edge_cases():
    assert bootstrap_ci([0.25]) == {"mean": 0.25, "lo": 0.25, "hi": 0.25, "n": 1}
    with pytest.raises(ValueError, match="n_boot >= 1 and 0 < level < 1"):
        bootstrap_ci([0.0, 1.0], level=95)


def test_paired_difference():
    a = [0.0] * 50 + [1.0] * 50
    b = [1.0] * 100
    d = paired_diff_ci(a, b)
    assert d["mean"] == pytest.approx(0.5) and 0.35 < d["lo"] < 0.5 < d["hi"] < 0.65
    same = paired_diff_ci(a, a)
    assert same["lo"] == same["hi"] == 0.0


def test_unknown_metric_lists_valid_ones():
    with pytest.raises(ValueError, match="em, f1, cover_em, llm_judge"):
        check_metrics("em,bleu")


def test_summarize_counts():
    recs = [
        {"em": 1.0, "searches": 2, "turns": 3, "tokens": 10, "invalid_format": 0},
        {"em": 0.0, "searches": 0, "turns": 1, "tokens": 4, "invalid_format": 1},
    ]
    s = summarize(recs, ["em"])
    assert s["n"] == 2 and s["em"]["mean"] == 0.5 and s["searches"] == 1.0 and s["invalid_format"] == 0.5
