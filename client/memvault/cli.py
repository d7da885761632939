"""The `memvault` command: remember, recall, get, forget, status and events from a shell.

Every command takes `--json` for output a program can parse. Failures print one
line, prefixed "memvault: ", to stderr and exit with a code that says what kind
of failure it was (the table is in EXIT_CODES_HELP and docs/cli.md); a
MemvaultError or a connection failure never prints a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from memvault import __version__, output
from memvault.client import Client
from memvault.errors import InvalidArgument, MemvaultError, NotFound, Unavailable

__all__ = ["EXIT_OK", "cli", "exit_code", "main"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_NOT_FOUND = 4

# "\b" keeps click from re-flowing the table into one paragraph.
EXIT_CODES_HELP = """\b
Exit codes:
  0  ok
  1  the daemon reported an error (one line on stderr, "memvault: ...")
  2  usage error or bad input (including the daemon's INVALID_ARGUMENT)
  3  the daemon is not running or not reachable
  4  no memory with that id
"""


def exit_code(err: MemvaultError) -> int:
    """The exit code the CLI uses for `err`."""
    if isinstance(err, InvalidArgument):
        return EXIT_USAGE
    if isinstance(err, Unavailable):
        return EXIT_UNAVAILABLE
    if isinstance(err, NotFound):
        return EXIT_NOT_FOUND
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


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


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
@click.version_option(__version__, message="memvault %(version)s")
@click.pass_context
def cli(ctx: click.Context, home: str | None, socket: str | None, timeout: float) -> None:
    """Encrypted, local-first memory for AI agents: talk to the memvault daemon."""
    ctx.obj = _Lazy(home, socket, timeout)


class _Lazy:
    """Creates the Client on first use, so `--help` and usage errors never connect."""

    def __init__(self, home: str | None, socket: str | None, timeout: float) -> None:
        self._args = (home, socket, timeout)
        self._client: Client | None = None

    def client(self) -> Client:
        if self._client is None:
            home, socket, timeout = self._args
            self._client = Client(socket, home=home, timeout=timeout)
            click.get_current_context().call_on_close(self._client.close)
        return self._client


def _client() -> Client:
    lazy = click.get_current_context().find_object(_Lazy)
    assert lazy is not None, "the memvault group always sets its context object"
    return lazy.client()


@cli.command()
@click.argument("text")
@click.option(
    "--type", "type_", metavar="TYPE", default="", help="episodic | semantic | procedural."
)
@click.option("--topic", default="", help="Dotted topic key, e.g. user.preferences.testing.")
@click.option("--tag", "tags", multiple=True, help="A tag; repeat for several.")
@click.option("--category", default="")
@click.option("--payload", metavar="JSON", help="A JSON object stored with the memory.")
@click.option("--importance", type=click.FloatRange(0, 1), help="0..1; 0.9 and above pins it.")
@click.option("--session", default="", help="Session id.")
@click.option("--source", default="", help="Which agent or file wrote it.")
@click.option("--entity", default="")
@click.option("--tier", default="", help="working | long_term | archived.")
@click.option("--expires-at", type=float, default=0.0, help="Unix time after which it is hidden.")
@click.option("--supersedes", default="", metavar="ID", help="The id of a memory this replaces.")
@json_option
def remember(
    text: str,
    type_: str,
    topic: str,
    tags: tuple[str, ...],
    category: str,
    payload: str | None,
    importance: float | None,
    session: str,
    source: str,
    entity: str,
    tier: str,
    expires_at: float,
    supersedes: str,
    as_json: bool,
) -> None:
    """Store TEXT as a memory ("-" reads it from stdin); prints its id."""
    if text == "-":
        text = sys.stdin.read().strip()
    result = _client().remember(
        text,
        type=type_,
        topic=topic,
        payload=_json_object(payload, "--payload"),
        entity=entity,
        tags=tags,
        category=category,
        importance=importance,
        session=session,
        source=source,
        tier=tier,
        expires_at=expires_at,
        supersedes=supersedes,
    )
    if as_json:
        output.echo_json(result.to_dict())
        return
    click.echo(result.id)
    if result.reinforced:
        # On stderr, so that `id=$(memvault remember ...)` captures only the id.
        click.echo("reinforced existing memory", err=True)


@cli.command()
@click.argument("query")
@click.option("--top-k", type=click.IntRange(1, 1000), help="How many hits at most (default 3).")
@click.option("--min-score", type=float, help="Drop hits scoring below this.")
@click.option("--filter", "filter_", metavar="JSON", help="A filter expression, passed as is.")
@json_option
def recall(
    query: str, top_k: int | None, min_score: float | None, filter_: str | None, as_json: bool
) -> None:
    """The memories that best answer QUERY, best first."""
    # The filter goes through verbatim: the daemon owns its grammar and says
    # what is wrong with it (exit 2).
    hits = _client().recall(query, top_k=top_k or 0, min_score=min_score, filter=filter_)
    if as_json:
        output.echo_json([hit.to_dict() for hit in hits])
    elif hits:
        output.show(output.hits_table(hits))
    else:
        click.echo("no memories matched", err=True)


@cli.command()
@click.argument("id")
@click.option("--vector", is_flag=True, help="Include the stored embedding.")
@json_option
def get(id: str, vector: bool, as_json: bool) -> None:
    """Show the memory with this ID."""
    memory = _client().get(id, include_vector=vector)
    if as_json:
        output.echo_json(memory.to_dict())
    else:
        output.show(output.memory_table(memory))


@cli.command()
@click.argument("id")
@json_option
def forget(id: str, as_json: bool) -> None:
    """Delete the memory with this ID, on every synced device."""
    txid = _client().forget(id)
    if as_json:
        output.echo_json({"id": id, "txid": txid})
    else:
        click.echo(f"forgot {id} (txid {txid})")


@cli.command()
@json_option
def status(as_json: bool) -> None:
    """The daemon's state: model, counts, cache hit rate."""
    state = _client().status()
    if as_json:
        output.echo_json(state.to_dict())
    else:
        output.show(output.status_table(state))


@cli.command()
@click.option(
    "--type", "types", multiple=True, help="hit | miss | remember | forget | ready; repeatable."
)
@json_option
def events(types: tuple[str, ...], as_json: bool) -> None:
    """Stream the daemon's events, one JSON object per line, until Ctrl-C.

    The output is JSON lines with or without --json.
    """
    del as_json  # accepted for symmetry with the other commands
    try:
        with _client().events(types) as stream:
            for event in stream:
                output.echo_json(event.to_dict(), indent=None)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how this command ends


def _json_object(text: str | None, option: str) -> dict[str, Any] | None:
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


def main() -> None:
    """The `memvault` console script."""
    cli(prog_name="memvault")


if __name__ == "__main__":
    main()
