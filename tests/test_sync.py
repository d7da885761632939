"""Sync end to end: real daemons, a real memvault-server, a directory and a
real S3 server, the real model."""

from __future__ import annotations

import base64
import random
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from memvault import Client
from memvault.status import SyncInfo
from memvault_base.errors import Locked, MemvaultError, RollbackDetected
from memvaultd.sync.remotes import open_remote

from .ceph import CephRGW
from .daemon_process import DaemonProcess
from .server_process import ServerProcess, create_token

PROPAGATION_S = 2.0


def _eventually(check: Callable[[], bool], timeout: float = PROPAGATION_S * 5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def _has(client: Client, memory_id: str) -> bool:
    try:
        client.get(memory_id)
    except MemvaultError:
        return False
    return True


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ServerProcess, str]]:
    proc = ServerProcess(tmp_path / "server").start()
    token = create_token(proc.data_dir, "laptop")
    yield proc, token
    proc.stop()


@contextmanager
def _pair(tmp_path: Path, **env: str) -> Iterator[tuple[DaemonProcess, DaemonProcess]]:
    with DaemonProcess(tmp_path / "a", **env).start() as a, \
            DaemonProcess(tmp_path / "b", **env).start() as b:
        yield a, b
        a.stop()
        b.stop()


def _init_and_join(a: DaemonProcess, b: DaemonProcess, remote: str, token: str | None
                   ) -> tuple[Client, Client, str]:
    ca, cb = Client(socket=a.socket), Client(socket=b.socket)
    before = ca.remember("the laptop knew this before sync", topic="pre.a").id
    held = cb.remember("the desktop knew this before joining", topic="pre.b").id
    result = ca.init_sync(remote, token=token)
    assert result.recovery_key.startswith("mvr1-")
    assert ca.sync_status().head >= 1, "init returns once its first version is pushed"
    joined = cb.join_sync(remote, result.recovery_key, token=token)
    assert joined.vault_id == result.vault_id
    assert _has(cb, before) and _has(cb, held), "join keeps both sides' memories"
    _eventually(lambda: _has(ca, held))
    return ca, cb, result.recovery_key


def _propagates(ca: Client, cb: Client) -> None:
    memory = ca.remember(f"deploys happen on fridays {uuid.uuid4().hex[:6]}", topic="ops")
    _eventually(lambda: _has(cb, memory.id), timeout=PROPAGATION_S)
    hits = cb.recall("when do deploys happen", topic="ops")
    assert memory.id in {h.memory.id for h in hits}


def test_two_devices_through_memvault_server(tmp_path: Path,
                                             server: tuple[ServerProcess, str]) -> None:
    proc, token = server
    remote = f"grpc://{proc.target}"
    with _pair(tmp_path) as (a, b):
        ca, cb, _ = _init_and_join(a, b, remote, token)
        _propagates(ca, cb)
        _propagates(cb, ca)
        status = cb.sync_status()
        assert status.configured and status.state in ("idle", "syncing") and status.head >= 2
        assert token not in status.remote


def test_two_devices_through_a_directory(tmp_path: Path) -> None:
    remote = (tmp_path / "shared").as_uri()
    with _pair(tmp_path) as (a, b):
        ca, cb, _ = _init_and_join(a, b, remote, None)
        _propagates(ca, cb)


