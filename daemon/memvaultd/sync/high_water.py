"""What this device knows of the remote, kept sealed in `data/sync.state`.

    file  := magic "MVSS" | format:u8 | sealed(JSON)
             AAD "memvault/sync-state" | format:u8 | vault_id:16,
             key = HKDF(vault key, "sync/state/v1")
    JSON  := {"remote": URL, "token": TOKEN | null,
              "head": N, "head_hash": HEX, "pushed_seq": S,
              "snapshot": M, "ops_since_snapshot": K,
              "chain": C, "scope": SCOPE,
              "seen": {DEVICE_ID: WALL_S, ...},
              "witness": URL | "", "witness_token": TOKEN | null,
              "signed": BOOL,
              "epochs": {N: KEY_HEX, ...}, "revoked": {DEVICE_ID: HEAD, ...},
              "members": [DEVICE_ID, ...], "local_epoch": L}

`head` and `head_hash` are the high-water mark (borg's replay defence): the
newest version this device has applied, and the sha256 of its object. A
remote that later shows a shorter chain, or another object at that number,
is reporting a rollback or a fork, and sync stops. `pushed_seq` is the last
local log record whose operation the remote holds: the log is never pruned
past it. The token is a secret, hence sealed. It is replaced as every file
the daemon renames into place: temporary file, fsync, rename, directory fsync.

`snapshot` is the version of the newest remote snapshot this device knows
(published or seen), `ops_since_snapshot` the operations in the versions
it pulled or pushed since: the worker publishes the next snapshot when that
count reaches the vault's size (`snapshot_publisher.py`). `chain` and `scope` say which
chain of the vault this device syncs on: chain 1 lives under the vault's id
on the remote (`scope` ""), each repair moves the vault to a new one under
a scope of its own (`moves.py`). A file without these keys (written before
they existed) reads as chain 1, no snapshot known.

`seen` holds, for every other device whose operations this device pulled,
the newest of their stamps' wall times (seconds): a device silent for
longer than `freeze_bound_hours` is named by `sync status` (a frozen view,
docs/threat-model.md). `witness` is the second remote where this device
records what it has seen (`witness.py`), with its token. `signed`: this
device has met a signed version on its chain (`signatures.py`), so an
unsigned one (of an earlier release) is refused from then on. `epochs`
holds the key of every key epoch after the first that this device has
(`epochs.py`; the first is the vault key), `revoked` the revoked devices
with the head above which their versions are refused, `members` the
devices the newest epoch was given to (`epochs.admits`). `local_epoch` is
the epoch whose key is the vault key this device keeps (keyring or key
file), which seals every local file, this one included: 0 until the device
moved its files to a newer epoch (`storage/rekey_journal.py`); from then on
`epochs` holds epoch 0's key too ("0"), which the remote's objects of
epoch 0 and the fingerprints need.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from memvault_base.durable import replace_file, sync_dir
from memvault_base.errors import IntegrityError
from memvaultd.crypto.aead import open_sealed, seal
from memvaultd.crypto.kdf import derive_key

FILE_NAME = "sync.state"
MAGIC = b"MVSS"
FORMAT = 1


@dataclass(frozen=True)
class HighWater:
    remote: str
    token: str | None = None
    head: int = 0
    head_hash: str = ""
    pushed_seq: int = 0
    snapshot: int = 0
    ops_since_snapshot: int = 0
    chain: int = 1
    scope: str = ""
    seen: dict[str, float] = field(default_factory=dict)
    witness: str = ""
    witness_token: str | None = None
    signed: bool = False
    epochs: dict[str, str] = field(default_factory=dict)
    revoked: dict[str, int] = field(default_factory=dict)
    members: list[str] = field(default_factory=list)
    local_epoch: int = 0

    def first_key(self, local_key: bytes) -> bytes:
        """Key epoch 0's key, given the vault key this device keeps."""
        return bytes.fromhex(self.epochs["0"]) if "0" in self.epochs else local_key

    def advanced(self, head: int, head_hash: bytes, pushed_seq: int | None = None,
                 ops: int = 0, writers: dict[str, float] | None = None,
                 signed: bool = False) -> HighWater:
        """At version `head` (hashing to `head_hash`), `ops` more operations
        since the snapshot, everything of this device up to `pushed_seq` on
        the remote; `writers`: the devices whose operations it pulled, with
        the newest of their stamps (wall seconds)."""
        seen = self.seen
        if writers:
            seen = dict(seen)
            for device, wall_s in writers.items():
                seen[device] = max(wall_s, seen.get(device, 0.0))
        return replace(self, head=head, head_hash=head_hash.hex(),
                       pushed_seq=self.pushed_seq if pushed_seq is None else pushed_seq,
                       ops_since_snapshot=self.ops_since_snapshot + ops, seen=seen,
                       signed=self.signed or signed)

    def snapshot_at(self, number: int) -> HighWater:
        """A remote snapshot at version `number` is known: count from there."""
        return replace(self, snapshot=number, ops_since_snapshot=0)


class HighWaterFile:
    def __init__(self, data_dir: Path, vault_key: bytes, vault_id: bytes) -> None:
        self.path = data_dir / FILE_NAME
        self._key = derive_key(vault_key, purpose="sync/state/v1")
        self._aad = b"memvault/sync-state" + bytes([FORMAT]) + vault_id

    def load(self) -> HighWater | None:
        try:
            blob = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if blob[:5] != MAGIC + bytes([FORMAT]):
            raise IntegrityError(f"{self.path}: not a memvault sync state (format "
                                 f"{blob[4:5].hex() or 'missing'})")
        try:
            doc = json.loads(open_sealed(self._key, blob[5:], aad=self._aad))
        except IntegrityError as exc:
            raise IntegrityError(f"{self.path}: does not authenticate") from exc
        return HighWater(**doc)

    def remove(self) -> None:
        """Forget the remote (`memvault sync leave`), durably: once this
        returns, the next start does not resume sync."""
        self.path.unlink(missing_ok=True)
        sync_dir(self.path.parent)

    def save(self, mark: HighWater) -> None:
        # Durable with its directory (`replace_file`): else a power cut could
        # bring back the previous mark, and with it versions this device
        # already applied and operations it already pushed.
        replace_file(self.path, MAGIC + bytes([FORMAT]) + seal(
            self._key, json.dumps(asdict(mark)).encode(), aad=self._aad))
