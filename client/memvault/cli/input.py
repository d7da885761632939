"""What the user hands the `memvault` command, read and checked before anything
is sent: an option's JSON object, JSON lines (`turns append`, `import`), and
secrets typed at a terminal (`join`'s recovery key, `service install`'s
passphrase)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import click

from memvault.types import Memory
from memvault_base.errors import InvalidArgument

__all__ = ["json_lines", "json_object", "line_source", "read_memories", "secret"]


def json_object(text: str | None, option: str) -> dict[str, Any] | None:
    """Parse an option's JSON object before anything is sent."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as err:
        raise InvalidArgument(f"{option} is not valid JSON: {err}") from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{option} must be a JSON object, not {type(value).__name__}")
    return value


def json_lines(lines: Iterable[str], where: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line; InvalidArgument names a bad one."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as err:
            raise InvalidArgument(f"{where} line {number}: not JSON: {err}") from None
        if not isinstance(value, dict):
            raise InvalidArgument(f"{where} line {number}: not a JSON object")
        yield number, value


def read_memories(lines: Iterable[str], where: str) -> Iterator[tuple[int, Memory]]:
    """The memories of export lines, each with its line number; InvalidArgument
    names a bad line and what is wrong."""
    for number, value in json_lines(lines, where):
        memory = Memory.from_dict(value, where=f"{where} line {number}")
        if not memory.id:
            # Checked here: the daemon sees a batch, and could not name the line.
            raise InvalidArgument(f"{where} line {number}: no id (import keeps each memory's "
                                  "id, as export wrote it; `memvault remember` stores a new one)")
        yield number, memory


def line_source(file: str) -> Callable[[], Iterable[str]]:
    """The lines of `file` ("-": stdin), readable twice: once to check, once to send."""
    if file == "-":
        text = sys.stdin.read().splitlines()
        return lambda: text
    return lambda: _lines_of(Path(file))


def _lines_of(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as f:
        yield from f


def secret(label: str, what: str, how: str, *, confirm: bool = False) -> str:
    """`what`, typed at the terminal after `label` without echo; without a terminal,
    InvalidArgument (exit 2) at once, saying `how` to give it instead.

    click's hidden prompt falls back to getpass, which without a terminal
    prints a GetPassWarning, reads stdin with echo, and ends in "Aborted!"."""
    if not sys.stdin.isatty():
        raise InvalidArgument(f"{what} is needed and there is no terminal to ask for it: {how}")
    value: str = click.prompt(label, hide_input=True, confirmation_prompt=confirm)
    return value
