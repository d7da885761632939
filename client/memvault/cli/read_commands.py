"""`memvault recall`, `get`, `topics` and `entities`: the commands that read
memories and print them as tables (or JSON)."""

from __future__ import annotations

import sys
from typing import Any

import click

from memvault.cli import output
from memvault.cli.context import current_client, whole_id
from memvault.cli.options import filter_option, json_option
from memvault.types import Facet

__all__ = ["entities", "get", "recall", "topics"]

_client = current_client


def _score(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not 0 <= value <= 1:  # NaN fails this too
        raise click.BadParameter(f"{value} is not a score: scores run from 0 to 1")
    return value


@click.command()
@click.argument("query")
@click.option("--top-k", type=click.IntRange(1, 1000), help="How many hits at most (default 3).")
@click.option("--min-score", type=float, callback=_score, metavar="0..1",
              help="Drop hits scoring below this (scores run from 0 to 1).")
@filter_option
@click.option("--mode", type=click.Choice(["hybrid", "vector", "keyword"]), help="Default: hybrid.")
@click.option("--type", "types", multiple=True, help="Only this type; repeatable.")
@click.option("--topic", default="", help="Only this topic and the topics below it.")
@click.option("--exact-topic", is_flag=True,
              help="With --topic: only that topic, not the topics below it.")
@click.option("--session", default="", help="Only this session.")
@click.option("--source", default="", help="Only memories this agent or file wrote.")
@click.option("--tier", "tiers", multiple=True, help="Only this tier; repeatable.")
@click.option("--include-superseded", is_flag=True, help="Also replaced memories.")
@click.option("--max-tokens", type=click.IntRange(0), default=0, help="A token budget for hits.")
@click.option("--offset", type=click.IntRange(0), default=0, help="Skip this many ranked hits.")
@click.option("--preview", is_flag=True, help="Leave access counts alone.")
@click.option("--min-txid", type=click.IntRange(0), default=0, help="Wait for this write first.")
@click.option("--turns", is_flag=True, help="Also search transcript turns.")
@click.option("--band", type=click.Choice(["hot", "warm", "cold", "frozen"]),
              help="Only memories of this heat band.")
@json_option
def recall(
    query: str,
    top_k: int | None,
    filter_: str | None,
    mode: str | None,
    band: str | None,
    offset: int,
    preview: bool,
    turns: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """The memories that best answer QUERY ("-" reads it from stdin), best first."""
    if query == "-":
        # From stdin, a query is not in the process's arguments, which every
        # user of the machine can read (ps).
        query = sys.stdin.read().strip()
    # The filter goes through verbatim: the daemon owns its grammar and says
    # what is wrong with it (exit 2).
    hits = _client().recall(
        query,
        top_k=top_k or 0,
        filter=filter_,
        mode=mode or "",
        band=band or "",
        offset=offset,
        mark_accessed=not preview,
        include_turns=turns,
        **options,
    )
    if as_json:
        output.echo_json(hits.to_dict() if turns else [hit.to_dict() for hit in hits])
        return
    if hits:
        output.show(output.hits_table(hits, first=offset + 1))
    else:
        click.echo("no memories matched", err=True)
    if hits.turns:
        output.show(output.turns_table(hits.turns))
    elif turns:
        click.echo("no turns matched", err=True)
    if hits.has_more:
        click.echo(f"more: --offset {offset + len(hits)}", err=True)


@click.command()
@click.argument("id")
@click.option("--vector", is_flag=True, help="Include the stored embedding.")
@click.option("--chain", is_flag=True, help="Show its supersession chain, oldest first.")
@click.option("--sources", is_flag=True,
              help="Show the archived memories a consolidated memory summarises.")
@json_option
def get(id: str, vector: bool, chain: bool, sources: bool, as_json: bool) -> None:
    """Show the memory with this ID (or, with --chain, every version of it;
    with --sources, what a consolidated memory was made from). ID may be its
    first characters, as tables show them (at least 4)."""
    id = whole_id(id)
    if chain or sources:
        links = _client().history(id) if chain else _client().sources(id)
        if as_json:
            output.echo_json([link.to_dict() for link in links])
        else:
            output.show(output.chain_table(links, current=id))
        return
    memory = _client().get(id, include_vector=vector)
    if as_json:
        output.echo_json(memory.to_dict())
    else:
        output.show(output.memory_table(memory))


@click.command()
@filter_option
@json_option
def topics(filter_: str | None, as_json: bool) -> None:
    """The topics of the vault: how many memories each, and when last active."""
    _show_facets(_client().list_topics(filter_), "topic", as_json)


@click.command()
@filter_option
@json_option
def entities(filter_: str | None, as_json: bool) -> None:
    """The entities of the vault: how many memories each, and when last active."""
    _show_facets(_client().list_entities(filter_), "entity", as_json)


def _show_facets(facets: list[Facet], noun: str, as_json: bool) -> None:
    if as_json:
        output.echo_json([facet.to_dict() for facet in facets])
    elif facets:
        output.show(output.facets_table(facets, noun))
    else:
        click.echo(f"no {noun} yet", err=True)
