"""The README stays short and every relative link in the README and docs/ leads somewhere.

`make lint` also builds the docs site with ``mkdocs build --strict`` (broken links and references fail there
too); this test covers the README, which is not a page of the site, and runs without mkdocs installed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 200
MARKDOWN_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# [text](target) and ![alt](target), not inside inline code; the target ends at whitespace or ")"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_BLOCK = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def github_anchor(heading: str) -> str:
    """The anchor GitHub (and the docs site, configured alike in mkdocs.yml) gives a Markdown heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in HEADING.findall(CODE_BLOCK.sub("", path.read_text(encoding="utf-8"))):
        anchor = github_anchor(heading)
        count = seen.get(anchor, 0)
        anchors.add(anchor if count == 0 else f"{anchor}-{count}")
        seen[anchor] = count + 1
    return anchors


def relative_links(path: Path) -> list[str]:
    """The link targets of a Markdown file that are neither URLs nor inside code."""
    text = INLINE_CODE.sub("", CODE_BLOCK.sub("", path.read_text(encoding="utf-8")))
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; keep it to {README_MAX_LINES}: details go to docs/"


@pytest.mark.parametrize("path", MARKDOWN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path):
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target} (no file {linked.relative_to(ROOT) if linked.is_relative_to(ROOT) else linked})")
        elif anchor and linked.suffix == ".md" and anchor not in anchors_of(linked):
            broken.append(f"{target} (no heading with anchor #{anchor} in {linked.name})")
    assert not broken, f"{path.relative_to(ROOT)}: broken links: " + "; ".join(broken)


def test_the_checks_catch_a_broken_link(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## `searchgym train --init`\n\n[a](missing.md) [b](page.md#title) `[c](gone.md)`\n")
    assert relative_links(page) == ["missing.md", "page.md#title"]
    assert anchors_of(page) == {"title", "searchgym-train---init"}


def test_every_docs_page_is_in_the_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")]
    missing = [p for p in pages if f": {p}" not in nav]
    assert not missing, f"docs pages missing from the nav in mkdocs.yml: {missing}"
