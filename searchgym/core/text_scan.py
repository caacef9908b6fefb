"""Linear-time scans of untrusted text (model output, retrieved documents) where a regular expression was not.

A lazy ``(.*?)`` that must reach a closing string rescans to the end of the text (or line) from every opening
that is never closed, so n unclosed openings cost O(n²). Each function here returns exactly what its stated
pattern returned, but stops at the first opening that cannot be closed: no later one can be closed either.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..errors import InvalidArgumentError

__all__ = ["tag_bodies", "doc_header_matches", "split_doc_headers", "DOC_HEADER"]

#: the start of a document header, ``Doc 3 (Title: "`` (any whitespace, Unicode digits), up to its title
DOC_HEADER = re.compile(r'Doc\s+\d+\s*\(Title:\s*"')
_SPACES = re.compile(r"\s*")


def tag_bodies(text: str, open_tag: str, close_tag: str) -> list[str]:
    """``re.findall(re.escape(open_tag) + "(.*?)" + re.escape(close_tag), text, re.DOTALL)``, in linear time.

    The texts between each ``open_tag`` and the first ``close_tag`` after it, left to right, not overlapping;
    an opening tag with no closing tag after it ends the scan. Both tags must be non-empty.
    """
    if not open_tag or not close_tag:
        raise InvalidArgumentError(f"tag_bodies needs non-empty tags, got {open_tag!r} and {close_tag!r}")
    out: list[str] = []
    pos = 0
    while (start := text.find(open_tag, pos)) >= 0:
        body = start + len(open_tag)
        end = text.find(close_tag, body)
        if end < 0:
            break
        out.append(text[body:end])
        pos = end + len(close_tag)
    return out


def doc_header_matches(text: str, header: re.Pattern = DOC_HEADER) -> Iterator[tuple[int, int, int]]:
    """``(start, title start, title end)`` of each match of ``header.pattern + '(.*?)"\\)'`` (no DOTALL) in ``text``.

    Left to right and not overlapping, as ``re.finditer`` finds them; ``header`` must match at most one way at
    a position and never match whitespace first (true of :data:`DOC_HEADER` and of ``Doc \\d+ \\(Title: "``). A
    title ends at the first ``")`` on its header's line; once a line has a header without one, the later
    headers on that line are skipped unscanned (the pattern rescanned the line for each: O(n²)).
    """
    pos, line_end, dead_line = 0, -1, -1
    while (m := header.search(text, pos)) is not None:
        title = m.end()
        if title > line_end:  # the line the title is on ends at its first newline (or the text's end)
            nl = text.find("\n", title)
            line_end = len(text) if nl < 0 else nl
        close = -1 if line_end == dead_line else text.find('")', title, line_end)
        if close < 0:
            dead_line = line_end
            pos = m.start() + 1
            continue
        yield m.start(), title, close
        pos = close + 2


def split_doc_headers(text: str) -> list[str]:
    """``re.split(r'Doc\\s+\\d+\\s*\\(Title:\\s*"(.*?)"\\)\\s*', text)`` in linear time.

    ``[before, title 1, body 1, title 2, body 2, ...]``: the text around each ``Doc i (Title: "t")`` header (and
    the whitespace after it), with the titles between.
    """
    out: list[str] = []
    last = 0
    for start, title, close in doc_header_matches(text):
        out += [text[last:start], text[title:close]]
        spaces = _SPACES.match(text, close + 2)  # the header's trailing \s* (always matches)
        last = spaces.end() if spaces else close + 2
    out.append(text[last:])
    return out
