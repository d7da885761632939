"""Splitting a note file into chunks, each one memory (docs/watch.md).

Markdown is split at its headings, outside fenced code blocks: ATX (`#` to
`######`) and Setext (a paragraph underlined with `===`, level 1, or `---`,
level 2, as CommonMark reads them); each section is one chunk, headed by its
heading line(s), and known by its heading path ("Design > Storage"). Plain
text has no headings: the whole file is one section with the empty path. A
section longer than `TARGET_CHARS` is split further at paragraph boundaries
(blank lines, never inside a code fence), then at line boundaries, then, for
one enormous line, anywhere; every part after the first repeats the heading
line, so each memory reads on its own.

A chunk is identified by (heading path, occurrence, part): the occurrence
counts earlier sections of the file with the same heading path ("Notes"
twice is "Notes" #0 and #1), the part counts the pieces of a long section.
Its `sha256` is of its text, so an unchanged chunk is recognised after a
restart without comparing texts.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

# all-MiniLM-L6-v2 reads its first 256 word pieces, about 1,000-1,200
# characters of English prose; 1,500 keeps a typical note section whole (a
# few paragraphs) while its start still dominates the embedding.
TARGET_CHARS = 1500
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd"})

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_BREAK = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")  # a thematic break
# A quote, or a list item with text, which ends a paragraph (an ordered one
# only from 1); an underline below either is a thematic break or text.
_QUOTE_OR_ITEM = re.compile(r"^ {0,3}(?:>|(?:[-+*]|(\d{1,9})[.)])[ \t]+\S)")
_INDENTED = re.compile(r"^(?: {4}|\t)")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
HEADING_SEPARATOR = " > "
# A heading line longer than this is cut where a chunk repeats it: a "heading"
# of thousands of characters is a paragraph someone prefixed with "#".
_HEADING_CHARS = 200


@dataclass(frozen=True, slots=True)
class Chunk:
    heading: str  # the heading path, "" before the first heading
    occurrence: int
    part: int
    text: str

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.heading, self.occurrence, self.part)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class _Section:
    heading: str
    heading_line: str
    lines: list[str]


def split(text: str, *, markdown: bool, target: int = TARGET_CHARS) -> list[Chunk]:
    """The chunks of a file's text, in file order; blank sections are dropped."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if markdown:
        text = _FRONT_MATTER.sub("", text, count=1)
        sections = _sections(text)
    else:
        sections = [_Section("", "", text.split("\n"))]
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    for section in sections:
        body = "\n".join(section.lines).strip("\n")
        if not body.strip():
            continue  # a heading directly followed by its subheading
        occurrence = seen.get(section.heading, 0)
        seen[section.heading] = occurrence + 1
        head = section.heading_line + "\n\n" if section.heading_line else ""
        for part, piece in enumerate(_pieces(body, target - len(head))):
            chunks.append(Chunk(section.heading, occurrence, part, (head + piece).strip()))
    return chunks


def _sections(text: str) -> list[_Section]:
    sections = [_Section("", "", [])]
    path: list[tuple[int, str]] = []

    def open_section(level: int, title: str, heading_line: str) -> None:
        nonlocal path
        path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, title)]
        name = HEADING_SEPARATOR.join(t for _, t in path)
        sections.append(_Section(name, heading_line[:_HEADING_CHARS], []))

    fence = ""
    # Lines of the paragraph just above (a Setext heading's text, if an
    # underline follows), or below 0 in a quote, list item or indented code
    # (`_paragraph_after`), below which an underline is no heading.
    paragraph = 0
    for line in text.split("\n"):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
            paragraph = 0
        elif opened:
            fence, paragraph = opened.group(1), 0
        elif heading := _HEADING.match(line):
            open_section(len(heading.group(1)), heading.group(2).strip(), line.strip())
            paragraph = 0
            continue
        elif paragraph > 0 and (underline := _SETEXT.match(line)):
            lines = sections[-1].lines
            words = [text_line.strip() for text_line in lines[-paragraph:]]
            del lines[-paragraph:]
            level = 1 if underline.group(1)[0] == "=" else 2
            open_section(level, " ".join(words), "\n".join([*words, line.strip()]))
            paragraph = 0
            continue
        else:
            paragraph = _paragraph_after(line, paragraph)
        sections[-1].lines.append(line)
    return sections


_LAZY, _CODE = -1, -2  # in a quote or list item; in indented code


def _paragraph_after(line: str, paragraph: int) -> int:
    """The count of paragraph lines once `line` (no heading, no fence) is
    read, or `_LAZY` / `_CODE` (CommonMark's block structure, as far as
    Setext headings need it)."""
    if not line.strip() or _BREAK.match(line):
        return 0
    if paragraph == _CODE:
        if _INDENTED.match(line):
            return _CODE
        paragraph = 0  # indented code has no lazy lines: a new block
    item = _QUOTE_OR_ITEM.match(line)
    if item and not (paragraph > 0 and item.group(1) not in (None, "1")):
        return _LAZY  # (an ordered item from 2 on does not end a paragraph)
    if paragraph == 0 and _INDENTED.match(line):
        return _CODE  # within a paragraph, an indented line continues it
    return paragraph + 1 if paragraph >= 0 else _LAZY


def _pieces(body: str, limit: int) -> list[str]:
    """`body` in pieces of at most `limit` characters, cut where it reads best."""
    limit = max(limit, 200)
    if len(body) <= limit:
        return [body]
    pieces: list[str] = []
    current = ""
    for block in _blocks(body):
        for unit in _fit(block, limit):
            if current and len(current) + 2 + len(unit) > limit:
                pieces.append(current)
                current = ""
            current = f"{current}\n\n{unit}" if current else unit
    if current:
        pieces.append(current)
    return pieces


def _blocks(body: str) -> list[str]:
    """Paragraphs: runs of lines between blank lines; a code fence stays one block."""
    blocks: list[str] = []
    lines: list[str] = []
    fence = ""
    for line in body.split("\n"):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
        elif opened:
            fence = opened.group(1)
        elif not line.strip():
            if lines:
                blocks.append("\n".join(lines))
                lines = []
            continue
        lines.append(line)
    if lines:
        blocks.append("\n".join(lines))
    return blocks


def _fit(block: str, limit: int) -> list[str]:
    """A block too long for one piece, cut at line ends, else anywhere."""
    if len(block) <= limit:
        return [block]
    units: list[str] = []
    current = ""
    for line in block.split("\n"):
        while len(line) > limit:
            if current:
                units.append(current)
                current = ""
            units.append(line[:limit])
            line = line[limit:]
        if current and len(current) + 1 + len(line) > limit:
            units.append(current)
            current = ""
        current = f"{current}\n{line}" if current else line
    if current:
        units.append(current)
    return units
