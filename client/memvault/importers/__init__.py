"""Importers: what users already keep elsewhere, read into memory drafts.

Each importer is pure parsing (file(s) -> `Draft`s) and never talks to the
daemon; `memvault import-from` sends the drafts through `Client.remember_batch`
(docs/import.md).

- `mem0`: a mem0 export (`get_all`'s list of memories);
- `notes`: a folder of Markdown notes (basic-memory, Obsidian), one-off;
- `agents_md`: CLAUDE.md / AGENTS.md, each instruction a procedural memory.

A file that cannot be read as its importer expects raises `InvalidArgument`
naming the file and line, before any draft is returned.
"""

from memvault.importers.drafts import Draft

__all__ = ["Draft"]