def test_two_devices_through_s3_and_the_bucket_holds_no_plaintext(
        tmp_path: Path, s3: CephRGW, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = f"s3://memvault-sync/{uuid.uuid4().hex[:8]}"
    with _pair(tmp_path, **s3.env()) as (a, b):
        ca, cb, _ = _init_and_join(a, b, remote, None)
        _propagates(ca, cb)
        _store_canaries(ca, cb)
        vault_id = ca.status().vault_id
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    bucket = open_remote(remote, vault_id=vault_id)
    blobs = [bucket.get_object(name) for name in bucket.list_objects()]
    blobs += [blob for _, blob in bucket.versions_after(0)]
    bucket.close()
    _assert_no_canaries(blobs)


@pytest.fixture
def s3(rgw: CephRGW) -> CephRGW:
    rgw.create_bucket("memvault-sync")
    return rgw


def test_wrong_recovery_key_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    remote = (tmp_path / "shared").as_uri()
    with _pair(tmp_path) as (a, b):
        ca, cb = Client(socket=a.socket), Client(socket=b.socket)
        ca.init_sync(remote)
        mine = cb.remember("kept whatever happens").id
        vault_before = cb.status().vault_id
        good = ca.sync_status()
        assert good.configured
        wrong = "mvr1-" + base64.b32encode(bytes.fromhex(ca.status().vault_id) + bytes(32)
                                           ).decode().lower().rstrip("=")
        with pytest.raises(Locked, match="recovery key"):
            cb.join_sync(remote, wrong)
        assert cb.status().vault_id == vault_before and _has(cb, mine)
        assert not cb.sync_status().configured


CANARIES = ("zebracanary-text-77a1", "zebracanary.topic.3c9e", "zebracanary-tag-5d20",
            "zebracanary-payload-e811", "zebracanary-query-0b4f", "zebracanary-filter-9a6d")


def test_the_server_holds_no_plaintext(tmp_path: Path, server: tuple[ServerProcess, str]
                                       ) -> None:
    proc, token = server
    remote = f"grpc://{proc.target}"
    with _pair(tmp_path) as (a, b):
        ca, cb, _ = _init_and_join(a, b, remote, token)
        _store_canaries(ca, cb)
    _assert_no_canaries([p.read_bytes() for p in proc.data_dir.rglob("*") if p.is_file()])


def _store_canaries(writer: Client, reader: Client) -> None:
    text, topic, tag, payload, query, filter_value = CANARIES
    writer.remember(f"the secret is {text}", topic=topic, tags=[tag], payload={"k": payload})
    writer.recall(query, filter={"category": filter_value})
    writer.sync_now()
    _eventually(lambda: bool(reader.recall(f"secret {text}",
                                           filter={"tags": {"contains": tag}})))


def _assert_no_canaries(blobs: list[bytes]) -> None:
    assert blobs
    for secret in CANARIES:
        raw = secret.encode()
        for encoded in (raw, raw.hex().encode(), base64.b64encode(raw),
                        secret.encode("utf-16-le")):
            assert not any(encoded in blob for blob in blobs), secret


def test_a_rolled_back_remote_is_reported_not_applied(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    remote = shared.as_uri()
    with _pair(tmp_path) as (a, b):
        ca, cb, _ = _init_and_join(a, b, remote, None)
        _propagates(ca, cb)
        saved = tmp_path / "old-remote"
        shutil.copytree(shared, saved)
        before_rollback = ca.remember("written after the copy was taken", topic="late").id
        _eventually(lambda: _has(cb, before_rollback))
        ca.sync_now()
        cb.sync_now()
        shutil.rmtree(shared)
        shutil.copytree(saved, shared)  # the remote goes back in time
        with pytest.raises(RollbackDetected, match="rollback"):
            cb.sync_now()
        status = cb.sync_status()
        assert status.state == "stopped" and "rollback" in status.last_error.lower()
        assert _has(cb, before_rollback), "nothing local is lost"


def test_an_offline_device_catches_up(tmp_path: Path, server: tuple[ServerProcess, str]
                                      ) -> None:
    proc, token = server
    remote = f"grpc://{proc.target}"
    with _pair(tmp_path) as (a, b):
        ca, cb, _ = _init_and_join(a, b, remote, token)
        b.stop()
        ids = [r.id for r in ca.remember_batch(
            [{"text": f"written while the desktop slept, note {i}", "topic": f"n{i}"}
             for i in range(100)])]
        ca.sync_now()
        b.start()
        cb = Client(socket=b.socket)
        _eventually(lambda: all(_has(cb, i) for i in ids), timeout=30)


def _views(*clients: Client) -> list[list[str]]:
    """Each device's memories as it would export them, access counts aside
    (reads are counted per device until synced)."""
    return [sorted(repr(sorted((m.to_dict() | {"access_count": 0, "last_accessed_at": 0})
                               .items())) for m in cl.export()) for cl in clients]


def test_three_devices_converge(tmp_path: Path, server: tuple[ServerProcess, str]) -> None:
    proc, token = server
    remote = f"grpc://{proc.target}"
    with DaemonProcess(tmp_path / "a").start() as a, DaemonProcess(tmp_path / "b").start() as b, \
            DaemonProcess(tmp_path / "c").start() as c:
        clients = [Client(socket=d.socket) for d in (a, b, c)]
        key = clients[0].init_sync(remote, token=token).recovery_key
        for other in clients[1:]:
            other.join_sync(remote, key, token=token)
        ids = []
        for round_ in range(3):
            for n, client in enumerate(clients):
                ids.append(client.remember(f"device {n} round {round_} fact about otters "
                                           f"{uuid.uuid4().hex[:6]}", topic=f"d{n}r{round_}").id)
        for client in clients:
            client.sync_now()
        _eventually(lambda: all(_has(cl, i) for cl in clients for i in ids), timeout=30)
        edits = [lambda: clients[0].update(ids[1], category="edited-by-a"),
                 lambda: clients[1].update(ids[1], tags=["edited-by-b"]),
                 lambda: clients[2].reinforce(ids[2]),
                 lambda: clients[1].reinforce(ids[2]),
                 lambda: clients[2].forget(ids[3]),
                 lambda: clients[0].remember("written by a during the edits", topic="x"),
                 lambda: clients[1].remember("written by b during the edits", topic="y")]
        with ThreadPoolExecutor(len(edits)) as pool:  # all devices at once
            for future in [pool.submit(edit) for edit in edits]:
                future.result()

        def same() -> bool:
            for client in clients:
                client.sync_now()
            views = _views(*clients)
            return views[0] == views[1] == views[2]

        _eventually(same, timeout=30)
        merged = clients[2].get(ids[1])
        assert merged.category == "edited-by-a" and merged.tags == ("edited-by-b",)
        assert clients[0].get(ids[2]).reinforce_count == 2
        assert not _has(clients[0], ids[3])
        for d in (a, b, c):
            d.stop()


def test_writes_during_init_land_on_every_device(tmp_path: Path) -> None:
    """`init` logs the whole vault in chunks and lets writes in between; the
    ones that land there (new memories, updates, forgets of memories being
    logged) must reach a joining device exactly as they stand on the first.
    The edits go to the memories logged last, whose puts are the likeliest
    to be still unlogged when an edit of them is: the other device must not
    meet the edit first (it would drop it)."""
    remote = (tmp_path / "shared").as_uri()
    rng = random.Random(7)

    def vector() -> list[float]:
        v = [rng.gauss(0, 1) for _ in range(384)]
        norm = sum(x * x for x in v) ** 0.5
        return [x / norm for x in v]

    with _pair(tmp_path) as (a, b):
        ca, cb = Client(socket=a.socket), Client(socket=b.socket)
        ids = [r.id for r in ca.remember_batch(
            [{"text": f"note {i} about the build cache", "topic": f"t{i}", "vector": vector()}
             for i in range(10_000)])]
        edited, forgotten, written = [], [], []
        alive = ids[len(ids) // 2 :]
        done = threading.Event()

        def edit() -> None:
            with Client(socket=a.socket) as client:
                while not done.is_set():
                    target = alive[rng.randrange(len(alive))]
                    if rng.random() < 0.3:
                        client.forget(target)
                        forgotten.append(target)
                        alive.remove(target)
                    else:
                        client.update(target, category=f"edited {len(edited)}")
                        edited.append(target)
                    written.append(client.remember(f"written during init {len(written)}",
                                                   topic=f"w{len(written)}",
                                                   vector=vector()).id)

        with ThreadPoolExecutor(1) as pool:
            editor = pool.submit(edit)
            try:
                key = ca.init_sync(remote).recovery_key
            finally:
                done.set()
            editor.result()
        assert edited and forgotten and written
        cb.join_sync(remote, key)

        def same() -> bool:
            ca.sync_now()
            cb.sync_now()
            views = _views(ca, cb)
            return views[0] == views[1]

        _eventually(same, timeout=60)
        assert all(_has(cb, i) for i in written)
        assert not any(_has(cb, i) for i in forgotten)
        last = {i: n for n, i in enumerate(edited)}
        for memory_id in set(edited) - set(forgotten):
            assert cb.get(memory_id).category == f"edited {last[memory_id]}"


def _settled_refusal(client: Client, timeout: float = 20) -> SyncInfo:
    """The status once a pass has stopped sync or refused a version and
    ended. A refusal is listed as soon as it is met, while its pass still
    reads "syncing"; the status returned is the one that ended the wait."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.sync_status()
        if status.state == "stopped" or (status.refused and status.state != "syncing"):
            return status
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_altered_remote_objects_are_refused_and_nothing_is_applied(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    remote = shared.as_uri()
    with _pair(tmp_path) as (a, b):
        ca, cb, _ = _init_and_join(a, b, remote, None)
        b.stop()
        late = ca.remember("written while the desktop was off", topic="late").id
        ca.sync_now()
        versions = sorted(shared.rglob("versions/*"))
        newest, older = versions[-1], versions[-2]
        original = newest.read_bytes()
        attacks = {
            "flipped byte": original[:100] + bytes([original[100] ^ 1]) + original[101:],
            "truncated": original[: len(original) // 2],
            "swapped": older.read_bytes(),
        }
        number = int(newest.name)
        for attack, (name, forged) in enumerate(attacks.items()):
            newest.write_bytes(forged)
            b.start()
            cb = Client(socket=b.socket)
            status = _settled_refusal(cb)
            if attack == 0:
                # No registered device signed these bytes: refused, passed
                # over, named; B has now seen this object as version N.
                assert status.state == "idle", (name, status)
                assert [n for n, _ in status.refused] == [number], (name, status)
            else:
                # Other bytes where B saw the first forgery: a replaced history.
                assert status.state == "stopped", (name, status)
                assert f"version {number}" in status.last_error, (name, status.last_error)
            assert not _has(cb, late), f"{name}: nothing from a forged object is applied"
            b.stop()
        newest.write_bytes(original)
        b.start()
        cb = Client(socket=b.socket)
        # The original back in place is one more replacement to B: it stops,
        # and a repair (B's whole vault on a fresh chain, A following at its
        # next `sync now`) brings A's version to B after all.
        _eventually(lambda: cb.sync_status().state == "stopped", timeout=20)
        cb.sync_repair(confirm=True)
        ca.sync_now()
        cb.sync_now()
        assert _has(cb, late)


def test_a_vanished_remote_loses_nothing_and_sync_resumes(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    remote = shared.as_uri()
    with _pair(tmp_path) as (a, b):
        ca, cb, _ = _init_and_join(a, b, remote, None)
        away = tmp_path / "shared.away"
        shared.rename(away)
        shared.write_text("the NAS is unmounted")  # every remote call now fails
        ids = [ca.remember(f"written while the remote was gone, note {i}", topic=f"gone{i}").id
               for i in range(20)]  # local writes never wait on the remote
        _eventually(lambda: ca.sync_status().state == "offline", timeout=20)
        assert ca.sync_status().pending >= 0 and ca.sync_status().last_error
        assert ca.recall("written while the remote was gone", topic="gone3")
        shared.unlink()
        away.rename(shared)
        _eventually(lambda: all(_has(cb, i) for i in ids), timeout=60)
        assert ca.sync_status().state in ("idle", "syncing")


def test_a_forked_history_is_reported_not_applied(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    remote = shared.as_uri()
    with _pair(tmp_path) as (a, b):
        ca, cb, _ = _init_and_join(a, b, remote, None)
        _propagates(ca, cb)
        cb.sync_now()
        versions = sorted(shared.rglob("versions/*"))
        # Same length, another object at the number the desktop has seen.
        versions[-1].write_bytes(versions[-2].read_bytes())
        with pytest.raises(RollbackDetected, match="forked or replaced"):
            cb.sync_now()
        assert cb.sync_status().state == "stopped"


# 10,000 memories with their own vectors (1,536 bytes each) make a state of
# ~20 MiB: over memvault-server's default object limit of 16 MiB.
LARGE = 10_000
LARGE_BATCH = 2000
OBJECT_LIMIT = 16 * 1024 * 1024


def _unit_vectors(rng: random.Random, n: int) -> list[list[float]]:
    import numpy as np

    raw = np.random.default_rng(rng.randrange(1 << 30)).standard_normal((n, 384))
    rows: list[list[float]] = (raw / np.linalg.norm(raw, axis=1, keepdims=True)).tolist()
    return rows


def _store_files(data_dir: Path, prefix: str) -> list[Path]:
    """The server's files of objects whose names start with `prefix`
    (the directory store writes "/" in a name as "+": docs/format.md)."""
    return sorted(p for p in data_dir.rglob(f"objects/{prefix.replace('/', '+')}*")
                  if p.is_file())


def _store_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.rglob("*") if p.is_file()
               and p.parent.name in ("objects", "versions"))


def test_a_vault_over_the_object_limit_joins_from_one_snapshot(
        tmp_path: Path, server: tuple[ServerProcess, str]) -> None:
    proc, token = server
    remote = f"grpc://{proc.target}"
    rng = random.Random(23)
    with DaemonProcess(tmp_path / "a").start() as a, DaemonProcess(tmp_path / "c").start() as c:
        ca, cc = Client(socket=a.socket, timeout=600), Client(socket=c.socket, timeout=600)
        for start in range(0, LARGE, LARGE_BATCH):
            ca.remember_batch([{"text": f"large vault note {start + i}",
                                "topic": f"large.{start + i}", "vector": vector}
                               for i, vector in enumerate(_unit_vectors(rng, LARGE_BATCH))])
        key = ca.init_sync(remote, token=token).recovery_key
        _eventually(lambda: ca.sync_status().snapshot > 0, timeout=180)
        status = ca.sync_status()
        chunks = _store_files(proc.data_dir, "state-chunks/")
        manifests = _store_files(proc.data_dir, "states/")
        sizes = [p.stat().st_size for p in chunks]
        print("snapshot:", {"version": status.snapshot, "chunks": len(chunks),
                            "bytes": sum(sizes), "largest": max(sizes, default=0)})
        assert status.state == "idle" and not status.last_error, status
        assert len(manifests) == 1 and sum(sizes) > OBJECT_LIMIT
        assert max(sizes) <= 4 * 1024 * 1024
        stored = _store_bytes(proc.data_dir)
        for _ in range(5):  # idle rounds publish nothing more
            assert ca.sync_now().state == "idle"
        assert _store_bytes(proc.data_dir) == stored

        cc.join_sync(remote, key, token=token)
        assert cc.status().memory_count == ca.status().memory_count == LARGE
        assert cc.sync_status().head == status.head
        assert f"bootstrapping from the snapshot at version {status.snapshot}" in c.log
        a.stop()
        c.stop()


def test_long_memories_travel_in_versions_under_the_object_limit(tmp_path: Path) -> None:
    """600 memories of 30 KiB are ~18 MB of operations: as one version of
    (up to) 1,000 operations they made an object every remote refuses, and
    sync never got past it. Versions are cut by size too."""
    remote = (tmp_path / "shared").as_uri()
    rng = random.Random(31)
    long_text = "x" * 30_000
    with _pair(tmp_path) as (a, b):
        ca = Client(socket=a.socket, timeout=600)
        ids = [r.id for r in ca.remember_batch(
            [{"text": f"{i} {long_text}", "topic": f"long.{i}", "vector": vector}
             for i, vector in enumerate(_unit_vectors(rng, 600))])]
        key = ca.init_sync(remote).recovery_key
        status = ca.sync_now()
        assert status.state == "idle" and not status.last_error, status
        assert status.head >= 2 and status.pending == 0, status
        versions = sorted((tmp_path / "shared").glob("*/versions/*"))
        assert versions and max(p.stat().st_size for p in versions) <= 16 * 1024 * 1024
        cb = Client(socket=b.socket, timeout=600)
        cb.join_sync(remote, key)
        assert all(_has(cb, memory_id) for memory_id in ids)
