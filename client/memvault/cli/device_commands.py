"""`memvault devices`, `memvault devices rename OLD NEW`, `memvault devices
revoke NAME` and `memvault recovery-key rotate`: the devices registered in
the vault and its key epochs (docs/cli.md). The registry travels with sync,
sealed under the vault's key; the daemon reads it from the remote."""

from __future__ import annotations

import time
from collections.abc import Sequence

import click
from rich.markup import escape
from rich.table import Table

from memvault.cli import output
from memvault.cli.context import current_client
from memvault.cli.options import json_option
from memvault.cli.sync_output import ago
from memvault.types import DeviceInfo, RotateResult

__all__ = ["devices", "devices_table", "recovery_key"]

_client = current_client
# A name longer than this ends in "…": the table keeps within 80 columns
# (24 + 16 + 2 x 16 + 4 + 4 gaps of 2).
_NAME_CHARS = 24


@click.group(invoke_without_command=True)
@json_option
@click.pass_context
def devices(ctx: click.Context, as_json: bool) -> None:
    """List the vault's devices: name, id, when each registered and when
    this device last pulled something of it; this device is marked.

    Each device signs what it pushes with its own key; a version signed by
    no device listed here is refused (`memvault sync status` lists it).
    """
    if ctx.invoked_subcommand is not None:
        return
    _show(_client().devices(), as_json)


@devices.command()
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@json_option
def rename(old: str, new: str, as_json: bool) -> None:
    """Rename the device named OLD (or whose id starts with OLD) to NEW, on
    every device of the vault."""
    _show(_client().rename_device(old, new), as_json)


@devices.command()
@click.argument("name", metavar="NAME")
@json_option
def revoke(name: str, as_json: bool) -> None:
    """Revoke the device named NAME (or whose id starts with NAME): a new
    vault key for every other device, and a new recovery key, printed once.
    The revoked device opens nothing written from now on, and what it
    pushes from now on is refused by the others. On a memvault-server, its
    token is revoked too; the output says whether it was."""
    _show_rotation(_client().rotate_keys(name), as_json)


@click.group("recovery-key")
def recovery_key() -> None:
    """The vault's recovery key."""


@recovery_key.command()
@json_option
def rotate(as_json: bool) -> None:
    """A new vault key for every device and a new recovery key, printed
    once: the old recovery key opens nothing written from now on. After a
    rotation cut short before it printed its key, prints that key instead."""
    _show_rotation(_client().rotate_keys(), as_json)


def _show_rotation(result: RotateResult, as_json: bool) -> None:
    if as_json:
        output.echo_json(result.to_dict())
        return
    if result.recovered:
        click.echo(f"key epoch {result.epoch} was started by a rotation cut short before it "
                   "printed its recovery key; no other epoch was started")
        click.echo("Recovery key (shown once; the previous one opens nothing new):")
        click.echo(f"  {result.recovery_key}")
        return
    if result.revoked_device:
        click.echo(f"device {result.revoked_device} revoked")
    if result.token_note:
        click.echo(f"{'' if result.token_revoked else 'warning: '}{result.token_note}",
                   err=not result.token_revoked)
    click.echo(f"key epoch {result.epoch} started; the other devices move to it at their "
               "next sync")
    click.echo("Recovery key (shown once; the previous one opens nothing new):")
    click.echo(f"  {result.recovery_key}")


def _show(listed: list[DeviceInfo], as_json: bool) -> None:
    if as_json:
        output.echo_json([d.to_dict() for d in listed])
    else:
        output.show(devices_table(listed))


def devices_table(listed: Sequence[DeviceInfo], *, now: float | None = None) -> Table:
    now = time.time() if now is None else now
    table = Table(box=None, pad_edge=False)
    table.add_column("name", no_wrap=True, max_width=_NAME_CHARS, overflow="ellipsis")
    table.add_column("device", no_wrap=True)
    table.add_column("added", no_wrap=True)
    table.add_column("last seen", no_wrap=True)
    table.add_column("this", no_wrap=True)
    for device in listed:
        seen = "-" if device.this_device else _when(device.last_seen, now)
        if device.revoked:
            seen = "revoked"
        table.add_row(escape(device.name), device.device_id, _when(device.added, now), seen,
                      "*" if device.this_device else "")
    return table


def _when(epoch: float, now: float) -> str:
    return ago(max(0.0, now - epoch)) if epoch else "never"
