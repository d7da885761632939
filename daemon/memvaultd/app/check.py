"""`memvaultd check [--repair] [--json] [--no-remote]`: check a vault, and
repair it, with no daemon running: the way in when the daemon cannot start.

It opens the vault as the daemon does (`vault.json`, then the key: the key
file with the passphrase from MEMVAULT_PASSPHRASE, MEMVAULT_PASSPHRASE_FILE
or a prompt, else the OS keyring), and holds the daemon's socket while it
works: a daemon started meanwhile finds it answering and exits 2, so nothing
writes the vault while it is read or rewritten. `memvault check` asks the
running daemon instead when there is one (`check_served`, the `Check` call),
and runs this when there is none.

Exit codes: 0 every file authenticates (after a repair: the repaired vault
does); 1 something is damaged (or a repair could not make it sound);
2 nothing could be checked (no vault here, the key is locked, a daemon runs).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from memvault_base.errors import IntegrityError, InvalidArgument, MemvaultError
from memvault_base.paths import resolve
from memvaultd.app.chain_check import SyncCheck, check_sync, pull_chain
from memvaultd.model.operations import Operation
from memvaultd.serve.front.socket_guard import claim_socket, prepare_socket_dir
from memvaultd.storage.keys import KEY_FILE_NAME, load_vault_key
from memvaultd.storage.vault_info import FILE_NAME as VAULT_JSON
from memvaultd.storage.vault_info import VaultInfo
from memvaultd.vault.check import (
    DAMAGED,
    OK,
    REPAIR_HINT,
    CheckReport,
    Finding,
    check_running,
    seqs_named,
    unfinished_repair,
    vault_id_hint,
)
from memvaultd.vault.salvage import examine, finish_repair, repair
from memvaultd.vault.vault import Vault

__all__ = ["EXIT_CANNOT_CHECK", "EXIT_DAMAGED", "check_command", "check_offline",
           "check_served"]

EXIT_DAMAGED = 1
EXIT_CANNOT_CHECK = 2
REPAIRED = "repaired"  # the status of what a repair replaced
_LOCAL_KINDS = frozenset({"snapshot", "log segment", "log", "sync state"})


def check_served(vault: Vault, *, remote: bool) -> CheckReport:
    """The running daemon's check of its own vault: every file, read beside it."""
    report = check_running(vault.core, vault.snapshots)
    sync = check_sync(vault.data_dir, vault.vault_key, vault.info.vault_id_bytes, remote=remote)
    _insert_sync(report, sync)
    return report


def check_offline(data_dir: Path, socket_path: Path, *, repair_it: bool, remote: bool,
                  prompt: bool) -> CheckReport:
    """Check the vault in `data_dir` (and repair it) while no daemon runs."""
    with holding(socket_path):
        report = CheckReport("offline")
        if not (data_dir / VAULT_JSON).exists():
            hint = vault_id_hint(data_dir)
            if hint is None:
                raise InvalidArgument(f"no vault in {data_dir} (no {VAULT_JSON})")
            report.add(Finding(VAULT_JSON, "vault.json", DAMAGED,
                               f"missing, beside the files of vault {hint}: nothing can be "
                               "opened without it; restore it from a backup (it holds no "
                               "secret)"))
            return report
        finished = finish_repair(data_dir) if repair_it else None
        if (unfinished := unfinished_repair(data_dir)) is not None:
            report.add(unfinished)
        try:
            info = VaultInfo.load(data_dir)
            assert info is not None
        except IntegrityError as exc:
            report.add(Finding(VAULT_JSON, "vault.json", DAMAGED,
                               f"{exc}: nothing else can be checked without it; restore it "
                               "from a backup (it holds no secret)"))
            return report
        report.add(Finding(VAULT_JSON, "vault.json", OK, f"vault {info.vault_id}, model "
                           f"{info.model}, {info.dimension} dimensions"))
        try:
            key = load_vault_key(data_dir, info.vault_id_bytes, prompt=prompt)
        except IntegrityError as exc:
            report.add(Finding(KEY_FILE_NAME, "key", DAMAGED, str(exc)))
            return report
        report.add(Finding(KEY_FILE_NAME if key.storage == "keyfile" else "keyring", "key", OK,
                           f"opens: {key.detail}"))
        sync = check_sync(data_dir, key.key, info.vault_id_bytes, remote=remote)
        examine(data_dir, info, key.key, report, keep_after=sync.pushed_seq)
        _insert_sync(report, sync)
        if finished is not None:
            report.add(Finding(str(finished.relative_to(data_dir)), "repair", OK,
                               "an interrupted repair was finished: the files it replaced "
                               "are kept here"))
        if not repair_it:
            return report
        if not any(f.status == DAMAGED and f.kind in _LOCAL_KINDS for f in report.findings):
            report.add(Finding("vault", "repair", OK, "nothing to repair here: every local "
                               "file authenticates" + ("; the remote's chain is mended by "
                               "sync (`memvault sync status`)" if not report.sound else "")))
            return report
        return _repair(data_dir, info, key.key, report, sync)


