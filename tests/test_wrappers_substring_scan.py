"""The compiled waypoint matcher (``_substring_scan``) equals ``[p in text for p in patterns]``.

It reads the str's PEP 393 buffer in place (1, 2 or 4 bytes per character) and anchors on a rare
byte, so the cases that matter are the storage kinds, misaligned byte hits, patterns wider than the
text, and the edges of the text. Also: the pure-Python fallback when the extension is missing.
"""

from __future__ import annotations

import shutil
import sysconfig

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.wrappers import waypoint_coverage_reward as wcr
from searchgym.wrappers.waypoint_coverage_reward import NATIVE_AVAILABLE, WaypointMatcher

native = pytest.mark.skipif(not NATIVE_AVAILABLE, reason="searchgym was installed without its C extension")


def _contains_each(text, patterns):
    from searchgym.wrappers._substring_scan import contains_each

    return contains_each(text, patterns)


def test_extension_is_built_wherever_a_c_compiler_exists():
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) here: the pure-Python strategies serve")
    assert NATIVE_AVAILABLE, "a C compiler is present but searchgym.wrappers._substring_scan was not built"
    assert WaypointMatcher(["Bern"]).strategy == "native"


@native
@pytest.mark.parametrize(
    "text",
    [
        "ascii only: Bern lies on the Aare, Zurich on the Limmat.",
        "latin-1: Genève and Zürich, Bern",
        "ucs-2: Bern – Zürich – Genève",
        "ucs-4: Bern 😀 Zürich 😀 Genève",
    ],
)
def test_every_storage_kind_matches_like_in(text):
    patterns = ["Bern", "Zürich", "Genève", "Basel", "😀", "–", "ü", "Bern – Z", "Aare", "Limmat."]
    assert _contains_each(text, patterns) == [p in text for p in patterns]


@native
def test_edges_of_the_text_and_whole_text():
    text = "Alpha middle Omega"
    patterns = ["Alpha", "Omega", text, text + "!", "A", "a", "x" * 40]
    assert _contains_each(text, patterns) == [True, True, True, False, True, True, False]
    assert _contains_each("", ["a"]) == [False]
    assert _contains_each("abc", []) == []


@native
def test_misaligned_byte_hits_are_not_matches():
    # UCS-2 text U+4100 U+4200 U+0000 is bytes 00 41 00 42 00 00 (little-endian): "AB" (41 00 42 00)
    # appears at the odd byte offset 1, which is not a character boundary.
    text = "\u4100\u4200\x00"
    assert _contains_each(text, ["AB", "\u4200", "A"]) == ["AB" in text, True, "A" in text] == [False, True, False]
    text4 = "\U00010041\U00010042\x00"
    assert _contains_each(text4, ["AB", "\U00010042"]) == [False, True]


@native
def test_pattern_wider_than_the_text_cannot_occur():
    assert _contains_each("plain ascii text", ["ascii – text", "😀", "text"]) == [False, False, True]


@native
def test_bad_arguments_raise_type_errors():
    with pytest.raises(TypeError, match="text must be str"):
        _contains_each(b"bytes", ["a"])
    with pytest.raises(TypeError, match="pattern 1 must be str"):
        _contains_each("text", ["a", 3])
    with pytest.raises(TypeError, match="tuple or list"):
        _contains_each("text", 5)
    from searchgym.wrappers._substring_scan import contains_each

    with pytest.raises(TypeError, match="2 arguments"):
        contains_each("text")


@native
@settings(max_examples=400, deadline=None)
@given(
    text=st.text(alphabet="abAB é–😀\x00\u4100\u4200", max_size=300),
    patterns=st.lists(st.text(alphabet="abAB é–😀\x00\u4100\u4200", min_size=1, max_size=5), max_size=12),
)
def test_matches_in_on_random_text(text, patterns):
    assert _contains_each(text, patterns) == [p in text for p in patterns]


@native
def test_long_text_releases_nothing_it_should_not():
    # > 64 KB buffers are scanned without the GIL; results must be unchanged.
    text = ("lorem ipsum dolor – sit amet " * 5000) + "Needle"
    assert _contains_each(text, ["Needle", "needle", "amet – ", "dolor – sit"]) == [True, False, False, True]


def test_without_the_extension_auto_falls_back_and_native_explains_the_fix(monkeypatch):
    monkeypatch.setattr(wcr, "NATIVE_AVAILABLE", False)
    monkeypatch.setattr(wcr, "_native_contains_each", None)
    few = WaypointMatcher(["Bern", "Zurich"])
    assert few.strategy == "scan" and few.match("Zurich only") == [False, True]
    many = WaypointMatcher([f"w{i}" for i in range(wcr.AUTOMATON_THRESHOLD)])
    assert many.strategy == "automaton"
    with pytest.raises(RuntimeError, match="C compiler"):
        WaypointMatcher(["Bern"], strategy="native")


@native
def test_aliases_and_repeated_titles_map_hits_back_to_waypoints():
    m = WaypointMatcher(["Bern", "Zurich", "Bern"], aliases=[["Berne"], ["Zürich"], []], strategy="native")
    assert m.match("Zürich is larger") == [False, True, False]
    assert m.match("Bern is the capital") == [True, False, True]


@native
@pytest.mark.parametrize("kind_char", ["", "é", "–", "😀"])
def test_anchor_that_keeps_hitting_falls_back_to_a_linear_search(kind_char):
    # Runs of 499 "a" then a separator: "a" * 500 has no rarer byte than "a", its anchor hits at almost
    # every position and each verification fails late, so the scan hands it to CPython's search.
    text = kind_char + ("a" * 499 + "c") * 400
    patterns = ["a" * 500, "a" * 499 + "c", "c" + "a" * 499 + "c", "a" * 400 + "d"]
    assert _contains_each(text, patterns) == [p in text for p in patterns] == [False, True, True, False]
    late = text + "a" * 500
    assert _contains_each(late, patterns) == [True, True, True, False]
