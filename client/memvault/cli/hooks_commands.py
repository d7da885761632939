"""`memvault hooks install | uninstall | run`: memvault in Claude Code's
session lifecycle (docs/hooks.md).

`install claude-code` merges four hook entries into Claude Code's settings
(the user's, or a project's with `--project`), each running
`memvault hooks run EVENT`; `uninstall claude-code` removes exactly those.
`run EVENT` is what Claude Code runs: it reads the event's JSON on stdin
and answers on stdout (`memvault.hooks.runner`), always with exit code 0.

The command written into the settings is the `memvault` beside this
interpreter (a virtualenv's `bin/`), as an absolute path: Claude Code runs
hooks through a shell whose PATH may not hold the virtualenv. `--home` and
`--socket` given to this command are written into it too.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from memvault.cli import output
from memvault.cli.context import LazyClient
from memvault.cli.options import json_option
from memvault.hooks import settings
from memvault.hooks.events import EVENTS
from memvault.hooks.injection import PROMPT_MIN_RELEVANCE, SESSION_MAX_TOKENS
from memvault.hooks.runner import ALL, AUTO, Options, run

__all__ = ["hooks"]

_AGENTS = click.Choice(["claude-code"])
_project_option = click.option(
    "--project", type=click.Path(file_okay=False), metavar="DIR",
    help="Write DIR/.claude/settings.json (default: the user's ~/.claude/settings.json).")


@click.group()
def hooks() -> None:
    """Hooks that give an agent memvault's memories and keep its sessions."""


_scope_option = click.option(
    "--scope", "scopes", multiple=True, metavar="SCOPE",
    help=f"The scope the hooks work in (repeat for several): {AUTO} (the default) is the "
         f"session's project, project:NAME; {ALL} reaches every scope (docs/hooks.md).")


def _lazy() -> LazyClient:
    lazy = click.get_current_context().find_object(LazyClient)
    assert lazy is not None, "the memvault group always sets its context object"
    return lazy


def _where() -> tuple[str | None, str | None]:
    return _lazy().where


def _settings_path(project: str | None) -> Path:
    base = Path(project).expanduser().absolute() if project else Path.home()
    return base / ".claude" / "settings.json"


def _program() -> str:
    """The `memvault` beside this interpreter, else the first on PATH, else the bare name."""
    beside = Path(sys.executable).parent / "memvault"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.absolute())
    found = shutil.which("memvault")
    return str(Path(found).absolute()) if found else "memvault"


@hooks.command("install")
@click.argument("agent", type=_AGENTS)
@_project_option
@click.option("--budget", type=click.IntRange(min=50), metavar="TOKENS",
              help=f"Tokens session start may add (default {SESSION_MAX_TOKENS}).")
@click.option("--min-relevance", type=click.FloatRange(0, 1), metavar="R",
              help="Relevance (0..1) a memory needs to be added to a prompt "
                   f"(default {PROMPT_MIN_RELEVANCE}).")
@_scope_option
@click.option("--dry-run", is_flag=True, help="Print the entries and write nothing.")
@json_option
def install(agent: str, project: str | None, budget: int | None, min_relevance: float | None,
            scopes: tuple[str, ...], dry_run: bool, as_json: bool) -> None:
    """Add memvault's hooks to AGENT's settings, keeping every other hook and key."""
    home, socket = _where()
    before = [*(["--home", home] if home else []), *(["--socket", socket] if socket else [])]
    everywhere = [arg for scope in scopes for arg in ("--scope", scope)]
    after: dict[str, list[str]] = {name: list(everywhere) for name in EVENTS}
    if budget is not None:
        after["session-start"] += ["--max-tokens", str(budget)]
    if min_relevance is not None:
        after["prompt"] += ["--min-relevance", f"{min_relevance:g}"]
    wanted = settings.commands(_program(), before, after)
    path = _settings_path(project)
    current = settings.read(path)
    merged = settings.installed(current, wanted)
    changed = merged != current
    if not dry_run and changed:
        settings.write(path, merged)
    result: dict[str, Any] = {"agent": agent, "path": str(path), "dry_run": dry_run,
                              "changed": changed, "hooks": wanted}
    if as_json:
        output.echo_json(result)
    elif dry_run:
        click.echo(f"# would merge into {path}" if changed else f"# {path} has them already")
        output.echo_json({"hooks": {event: [{"hooks": [
            {"type": "command", "command": command, "timeout": settings.TIMEOUT_S}]}]
            for event, command in wanted.items()}})
    elif changed:
        click.echo(f"memvault's hooks are in {path}: {', '.join(wanted)}")
    else:
        click.echo(f"{path} already has memvault's hooks; nothing changed")


@hooks.command("uninstall")
@click.argument("agent", type=_AGENTS)
@_project_option
@click.option("--dry-run", is_flag=True, help="Say what would be removed and write nothing.")
@json_option
def uninstall(agent: str, project: str | None, dry_run: bool, as_json: bool) -> None:
    """Remove the hooks `install` added to AGENT's settings, and nothing else."""
    path = _settings_path(project)
    current = settings.read(path)
    remaining, removed = settings.uninstalled(current)
    if removed and not dry_run:
        settings.write(path, remaining)
    if as_json:
        output.echo_json({"agent": agent, "path": str(path), "dry_run": dry_run,
                          "removed": removed})
    elif removed:
        verb = "would remove" if dry_run else "removed"
        count = output.plural(removed, "memvault hook", "memvault hooks")
        click.echo(f"{verb} {count} from {path}")
    else:
        click.echo(f"{path} has no memvault hooks; nothing changed")


class _FailOpenCommand(click.Command):
    """A command whose usage errors reach its callback (as `ctx.meta[USAGE]`)
    instead of ending the process with exit code 2."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as err:
            ctx.meta[_USAGE] = err.format_message()
            for param in self.get_params(ctx):
                if param.expose_value and param.name is not None:
                    ctx.params.setdefault(param.name, None)
            ctx.args = []
            return []


_USAGE = "memvault.hooks.usage_error"


# Claude Code takes exit code 2 as "block": a usage error here (an option a
# newer install wrote, a value that does not parse) would stop the agent's
# prompt. So `run` takes its options as text, ignores options it does not
# know, and leaves every check to the runner, which fails open.
@hooks.command("run", cls=_FailOpenCommand,
               context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("event", metavar="|".join(EVENTS))
@click.option("--max-tokens", metavar="TOKENS",
              help="Tokens session-start or prompt may add (defaults: docs/hooks.md).")
@click.option("--min-relevance", metavar="R",
              help="Relevance (0..1) a memory needs to be added (defaults: docs/hooks.md).")
@_scope_option
@click.pass_context
def run_hook(ctx: click.Context, event: str | None, max_tokens: str | None,
             min_relevance: str | None, scopes: tuple[str, ...]) -> None:
    """What Claude Code runs at EVENT: its JSON on stdin, the answer on stdout; exits 0."""
    home, socket = _where()
    # The hook's own --scope, else the global one (`memvault --scope S hooks run`).
    options = Options(home, socket, max_tokens, min_relevance, scopes or _lazy().scopes,
                      ignored=tuple(ctx.args),
                      usage_error=ctx.meta.get(_USAGE, ""))
    answer = run(event or "", sys.stdin.read(), options)
    if answer.stdout is not None:
        output.echo_json(answer.stdout, indent=None)
    if answer.stderr:
        click.echo(answer.stderr, err=True)
