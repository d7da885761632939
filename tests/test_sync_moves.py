"""Moves to a fresh chain (`sync repair`), the logic alone, on a remote in
this process: which notice wins, which are ignored, and two repairs racing.
The same through real daemons and memvault-server:
`test_sync_repair.py::test_a_bad_version_is_named_repaired_and_nothing_is_lost`.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from memvault_base.errors import InvalidArgument, MemvaultError
from memvaultd.model.operations import Operation
from memvaultd.sync import moves, signatures
from memvaultd.sync.envelope import MOVE, Envelope
from memvaultd.sync.high_water import HighWater, HighWaterFile
from memvaultd.sync.remotes import open_remote
from memvaultd.sync.remotes.base import Remote
from memvaultd.sync.version_body import pack_ops
from memvaultd.sync.worker import SyncWorker

from .signed_chain import registered, signed_version, worker_devices


class _Vault:
    def __init__(self) -> None:
        self.repushes = 0

    def keep_log_from(self, seq: int | None) -> None:
        pass

    def local_ops_after(self, seq: int) -> tuple[list[tuple[int, Operation]], int]:
        return [], seq

    def holds_log_after(self, seq: int) -> bool:
        return True

    def apply_remote(self, ops: Sequence[Operation]) -> int:
        return len(ops)

    def state_at_sync(self, pushed_seq: int) -> bytes | None:
        return None

    def size(self) -> int:
        return 0

    def repush(self) -> int:
        self.repushes += 1
        return 0


@pytest.fixture
def space() -> tuple[str, Envelope, str]:
    vault_id = os.urandom(16)
    return f"memory://{uuid.uuid4().hex}", Envelope(os.urandom(32), vault_id), vault_id.hex()


def _worker(tmp_path: Path, space: tuple[str, Envelope, str], name: str
            ) -> tuple[SyncWorker, _Vault]:
    url, envelope, vault_id = space
    vault = _Vault()
    (tmp_path / name).mkdir()

    def open_scope(scope: str) -> Remote:
        return open_remote(url, vault_id=scope)

    remote = open_remote(url, vault_id=vault_id)
    worker = SyncWorker(vault, remote,  # type: ignore[arg-type]
                        HighWaterFile(tmp_path / name, os.urandom(32), envelope.vault_id),
                        HighWater(url), envelope, open_scope=open_scope,
                        **worker_devices(remote, envelope))
    return worker, vault


def _stop_both_at_a_bad_version(url: str, envelope: Envelope, vault_id: str,
                                *workers: SyncWorker) -> None:
    remote = open_remote(url, vault_id=vault_id)
    device = registered(remote, envelope)
    good = signed_version(device, 1, b"", pack_ops([]))
    assert remote.append_version(1, b"", good)
    # Signed by a registered device, yet it does not open: damage, or a
    # fork; a version no device signed is only passed over (test_devices.py).
    bad = signatures.sign(device.keys, device.device, envelope.vault_id, 2, os.urandom(4096))
    assert remote.append_version(2, hashlib.sha256(good).digest(), bad)
    for worker in workers:
        with pytest.raises(MemvaultError):
            worker.sync_once()
        assert worker.status.state == "stopped" and worker.status.bad_version == 2


def test_a_repair_moves_one_device_and_the_other_follows_while_stopped(
        tmp_path: Path, space: tuple[str, Envelope, str]) -> None:
    url, envelope, vault_id = space
    (a, vault_a), (b, vault_b) = _worker(tmp_path, space, "a"), _worker(tmp_path, space, "b")
    _stop_both_at_a_bad_version(url, envelope, vault_id, a, b)
    with pytest.raises(InvalidArgument):
        _worker(tmp_path, space, "c")[0].repair()  # not stopped: nothing to repair
    a.repair()
    assert a.high_water.chain == 2 and a.high_water.scope.startswith(f"{vault_id}-")
    assert a.status.bad_version == 0 and vault_a.repushes == 1
    b.sync_once(full_check=False)  # what B's stopped loop does about once a minute
    assert (b.high_water.chain, b.high_water.scope) == (a.high_water.chain,
                                                        a.high_water.scope)
    assert b.status.state == "idle" and vault_b.repushes == 1
    a.sync_once()
    assert a.status.state == "idle"


def test_two_repairs_at_once_agree_on_one_chain(tmp_path: Path,
                                                space: tuple[str, Envelope, str]) -> None:
    url, envelope, vault_id = space
    (a, _), (b, _) = _worker(tmp_path, space, "a"), _worker(tmp_path, space, "b")
    _stop_both_at_a_bad_version(url, envelope, vault_id, a, b)
    base = open_remote(url, vault_id=vault_id)
    first, second = moves.new_move(vault_id, 2), moves.new_move(vault_id, 2)
    moves.announce(base, envelope, first)  # as if both had written theirs
    moves.announce(base, envelope, second)
    a.repair()  # writes a chain-3 notice: the newest wins
    b.sync_once()
    assert a.high_water.chain == b.high_water.chain == 3
    assert a.high_water.scope == b.high_water.scope


def test_notices_that_do_not_open_or_name_another_vault_are_ignored(
        space: tuple[str, Envelope, str]) -> None:
    url, envelope, vault_id = space
    base = open_remote(url, vault_id=vault_id)
    real = moves.new_move(vault_id, 2)
    moves.announce(base, envelope, real)
    base.put_object("moves/" + "0" * 32, os.urandom(4096))  # planted with a token
    other = Envelope(os.urandom(32), envelope.vault_id)  # another key
    moves.announce(base, other, moves.new_move(vault_id, 9))
    for body in ({"chain": 7, "scope": f"{'1' * 32}-{'2' * 16}"},  # another vault's scope
                 {"chain": 1, "scope": f"{vault_id}-{'3' * 16}"},  # not a later chain
                 {"chain": "x"}):
        base.put_object(f"moves/{uuid.uuid4().hex}",
                        envelope.seal(MOVE, json.dumps(body).encode()))
    assert moves.newest(base, envelope, vault_id) == real
    scopes = sorted(moves.new_move(vault_id, 4).scope for _ in range(2))
    for scope in reversed(scopes):
        moves.announce(base, envelope, moves.Move(4, scope))
    assert moves.newest(base, envelope, vault_id) == moves.Move(4, scopes[0])
