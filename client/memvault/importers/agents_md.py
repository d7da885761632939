"""CLAUDE.md / AGENTS.md: each instruction a procedural memory (docs/import.md).

An instruction is a top-level list item (with its indented lines and nested
items) or a paragraph; a fenced code block belongs to the instruction before
it under the same heading ("Run the tests with:" then the command), or is
one of its own. Its topic is "instructions" and its heading path
("## Testing" under "# Project" -> "instructions.project.testing"), its
source "FILE:LINE" (the line it starts on), its tag the file's name
("claude-md").
"""

from __future__ import annotations

import re
from pathlib import Path

from memvault.importers.drafts import Draft, checked_text, read_text
from memvault.importers.markdown import Fences, heading, slug, topic_of

__all__ = ["TOPIC_PREFIX", "read_instructions"]

PROCEDURAL = "procedural"
TOPIC_PREFIX = "instructions"
_ITEM = re.compile(r"^([-*+]|\d{1,9}[.)])[ \t]+")
_COMMENT = re.compile(r"^\s*<!--.*-->\s*$")


def read_instructions(path: Path, name: str | None = None) -> list[Draft]:
    """The instructions of the file at `path`; `name` is how sources name it
    (default: `path` as given)."""
    name = name or str(path)
    return parse_instructions(read_text(path, name), name)


def parse_instructions(text: str, name: str) -> list[Draft]:
    tag = slug(Path(name).name)
    drafts: list[Draft] = []
    path: list[tuple[int, str]] = []
    block: list[str] = []
    start = 0
    last_under: tuple[tuple[int, str], ...] | None = None  # the heading path of drafts[-1]
    fences = Fences()

    def flush() -> None:
        nonlocal block, last_under
        if block:
            where = f"{name}:{start}"
            drafts.append(Draft(text=checked_text("\n".join(block), where), type=PROCEDURAL,
                                topic=topic_of(TOPIC_PREFIX, [t for _, t in path]),
                                source=where, tags=(tag,)))
            last_under = tuple(path)
        block = []

    for number, line in enumerate(text.splitlines(), 1):
        if fences.inside(line):
            if not block:
                if drafts and last_under == tuple(path):  # the command after its instruction
                    reopened = drafts.pop()
                    block, start = [reopened.text], int(reopened.source.rsplit(":", 1)[1])
                else:
                    start = number
            block.append(line)
            continue
        if not line.strip() or _COMMENT.match(line):
            flush()
            continue
        found = heading(line)
        if found:
            flush()
            level, title = found
            path = [(lv, t) for lv, t in path if lv < level] + [(level, title)]
            continue
        item = _ITEM.match(line)
        if item and not line[0].isspace():
            flush()
            block, start = [line[item.end():].strip()], number
            continue
        if not block:
            start = number
        block.append(line.strip())
    flush()
    return drafts
