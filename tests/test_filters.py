"""SSP rule filters: each rule rejects with its stable code; a good question passes."""

from __future__ import annotations

import re

import pytest

from searchgym.errors import InvalidArgumentError
from searchgym.scoring.question_filters import REASONS, FilterConfig, check_question, filter_settings
from tests.support.trajectories import proposer_trajectory

GOOD_Q = "Which city is the capital of the country in which the chemist Alice Varn was born?"


def test_good_question_passes_with_details():
    res = check_question(GOOD_Q, "Ostrel", proposer_trajectory(["Alice Varn birthplace", "Tarsk country"]))
    assert res.ok and res.reason is None
    assert res.details["searches"] == 2 and res.details["information_blocks"] == 2 and res.details["words"] == 16


@pytest.mark.parametrize(
    "question,reason",
    [
        (None, "no_question"),
        ("   ", "no_question"),
        ("Who?", "too_short"),
        ("x" * 1001, "too_long"),
        ("Which city is the capital there?", "too_few_words"),
        ("Is Ostrel the capital of the country in which the chemist Alice Varn was born?", "answer_leak"),
        ("Is OSTREL the capital of the country in which the chemist Alice Varn was born?", "answer_leak"),
    ],
)
def test_question_shape_rules(question, reason):
    res = check_question(question, ["Ostrel"], proposer_trajectory(["a", "b"]))
    assert not res.ok and res.reason == reason and reason in REASONS


def test_trajectory_rules():
    assert (
        check_question(GOOD_Q, "Ostrel", proposer_trajectory(["a", "b"], information=False)).reason == "no_information"
    )
    assert check_question(GOOD_Q, "Ostrel", proposer_trajectory(["only one"])).reason == "too_few_searches"
    res = check_question(GOOD_Q, "Ostrel", proposer_trajectory(["Tarsk  country", "tarsk COUNTRY"]))
    assert res.reason == "duplicate_queries" and res.details["duplicate_queries"] == ["tarsk country"]


def test_alias_leak_is_opt_in():
    q = "Which city is the capital of the Republic of Merovia, founded in the year 1204?"
    golds = ["Merovia republic", "Republic of Merovia"]
    traj = proposer_trajectory(["a", "b"])
    assert check_question(q, golds, traj).ok
    res = check_question(q, golds, traj, FilterConfig(leak_check_aliases=True))
    assert res.reason == "answer_leak" and res.details["leaked"] == ["Republic of Merovia"]


def test_rules_can_be_disabled():
    cfg = FilterConfig(
        min_searches=0,
        require_information=False,
        forbid_duplicate_queries=False,
        forbid_answer_in_question=False,
        min_words=0,
    )
    assert check_question("Ostrel? sure", "Ostrel", proposer_trajectory([]), cfg).ok


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="min_words"):
        FilterConfig(min_words=-1)
    with pytest.raises(ValueError, match="max_chars"):
        FilterConfig(min_chars=20, max_chars=10)


def test_required_search_count_is_enforced_only_when_asked():
    two = proposer_trajectory(["Alice Varn birthplace", "Tarsk country"])
    assert check_question(GOOD_Q, "Ostrel", two, required_searches=3).ok  # SSP's code filters: >= min_searches only
    strict = FilterConfig(searches_at_least_required=True)
    res = check_question(GOOD_Q, "Ostrel", two, strict, required_searches=3)
    assert res.reason == "too_few_searches" and res.details["required"] == 3 and res.details["searches"] == 2
    three = proposer_trajectory(["Alice Varn birthplace", "Tarsk country", "Merovia capital"])
    assert check_question(GOOD_Q, "Ostrel", three, strict, required_searches=3).ok
    assert check_question(GOOD_Q, "Ostrel", two, strict).ok  # no count asked for: nothing to enforce


def test_min_searches_is_capped_at_the_required_count_only_when_asked():
    one = proposer_trajectory(["Alice Varn birthplace"])
    assert check_question(GOOD_Q, "Ostrel", one, required_searches=1).reason == "too_few_searches"  # SSP's code: >= 2
    capped = FilterConfig(min_searches_at_most_required=True)
    assert check_question(GOOD_Q, "Ostrel", one, capped, required_searches=1).ok
    assert check_question(GOOD_Q, "Ostrel", one, capped, required_searches=3).reason == "too_few_searches"
    assert check_question(GOOD_Q, "Ostrel", one, capped).reason == "too_few_searches"  # no count: min_searches holds
    none = proposer_trajectory([])
    assert check_question(GOOD_Q, "Ostrel", none, capped, required_searches=1).reason == "no_information"


def test_filter_settings_read_command_line_items_and_refuse_bad_ones():
    """``--filter FIELD=VALUE`` items become the mapping an env's filter_config takes, checked before any env."""
    assert filter_settings(["min_searches=1", "min_searches_at_most_required=true"]) == {
        "min_searches": 1,
        "min_searches_at_most_required": True,
    }
    assert filter_settings([]) == {}
    for item, message in (
        ("min_searches=x", "--filter: min_searches expects an integer, got 'x'"),
        ("min_searches", "must look like FIELD=VALUE"),
        ("min_search=1", "no such rule filter; valid: min_chars"),
    ):
        with pytest.raises(InvalidArgumentError, match=re.escape(message)):
            filter_settings([item])
