"""Note files split into chunks: by heading, long sections at paragraphs."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memvaultd.notes.chunking import TARGET_CHARS, _sections, split
from memvaultd.notes.note_folder import glob_regex

NOTE = """\
---
title: front matter is not a memory
---
Preamble before any heading.

# Memvault

## Design

Sealed log, snapshots.

```python
# not a heading: inside a fence
x = 1
```

## Notes

first notes

## Notes

second notes

# Empty

## Child

child text
"""


def test_sections_by_heading_path_with_occurrences() -> None:
    chunks = split(NOTE, markdown=True)
    assert [(c.heading, c.occurrence, c.part) for c in chunks] == [
        ("", 0, 0),
        ("Memvault > Design", 0, 0),
        ("Memvault > Notes", 0, 0),
        ("Memvault > Notes", 1, 0),
        ("Empty > Child", 0, 0),
    ]
    assert chunks[0].text == "Preamble before any heading."
    design = chunks[1].text
    assert design.startswith("## Design\n\nSealed log") and "# not a heading" in design
    assert chunks[3].text == "## Notes\n\nsecond notes"
    assert "front matter" not in " ".join(c.text for c in chunks)


def test_long_sections_split_at_paragraphs_and_repeat_the_heading() -> None:
    paragraphs = [f"paragraph {i} " + "word " * 60 for i in range(20)]  # ~320 chars each
    chunks = split("# Long\n\n" + "\n\n".join(paragraphs), markdown=True)
    assert len(chunks) > 3
    assert [c.part for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text.startswith("# Long\n\nparagraph ")
        assert len(chunk.text) <= TARGET_CHARS
    body = "".join(c.text.removeprefix("# Long\n\n") for c in chunks)
    assert all(p.strip() in body for p in paragraphs)  # every paragraph whole, once


def test_one_enormous_line_is_cut_anyway() -> None:
    chunks = split("x" * 10_000, markdown=False)
    assert "".join(c.text for c in chunks) == "x" * 10_000
    assert all(len(c.text) <= TARGET_CHARS for c in chunks)


def test_plain_text_has_no_headings_and_same_text_same_hash() -> None:
    chunks = split("# not a heading in a .txt\n\nbody", markdown=False)
    assert [c.heading for c in chunks] == [""]
    crlf = split("# not a heading in a .txt\r\n\r\nbody", markdown=False)
    assert chunks[0].sha256 == crlf[0].sha256


def test_an_edit_changes_only_its_own_chunk() -> None:
    before = {c.key: c.sha256 for c in split(NOTE, markdown=True)}
    after = {c.key: c.sha256 for c in split(NOTE.replace("first notes", "first notes, edited"),
                                             markdown=True)}
    assert before.keys() == after.keys()
    assert [k for k in before if before[k] != after[k]] == [("Memvault > Notes", 0, 0)]


@given(st.text(alphabet=st.sampled_from("ab #\n`~-"), max_size=5000))
def test_any_text_splits_into_bounded_nonblank_chunks(text: str) -> None:
    for markdown in (True, False):
        chunks = split(text, markdown=markdown)
        assert len({c.key for c in chunks}) == len(chunks)
        for chunk in chunks:
            assert chunk.text.strip()
            assert len(chunk.text) <= TARGET_CHARS


def test_glob_patterns() -> None:
    md = glob_regex("**/*.md")
    assert md.fullmatch("a.md") and md.fullmatch("x/y/a.md")
    assert not md.fullmatch("a.txt") and not md.fullmatch("a.md.bak")
    top = glob_regex("*.txt")
    assert top.fullmatch("a.txt") and not top.fullmatch("d/a.txt")
    assert glob_regex("journal/**/*.md").fullmatch("journal/2026/01.md")


SETEXT = """\
Project log
===========

Started in March.

Storage
-------

Sealed segments.

# Later

A title that runs
over two lines
---

wrapped text

- a list item
---

after a thematic break

***

===

```
Not a heading
---
```
"""


def test_setext_headings_are_headings_too() -> None:
    chunks = split(SETEXT, markdown=True)
    assert [(c.heading, c.occurrence) for c in chunks] == [
        ("Project log", 0),
        ("Project log > Storage", 0),
        ("Later > A title that runs over two lines", 0),
    ]
    assert chunks[0].text == "Project log\n===========\n\nStarted in March."
    assert chunks[1].text == "Storage\n-------\n\nSealed segments."
    last = chunks[2].text
    assert last.startswith("A title that runs\nover two lines\n---\n\nwrapped text")
    # An underline below a list item, after a blank line, or inside a fence
    # is a thematic break or text, not a heading: it stays in the section.
    for kept in ("- a list item\n---", "***\n\n===", "Not a heading\n---"):
        assert kept in last


def test_a_setext_heading_ends_the_section_before_it() -> None:
    chunks = split("# Top\n\nintro\n\nNext\n====\n\nbody", markdown=True)
    assert [(c.heading, c.text) for c in chunks] == [
        ("Top", "# Top\n\nintro"), ("Next", "Next\n====\n\nbody")]


# Lines that make CommonMark's block structure hard: headings of both kinds,
# underlines of every length and indent, thematic breaks, fences, indented
# code, tables. (Headings inside list items and quotes are not looked for:
# docs/watch.md.)
_LINES = ["Title", "two words", "===", "---", "", "", "text", "more text", "***", "- - -",
          "  ---", "   ===", "    code", "\tindented", "```", "~~~", "# H1", "## H2 ##", "--",
          "=", "#nospace", "| a | b |", "_ _ _"]


def test_headings_agree_with_a_commonmark_parser() -> None:
    markdown_it = pytest.importorskip("markdown_it")  # installed with rich
    parser = markdown_it.MarkdownIt("commonmark")
    rng = random.Random(20261126)
    for _ in range(3_000):
        text = "\n".join(rng.choice(_LINES) for _ in range(rng.randint(1, 12)))
        tokens = parser.parse(text)
        expected = [" ".join(tokens[i + 1].content.split()) for i, t in enumerate(tokens)
                    if t.type == "heading_open"]
        # Every heading opens a section (split() then drops the empty ones).
        found = [" ".join(s.heading.split(" > ")[-1].split()) for s in _sections(text)[1:]]
        assert found == expected, repr(text)
