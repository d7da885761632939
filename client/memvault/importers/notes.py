"""A folder of Markdown notes (basic-memory, Obsidian), imported once
(docs/import.md); `[[watch]]` keeps a folder in step instead (docs/watch.md).

Each note is split at its headings (markdown.py), each section with a body
one memory headed by its heading line; a longer section is cut at the first
blank line (outside code fences) past each `TARGET_CHARS` characters, each
part after the first headed by the heading line again. Its topic is "notes" and the note's folder
("projects/alpha/plan.md" -> "notes.projects.alpha"), its source
"note:PATH#Heading > Path" (not the "file:" of a watched note: an imported
memory is the vault's own, which upkeep may merge), its tags the front
matter's `tags` and the #tags of its section, its payload the note's path
and front matter. Hidden files and folders (.obsidian, .git, .trash) are
skipped.

The front matter (YAML between `---` lines at the top) is read in its simple
form, which basic-memory and Obsidian write: `key: value`, `key: [a, b]`, and
`key:` followed by `- item` lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memvault.importers.drafts import Draft, checked_text, read_text
from memvault.importers.markdown import Fences, heading, topic_of
from memvault_base.errors import InvalidArgument

__all__ = ["NOTE_SUFFIXES", "TARGET_CHARS", "TOPIC_PREFIX", "note_files", "parse_note", "read_note"]

NOTE_SUFFIXES = frozenset({".md", ".markdown"})
TOPIC_PREFIX = "notes"
# The daemon's watched notes split sections at 1,500 characters, about what
# all-MiniLM-L6-v2 reads (256 word pieces, docs/watch.md); imported ones alike.
TARGET_CHARS = 1500
# The daemon keeps at most 64 tags on a memory.
MAX_TAGS = 64
_FRONT_KEY = re.compile(r"^([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")
_FRONT_ITEM = re.compile(r"^[ \t]*-[ \t]+(.*?)[ \t]*$")
_TAG = re.compile(r"(?<![\w&#/`])#([A-Za-z_][\w/-]*)")
_CODE_SPAN = re.compile(r"`[^`]*`")


def note_files(folder: Path) -> list[Path]:
    """The notes below `folder`, sorted, hidden files and folders left out."""
    return sorted(
        path for path in folder.rglob("*")
        if path.suffix.lower() in NOTE_SUFFIXES and path.is_file()
        and not any(part.startswith(".") for part in path.relative_to(folder).parts))


def read_note(folder: Path, path: Path, shown: str | None = None) -> list[Draft]:
    """The memories of the note at `path` below `folder`; errors name it
    as `shown` (default: `folder` / its path)."""
    relative = path.relative_to(folder).as_posix()
    name = shown or str(folder / relative)
    return parse_note(read_text(path, name), relative, name)


def parse_note(text: str, relative: str, name: str) -> list[Draft]:
    """The memories of a note's `text`, at path `relative` below its folder."""
    front, body_line = _front_matter(text, name)
    lines = text.splitlines()[body_line - 1:]
    payload: dict[str, Any] = {"note": relative}
    if front:
        payload["front_matter"] = front
    topic = topic_of(TOPIC_PREFIX, list(Path(relative).parent.parts))
    drafts = []
    for path_titles, start, section in _sections(lines, body_line):
        source = f"note:{relative}" + ("#" + " > ".join(path_titles) if path_titles else "")
        for part_line, part in _parts(section, start):
            text = checked_text(part, f"{name}:{part_line}")
            tags = _tags(front.get("tags"), text)
            drafts.append(Draft(text=text, topic=topic, source=source, tags=tags,
                                payload=payload))
    return drafts


def _front_matter(text: str, name: str) -> tuple[dict[str, Any], int]:
    """The front matter's keys, and the line the note's body starts on."""
    lines = text.splitlines()
    if not lines or lines[0].rstrip() != "---":
        return {}, 1
    end = next((i for i, line in enumerate(lines[1:], 1) if line.rstrip() in ("---", "...")), 0)
    if not end:
        raise InvalidArgument(f"{name}:1: front matter has no closing `---` line")
    front: dict[str, Any] = {}
    key = ""
    for number, line in enumerate(lines[1:end], 2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = _FRONT_ITEM.match(line)
        if item and key and isinstance(front[key], list):
            front[key].append(_scalar(item.group(1)))
            continue
        match = _FRONT_KEY.match(line)
        if not match:
            raise InvalidArgument(f"{name}:{number}: front matter line is not `key: value`")
        key, value = match.group(1), match.group(2) or ""
        front[key] = _value(value) if value else []
    return front, end + 2


def _value(text: str) -> Any:
    if text.startswith("[") and text.endswith("]"):
        return [_scalar(v) for v in text[1:-1].split(",") if v.strip()]
    return _scalar(text)


def _scalar(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _sections(lines: list[str], first: int) -> Iterator[tuple[list[str], int, list[str]]]:
    """(heading path, first line number, lines) of each section with a body."""
    path: list[tuple[int, str]] = []
    start, section = first, list[str]()
    fences = Fences()
    for number, line in enumerate(lines, first):
        found = None if fences.inside(line) else heading(line)
        if found:
            if any(s.strip() for s in section[1 if path else 0:]):
                yield [t for _, t in path], start, section
            level, title = found
            path = [(lv, t) for lv, t in path if lv < level] + [(level, title)]
            start, section = number, [line]
        else:
            section.append(line)
    if any(s.strip() for s in section[1 if path else 0:]):
        yield [t for _, t in path], start, section


def _parts(section: list[str], start: int) -> Iterator[tuple[int, str]]:
    """The section cut at the first blank line outside code fences past each
    TARGET_CHARS characters, each part after the first headed by the heading line."""
    head = section[0] if heading(section[0]) else ""
    part: list[str] = []
    part_line = start
    fences = Fences()
    for number, line in enumerate(section, start):
        inside = fences.inside(line)
        size = sum(len(s) + 1 for s in part)
        if not inside and not line.strip() and size > TARGET_CHARS and \
                any(s.strip() for s in part[1 if part[0] == head else 0:]):
            yield part_line, "\n".join(part)
            part, part_line = [head] if head else [], number
            continue
        part.append(line)
    if any(s.strip() for s in part[1 if head and part and part[0] == head else 0:]):
        yield part_line, "\n".join(part)


def _tags(front_tags: Any, text: str) -> tuple[str, ...]:
    if isinstance(front_tags, str):
        front_tags = front_tags.replace(",", " ").split()
    tags = [t.lstrip("#") for t in front_tags or () if isinstance(t, str) and t.strip("#")]
    fences = Fences()
    for line in text.splitlines():
        if not fences.inside(line) and not heading(line):
            tags += _TAG.findall(_CODE_SPAN.sub("", line))
    return tuple(dict.fromkeys(tags))[:MAX_TAGS]
