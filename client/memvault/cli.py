"""The `memvault` command: every call of `memvault.Client` from a shell.

remember, supersede, update, reinforce, recall, get, forget (and forget --sweep),
consolidate, topics, entities, turns append, export, import, status, events,
doctor. Every command that prints data
takes `--json` for output a program can parse. Failures print one line,
prefixed "memvault: ", to stderr and exit with a code that says what kind of
failure it was (the table is in EXIT_CODES_HELP and docs/cli.md); a
MemvaultError or a connection failure never prints a traceback.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

import click

from memvault import __version__, output
from memvault.cli_context import LazyClient, current_client
from memvault.client import IMPORT_BATCH_SIZE
from memvault.errors import InvalidArgument, MemvaultError, NotFound, Unavailable
from memvault.types import Facet, Memory, SyncInfo

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
filter_option = click.option(
    "--filter", "filter_", metavar="JSON", help="A filter expression, passed as is."
)

_F = TypeVar("_F", bound=Callable[..., Any])


def memory_options(command: _F) -> _F:
    """The field options of remember, supersede and update; None when not given."""
    options = [
        click.option(
            "--type",
            "type_",
            metavar="TYPE",
            help="episodic | semantic | procedural (or fact, event, instruction, task).",
        ),
        click.option("--topic", help="Dotted topic key, e.g. user.preferences.testing."),
        click.option("--tag", "tags", multiple=True, help="A tag; repeat for several."),
        click.option("--category"),
        click.option("--payload", metavar="JSON", help="A JSON object stored with the memory."),
        click.option(
            "--importance", type=click.FloatRange(0, 1), help="0..1; 0.9 and above pins it."
        ),
        click.option("--session", help="Session id."),
        click.option("--source", help="Which agent or file wrote it."),
        click.option("--entity"),
        click.option("--tier", help="working | long_term | archived."),
        click.option("--expires-at", type=float, help="Unix time after which it is hidden."),
        click.option("--protected/--unprotected", default=None,
                     help="Keep it out of the forgetting sweep and consolidation."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


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
    ctx.obj = LazyClient(home, socket, timeout)


_client = current_client


@cli.command()
@click.argument("text")
@memory_options
@click.option("--supersedes", default="", metavar="ID", help="The id of a memory this replaces.")
@json_option
def remember(text: str, supersedes: str, as_json: bool, **fields: Any) -> None:
    """Store TEXT as a memory ("-" reads it from stdin); prints its id."""
    if text == "-":
        text = sys.stdin.read().strip()
    result = _client().remember(text, supersedes=supersedes, **_keywords(fields))
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
@filter_option
@click.option("--mode", type=click.Choice(["hybrid", "vector", "keyword"]), help="Default: hybrid.")
@click.option("--type", "types", multiple=True, help="Only this type; repeatable.")
@click.option("--topic", default="", help="Only this topic and the topics below it.")
@click.option("--session", default="", help="Only this session.")
@click.option("--source", default="", help="Only memories this agent or file wrote.")
@click.option("--tier", "tiers", multiple=True, help="Only this tier; repeatable.")
@click.option("--include-superseded", is_flag=True, help="Also replaced memories.")
@click.option("--max-tokens", type=click.IntRange(0), default=0, help="A token budget for hits.")
@click.option("--offset", type=click.IntRange(0), default=0, help="Skip this many ranked hits.")
@click.option("--preview", is_flag=True, help="Leave access counts alone.")
@click.option("--min-txid", type=click.IntRange(0), default=0, help="Wait for this write first.")
@click.option("--turns", is_flag=True, help="Also search transcript turns.")
@click.option("--band", default="", type=click.Choice(["", "hot", "warm", "cold", "frozen"]),
              help="Only memories of this heat band.")
@json_option
def recall(
    query: str,
    top_k: int | None,
    filter_: str | None,
    mode: str | None,
    offset: int,
    preview: bool,
    turns: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """The memories that best answer QUERY, best first."""
    # The filter goes through verbatim: the daemon owns its grammar and says
    # what is wrong with it (exit 2).
    hits = _client().recall(
        query,
        top_k=top_k or 0,
        filter=filter_,
        mode=mode or "",
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


@cli.command()
@click.argument("id")
@click.option("--vector", is_flag=True, help="Include the stored embedding.")
@click.option("--chain", is_flag=True, help="Show its supersession chain, oldest first.")
@click.option("--sources", is_flag=True,
              help="Show the archived memories a consolidated memory summarises.")
@json_option
def get(id: str, vector: bool, chain: bool, sources: bool, as_json: bool) -> None:
    """Show the memory with this ID (or, with --chain, every version of it;
    with --sources, what a consolidated memory was made from)."""
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


@cli.command()
@click.argument("id", required=False)
@click.option("--filter", "filter_", metavar="JSON", help="Forget every memory this matches.")
@click.option("--sweep", "sweep_", is_flag=True,
              help="Forget every memory whose forgetting risk is over the threshold.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="With --sweep: this risk threshold instead of the daemon's (0.5).")
@click.option("--dry-run", is_flag=True, help="With --filter or --sweep: list, forget nothing.")
@json_option
def forget(id: str | None, filter_: str | None, sweep_: bool, threshold: float | None,
           dry_run: bool, as_json: bool) -> None:
    """Delete the memory with this ID, every memory --filter matches, or (--sweep) every
    memory cold, old and minor enough to forget; on every synced device.

    With --filter the ids go to stdout, one per line, and the count to stderr.
    With --sweep each memory comes with its reason; pinned, protected,
    procedural and young memories are never swept.
    """
    if (id is not None) + (filter_ is not None) + sweep_ != 1:
        raise click.UsageError("give one of ID, --filter or --sweep")
    if threshold is not None and not sweep_:
        raise click.UsageError("--threshold goes with --sweep")
    if sweep_:
        sweep_command(dry_run, threshold, as_json)
        return
    if filter_ is None:
        assert id is not None
        if dry_run:
            raise click.UsageError("--dry-run goes with --filter or --sweep")
        txid = _client().forget(id)
        if as_json:
            output.echo_json({"id": id, "txid": txid})
        else:
            click.echo(f"forgot {id} (txid {txid})")
        return
    result = _client().forget_where(filter_, dry_run=dry_run)
    if as_json:
        output.echo_json({**result.to_dict(), "dry_run": dry_run})
        return
    for forgotten in result.ids:
        click.echo(forgotten)
    count = output.plural(len(result.ids), "memory", "memories")
    click.echo(
        f"would forget {count}" if dry_run else f"forgot {count} (txid {result.txid})", err=True
    )


@cli.command()
@click.argument("id")
@click.argument("text")
@memory_options
@json_option
def supersede(id: str, text: str, as_json: bool, **fields: Any) -> None:
    """Store TEXT ("-" reads stdin) as the new version of memory ID; prints the new id."""
    if text == "-":
        text = sys.stdin.read().strip()
    result = _client().supersede(id, text, **_keywords(fields))
    if as_json:
        output.echo_json(result.to_dict())
    else:
        click.echo(result.id)


@cli.command()
@click.argument("id")
@click.option("--text", help="The new text (re-embedded).")
@memory_options
@click.option("--clear-tags", is_flag=True, help="Remove every tag.")
@json_option
def update(id: str, text: str | None, clear_tags: bool, as_json: bool, **fields: Any) -> None:
    """Edit memory ID in place, keeping its id; only the options given change."""
    changes = _keywords(fields)
    if clear_tags:
        if "tags" in changes:
            raise click.UsageError("--clear-tags and --tag do not go together")
        changes["tags"] = []
    result = _client().update(id, text=text, **changes)
    if as_json:
        output.echo_json(result.to_dict())
    else:
        click.echo(f"updated {id} (txid {result.txid})")


@cli.command()
@click.argument("id")
@json_option
def reinforce(id: str, as_json: bool) -> None:
    """Count memory ID as confirmed once more: it fades more slowly."""
    result = _client().reinforce(id)
    if as_json:
        output.echo_json({"id": id, **result.to_dict()})
    else:
        click.echo(f"reinforced {id} ({result.reinforce_count} times, txid {result.txid})")


@cli.command()
@filter_option
@json_option
def topics(filter_: str | None, as_json: bool) -> None:
    """The topics of the vault: how many memories each, and when last active."""
    _show_facets(_client().list_topics(filter_), "topic", as_json)


@cli.command()
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


@cli.command()
@click.option("--follow-scan", is_flag=True,
              help="Follow the scan of the watched folders with a progress bar.")
@json_option
def status(follow_scan: bool, as_json: bool) -> None:
    """The daemon's state: model, counts, cache hit rate, socket, key storage."""
    if follow_scan:
        _follow_scan()
        return
    client = _client()
    state = client.status(bands=True)
    try:
        sync: SyncInfo | None = client.sync_status()
    except MemvaultError:  # a daemon older than sync: report it as not set up
        sync = None
    if as_json:
        output.echo_json({**state.to_dict(),
                          "sync": sync.to_dict() if sync else {"configured": False}})
    else:
        output.show(output.status_table(state, sync))


