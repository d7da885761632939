"""What the Markdown importers share: headings, code fences, topic slugs.

Only ATX headings (`#` to `######`) split a file, and never inside a fenced
code block (``` or ~~~); Setext headings (a line underlined with === or ---)
stay text. The daemon's watched notes also split Setext headings
(docs/watch.md); a one-off import keeps to the form CLAUDE.md, AGENTS.md and
Obsidian notes use.
"""

from __future__ import annotations

import re

__all__ = ["Fences", "heading", "slug", "topic_of"]

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_NOT_SLUG = re.compile(r"[^\w]+")


def heading(line: str) -> tuple[int, str] | None:
    """(level, title) when `line` is an ATX heading."""
    match = _HEADING.match(line)
    return (len(match.group(1)), match.group(2)) if match else None


class Fences:
    """Follows fenced code blocks line by line: `inside(line)` is True for
    the fence lines and every line between them."""

    def __init__(self) -> None:
        self._open = ""

    def inside(self, line: str) -> bool:
        match = _FENCE.match(line)
        if self._open:
            if match and match.group(1)[0] == self._open[0] and len(match.group(1)) >= len(
                    self._open) and not line.strip()[len(match.group(1)):].strip():
                self._open = ""
            return True
        if match:
            self._open = match.group(1)
            return True
        return False


def slug(title: str) -> str:
    """"Code style & tests" -> "code-style-tests": a topic key's part."""
    return _NOT_SLUG.sub("-", title.lower()).strip("-_")


def topic_of(prefix: str, parts: list[str]) -> str:
    """`prefix` and the slugs of `parts`, dotted: ("instructions", ["Testing"]) ->
    "instructions.testing"."""
    return ".".join([prefix, *filter(None, (slug(p) for p in parts))])
