"""`memvault list`: every memory, a page at a time, in a stable order (no query, no ranking)."""

from __future__ import annotations

import click

from memvault.cli import output
from memvault.cli.context import current_client
from memvault.cli.options import filter_option, json_option

__all__ = ["list_"]

SORTS = ("created", "last_used", "heat", "importance")
BANDS = ("hot", "warm", "cold", "frozen")


@click.command("list")
@click.option("--sort", type=click.Choice(SORTS), default="created", show_default=True,
              help="The order, newest (hottest, most important) first; ties by id.")
@click.option("--asc", "ascending", is_flag=True, help="Oldest (coldest, least) first.")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True,
              help="Memories per page.")
@click.option("--offset", type=click.IntRange(0), default=0, help="Skip this many.")
@click.option("--page", "page_token", default="", metavar="TOKEN",
              help="The page after the one that printed this token.")
@filter_option
@click.option("--type", "types", multiple=True, help="Only this type; repeatable.")
@click.option("--topic", default="", help="Only this topic and the topics below it.")
@click.option("--entity", default="", help="Only memories about this entity.")
@click.option("--tag", default="", help="Only memories with this tag.")
@click.option("--source", default="", help="Only memories this agent or file wrote.")
@click.option("--session", default="", help="Only this session.")
@click.option("--band", type=click.Choice(BANDS), help="Only memories of this heat band.")
@click.option("--tier", "tiers", multiple=True, help="Only this tier; repeatable.")
@click.option("--include-superseded", is_flag=True, help="Also replaced memories.")
@click.option("--facets", is_flag=True,
              help="Also count the matching memories per topic, entity, tag, type, source, "
                   "session, band and tier.")
@json_option
def list_(sort: str, ascending: bool, limit: int, offset: int, page_token: str,
          filter_: str | None, types: tuple[str, ...], topic: str, entity: str, tag: str,
          source: str, session: str, band: str | None, tiers: tuple[str, ...],
          include_superseded: bool, facets: bool, as_json: bool) -> None:
    """Every memory that matches, a page at a time (`--page` for the next)."""
    page = current_client().list_memories(
        sort=sort, ascending=ascending, limit=limit, offset=offset, page_token=page_token,
        filter=filter_, types=types, topic=topic, entity=entity, tag=tag, source=source,
        session=session, band=band or "", tiers=tiers, include_superseded=include_superseded,
        facets=facets)
    if as_json:
        output.echo_json(page.to_dict())
        return
    if page.memories:
        output.show(output.listing_table(page.memories, sort))
    else:
        click.echo("no memories matched", err=True)
    for name, counts in page.facets.items():
        if counts.values:
            shown = ", ".join(f"{value} {count}" for value, count in counts.values)
            hidden = counts.distinct - len(counts.values)
            click.echo(f"{name}: {shown}" + (f" (+{hidden} more)" if hidden else ""))
    span = (f"{offset + 1}-{offset + len(page.memories)} of "
            if page.memories and not page_token else "")
    click.echo(f"{span}{output.plural(page.total, 'memory', 'memories')}", err=True)
    if page.next_page_token:
        click.echo(f"more: --page {page.next_page_token}", err=True)
