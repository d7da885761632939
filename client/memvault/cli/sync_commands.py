"""`memvault init`, `memvault join`,
`memvault sync now|status|verify|witness|repair|leave|move`: set up, watch,
verify, witness, repair, leave and move end-to-end encrypted sync. The daemon
does the work; these commands ask it to and print what it says."""

from __future__ import annotations

from collections.abc import Callable

import click

from memvault.cli import output
from memvault.cli.context import current_client
from memvault.cli.input import secret, secret_from_file, warn_if_in_argv
from memvault.cli.sync_output import sync_table
from memvault.types import InitResult, SyncInfo

RECOVERY_ENV = "MEMVAULT_RECOVERY_KEY"
TOKEN_ENV = "MEMVAULT_TOKEN"
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
remote_option = click.option("--remote", required=True, metavar="URL",
                             help="grpc://host:port, grpcs://host:port, s3://bucket/prefix "
                                  "or file:///path")


def token_option(command: Callable[..., None]) -> Callable[..., None]:
    """`--token-file FILE` (- for stdin), `MEMVAULT_TOKEN`, or `--token` (warned)."""
    command = click.option(
        "--token-file", metavar="FILE", default=None,
        help="Read the memvault-server bearer token from FILE's first line (- for stdin).",
    )(command)
    return click.option(
        "--token", envvar=TOKEN_ENV, default=None, expose_value=True,
        callback=warn_if_in_argv(TOKEN_ENV, "--token-file"),
        help=f"Bearer token for a memvault-server ({TOKEN_ENV}). As an argument it is "
             "visible to other users: prefer the variable or --token-file.",
    )(command)


def _token(token: str | None, token_file: str | None) -> str | None:
    if token_file is not None:
        return secret_from_file(token_file, "a token")
    return token
cleartext_option = click.option(
    "--allow-cleartext-token", is_flag=True,
    help="Send the token over grpc:// (no TLS) to a host other than this one. Without it "
         "that is refused: use grpcs://.")


_client = current_client


@click.command("init")
@remote_option
@token_option
@cleartext_option
@json_option
def init(remote: str, token: str | None, token_file: str | None, allow_cleartext_token: bool,
         as_json: bool) -> None:
    """Start syncing this vault to an empty remote; prints the recovery key once."""
    result = _client().init_sync(remote, token=_token(token, token_file),
                                 allow_cleartext_token=allow_cleartext_token)
    _show_recovery(result, remote, as_json)


def _show_recovery(result: InitResult, remote: str, as_json: bool) -> None:
    if as_json:
        output.echo_json(result.to_dict())
        return
    click.echo(f"vault {result.vault_id} now syncs to {remote}")
    click.echo("Recovery key (shown once; another device needs it to join):")
    click.echo(f"  {result.recovery_key}")


@click.command("join")
@remote_option
@token_option
@cleartext_option
@click.option("--recovery-key", envvar=RECOVERY_ENV, default=None,
              callback=warn_if_in_argv(RECOVERY_ENV, "--recovery-key-file"),
              help=f"The vault's recovery key ({RECOVERY_ENV}); asked for when absent. As an "
                   "argument it is visible to other users: prefer the prompt, the variable "
                   "or --recovery-key-file.")
@click.option("--recovery-key-file", metavar="FILE", default=None,
              help="Read the recovery key from FILE's first line (- for stdin).")
@json_option
def join(remote: str, token: str | None, token_file: str | None, allow_cleartext_token: bool,
         recovery_key: str | None, recovery_key_file: str | None, as_json: bool) -> None:
    """Join the vault on REMOTE; the memories this device holds are kept."""
    if recovery_key_file is not None:
        recovery_key = secret_from_file(recovery_key_file, "a recovery key")
    if not recovery_key:
        recovery_key = secret("Recovery key", "the recovery key",
                              f"set {RECOVERY_ENV} or give --recovery-key-file FILE "
                              "(- for stdin)")
    result = _client().join_sync(remote, recovery_key, token=_token(token, token_file),
                                 allow_cleartext_token=allow_cleartext_token)
    if as_json:
        output.echo_json(result.to_dict())
    else:
        click.echo(f"joined vault {result.vault_id}: "
                   f"{output.plural(result.memory_count, 'memory', 'memories')}")


@click.group("sync")
def sync() -> None:
    """Sync now, or see where sync stands."""


@sync.command("now")
@json_option
def now(as_json: bool) -> None:
    """Pull and push at once."""
    _show(_client().sync_now(), as_json)


@sync.command("status")
@json_option
def status(as_json: bool) -> None:
    """Remote, head, last push and pull, pending operations, errors."""
    info = _client().sync_status()
    _show(info, as_json)
    if not as_json and info.unshown_recovery_key:
        click.echo(f"A rotation started key epoch {info.unshown_recovery_epoch} and was cut "
                   "short before it printed its recovery key. Recovery key (shown once):")
        click.echo(f"  {info.unshown_recovery_key}")
    if not as_json and info.state == "stopped":
        click.echo("Sync is stopped; `memvault sync repair` moves the vault to a fresh chain "
                   "(every memory kept).")


