"""What the stores hold, as docs/format.md ("Remote layout") draws it.

The directory store serves a `file://` remote and memvault-server's data
directory (one implementation, `memvault_base.objects.directory`, each
writer with its own temporaries, and clearing only its own leftovers); the bucket
store serves an `s3://` remote and the server's `--store s3://...`. Data laid
out as documented must read, and writes must land where documented.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from pathlib import Path

import obstore
import pytest

from memvault_base.objects.names import object_key, owner_key, version_key
from memvault_base.objects.s3 import bucket_client
from memvault_server.store import open_store
from memvaultd.sync.remotes import open_remote

from .ceph import CephRGW

VAULT = "v1"
V1, V2 = "00000000000000000001", "00000000000000000002"


def _files(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}


def test_a_file_remote_reads_what_is_laid_out_as_documented(tmp_path: Path) -> None:
    vault = tmp_path / VAULT
    for folder in ("objects", "versions", "tmp"):
        (vault / folder).mkdir(parents=True)
    (vault / "objects" / "keys+recovery").write_bytes(b"wrapped")
    (vault / "objects" / "keys").write_bytes(b"a and a/b both exist")
    (vault / "versions" / V1).write_bytes(b"one")
    remote = open_remote(f"file://{tmp_path}", vault_id=VAULT)
    assert remote.list_objects() == ["keys", "keys/recovery"]
    assert remote.get_object("keys/recovery") == b"wrapped"
    assert remote.head() == 1
    assert remote.versions_after(0) == [(1, b"one")]


def test_a_file_remote_writes_as_documented(tmp_path: Path) -> None:
    remote = open_remote(f"file://{tmp_path}", vault_id=VAULT)
    assert remote.put_object("snapshots/" + V1, b"s")
    assert remote.append_version(1, b"", b"one")
    assert remote.append_version(2, b"h" * 32, b"two")
    assert _files(tmp_path) == {f"{VAULT}/objects/snapshots+{V1}", f"{VAULT}/versions/{V1}",
                                f"{VAULT}/versions/{V2}"}
    assert (tmp_path / VAULT / "tmp").is_dir()
    assert (tmp_path / VAULT / "versions" / V2).stat().st_mode & 0o777 == 0o600


def test_the_server_store_reads_and_writes_as_documented(tmp_path: Path) -> None:
    root = tmp_path / "store"
    (root / VAULT / "objects").mkdir(parents=True)
    (root / VAULT / "owner").write_bytes(b"alice")
    (root / VAULT / "objects" / "keys+recovery").write_bytes(b"wrapped")
    store = open_store(None, tmp_path)
    assert store.get(owner_key(VAULT)) == b"alice"
    assert store.get(object_key(VAULT, "keys/recovery")) == b"wrapped"
    assert store.put_if_absent(version_key(VAULT, 1), b"one")
    assert not store.put_if_absent(owner_key(VAULT), b"mallory")
    assert store.put_if_absent(owner_key("v2"), b"bob")
    assert _files(root) == {f"{VAULT}/owner", f"{VAULT}/objects/keys+recovery",
                            f"{VAULT}/versions/{V1}", "v2/owner"}
    assert (root / ".tmp").is_dir()
    assert store.list(f"{VAULT}/objects/k") == [object_key(VAULT, "keys/recovery")]
    # The inventory the server counts quotas from: every key and its size, no temporary.
    (root / ".tmp" / "being-written.tmp").write_bytes(b"partial")
    assert sorted(store.inventory()) == [
        (object_key(VAULT, "keys/recovery"), 7), (owner_key(VAULT), 5),
        (version_key(VAULT, 1), 3), (owner_key("v2"), 3)]


def test_each_writer_clears_only_its_own_leftovers(tmp_path: Path) -> None:
    hour_ago = time.time() - 3601
    server_tmp = tmp_path / "data" / "store" / ".tmp"
    remote_tmp = tmp_path / "remote" / VAULT / "tmp"
    mine = hashlib.sha256(b"memvault/remote-tmp/d1").hexdigest()[:16] + "-"
    theirs = hashlib.sha256(b"memvault/remote-tmp/d2").hexdigest()[:16] + "-"
    left = {server_tmp: ["0123456789abcdef.tmp"],
            remote_tmp: [f"{mine}0123456789abcdef.tmp", f"{theirs}0123456789abcdef.tmp",
                         f"{theirs}fedcba9876543210.tmp"]}
    for tmp, names in left.items():
        tmp.mkdir(parents=True)
        for name in [*names, "notes.txt"]:
            (tmp / name).write_bytes(b"left by a crash, or not ours")
            os.utime(tmp / name, (hour_ago, hour_ago))
    (remote_tmp / f"{theirs}fedcba9876543210.tmp").write_bytes(b"being written right now")
    # One server per data directory: every name it makes in .tmp/ is a crash's.
    open_store(None, tmp_path / "data")
    assert sorted(path.name for path in server_tmp.iterdir()) == ["notes.txt"]
    # Other devices may be writing into a remote's tmp/, for however long:
    # only this device's own names go, whatever their age.
    open_remote(f"file://{tmp_path / 'remote'}", vault_id=VAULT, device="d1")
    assert sorted(path.name for path in remote_tmp.iterdir()) == sorted(
        [f"{theirs}0123456789abcdef.tmp", f"{theirs}fedcba9876543210.tmp", "notes.txt"])


def test_an_s3_remote_reads_and_writes_as_documented(
        rgw: CephRGW, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in rgw.env().items():
        monkeypatch.setenv(key, value)
    bucket, prefix = "memvault-layout", uuid.uuid4().hex[:8]
    rgw.create_bucket(bucket)
    raw = bucket_client(bucket)
    obstore.put(raw, f"{prefix}/{VAULT}/objects/keys/recovery", b"wrapped")
    remote = open_remote(f"s3://{bucket}/{prefix}/", vault_id=VAULT)
    assert remote.get_object("keys/recovery") == b"wrapped"
    assert remote.append_version(1, b"", b"one")
    keys = {meta["path"] for page in obstore.list(raw, prefix) for meta in page}
    assert keys == {f"{prefix}/{VAULT}/objects/keys/recovery", f"{prefix}/{VAULT}/versions/{V1}"}
    remote.close()
    # The inventory the server counts quotas from: keys under the prefix, with sizes.
    obstore.put(raw, f"{prefix}-beside/{VAULT}/owner", b"not under the prefix")
    store = open_store(f"s3://{bucket}/{prefix}", Path("unused"))
    assert sorted(store.inventory()) == [(object_key(VAULT, "keys/recovery"), 7),
                                         (version_key(VAULT, 1), 3)]
    store.close()
