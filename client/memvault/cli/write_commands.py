"""`memvault remember`, `supersede`, `update`, `reinforce` and `forget` (by id,
by --filter, or --sweep; to the trash, or --purge): the commands that write
memories."""

from __future__ import annotations

import sys
from typing import Any

import click

from memvault.cli import output
from memvault.cli.context import current_client, whole_id
from memvault.cli.options import allow_secret_option, json_option, memory_keywords, memory_options
from memvault.cli.upkeep_commands import sweep as sweep_command
from memvault.types import RememberResult
from memvault_base.errors import MemvaultError

# What the trash shows as having forgotten a memory through this command.
BY_CLI = "cli"

__all__ = ["forget", "reinforce", "remember", "supersede", "update"]

_client = current_client


@click.command()
@click.argument("text")
@memory_options
@click.option("--supersedes", default="", metavar="ID", help="The id of a memory this replaces.")
@click.option("--new", "new", is_flag=True,
              help="Store it as a memory of its own: never a reinforcement nor a new version.")
@allow_secret_option
@json_option
def remember(text: str, supersedes: str, new: bool, allow_secret: bool, as_json: bool,
             **fields: Any) -> None:
    """Store TEXT as a memory ("-" reads it from stdin); prints its id.

    The same statement as a memory of its type and topic reinforces that
    memory; a changed fact (a number, a date, a name, a negation...) becomes
    its new version, the earlier one kept in the chain. Either is said on
    stderr: "superseded 6001b6ef… (The Q3 deadline … is March 3)".
    """
    if text == "-":
        text = sys.stdin.read().strip()
    if supersedes:
        supersedes = whole_id(supersedes)
    result = _client().remember(text, supersedes=supersedes, new=new,
                                allow_secret=allow_secret, **memory_keywords(fields))
    _said(result, as_json)


def _said(result: RememberResult, as_json: bool) -> None:
    if as_json:
        output.echo_json(result.to_dict())
        return
    click.echo(result.id)
    if result.target:
        # On stderr, so that `id=$(memvault remember ...)` captures only the id.
        click.echo(output.outcome_line(result.outcome, result.target, _text_of(result.target)),
                   err=True)


def _text_of(memory_id: str) -> str:
    try:
        return _client().get(memory_id).text
    except MemvaultError:  # forgotten meanwhile: the id alone says enough
        return ""


@click.command()
@click.argument("id")
@click.argument("text")
@memory_options
@click.option("--clear-tags", is_flag=True, help="Leave the new version without tags.")
@allow_secret_option
@json_option
def supersede(id: str, text: str, clear_tags: bool, allow_secret: bool, as_json: bool,
              **fields: Any) -> None:
    """Store TEXT ("-" reads stdin) as the new version of memory ID; prints the new id.

    Every option not given is the old memory's (topic, tags, category,
    entity, payload, importance, type, session, source, protection); an
    empty value (--topic "") leaves that field empty.
    """
    if text == "-":
        text = sys.stdin.read().strip()
    changes = memory_keywords(fields)
    if clear_tags:
        if "tags" in changes:
            raise click.UsageError("--clear-tags and --tag do not go together")
        changes["tags"] = []
    _said(_client().supersede(whole_id(id), text, allow_secret=allow_secret, **changes),
          as_json)


@click.command()
@click.argument("id")
@click.option("--text", help="The new text (re-embedded).")
@memory_options
@click.option("--clear-tags", is_flag=True, help="Remove every tag.")
@allow_secret_option
@json_option
def update(id: str, text: str | None, clear_tags: bool, allow_secret: bool, as_json: bool,
           **fields: Any) -> None:
    """Edit memory ID in place, keeping its id; only the options given change."""
    changes = memory_keywords(fields)
    if clear_tags:
        if "tags" in changes:
            raise click.UsageError("--clear-tags and --tag do not go together")
        changes["tags"] = []
    id = whole_id(id)
    result = _client().update(id, text=text, allow_secret=allow_secret, **changes)
    if as_json:
        output.echo_json(result.to_dict())
    else:
        click.echo(f"updated {id} (txid {result.txid})")


@click.command()
@click.argument("id")
@json_option
def reinforce(id: str, as_json: bool) -> None:
    """Count memory ID as confirmed once more: it fades more slowly."""
    id = whole_id(id)
    result = _client().reinforce(id)
    if as_json:
        output.echo_json({"id": id, **result.to_dict()})
    else:
        times = output.plural(result.reinforce_count, "time", "times")
        click.echo(f"reinforced {id} ({times}, txid {result.txid})")


@click.command()
@click.argument("id", required=False)
@click.option("--filter", "filter_", metavar="JSON", help="Forget every memory this matches.")
@click.option("--sweep", "sweep_", is_flag=True,
              help="Forget every memory whose forgetting risk is over the threshold.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="With --sweep: this risk threshold instead of the daemon's (0.5).")
@click.option("--purge", is_flag=True,
              help="With ID or --filter: skip the trash, erase for good on every device.")
@click.option("--dry-run", is_flag=True, help="With --filter or --sweep: list, forget nothing.")
@json_option
def forget(id: str | None, filter_: str | None, sweep_: bool, threshold: float | None,
           purge: bool, dry_run: bool, as_json: bool) -> None:
    """Move to the trash the memory with this ID, every memory --filter matches, or
    (--sweep) every memory cold, old and minor enough to forget; on every synced device.

    `memvault trash restore ID` brings a memory back until the trash purges
    it (trash.retention_days, 30 by default); --purge erases at once instead.
    With --filter the ids go to stdout, one per line, and the count to stderr.
    With --sweep each memory comes with its reason; pinned, protected,
    procedural and young memories are never swept.
    """
    if (id is not None) + (filter_ is not None) + sweep_ != 1:
        raise click.UsageError("give one of ID, --filter or --sweep")
    if threshold is not None and not sweep_:
        raise click.UsageError("--threshold goes with --sweep")
    if purge and sweep_:
        raise click.UsageError("--purge goes with ID or --filter")
    if sweep_:
        sweep_command(dry_run, threshold, as_json)
        return
    if filter_ is None:
        assert id is not None
        if dry_run:
            raise click.UsageError("--dry-run goes with --filter or --sweep")
        id = whole_id(id)
        txid = _client().forget(id, purge=purge, by=BY_CLI)
        if as_json:
            output.echo_json({"id": id, "txid": txid, "purged": purge})
        elif purge:
            click.echo(f"purged {id} (txid {txid})")
        else:
            click.echo(f"forgot {id} (txid {txid})")
            click.echo(f"in the trash: `memvault trash restore {id}` brings it back", err=True)
        return
    result = _client().forget_where(filter_, dry_run=dry_run, purge=purge, by=BY_CLI)
    if as_json:
        output.echo_json({**result.to_dict(), "dry_run": dry_run})
        return
    for forgotten in result.ids:
        click.echo(forgotten)
    count = output.plural(len(result.ids), "memory", "memories")
    if dry_run:
        click.echo(f"would {'purge' if purge else 'forget'} {count}", err=True)
        return
    click.echo(f"{'purged' if purge else 'forgot'} {count} (txid {result.txid})", err=True)
    if result.ids and not purge:
        click.echo(output.trash_hint(result.purge_at), err=True)
