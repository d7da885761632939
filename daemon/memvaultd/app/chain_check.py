"""What `memvault check` reads of sync: the sealed sync state, and the
remote's version chain, read and never written.

The chain is walked from its first version: each version must be signed
by a device of the registry (`sync/signatures.py`; one that is not is
passed over and counted, as sync passes it over), open under its number
and its parent's hash (`sync/envelope.py`), and its operations parse; the
version this device saw last must still be there, unchanged (the
high-water mark), and the chain no shorter; the vault's description
and its newest snapshot must open. That is every object a new device needs
to join. The walk downloads the whole chain (`--no-remote` skips it); a
remote that cannot be reached leaves the chain `unchecked`, not damaged.

It lives with the composition root because it reads both sides: the
vault's sealed state file and the sync package's remote and envelope.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memvault_base.errors import IntegrityError, MemvaultError
from memvaultd.model.operations import Operation
from memvaultd.storage.snapshot_body import decode_published
from memvaultd.sync import epochs, signatures
from memvaultd.sync.devices import read_records
from memvaultd.sync.envelope import DESCRIPTION, Envelope
from memvaultd.sync.high_water import HighWater, HighWaterFile
from memvaultd.sync.remotes import open_remote, redact
from memvaultd.sync.remotes.base import Remote
from memvaultd.sync.setup import DESCRIPTION_OBJECT
from memvaultd.sync.snapshots import latest_snapshot
from memvaultd.sync.version_body import unpack_ops
from memvaultd.vault.check import DAMAGED, OK, UNCHECKED, Finding

__all__ = ["SyncCheck", "check_sync", "pull_chain"]

_BATCH = 50  # versions per call, as the worker pulls them


@dataclass
class SyncCheck:
    findings: list[Finding] = field(default_factory=list)
    pushed_seq: int | None = None  # the log must keep every record after it
    damaged_state: Path | None = None  # a sync.state that does not authenticate


def check_sync(data_dir: Path, key: bytes, vault_id: bytes, *, remote: bool) -> SyncCheck:
    water = HighWaterFile(data_dir, key, vault_id)
    name = water.path.name
    try:
        mark = water.load()
    except IntegrityError as exc:
        return SyncCheck([Finding(name, "sync state", DAMAGED, f"{exc}: sync cannot resume. "
                                  "`memvault check --repair` sets it aside; then set sync up "
                                  "again with `memvault join` and the recovery key")],
                         damaged_state=water.path)
    if mark is None:
        return SyncCheck()
    check = SyncCheck([Finding(name, "sync state", OK,
                               f"syncs with {redact(mark.remote)}: version {mark.head} seen, "
                               f"log pushed up to seq {mark.pushed_seq}")], mark.pushed_seq)
    if not remote:
        check.findings.append(Finding("remote", "remote", UNCHECKED, "not read (--no-remote)"))
    else:
        check.findings.append(_chain(mark, key, vault_id))
    return check


class ChainBroken(MemvaultError):
    """The remote's version chain has a gap, or is not the one this device saw."""


def pull_chain(data_dir: Path, key: bytes, vault_id: bytes, each: Callable[[Operation], None]
               ) -> Finding:
    """Walk the chain up to the version this device saw last, giving `each`
    operation of it to `each` (a repair takes back what the remote holds of
    what was lost here); a finding says how that went."""
    mark = HighWaterFile(data_dir, key, vault_id).load()
    assert mark is not None, "only a vault that syncs has a chain"
    return _chain(mark, key, vault_id, each)


