"""`memvault trash`: what `forget` put in the trash, `trash restore` and
`trash empty` (docs/cli.md). The daemon keeps the trash, synced; these ask
and print."""

from __future__ import annotations

import click

from memvault.cli import output
from memvault.cli.context import current_client, whole_id
from memvault.cli.options import json_option

__all__ = ["trash"]

_client = current_client


@click.group(invoke_without_command=True)
@json_option
@click.pass_context
def trash(ctx: click.Context, as_json: bool) -> None:
    """List the memories in the trash: when and by what each was forgotten,
    and when it will be purged for good (trash.retention_days, 30 by default).

    Recall and every other read never see them; `memvault trash restore`
    brings them back, on every synced device.
    """
    if ctx.invoked_subcommand is not None:
        return
    held = _client().trash()
    if as_json:
        output.echo_json([t.to_dict() for t in held])
    elif held:
        output.show(output.trash_table(held))
    else:
        click.echo("the trash is empty", err=True)


@trash.command()
@click.argument("ids", nargs=-1, metavar="ID...")
@click.option("--all", "every", is_flag=True, help="Restore everything in the trash.")
@json_option
def restore(ids: tuple[str, ...], every: bool, as_json: bool) -> None:
    """Bring memories back from the trash, every field as it was.

    Prints their ids, one per line; exit 4 when one is neither in the trash
    nor in the vault (purged).
    """
    if bool(ids) == every:
        raise click.UsageError("give the IDs to restore, or --all")
    result = (_client().restore_all() if every
              else _client().restore([whole_id(ref) for ref in ids]))
    if as_json:
        output.echo_json(result.to_dict())
        return
    for memory in result.memories:
        click.echo(memory.id)
    count = output.plural(len(result.memories), "memory", "memories")
    click.echo(f"restored {count} (txid {result.txid})", err=True)


@trash.command()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def empty(yes: bool, as_json: bool) -> None:
    """Purge everything in the trash, for good, on every synced device.

    Asks first (the count), unless --yes; without a terminal to answer and
    without --yes, nothing is purged.
    """
    client = _client()
    if not yes:
        count = len(client.trash())
        if not count:
            click.echo("the trash is empty", err=True)
            return
        memories = output.plural(count, "memory", "memories")
        click.confirm(f"Purge {memories} for good, on every synced device?", abort=True,
                      err=True)
    result = client.empty_trash()
    if as_json:
        output.echo_json(result.to_dict())
        return
    for memory_id in result.ids:
        click.echo(memory_id)
    count_text = output.plural(len(result.ids), "memory", "memories")
    click.echo(f"purged {count_text} (txid {result.txid})", err=True)
