"""`memvault check [--repair] [--json] [--no-remote]`: is every sealed file sound?

Asked of the running daemon when there is one (the `Check` call: it reads
its files beside serving). When none answers, and always for `--repair`,
it runs the daemon's own checker, `memvaultd check --json`, as a process:
the light client never imports the daemon, and a vault the daemon cannot
start from is exactly the one to check. That process asks for the
passphrase itself (on this terminal) when the key file needs one.

Exit codes: 0 every file authenticates (after `--repair`: the repaired vault
does), 1 something is damaged, 2 nothing could be checked (the key is
locked, no vault, or `--repair` while a daemon runs).
"""

from __future__ import annotations

import json
import subprocess

import click

from memvault.check import CheckReport
from memvault.cli import output
from memvault.cli.context import current_client
from memvault.cli.service import find_daemon
from memvault.connection import START_HINT
from memvault_base.errors import MemvaultError, Unavailable

__all__ = ["check"]

EXIT_DAMAGED = 1
EXIT_CANNOT_CHECK = 2


@click.command()
@click.option("--repair", is_flag=True,
              help="Write back everything that authenticates as a sound vault (the daemon "
                   "must be stopped); the damaged files are kept aside, never deleted.")
@click.option("--no-remote", is_flag=True,
              help="Do not read the remote's version chain (it is downloaded whole).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def check(repair: bool, no_remote: bool, as_json: bool) -> None:
    """Verify every snapshot, log record, the key, vault.json and the remote's chain.

    Changes nothing without --repair. Exit status 0 when all is sound, 1 when
    something is damaged, 2 when nothing could be checked.
    """
    report = None
    if not repair:
        try:
            report = current_client().check(remote=not no_remote)
        except Unavailable as exc:
            if START_HINT not in str(exc):
                raise  # a daemon runs but cannot answer yet (still loading)
    if report is None:  # no daemon: its checker reads the files itself
        report = _offline(repair, no_remote)
    if as_json:
        output.echo_json(report.to_dict())
    else:
        output.show(output.check_table(report))
        click.echo(output.check_verdict(report), err=not report.sound)
    if not report.sound:
        raise SystemExit(EXIT_DAMAGED)


def _offline(repair: bool, no_remote: bool) -> CheckReport:
    params = click.get_current_context().find_root().params
    try:
        daemon = find_daemon()
    except MemvaultError as exc:
        click.echo(f"memvault: no daemon answers, and its checker cannot be run: {exc}",
                   err=True)
        raise SystemExit(EXIT_CANNOT_CHECK) from None
    command = [str(daemon)]
    for option in ("home", "socket"):
        if params.get(option):
            command += [f"--{option}", str(params[option])]
    command += ["check", "--json", *(["--repair"] if repair else []),
                *(["--no-remote"] if no_remote else [])]
    # stdin and stderr stay this terminal's: a passphrase prompt, and why it could not check.
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode == EXIT_CANNOT_CHECK:
        raise SystemExit(EXIT_CANNOT_CHECK)
    try:
        return CheckReport.from_dict(json.loads(done.stdout))
    except (ValueError, KeyError, TypeError) as exc:
        raise MemvaultError(f"memvaultd check exited {done.returncode} without a report") from exc