def _chain(mark: HighWater, key: bytes, vault_id: bytes,
           each: Callable[[Operation], None] | None = None) -> Finding:
    shown = redact(mark.remote)
    try:
        # After a repair the chain lives under the scope the move named.
        remote = open_remote(mark.remote, token=mark.token,
                             vault_id=mark.scope or vault_id.hex())
    except MemvaultError as exc:
        return Finding("remote", "remote", UNCHECKED, f"{shown}: cannot be opened: {exc}")
    envelope = Envelope(key, vault_id)
    for number, epoch_key in mark.epochs.items():  # the key epochs this device holds
        envelope.add_epoch(int(number), bytes.fromhex(epoch_key))
    try:
        base = remote if not mark.scope else open_remote(mark.remote, token=mark.token,
                                                          vault_id=vault_id.hex())
    except MemvaultError as exc:
        remote.close()
        return Finding("remote", "remote", UNCHECKED, f"{shown}: cannot be opened: {exc}")
    try:
        # As sync counts signers (`SyncWorker._signer_of`, `epochs.admits`).
        named = {*mark.members, *mark.revoked}
        records = {device: record for device, record in read_records(base, envelope).items()
                   if epochs.admits(envelope.epoch, named, device, record.epoch)}
        return _walk(remote, envelope, mark, shown, each,
                     lambda device, at: records[device].sign if device in records and not (
                         device in mark.revoked and at > mark.revoked[device]) else None)
    except (IntegrityError, ChainBroken) as exc:
        return Finding("remote", "remote", DAMAGED, f"{shown}: {exc}")
    except Exception as exc:  # down, slow, refusing: nothing is known to be wrong
        return Finding("remote", "remote", UNCHECKED,
                       f"{shown}: could not be read: {type(exc).__name__}: {exc}")
    finally:
        remote.close()
        if base is not remote:
            base.close()


def _signer_at(key_of: Callable[[str, int], bytes | None], number: int
               ) -> Callable[[str], bytes | None]:
    """`key_of` for version `number` (a revoked device counts up to its head)."""
    return lambda device: key_of(device, number)


def _walk(remote: Remote, envelope: Envelope, mark: HighWater, shown: str,
          each: Callable[[Operation], None] | None,
          key_of: Callable[[str, int], bytes | None]) -> Finding:
    description = json.loads(envelope.open(DESCRIPTION, remote.get_object(DESCRIPTION_OBJECT),
                                           name=DESCRIPTION_OBJECT))
    number, parent, operations, first, refused, signed = 0, b"", 0, 0, 0, False
    while True:
        batch = remote.versions_after(number, limit=_BATCH)
        for at, blob in batch:
            if first and at != number + 1:
                raise ChainBroken(f"version {number + 1} is missing (the remote offered {at})")
            first = first or at
            if at == 1 or at > first:  # a first version after a pruned start has no known parent
                name = f"version {at}"
                try:
                    body, signed_here = signatures.open_version(
                        envelope, blob, at, parent, _signer_at(key_of, at),
                        unsigned_ok=not signed)
                except signatures.Refused:
                    refused += 1  # as sync does: passed over, linked past
                else:
                    signed = signed or signed_here
                    ops = unpack_ops(body, name)
                    operations += len(ops)
                    if each is not None and at <= mark.head:
                        for op in ops:
                            each(op)
            parent, number = hashlib.sha256(blob).digest(), at
            if at == mark.head and parent.hex() != mark.head_hash:
                raise ChainBroken(f"version {at} is not the one this device saw: the history "
                                  "was forked or replaced")
        if len(batch) < _BATCH:
            break
    if number < mark.head:
        raise ChainBroken(f"the chain ends at version {number}, but this device has seen "
                          f"version {mark.head}: rolled back")
    snapshot = latest_snapshot(remote, envelope, decode_published)
    pruned = f" (versions before {first} are not there; checked from {first})" if first > 1 else ""
    newest = f"newest snapshot at version {snapshot[0]}" if snapshot else "no snapshot"
    passed = (f" ({refused} signed by no registered device: passed over, as sync does)"
              if refused else "")
    return Finding("remote", "remote", OK,
                   f"{shown}: {number} versions{passed}, {operations} operations; each "
                   f"version is signed by a registered device, opens and names its "
                   f"parent{pruned}; {newest}; model {description.get('model')}")
