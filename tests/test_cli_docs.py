"""docs/cli.md describes every command: a section whose heading names
`memvault COMMAND` for each command and subcommand of the click tree, so a
command added without its documentation fails here."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click

from memvault.cli.main import cli

CLI_MD = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def command_paths(group: click.Group, above: tuple[str, ...] = ()) -> Iterator[str]:
    """"trash", "trash restore", "sync now", ...: every command below `group`."""
    for name, command in group.commands.items():
        path = (*above, name)
        yield " ".join(path)
        if isinstance(command, click.Group):
            yield from command_paths(command, path)


def test_the_walk_finds_groups_and_their_subcommands() -> None:
    paths = set(command_paths(cli))
    assert {"recall", "trash", "trash restore", "sync", "sync now", "service",
            "service install", "turns append", "mcp", "init", "join"} <= paths


def test_every_command_has_a_section_in_docs_cli_md() -> None:
    headings = [line for line in CLI_MD.read_text().splitlines() if line.startswith("### ")]
    missing = [path for path in command_paths(cli)
               if not any(re.search(rf"`memvault {re.escape(path)}(?![\w-])", heading)
                          for heading in headings)]
    assert not missing, f"docs/cli.md has no section (### `memvault ...`) for: {missing}"
