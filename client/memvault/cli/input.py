"""What the user hands the `memvault` command, read and checked before anything
is sent: an option's JSON object, JSON lines (`turns append`, `import`), and
secrets typed at a terminal (`join`'s recovery key, `service install`'s
passphrase) or read from a file or stdin (`--token-file`, `--recovery-key-file`).

A secret given as an argument still works, with a warning on stderr: any
process of any user reads another's arguments (`ps`, `/proc/<pid>/cmdline`),
and the shell keeps them in its history."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from memvault.types import Memory
from memvault_base.errors import InvalidArgument

__all__ = ["json_lines", "json_object", "line_source", "read_memories", "secret",
           "secret_from_file", "warn_if_in_argv"]


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


def secret_from_file(file: str, what: str) -> str:
    """The first line of `file` ("-": of stdin), stripped; InvalidArgument if
    it cannot be read or is empty."""
    try:
        text = sys.stdin.readline() if file == "-" else Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InvalidArgument(f"cannot read {what} from {file}: {err}") from None
    lines = text.splitlines()
    value = lines[0].strip() if lines else ""
    if not value:
        raise InvalidArgument(f"{file} holds no {what} (its first line is empty)")
    return value


def warn_if_in_argv(env: str, file_option: str) -> Callable[
        [click.Context, click.Parameter, str | None], str | None]:
    """A click callback: warn on stderr when the option's value came from the
    command line, naming `env` and `file_option` as the ways to give it."""
    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value and param.name and \
                ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE:
            flag = param.opts[0]
            click.echo(f"warning: {flag} on the command line can be read by every user of this "
                       "machine (ps, /proc/<pid>/cmdline) and stays in your shell history; "
                       f"set {env} or use {file_option} FILE (- for stdin) instead", err=True)
        return value
    return callback
