"""`data/sync.setup`: the recovery key of a setup under way, sealed under the
vault key, found again only for the same remote and the same vault."""

from __future__ import annotations

import os
from pathlib import Path

from memvaultd.sync.pending_setup import FILE_NAME, PendingSetupFile

KEY = "mvr1-aaaaaaaa-bbbbbbbb-cccccccc"
URL = "grpcs://sync.example.org:7443"


def test_the_recovery_key_is_sealed_and_found_only_for_its_remote(tmp_path: Path) -> None:
    key, vault_id = os.urandom(32), os.urandom(16)
    pending = PendingSetupFile(tmp_path, key, vault_id)
    assert pending.recovery_key_for(URL) is None
    pending.save(URL, KEY)
    raw = (tmp_path / FILE_NAME).read_bytes()
    assert KEY.encode() not in raw and URL.encode() not in raw
    assert pending.recovery_key_for(URL) == KEY
    assert pending.recovery_key_for("grpcs://elsewhere.example.org:7443") is None
    # Another vault (this device joined one since): ignored, not an error.
    assert PendingSetupFile(tmp_path, os.urandom(32), vault_id).recovery_key_for(URL) is None
    assert PendingSetupFile(tmp_path, key, os.urandom(16)).recovery_key_for(URL) is None
    pending.remove()
    assert not (tmp_path / FILE_NAME).exists() and pending.recovery_key_for(URL) is None


def test_every_flipped_byte_is_ignored(tmp_path: Path) -> None:
    key, vault_id = os.urandom(32), os.urandom(16)
    pending = PendingSetupFile(tmp_path, key, vault_id)
    pending.save(URL, KEY)
    path = tmp_path / FILE_NAME
    blob = path.read_bytes()
    for index in range(len(blob)):
        path.write_bytes(blob[:index] + bytes([blob[index] ^ 0x01]) + blob[index + 1:])
        assert pending.recovery_key_for(URL) is None, index
    path.write_bytes(blob[:20])
    assert pending.recovery_key_for(URL) is None
