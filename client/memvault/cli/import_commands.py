"""`memvault import-from`: memories from what users already keep elsewhere
(a mem0 export, a folder of Markdown notes, CLAUDE.md / AGENTS.md), read by
`memvault.importers` and sent with `remember_batch` (docs/import.md).

Every file is read and checked before anything is sent, so a bad one stores
nothing. `--dry-run` prints what would be remembered and sends nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import click

from memvault.cli import output
from memvault.cli.context import current_client
from memvault.cli.options import json_option
from memvault.importers import Draft
from memvault.importers.agents_md import read_instructions
from memvault.importers.mem0 import read_mem0
from memvault.importers.notes import note_files, read_note
from memvault.write_results import ADDED, REINFORCED, SUPERSEDED

__all__ = ["REMEMBER_BATCH_SIZE", "import_from"]

# Drafts per remember_batch call. The daemon embeds every one and compares it
# with the memories of its type and topic before it answers: 100 note
# sections of ~600 characters took 11 s on 2 busy cores (load 2.8), so 50
# keep a call near 6 s, a fifth of the CLI's 30 s default --timeout.
REMEMBER_BATCH_SIZE = 50

_client = current_client

dry_run_option = click.option(
    "--dry-run", is_flag=True, help="Print what would be remembered; send nothing.")


@click.group("import-from")
def import_from() -> None:
    """Remember what another tool kept: a mem0 export, Markdown notes, CLAUDE.md / AGENTS.md.

    A second import of the same files adds nothing: each text restates the
    memory the first stored, which the daemon reinforces.
    """


@import_from.command("agents-md")
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False))
@dry_run_option
@json_option
def agents_md(files: tuple[str, ...], dry_run: bool, as_json: bool) -> None:
    """Each instruction of FILES (CLAUDE.md, AGENTS.md...) as a procedural memory.

    An instruction is a list item or a paragraph; its topic is
    "instructions." and its heading path, its source FILE:LINE.
    """
    drafts = [d for f in files for d in read_instructions(Path(f))]
    _remember(drafts, dry_run=dry_run, as_json=as_json)


@import_from.command("mem0")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@dry_run_option
@json_option
def mem0(file: str, dry_run: bool, as_json: bool) -> None:
    """The memories of a mem0 export FILE (`get_all`'s JSON).

    Each a semantic memory: topic "mem0", entity its user (else agent),
    source "mem0:ID", tags its categories, mem0's fields (id, hash, times,
    metadata) in the payload under "mem0".
    """
    _remember(read_mem0(Path(file)), dry_run=dry_run, as_json=as_json)


@import_from.command("notes")
@click.argument("folder", type=click.Path(exists=True, file_okay=False))
@dry_run_option
@json_option
def notes(folder: str, dry_run: bool, as_json: bool) -> None:
    """Each section of the Markdown notes below FOLDER (basic-memory, Obsidian), once.

    A note is split at its headings; topic "notes." and its folder, source
    "note:PATH#Heading", tags from the front matter and the #tags of the
    section. Hidden folders (.obsidian, .git) are skipped. `[[watch]]` in
    the daemon's config keeps a folder in step instead.
    """
    root = Path(folder)
    files = note_files(root)
    drafts: list[Draft] = []
    with output.progress("reading notes", len(files)) as advance:
        for path in files:
            drafts += read_note(root, path)
            advance(1)
    _remember(drafts, dry_run=dry_run, as_json=as_json)


def _remember(drafts: Sequence[Draft], *, dry_run: bool, as_json: bool) -> None:
    if dry_run:
        if as_json:
            output.echo_json({"dry_run": True, "count": len(drafts),
                              "memories": [d.to_dict() for d in drafts]})
            return
        click.echo(f"would remember {output.plural(len(drafts), 'memory', 'memories')}")
        if drafts:
            output.show(output.drafts_table(drafts))
        return
    counts: Counter[str] = Counter()
    client = _client()
    with output.progress("remembering", len(drafts)) as advance:
        for start in range(0, len(drafts), REMEMBER_BATCH_SIZE):
            batch = drafts[start : start + REMEMBER_BATCH_SIZE]
            results = client.remember_batch(d.remember_input() for d in batch)
            counts.update(r.outcome for r in results)
            advance(len(batch))
    _said(counts, as_json)


def _said(counts: Counter[str], as_json: bool) -> None:
    said = {outcome: counts[outcome] for outcome in (ADDED, REINFORCED, SUPERSEDED)}
    if as_json:
        output.echo_json(said)
    else:
        click.echo(", ".join(f"{outcome} {n}" for outcome, n in said.items()))