# A scan publishes its progress twice a second: a second of silence means none runs.
_SCAN_SILENCE_S = 1.5


def _follow_scan() -> None:
    """A progress bar fed by the daemon's "watch" events, until the scan ends."""
    stream = _client().events(["watch"])
    seen = threading.Event()

    def give_up() -> None:
        if not seen.is_set():
            stream.cancel()

    timer = threading.Timer(_SCAN_SILENCE_S, give_up)
    timer.start()
    try:
        with stream:
            first = next(stream, None)
            seen.set()
            if first is None:
                click.echo("no scan of watched folders is running", err=True)
                return
            done, total = (int(n) for n in first.id.split("/"))
            with output.progress("scanning watched folders", total) as advance:
                advance(done)
                for event in itertools.chain([first], stream):
                    now, total = (int(n) for n in event.id.split("/"))
                    advance(now - done)
                    done = now
                    if done >= total:
                        break
            click.echo(f"scanned {output.plural(total, 'file', 'files')}", err=True)
    finally:
        timer.cancel()


@cli.command()
@click.option(
    "--type",
    "types",
    multiple=True,
    help="hit | miss | remember | forget | ready | watch | config; repeatable.",
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


@cli.group()
def turns() -> None:
    """Transcript turns: raw conversation, found by `recall --turns`."""


@turns.command("append")
@click.argument("session")
@click.option("--speaker", help="Who spoke (with --text: one turn instead of stdin).")
@click.option("--text", help="What was said.")
@click.option("--at", type=float, help="When, in Unix time (default now).")
@json_option
def append_turns(
    session: str, speaker: str | None, text: str | None, at: float | None, as_json: bool
) -> None:
    """Store turns of SESSION: JSON lines on stdin, {"speaker": ..., "text": ...} each
    (optionally "at" and "payload"); prints their ids."""
    if (speaker is None) != (text is None):
        raise click.UsageError("--speaker and --text go together")
    if speaker is not None:
        one: dict[str, Any] = {"speaker": speaker, "text": text}
        if at is not None:
            one["at"] = at
        given = [one]
    else:
        given = [line for _, line in _json_lines(sys.stdin, "stdin")]
    if not given:
        raise InvalidArgument("no turns given: JSON lines on stdin, or --speaker and --text")
    result = _client().append_turns(session, given)
    if as_json:
        output.echo_json(result.to_dict())
    else:
        click.echo("\n".join(result.ids))


@cli.command()
@click.argument("file", default="-", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--vectors", is_flag=True, help="Include the stored embeddings.")
@json_option
def export(file: str, vectors: bool, as_json: bool) -> None:
    """Write every memory, one JSON object per line, to FILE (default "-": stdout).

    The file holds the memories in clear text: it is created readable by you only.
    """
    client = _client()
    if file == "-":
        for memory in client.export(include_vectors=vectors):
            output.echo_json(memory.to_dict(), indent=None)
        return
    count = 0
    total = client.status().memory_count
    with _private_file(Path(file)) as out, output.progress("exporting", total) as advance:
        for memory in client.export(include_vectors=vectors):
            out.write(json.dumps(memory.to_dict(), ensure_ascii=False) + "\n")
            count += 1
            advance(1)
    if as_json:
        output.echo_json({"file": file, "exported": count})
    else:
        click.echo(f"exported {output.plural(count, 'memory', 'memories')} to {file}")


@cli.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@json_option
def import_(file: str, as_json: bool) -> None:
    """Import the memories of FILE (JSON lines, as `export` writes them; "-": stdin).

    Ids, times and counts are kept; nothing is duplicated (a restatement of a
    memory reinforces it). Every line is checked before anything is sent.
    """
    lines = _line_source(file)
    total = sum(1 for _ in _memories(lines(), file))
    client = _client()
    added = reinforced = txid = 0
    with output.progress("importing", total) as advance:
        memories = _memories(lines(), file)
        while batch := list(itertools.islice(memories, IMPORT_BATCH_SIZE)):
            result = client.import_memories(batch, batch_size=len(batch))
            added, reinforced = added + result.added, reinforced + result.reinforced
            txid = result.txid
            advance(len(batch))
    if as_json:
        output.echo_json({"added": added, "reinforced": reinforced, "txid": txid})
    else:
        click.echo(f"added {added}, reinforced {reinforced}" + (f" (txid {txid})" if txid else ""))


def _keywords(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The client keywords of the memory options given (None or no --tag: not given)."""
    out = {("type" if k == "type_" else k): v for k, v in fields.items() if v not in (None, ())}
    if "payload" in out:
        out["payload"] = _json_object(out["payload"], "--payload")
    return out


def _json_lines(lines: Iterable[str], where: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line; InvalidArgument names a bad one."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as err:
            raise InvalidArgument(f"{where} line {number}: not JSON: {err}") from None
        if not isinstance(value, dict):
            raise InvalidArgument(f"{where} line {number}: not a JSON object")
        yield number, value


def _memories(lines: Iterable[str], where: str) -> Iterator[Memory]:
    for number, value in _json_lines(lines, where):
        yield Memory.from_dict(value, where=f"{where} line {number}")


def _line_source(file: str) -> Callable[[], Iterable[str]]:
    """The lines of `file` ("-": stdin), readable twice: once to check, once to send."""
    if file == "-":
        text = sys.stdin.read().splitlines()
        return lambda: text
    return lambda: _lines_of(Path(file))


def _lines_of(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as f:
        yield from f


@contextmanager
def _private_file(path: Path) -> Iterator[IO[str]]:
    """A new file only its owner can read, at `path` only once complete.

    Written beside `path` (mkstemp creates it 0600) and renamed over it at the
    end, so a failed export never leaves half a file or clobbers an old one.
    """
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


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


from memvault.doctor import doctor  # noqa: E402 - commands of their own modules
from memvault.mcp_bridge import mcp  # noqa: E402
from memvault.service import service  # noqa: E402
from memvault.sync_commands import COMMANDS as SYNC_COMMANDS  # noqa: E402
from memvault.upkeep_commands import consolidate  # noqa: E402
from memvault.upkeep_commands import sweep as sweep_command  # noqa: E402

cli.add_command(consolidate)
cli.add_command(service)
cli.add_command(mcp)
cli.add_command(doctor)
for command in SYNC_COMMANDS:
    cli.add_command(command)


def main() -> None:
    """The `memvault` console script."""
    cli(prog_name="memvault")


if __name__ == "__main__":
    main()
