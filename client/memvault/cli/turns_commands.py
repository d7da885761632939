"""`memvault turns append`: raw conversation turns into the transcript layer."""

from __future__ import annotations

import sys
from typing import Any

import click

from memvault.cli import output
from memvault.cli.context import current_client
from memvault.cli.input import json_lines
from memvault.cli.options import json_option
from memvault_base.errors import InvalidArgument

__all__ = ["append_turns", "turns"]

_client = current_client


@click.group()
def turns() -> None:
    """Transcript turns: raw conversation, found by `recall --turns`."""


@turns.command("append")
@click.argument("session")
@click.option("--speaker", help="Who spoke (with --text: one turn instead of stdin).")
@click.option("--text", help="What was said.")
@click.option("--at", type=float, help="When, in Unix time (default now).")
@json_option
def append_turns(
    session: str, speaker: str | None, text: str | None, at: float | None, as_json: bool
) -> None:
    """Store turns of SESSION: JSON lines on stdin, {"speaker": ..., "text": ...} each
    (optionally "at" and "payload"); prints their ids."""
    if (speaker is None) != (text is None):
        raise click.UsageError("--speaker and --text go together")
    if speaker is not None:
        one: dict[str, Any] = {"speaker": speaker, "text": text}
        if at is not None:
            one["at"] = at
        given = [one]
    else:
        given = [line for _, line in json_lines(sys.stdin, "stdin")]
    if not given:
        raise InvalidArgument("no turns given: JSON lines on stdin, or --speaker and --text")
    result = _client().append_turns(session, given)
    if as_json:
        output.echo_json(result.to_dict())
    else:
        click.echo("\n".join(result.ids))
