"""`memvault export` and `memvault import`: every memory of the vault to and
from JSON lines, ids, times and counts kept."""

from __future__ import annotations

import itertools
import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import click

from memvault.cli import output
from memvault.cli.context import current_client
from memvault.cli.input import line_source, read_memories
from memvault.cli.options import allow_secret_option, json_option
from memvault.transfer import IMPORT_BATCH_SIZE
from memvault_base.errors import InvalidArgument

__all__ = ["export", "import_"]

_client = current_client


@click.command()
@click.argument("file", default="-", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--vectors", is_flag=True, help="Include the stored embeddings.")
@json_option
def export(file: str, vectors: bool, as_json: bool) -> None:
    """Write every memory, one JSON object per line, to FILE (default "-": stdout).

    The file holds the memories in clear text: it is created readable by you only.
    """
    client = _client()
    if file == "-":
        for memory in client.export(include_vectors=vectors):
            output.echo_json(memory.to_dict(), indent=None)
        return
    count = 0
    total = client.status().memory_count
    with _private_file(Path(file)) as out, output.progress("exporting", total) as advance:
        for memory in client.export(include_vectors=vectors):
            out.write(json.dumps(memory.to_dict(), ensure_ascii=False) + "\n")
            count += 1
            advance(1)
    if as_json:
        output.echo_json({"file": file, "exported": count})
    else:
        click.echo(f"exported {output.plural(count, 'memory', 'memories')} to {file}")


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@allow_secret_option
@json_option
def import_(file: str, allow_secret: bool, as_json: bool) -> None:
    """Import the memories of FILE (JSON lines, as `export` writes them; "-": stdin).

    Ids, times and counts are kept; nothing is duplicated (a restatement of a
    memory reinforces it). Every line is checked before anything is sent.
    """
    lines = line_source(file)
    total = sum(1 for _ in read_memories(lines(), file))
    client = _client()
    added = reinforced = txid = 0
    with output.progress("importing", total) as advance:
        memories = read_memories(lines(), file)
        while batch := list(itertools.islice(memories, IMPORT_BATCH_SIZE)):
            try:
                result = client.import_memories([memory for _, memory in batch],
                                                batch_size=len(batch), allow_secret=allow_secret)
            except InvalidArgument as exc:
                raise _at_line(exc, file, [number for number, _ in batch]) from None
            added, reinforced = added + result.added, reinforced + result.reinforced
            txid = result.txid
            advance(len(batch))
    if as_json:
        output.echo_json({"added": added, "reinforced": reinforced, "txid": txid})
    else:
        click.echo(f"added {added}, reinforced {reinforced}" + (f" (txid {txid})" if txid else ""))


def _at_line(exc: InvalidArgument, file: str, numbers: list[int]) -> InvalidArgument:
    """The daemon's "memories[3].text: ..." about a batch, as the file's line."""
    match = re.match(r"memories\[(\d+)\]\.?(.*)", str(exc), re.S)
    if match is None or int(match.group(1)) >= len(numbers):
        return exc
    return InvalidArgument(f"{file} line {numbers[int(match.group(1))]}: {match.group(2)}")


@contextmanager
def _private_file(path: Path) -> Iterator[IO[str]]:
    """A new file only its owner can read, at `path` only once complete.

    Written beside `path` (mkstemp creates it 0600) and renamed over it at the
    end, so a failed export never leaves half a file or clobbers an old one.
    """
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise
