"""`memvault-server`: the self-hosted sync endpoint's command line.

    memvault-server serve [--listen 127.0.0.1:7433] [--data DIR] [--store s3://bucket/prefix]
                          [--tls-cert FILE --tls-key FILE] [--max-object-bytes N]
                          [--rate N] [--max-watchers N]
                          [--quota-objects N] [--quota-bytes N]
    memvault-server token create NAME [--account ACCOUNT] [--admin]
    memvault-server token list
    memvault-server token revoke NAME

`--data` defaults to the platform's user data directory + `/memvault-server`
(`~/.local/share/memvault-server` on Linux) and holds `tokens.json` and, without
`--store`, the objects under `store/`. `serve` logs `listening on HOST:PORT`
once the port is bound, and stops cleanly on SIGTERM or SIGINT.

Exit codes: 0 clean stop; 1 a failed command (no such token); 2 cannot
start (bad flags, port in use, unreadable certificate).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

import click
import platformdirs

from memvault_base.errors import MemvaultError
from memvault_server import __version__
from memvault_server.limits import DEFAULT_RATE
from memvault_server.quotas import DEFAULT_MAX_BYTES, DEFAULT_MAX_OBJECTS
from memvault_server.serve import (
    DEFAULT_LISTEN,
    DEFAULT_MAX_OBJECT,
    DEFAULT_MAX_WATCHERS,
    Settings,
    SyncServer,
)
from memvault_server.tokens import TokenBook

log = logging.getLogger("memvault_server")


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("memvault-server", appauthor=False))


_data_option = click.option(
    "--data", "data_dir", type=click.Path(file_okay=False, path_type=Path),
    default=None, help="Tokens and (without --store) objects live here.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="memvault-server")
def main() -> None:
    """memvault-server: stores encrypted vault objects; holds no key."""


@main.command()
@click.option("--listen", default=DEFAULT_LISTEN, show_default=True, help="HOST:PORT to serve on.")
@_data_option
@click.option("--store", default=None, help="s3://bucket/prefix instead of DATA/store.")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--max-object-bytes", type=click.IntRange(1), default=DEFAULT_MAX_OBJECT,
              show_default=True)
@click.option("--rate", type=click.FloatRange(min=1), default=DEFAULT_RATE, show_default=True,
              help="Calls per second per account.")
@click.option("--max-watchers", type=click.IntRange(1), default=DEFAULT_MAX_WATCHERS,
              show_default=True, help="Concurrent WatchHead streams.")
@click.option("--quota-objects", type=click.IntRange(1), default=DEFAULT_MAX_OBJECTS,
              show_default=True, help="Objects and versions per account.")
@click.option("--quota-bytes", type=click.IntRange(1), default=DEFAULT_MAX_BYTES,
              show_default=True, help="Bytes of objects and versions per account.")
@click.option("--log-level", default="info", show_default=True)
def serve(listen: str, data_dir: Path | None, store: str | None, tls_cert: Path | None,
          tls_key: Path | None, max_object_bytes: int, rate: float, max_watchers: int,
          quota_objects: int, quota_bytes: int, log_level: str) -> None:
    """Serve the Sync API until SIGTERM or SIGINT."""
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if (tls_cert is None) != (tls_key is None):
        _fail("--tls-cert and --tls-key go together", 2)
    os.umask(0o077)
    settings = Settings(data_dir or default_data_dir(), listen, store, tls_cert, tls_key,
                        max_object_bytes, rate, max_watchers, quota_objects, quota_bytes)
    try:
        server = SyncServer(settings).start()
    except (MemvaultError, OSError, RuntimeError) as exc:
        _fail(f"cannot start: {exc}", 2)
    host = listen.rpartition(":")[0]
    log.info("memvault-server %s listening on %s:%d (%s, store %s)", __version__, host,
             server.port, "TLS" if tls_cert else "plaintext",
             store or settings.data_dir / "store")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    stop.wait()
    server.stop()
    log.info("stopped")


@main.group()
def token() -> None:
    """Bearer tokens: each belongs to an account, which owns the vaults it creates."""


@token.command("create")
@click.argument("name")
@click.option("--account", default=None, help="The account (default: NAME).")
@click.option("--admin", is_flag=True,
              help="May delete objects of the account's vaults (never give it to a device).")
@_data_option
def token_create(name: str, account: str | None, admin: bool, data_dir: Path | None) -> None:
    """Make a token and print it once; only its hash is kept."""
    try:
        value = TokenBook(data_dir or default_data_dir()).create(name, account, admin)
    except MemvaultError as exc:
        _fail(str(exc), 1)
    click.echo(value)


@token.command("list")
@_data_option
@click.option("--json", "as_json", is_flag=True, help="One JSON array.")
def token_list(data_dir: Path | None, as_json: bool) -> None:
    """Token names, accounts, creation times, admin marks and the device each
    is bound to (never the tokens)."""
    entries = TokenBook(data_dir or default_data_dir()).entries()
    if as_json:
        click.echo(json.dumps([{"name": e.name, "account": e.account, "admin": e.admin,
                                "created_at": e.created_at, "device": e.device}
                               for e in entries]))
        return
    for e in entries:
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.created_at))
        mark = ("\tadmin" if e.admin else "") + (f"\tdevice {e.device}" if e.device else "")
        click.echo(f"{e.name}\t{e.account}\t{created}{mark}")


@token.command("revoke")
@click.argument("name")
@_data_option
def token_revoke(name: str, data_dir: Path | None) -> None:
    """Remove a token; calls with it fail from the next call on."""
    try:
        TokenBook(data_dir or default_data_dir()).revoke(name)
    except MemvaultError as exc:
        _fail(str(exc), 1)


def _fail(message: str, code: int) -> None:
    click.echo(f"memvault-server: {message}", err=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
