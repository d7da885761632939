"""One watched notes folder and the memories that mirror its files.

Each chunk of a file (`chunking.py`) is one semantic memory:

    text     the chunk (its heading line first)
    topic    <prefix>.<directories>.<file stem>, e.g. notes.projects.memvault
    source   file:<path relative to the folder>#<heading path>
    payload  {"folder": "/home/me/notes", "file": "projects/memvault.md",
              "heading": "Design > Storage", "occurrence": 0, "part": 0,
              "sha256": "<hex of the text>"}

The payload, sealed like every field, is what identifies a chunk across
restarts: (folder, file, heading, occurrence, part) names it, the sha256 says
whether it changed. `plan()` compares a file on disk with what the vault holds
and returns the writes that make them agree: a new chunk is remembered, a
changed one supersedes its old version, a vanished one (or every chunk of a
deleted file) is forgotten together with its older versions. Unchanged chunks
are not touched, so their access counts and reinforcements stay.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memvaultd.config.settings import WatchFolder
from memvaultd.model import secrets
from memvaultd.model.commands import MemoryDraft
from memvaultd.model.memory import MAX_SHORT_FIELD, SEMANTIC, WATCHED_FILE_SOURCE, Memory
from memvaultd.notes import chunking

log = logging.getLogger("memvaultd.watch")

SOURCE_PREFIX = WATCHED_FILE_SOURCE
# Larger files are logged and skipped: a 2 MiB note is ~1,400 chunks, more
# likely an export or a log than something a person keeps as notes.
MAX_FILE_BYTES = 2 * 1024 * 1024

ChunkKey = tuple[str, int, int]  # (heading path, occurrence, part)
Lookup = Callable[[str], Memory | None]


@dataclass(frozen=True, slots=True)
class Tracked:
    """What the vault holds for one chunk: its memory id and content hash."""

    id: str
    sha256: str
    topic: str


@dataclass
class FilePlan:
    """The writes that bring the vault in line with one file."""

    file: str
    drafts: list[MemoryDraft] = field(default_factory=list)
    keys: list[ChunkKey] = field(default_factory=list)  # of each draft
    forget: list[str] = field(default_factory=list)
    unchanged: dict[ChunkKey, Tracked] = field(default_factory=dict)
    changed: int = 0

    @property
    def empty(self) -> bool:
        return not self.drafts and not self.forget


class NoteFolder:
    def __init__(self, spec: WatchFolder) -> None:
        self.spec = spec
        self.root = spec.path
        self.prefix = spec.topic or _topic_part(self.root.name) or "notes"
        self._pattern = glob_regex(spec.glob)
        self.known: dict[str, dict[ChunkKey, Tracked]] = {}

    # -- which files -----------------------------------------------------

    def covers(self, rel: str) -> bool:
        """Whether the file at `rel` (relative, "/"-separated) is mirrored."""
        parts = rel.split("/")
        return (not any(part.startswith(".") for part in parts)
                and self._pattern.fullmatch(rel) is not None)

    def relative(self, path: str | Path) -> str | None:
        """`path` relative to the folder, or None when it lies outside."""
        try:
            return Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return None

    def files(self, under: str = "") -> list[str]:
        """Every file the folder mirrors now (below `under`, when given);
        hidden directories are skipped."""
        found: list[str] = []
        for directory, dirs, names in os.walk(self.root / under):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            base = Path(directory).relative_to(self.root)
            for name in sorted(names):
                rel = (base / name).as_posix()
                if self.covers(rel):
                    found.append(rel)
        return found

    def topic_of(self, rel: str) -> str:
        parts = [_topic_part(p) for p in Path(rel).with_suffix("").parts]
        return ".".join([self.prefix, *(p for p in parts if p)])[:MAX_SHORT_FIELD]

    # -- what the vault holds ----------------------------------------------

    def index(self, memories: Iterable[Memory]) -> list[str]:
        """Learn the chunks the vault holds for this folder. Returns the ids of
        duplicates (two visible memories for one chunk), to be forgotten."""
        self.known = {}
        extra: list[str] = []
        for memory in memories:
            located = self._locate(memory)
            if located is None or memory.superseded_by:
                continue
            rel, key, sha = located
            chunks = self.known.setdefault(rel, {})
            if key in chunks:
                extra.append(memory.id)
            else:
                chunks[key] = Tracked(memory.id, sha, memory.topic_key)
        return extra

    def known_under(self, rel_dir: str) -> list[str]:
        prefix = rel_dir.rstrip("/") + "/"
        return [rel for rel in self.known if rel.startswith(prefix)]

    # -- reconciling -------------------------------------------------------

    def plan(self, rel: str, lookup: Lookup) -> FilePlan:
        """The writes that make the vault mirror file `rel` as it is now."""
        plan = FilePlan(rel)
        chunks = self._read(rel)
        held = self._held(rel, lookup)
        topic = self.topic_of(rel)
        for chunk in chunks or []:
            old = held.pop(chunk.key, None)
            if old is not None and old.sha256 == chunk.sha256 and old.topic == topic:
                plan.unchanged[chunk.key] = old
                continue
            plan.changed += old is not None
            plan.drafts.append(self._draft(rel, chunk, topic, old.id if old else ""))
            plan.keys.append(chunk.key)
        for gone in held.values():
            plan.forget.extend(self._history(gone.id, lookup))
        return plan

    def applied(self, plan: FilePlan, new_ids: list[str]) -> None:
        """Record what `plan`, now written, left in the vault."""
        chunks = dict(plan.unchanged)
        for key, draft, memory_id in zip(plan.keys, plan.drafts, new_ids, strict=True):
            sha = json.loads(draft.payload_json)["sha256"]
            chunks[key] = Tracked(memory_id, sha, draft.topic_key)
        if chunks:
            self.known[plan.file] = chunks
        else:
            self.known.pop(plan.file, None)

    def _read(self, rel: str) -> list[chunking.Chunk] | None:
        """The file's chunks; None when it is gone (or no longer mirrored)."""
        path = self.root / rel
        try:
            if not self.covers(rel) or not path.is_file():
                return None
            if path.stat().st_size > MAX_FILE_BYTES:
                log.warning("skipping %s: over %d bytes", path, MAX_FILE_BYTES)
                return None
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            log.warning("cannot read %s: %s", path, exc)
            return None
        markdown = path.suffix.lower() in chunking.MARKDOWN_SUFFIXES
        return chunking.split(text, markdown=markdown)

    def _held(self, rel: str, lookup: Lookup) -> dict[ChunkKey, Tracked]:
        """The file's tracked chunks that still exist, visible, in the vault
        (a memory forgotten or superseded by hand is written again)."""
        held: dict[ChunkKey, Tracked] = {}
        for key, tracked in self.known.get(rel, {}).items():
            memory = lookup(tracked.id)
            if memory is not None and not memory.superseded_by:
                held[key] = tracked
        return held

    def _history(self, memory_id: str, lookup: Lookup) -> Iterator[str]:
        """`memory_id` and the older versions of it that mirror this folder."""
        seen: set[str] = set()
        current = lookup(memory_id)
        while current is not None and current.id not in seen and self._locate(current):
            seen.add(current.id)
            yield current.id
            current = lookup(current.supersedes) if current.supersedes else None

    def _draft(self, rel: str, chunk: chunking.Chunk, topic: str, supersedes: str
               ) -> MemoryDraft:
        payload = {"folder": str(self.root), "file": rel, "heading": chunk.heading,
                   "occurrence": chunk.occurrence, "part": chunk.part, "sha256": chunk.sha256}
        source = f"{SOURCE_PREFIX}{rel}#{chunk.heading}" if chunk.heading else SOURCE_PREFIX + rel
        # The file is not the caller's to fix: a credential in it is stored
        # redacted, and said in the log (docs/secrets.md). The payload's
        # sha256 stays the file's, so the chunk still reads as unchanged.
        text = chunk.text
        if found := secrets.find(text):
            log.warning("%s: redacted %s", self.root / rel,
                        ", ".join(f"{f.kind} at characters {f.start}..{f.end}" for f in found))
            text = secrets.redact(text, found)
        return MemoryDraft(text=text, type=SEMANTIC, topic_key=topic,
                           payload_json=json.dumps(payload, ensure_ascii=False),
                           source=source[:MAX_SHORT_FIELD], supersedes=supersedes)

    def _locate(self, memory: Memory) -> tuple[str, ChunkKey, str] | None:
        """(file, chunk key, sha256) of a memory that mirrors this folder."""
        if not memory.source.startswith(SOURCE_PREFIX):
            return None
        payload: dict[str, Any] = memory.payload
        if payload.get("folder") != str(self.root):
            return None
        try:
            key = (str(payload["heading"]), int(payload["occurrence"]), int(payload["part"]))
            return str(payload["file"]), key, str(payload["sha256"])
        except (KeyError, TypeError, ValueError):
            return None


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A compiled match for a relative glob: `**/` is any number of
    directories (none too), `*` and `?` stay inside one path segment."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def _topic_part(name: str) -> str:
    """A path segment as a topic key segment: lower case, words joined by _."""
    return re.sub(r"[^\w-]+", "_", name.lower()).strip("_")