def _repair(data_dir: Path, info: VaultInfo, key: bytes, before: CheckReport,
            sync: SyncCheck) -> CheckReport:
    aside = ([(sync.damaged_state, "does not authenticate: sync must be set up again")]
             if sync.damaged_state is not None else [])
    remote = next((f for f in before.findings if f.kind == "remote"), None)
    pull = None
    if remote is not None and remote.status == OK:
        def pull(each: Callable[[Operation], None]) -> Finding:
            return pull_chain(data_dir, key, info.vault_id_bytes, each)
    read, where = repair(data_dir, info, key, keep_after=sync.pushed_seq, also_aside=aside,
                         pull=pull)
    after = CheckReport("offline")
    after.add(*(f for f in before.findings if f.kind in ("vault.json", "key")))
    examine(data_dir, info, key, after, keep_after=sync.pushed_seq)
    _insert_sync(after, check_sync(data_dir, key, info.vault_id_bytes, remote=False))
    after.findings = [f for f in after.findings if f.kind not in ("remote", "set aside")]
    after.add(*(f for f in before.findings if f.kind == "remote"))
    after.add(*(f for f in read.findings if f.kind == "repair"))
    kept = where.relative_to(data_dir) if where is not None else "nowhere"
    after.add(*(Finding(f.object, f.kind, REPAIRED, f"{f.detail} (kept in {kept})", f.seqs)
                for f in read.findings if f.status == DAMAGED and f.kind in _LOCAL_KINDS
                and f.object != "log"))
    lost = f"; could not be kept: {seqs_named(read.lost)}" if read.lost else ""
    after.add(Finding(str(kept), "repair", OK if after.sound else DAMAGED,
                      f"wrote snapshot {after.snapshot_seq} holding {after.memory_count} "
                      f"memories and a fresh log{lost}; the files it replaced are kept in "
                      f"{kept}"))
    after.lost, after.lost_memories = read.lost, read.lost_memories
    after.repaired = str(kept)
    return after


def _insert_sync(report: CheckReport, sync: SyncCheck) -> None:
    """The sync findings after the log's, before the folders set aside."""
    at = next((i for i, f in enumerate(report.findings) if f.kind == "set aside"),
              len(report.findings))
    report.findings[at:at] = sync.findings


@contextlib.contextmanager
def holding(path: Path) -> Iterator[None]:
    """The daemon's socket, bound by this process and answered with a
    close: no daemon starts on the vault meanwhile (it refuses a socket
    that answers), and a client finds no daemon at once."""
    prepare_socket_dir(path)
    claim_socket(path)
    old_umask = os.umask(0o177)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old_umask)
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()

    def refuse() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                connection, _ = listener.accept()
                connection.close()

    thread = threading.Thread(target=refuse, name="socket-holder", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        listener.close()
        path.unlink(missing_ok=True)


def render(report: CheckReport) -> str:
    """The report as lines a person reads."""
    width = max((len(f.object) for f in report.findings), default=0)
    lines = [f"{f.status:9} {f.object:{width}}  {f.detail}" for f in report.findings]
    if report.lost:
        lines.append(f"lost: log {seqs_named(report.lost)}")
        if report.lost_memories:
            lines.append("memories whose records were lost (named by later ones): "
                         + ", ".join(report.lost_memories))
    verdict = ("sound: every file authenticates" if report.sound else
               f"DAMAGED: {REPAIR_HINT}" if not report.repaired else "DAMAGED after the repair")
    lines.append(f"{verdict} ({report.memory_count} memories, from snapshot "
                 f"{report.snapshot_seq})")
    return "\n".join(lines)


@click.command("check")
@click.option("--repair", "repair_it", is_flag=True,
              help="Write back everything that authenticates as a sound vault; the damaged "
                   "files are kept aside.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--no-remote", is_flag=True, help="Do not read the remote's chain.")
@click.pass_context
def check_command(ctx: click.Context, repair_it: bool, as_json: bool, no_remote: bool) -> None:
    """Check the vault's files (and --repair them) while no daemon runs."""
    home, socket_path = ctx.obj
    paths = resolve(home)
    sock = Path(socket_path).absolute() if socket_path else paths.socket
    try:
        report = check_offline(paths.data_dir, sock, repair_it=repair_it, remote=not no_remote,
                               prompt=sys.stdin.isatty())
    except MemvaultError as exc:
        click.echo(f"memvaultd check: {' '.join(str(exc).split())}", err=True)
        ctx.exit(EXIT_CANNOT_CHECK)
    click.echo(json.dumps(report.to_dict(), ensure_ascii=False) if as_json else render(report))
    ctx.exit(0 if report.sound else EXIT_DAMAGED)
