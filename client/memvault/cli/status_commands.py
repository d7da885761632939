"""`memvault status` (and `status --follow-scan`) and `memvault events`: what
the daemon is and what it does."""

from __future__ import annotations

import itertools
import signal
import threading

import click

from memvault.cli import output
from memvault.cli.context import current_client
from memvault.cli.options import json_option
from memvault.types import SyncInfo
from memvault_base.errors import MemvaultError

__all__ = ["events", "status"]

_client = current_client


@click.command()
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


@click.command()
@click.option(
    "--type",
    "types",
    multiple=True,
    help="hit | miss | remember | forget | restore | ready | watch | config; repeatable.",
)
@json_option
def events(types: tuple[str, ...], as_json: bool) -> None:
    """Stream the daemon's events, one JSON object per line, until Ctrl-C.

    The output is JSON lines with or without --json.
    """
    del as_json  # accepted for symmetry with the other commands
    try:
        with _client().events(types) as stream:
            # Ctrl-C cancels the call, which ends the loop. Left to raise
            # KeyboardInterrupt wherever the main thread stood, inside gRPC's
            # iterator, it once left the process unable to exit (a test's
            # 10 s wait after SIGINT ran out).
            previous = signal.signal(signal.SIGINT, lambda signum, frame: stream.cancel())
            try:
                for event in stream:
                    output.echo_json(event.to_dict(), indent=None)
            finally:
                signal.signal(signal.SIGINT, previous)
    except KeyboardInterrupt:
        pass  # Ctrl-C before the call was open
