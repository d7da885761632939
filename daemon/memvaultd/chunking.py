"""Splitting a note file into chunks, each one memory (docs/watch.md).

Markdown is split at its ATX headings (`#` to `######`, outside fenced code
blocks); each section is one chunk, headed by its heading line, and known by
its heading path ("Design > Storage"). Plain text has no headings: the whole
file is one section with the empty path. A section longer than
`TARGET_CHARS` is split further at paragraph boundaries (blank lines, never
inside a code fence), then at line boundaries, then, for one enormous line,
anywhere; every part after the first repeats the heading line, so each
memory reads on its own.

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
    fence = ""
    for line in text.split("\n"):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
        elif opened:
            fence = opened.group(1)
        elif heading := _HEADING.match(line):
            level, title = len(heading.group(1)), heading.group(2).strip()
            path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, title)]
            name = HEADING_SEPARATOR.join(t for _, t in path)
            sections.append(_Section(name, line.strip()[:_HEADING_CHARS], []))
            continue
        sections[-1].lines.append(line)
    return sections


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