@sync.command("verify")
@click.argument("other", required=False, metavar="[FINGERPRINT]")
@json_option
def verify(other: str | None, as_json: bool) -> None:
    """Print this device's fingerprint of the chain; compare another device's.

    Run it on two devices of the vault and compare what they print (read it
    aloud, or give one's to the other as FINGERPRINT): the same history
    gives the same fingerprint, a remote that forked it cannot. With
    FINGERPRINT a mismatch stops sync here and exits with 5."""
    verdict = _client().verify_sync(other)
    if as_json:
        output.echo_json(verdict.to_dict())
    elif other is None:
        click.echo(f"This device's fingerprint (version {verdict.head} of chain "
                   f"{verdict.chain}):")
        click.echo(f"  {verdict.fingerprint}")
        click.echo("Run `memvault sync verify` on another device and compare, or give its "
                   "fingerprint here: `memvault sync verify FINGERPRINT`.")
    elif verdict.agreed:
        click.echo(f"The fingerprints agree at version {verdict.compared_at} of chain "
                   f"{verdict.chain}: both devices saw the same history up to there.")
        click.echo(f"This device's fingerprint: {verdict.fingerprint}")
    if verdict.undecided:
        if not as_json:
            click.echo(f"memvault: not compared: {verdict.undecided}", err=True)
        raise SystemExit(1)


@sync.command("witness")
@click.argument("url", metavar="URL")
@token_option
@cleartext_option
@json_option
def witness(url: str, token: str | None, token_file: str | None, allow_cleartext_token: bool,
            as_json: bool) -> None:
    """Record what this device has seen on a second remote, a witness.

    Every device given the same witness URL records its view of the chain
    there and checks the others' at every round: a remote that shows two
    devices different histories, or hides one's versions from another, is
    then caught without comparing fingerprints by hand, unless both remotes
    collude. URL is any kind of remote, as for `init`."""
    _show(_client().witness_sync(url, token=_token(token, token_file),
                                 allow_cleartext_token=allow_cleartext_token), as_json)


@sync.command("repair")
@click.option("--yes", is_flag=True, help="Confirmed: do not ask (for scripts).")
@json_option
def repair(yes: bool, as_json: bool) -> None:
    """Move a stopped vault to a fresh chain on its remote, keeping every memory."""
    client = _client()
    info = client.sync_status()
    if not info.configured:
        raise click.UsageError("sync is not set up: there is nothing to repair")
    if info.state != "stopped" and not info.withheld_head:
        click.echo(f"sync is {info.state}: there is nothing to repair")
        return
    if not yes:
        memories = client.status().memory_count
        click.echo(f"Sync stopped: {info.last_error}")
        held = output.plural(memories, "memory", "memories")
        click.echo(f"Repair moves this vault to a fresh chain on {info.remote}. This device "
                   f"puts all its {held} there; every other device moves too "
                   "the next time it syncs and puts its own there, so nothing is lost (each "
                   "uploads its vault once). The old chain stays on the remote, unused.")
        click.confirm("Move this vault to a fresh chain?", abort=True)
    _show(client.sync_repair(confirm=True), as_json)


@sync.command("leave")
@json_option
def leave(as_json: bool) -> None:
    """Stop syncing; every memory and the key stay here, the remote keeps its data."""
    result = _client().leave_sync()
    if as_json:
        output.echo_json(result.to_dict())
        return
    click.echo(f"left {result.remote}: this vault no longer syncs there.")
    click.echo("Every memory stays here; the remote keeps what it holds.")
    if result.pending:
        click.echo(f"{output.plural(result.pending, 'operation', 'operations')} of this device "
                   "never reached it; they stay here only.")
    click.echo("`memvault init` syncs to an empty remote; `memvault join` joins a vault.")


@sync.command("move")
@remote_option
@token_option
@cleartext_option
@json_option
def move(remote: str, token: str | None, token_file: str | None, allow_cleartext_token: bool,
         as_json: bool) -> None:
    """Sync to another, empty remote from now on; prints its recovery key once.

    Every memory of this device goes there, as a fresh chain. The old remote
    keeps its data and hears nothing: on every other device run
    `memvault sync leave`, then `memvault join` with the new remote and key."""
    result = _client().move_sync(remote, token=_token(token, token_file),
                                 allow_cleartext_token=allow_cleartext_token)
    _show_recovery(result, remote, as_json)
    if not as_json:
        click.echo("Other devices still sync to the old remote. On each of them run")
        click.echo("  memvault sync leave")
        click.echo(f"  memvault join --remote {remote}")
        click.echo("and give this recovery key.")


def _show(info: SyncInfo, as_json: bool) -> None:
    if as_json:
        output.echo_json(info.to_dict())
        return
    output.show(sync_table(info))


COMMANDS = (init, join, sync)
