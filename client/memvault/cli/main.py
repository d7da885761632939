"""The `memvault` command: every call of `memvault.Client` from a shell.

remember, supersede, update, reinforce, recall, get, list, forget (and forget --sweep),
trash (restore, empty), consolidate, topics, entities, turns append, export,
import, import-from, status, events, doctor, check, ui, hooks. Every command that prints data
takes `--json` for output a program can parse. Failures print one line,
prefixed "memvault: ", to stderr and exit with a code that says what kind of
failure it was (the table is in EXIT_CODES_HELP and docs/cli.md); a
MemvaultError or a connection failure never prints a traceback.

This module is the group and that error handling; the commands live in
modules of their own (`write_commands`, `read_commands`, `status_commands`,
`turns_commands`, `transfer_commands`, `upkeep_commands`, `trash_commands`,
`sync_commands`, `list_command`, `ui_commands`, `import_commands`,
`check_command`, `service`, `mcp_bridge`, `doctor`, `hooks_commands`), which never
import this one (see `cli_context`).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from memvault import __version__
from memvault.cli.check_command import check
from memvault.cli.context import LazyClient
from memvault.cli.device_commands import devices, recovery_key
from memvault.cli.doctor import doctor
from memvault.cli.hooks_commands import hooks
from memvault.cli.import_commands import import_from
from memvault.cli.list_command import list_
from memvault.cli.mcp_bridge import mcp
from memvault.cli.options import filter_option as filter_option
from memvault.cli.options import json_option as json_option
from memvault.cli.options import memory_options as memory_options
from memvault.cli.read_commands import entities, get, recall, topics
from memvault.cli.service import service
from memvault.cli.status_commands import events, status
from memvault.cli.sync_commands import COMMANDS as SYNC_COMMANDS
from memvault.cli.transfer_commands import export, import_
from memvault.cli.trash_commands import trash
from memvault.cli.turns_commands import append_turns as append_turns
from memvault.cli.turns_commands import turns
from memvault.cli.ui_commands import ui
from memvault.cli.upkeep_commands import consolidate
from memvault.cli.write_commands import forget, reinforce, remember, supersede, update
from memvault_base.errors import (
    ForkDetected,
    InvalidArgument,
    MemvaultError,
    NotFound,
    Unavailable,
)

__all__ = ["EXIT_OK", "cli", "exit_code", "main"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_NOT_FOUND = 4
EXIT_FORKED = 5

# "\b" keeps click from re-flowing the table into one paragraph.
EXIT_CODES_HELP = """An ID may be given by its first characters, as tables show them (at least 4),
when no other id begins with them.

\b
Exit codes:
  0  ok
  1  the daemon reported an error (one line on stderr, "memvault: ...")
  2  usage error or bad input (the daemon's INVALID_ARGUMENT, an id prefix
     that begins several ids)
  3  the daemon is not running or not reachable, or the sync remote it
     was asked to reach is not (the message names which)
  4  no memory with that id (or whose id begins with that prefix)
  5  `sync verify`: the other device's fingerprint differs from this one's
     (the remote forked the history or withheld versions; sync stopped)
"""


def exit_code(err: MemvaultError) -> int:
    """The exit code the CLI uses for `err`."""
    if isinstance(err, InvalidArgument):
        return EXIT_USAGE
    if isinstance(err, Unavailable):
        return EXIT_UNAVAILABLE
    if isinstance(err, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(err, ForkDetected):
        return EXIT_FORKED
    return EXIT_ERROR


class _Group(click.Group):
    """Turns memvault errors into one line on stderr and an exit code, in one place."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MemvaultError as err:
            message = " ".join(str(err).split()) or (type(err).__doc__ or type(err).__name__)
            click.echo(f"memvault: {message}", err=True)
            ctx.exit(exit_code(err))
        except BrokenPipeError:
            # The reader went away (`memvault events | head -1`): not an error.
            # Point stdout at /dev/null so the interpreter's final flush is quiet.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(EXIT_OK)


@click.group(
    cls=_Group, epilog=EXIT_CODES_HELP, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Keep config, data and socket under DIR (default: $MEMVAULT_HOME, else the platform's).",
)
@click.option(
    "--socket", type=click.Path(dir_okay=False), help="The daemon's socket (overrides --home)."
)
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds per call.")
@click.option(
    "--scope", "scopes", multiple=True, metavar="SCOPE",
    help="Work in this scope only (project:NAME, agent:NAME, user; repeat for several): see "
         "its memories and the user's, write only in it (docs/scopes.md). Default: every scope.",
)
@click.version_option(__version__, message="memvault %(version)s")
@click.pass_context
def cli(ctx: click.Context, home: str | None, socket: str | None, timeout: float,
        scopes: tuple[str, ...]) -> None:
    """Encrypted, local-first memory for AI agents: talk to the memvault daemon."""
    ctx.obj = LazyClient(home, socket, timeout, scopes)


for command in (
    remember, recall, get, list_, forget, trash, supersede, update, reinforce, topics, entities,
    status, events, turns, export, import_, import_from, consolidate, service, mcp, doctor, check,
    ui, hooks, devices, recovery_key, *SYNC_COMMANDS,
):
    cli.add_command(command)


def main() -> None:
    """The `memvault` console script."""
    cli(prog_name="memvault")


if __name__ == "__main__":
    main()
