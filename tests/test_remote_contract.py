"""One contract, every remote (restic's backend/test is the model).

Each test runs against:
- memory: `memory://` in this process;
- file:   a temporary directory;
- s3:     a real Ceph RGW on loopback (the `rgw` fixture), a fresh prefix per test;
- grpc:   a real memvault-server subprocess on an ephemeral loopback port.

`space` opens any number of clients on the same remote and vault, as several
devices would. Latencies are printed (`pytest -s`) and bounded loosely.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memvault_base.errors import InvalidArgument, NotFound, ResourceExhausted
from memvault_base.objects.names import MAX_LIMIT, MAX_OBJECT
from memvaultd.sync.remotes import Remote, open_remote

from .ceph import CephRGW
from .server_process import ServerProcess, create_token

KINDS = ["memory", "file", "s3", "grpc"]
# How soon watch_head must return after another client's append: the poll
# interval (file 0.5 s, S3 2 s) or a push (memory, grpc), plus slack for a
# loaded 2-core machine.
WATCH_BOUND = {"memory": 0.5, "grpc": 0.5, "file": 1.5, "s3": 3.5}
BUCKET = "memvault-contract"

# Opens another client on the space: the same vault, or `vault_id` if given.
Opener = Callable[..., Remote]


@pytest.fixture(scope="module")
def grpc_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    data = tmp_path_factory.mktemp("contract-server") / "data"
    data.mkdir()
    # An admin token: the contract includes deleting, which memvault-server
    # leaves to admins (a device token's refusal: test_server_bounds.py).
    token = create_token(data, "contract", admin=True)
    with ServerProcess(data).start() as server:
        yield f"grpc://{server.target}", token


@pytest.fixture(scope="module")
def s3_bucket(rgw: CephRGW) -> CephRGW:
    rgw.create_bucket(BUCKET)
    return rgw


@pytest.fixture(params=KINDS)
def space(request: pytest.FixtureRequest, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Opener]]:
    """(kind, open a new client) for one fresh vault on one remote."""
    kind: str = request.param
    vault_id = uuid.uuid4().hex
    token: str | None = None
    if kind == "memory":
        url = f"memory://{uuid.uuid4().hex}"
    elif kind == "file":
        url = f"file://{tmp_path / 'remote'}"
    elif kind == "s3":
        cluster: CephRGW = request.getfixturevalue("s3_bucket")
        for key, value in cluster.env().items():
            monkeypatch.setenv(key, value)
        url = f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}"
    else:
        url, token = request.getfixturevalue("grpc_server")
    opened: list[Remote] = []

    def opener(other_vault: str | None = None) -> Remote:
        remote = open_remote(url, token=token, vault_id=other_vault or vault_id)
        opened.append(remote)
        return remote

    yield kind, opener
    for remote in opened:
        remote.close()


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def test_put_is_write_once(space: tuple[str, Opener]) -> None:
    remote = space[1]()
    assert remote.put_object("keys/recovery", b"first") is True
    assert remote.put_object("keys/recovery", b"second") is False
    assert remote.put_object("keys/recovery", b"first") is False
    assert remote.get_object("keys/recovery") == b"first"


def test_get_missing_is_not_found(space: tuple[str, Opener]) -> None:
    remote = space[1]()
    with pytest.raises(NotFound):
        remote.get_object("segments/nothing-here")


def test_list_by_prefix_is_sorted(space: tuple[str, Opener]) -> None:
    remote = space[1]()
    names = ["b/2", "a/1", "b/10", "c", "b/1", "bb", "b/1/x"]
    for name in names:
        assert remote.put_object(name, name.encode())
    assert remote.list_objects() == sorted(names)
    assert remote.list_objects("b/") == ["b/1", "b/1/x", "b/10", "b/2"]
    assert remote.list_objects("b/1") == ["b/1", "b/1/x", "b/10"]
    assert remote.list_objects("b") == ["b/1", "b/1/x", "b/10", "b/2", "bb"]
    assert remote.list_objects("zz") == []
    # Versions are not objects.
    remote.append_version(1, b"", b"v1")
    assert remote.list_objects() == sorted(names)


def test_delete(space: tuple[str, Opener]) -> None:
    remote = space[1]()
    remote.put_object("segments/a", b"a")
    remote.put_object("segments/b", b"b")
    remote.delete_object("segments/a")
    with pytest.raises(NotFound):
        remote.get_object("segments/a")
    assert remote.list_objects() == ["segments/b"]
    remote.delete_object("segments/a")  # missing is fine
    remote.delete_object("never/was")
    assert remote.put_object("segments/a", b"again") is True
    assert remote.get_object("segments/a") == b"again"


def test_empty_chain(space: tuple[str, Opener]) -> None:
    remote = space[1]()
    assert remote.head() == 0
    assert remote.versions_after(0) == []


def test_append_version_rules(space: tuple[str, Opener]) -> None:
    remote = space[1]()
    assert remote.append_version(1, b"", b"one") is True
    assert remote.head() == 1
    assert remote.append_version(1, b"", b"other one") is False  # taken
    assert remote.append_version(3, _sha(b"two"), b"three") is False  # the chain is at 1
    assert remote.append_version(2, _sha(b"one"), b"two") is True
    assert remote.append_version(2, _sha(b"one"), b"two again") is False
    assert remote.head() == 2
    assert remote.versions_after(0) == [(1, b"one"), (2, b"two")]
    with pytest.raises(InvalidArgument):
        remote.append_version(0, b"", b"zero")
    with pytest.raises(InvalidArgument):
        remote.append_version(3, b"", b"no parent")
    with pytest.raises(InvalidArgument):
        remote.append_version(1, b"\x00" * 32, b"version 1 has no parent")


def test_racing_appends_have_one_winner(space: tuple[str, Opener]) -> None:
    """Eight clients race for each of 8 numbers: exactly one wins each, and
    the stored version is the winner's bytes."""
    kind, opener = space
    clients = [opener() for _ in range(8)]
    parent = b""
    for number in range(1, 9):
        barrier = threading.Barrier(len(clients))
        wins: list[bytes] = []

        def race(client: Remote, data: bytes, parent: bytes = parent,
                 number: int = number, barrier: threading.Barrier = barrier,
                 wins: list[bytes] = wins) -> None:
            barrier.wait()
            if client.append_version(number, parent, data):
                wins.append(data)

        threads = [threading.Thread(target=race, args=(c, f"{number}/{i}".encode()))
                   for i, c in enumerate(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(wins) == 1, f"{kind}: version {number} had {len(wins)} winners"
        assert clients[0].versions_after(number - 1, limit=1) == [(number, wins[0])]
        parent = _sha(wins[0])
    assert clients[3].head() == 8


def test_versions_after_order_and_limit(space: tuple[str, Opener]) -> None:
    remote = space[1]()
    parent = b""
    for number in range(1, 26):
        data = f"version {number}".encode()
        assert remote.append_version(number, parent, data)
        parent = _sha(data)
    every = remote.versions_after(0)
    assert [n for n, _ in every] == list(range(1, 26))
    assert every[11] == (12, b"version 12")
    assert [n for n, _ in remote.versions_after(10, limit=5)] == [11, 12, 13, 14, 15]
    assert [n for n, _ in remote.versions_after(23)] == [24, 25]
    assert remote.versions_after(25) == []
    assert remote.versions_after(99) == []
    for bad in (0, 1001):
        with pytest.raises(InvalidArgument):
            remote.versions_after(0, limit=bad)


def watch_in_thread(remote: Remote, after: int,
                    timeout: float) -> tuple[threading.Thread, list[tuple[int, float]]]:
    """A started thread running `watch_head`; the list gets (head, when it returned)."""
    woke: list[tuple[int, float]] = []

    def watch() -> None:
        woke.append((remote.watch_head(after, timeout), time.monotonic()))

    thread = threading.Thread(target=watch)
    thread.start()
    return thread, woke


def test_watch_head_wakes_on_another_clients_append(space: tuple[str, Opener]) -> None:
    kind, opener = space
    watcher, writer = opener(), opener()
    writer.append_version(1, b"", b"one")
    assert watcher.watch_head(0, timeout=5) == 1  # already past: returns at once
    begun = time.monotonic()
    assert watcher.watch_head(1, timeout=0.3) == 1  # nothing happens: the timeout
    assert 0.25 <= time.monotonic() - begun < 0.3 + WATCH_BOUND[kind]

    latencies = []
    for number, pause in ((2, 0.3), (3, 0.55), (4, 0.8)):  # spread across poll phases
        thread, woke = watch_in_thread(watcher, number - 1, 15)
        time.sleep(pause)  # the watch is waiting
        parent = _sha(writer.versions_after(number - 2, limit=1)[0][1])
        assert writer.append_version(number, parent, f"v{number}".encode())
        appended = time.monotonic()
        thread.join(20)
        assert woke and woke[0][0] == number
        latencies.append(woke[0][1] - appended)
    print(f"\nwatch_head latency, {kind}: "
          + ", ".join(f"{latency * 1000:.0f} ms" for latency in latencies))
    assert max(latencies) < WATCH_BOUND[kind], latencies


BAD_NAMES = ["", "/x", "x/", "../x", "a/../b", "a/./b", "..", ".", "a//b", "A", "a b",
             "caf\u00e9", "x" * 201, "a\\b", "a\x00b"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_names_are_refused(space: tuple[str, Opener], name: str) -> None:
    remote = space[1]()
    with pytest.raises(InvalidArgument):
        remote.put_object(name, b"x")
    with pytest.raises(InvalidArgument):
        remote.get_object(name)
    with pytest.raises(InvalidArgument):
        remote.delete_object(name)


def test_good_names_round_trip(space: tuple[str, Opener]) -> None:
    remote = space[1]()
    names = ["a", "x" * 200, "a.b", "..a", "a..", "a/b.c/d_e-f", "0/1/2/3", "-", "_"]
    for name in names:
        assert remote.put_object(name, name.encode())
    for name in names:
        assert remote.get_object(name) == name.encode()
    assert remote.list_objects() == sorted(names)
    with pytest.raises(InvalidArgument):
        remote.list_objects("/a")


def test_big_objects_round_trip(space: tuple[str, Opener]) -> None:
    kind, opener = space
    remote = opener()
    big = os.urandom(8 * 1024 * 1024)
    begun = time.monotonic()
    assert remote.put_object("snapshots/big", big)
    put_s = time.monotonic() - begun
    begun = time.monotonic()
    assert remote.get_object("snapshots/big") == big
    get_s = time.monotonic() - begun
    assert remote.append_version(1, b"", big)
    assert opener().versions_after(0) == [(1, big)]
    print(f"\n8 MiB object, {kind}: put {put_s * 1000:.0f} ms, get {get_s * 1000:.0f} ms")


def test_objects_over_the_largest_memvault_writes_are_refused(space: tuple[str, Opener]) -> None:
    remote = space[1]()
    over = bytes(MAX_OBJECT + 1)
    with pytest.raises(ResourceExhausted, match=f"over the {MAX_OBJECT} bytes"):
        remote.put_object("snapshots/over", over)
    with pytest.raises(ResourceExhausted, match=f"over the {MAX_OBJECT} bytes"):
        remote.append_version(1, b"", over)
    assert remote.list_objects() == [] and remote.head() == 0, "nothing left the device"


def test_small_object_latency(space: tuple[str, Opener]) -> None:
    kind, opener = space
    remote = opener()
    data = os.urandom(4096)
    rounds = 50
    begun = time.monotonic()
    for i in range(rounds):
        remote.put_object(f"segments/{i:04d}", data)
    put_ms = (time.monotonic() - begun) / rounds * 1000
    begun = time.monotonic()
    for i in range(rounds):
        assert remote.get_object(f"segments/{i:04d}") == data
    get_ms = (time.monotonic() - begun) / rounds * 1000
    print(f"\n4 KiB object, {kind}: put {put_ms:.2f} ms, get {get_ms:.2f} ms (mean of {rounds})")


def test_vaults_are_separate(space: tuple[str, Opener]) -> None:
    opener = space[1]
    remote, other = opener(), opener(uuid.uuid4().hex)
    remote.put_object("shared-name", b"mine")
    remote.append_version(1, b"", b"my version")
    assert other.list_objects() == []
    assert other.head() == 0
    with pytest.raises(NotFound):
        other.get_object("shared-name")
    assert other.put_object("shared-name", b"theirs") is True
    assert remote.get_object("shared-name") == b"mine"


def test_url_is_redacted_and_schemes_checked() -> None:
    remote = open_remote("memory://user:secret@space?token=abc", vault_id="v1")
    assert "secret" not in remote.url and "abc" not in remote.url
    for bad in ("ftp://x/y", "file://relative", "grpc://host", "s3://", "nothing"):
        with pytest.raises(InvalidArgument):
            open_remote(bad, vault_id="v1")
    with pytest.raises(InvalidArgument):
        open_remote("memory://x", vault_id="../escape")


def test_a_fresh_client_finds_the_head_of_a_long_chain(tmp_path: Path) -> None:
    """Without a head seen before, the head is probed (`exists` at doubling
    steps from the first version), then listed from there a page at a time:
    a chain longer than a page, pruned at the front, or with a planted
    stray past a gap, is never listed whole."""
    vault = uuid.uuid4().hex
    versions = tmp_path / vault / "versions"
    versions.mkdir(parents=True)
    for number in range(101, 2 * MAX_LIMIT + 346):  # 1..100 pruned
        (versions / f"{number:020d}").write_bytes(b"v")
    url = f"file://{tmp_path}"
    remote = open_remote(url, vault_id=vault)
    listed: list[int | None] = []
    listing = remote.store.list  # type: ignore[attr-defined]

    def counted(prefix: str, start_after: str = "", limit: int | None = None) -> list[str]:
        listed.append(limit)
        return listing(prefix, start_after, limit)

    remote.store.list = counted  # type: ignore[attr-defined]
    assert remote.head() == 2 * MAX_LIMIT + 345
    assert None not in listed and len(listed) <= 3, listed
    (versions / f"{3 * MAX_LIMIT:020d}").write_bytes(b"planted past a gap")
    assert open_remote(url, vault_id=vault).head() == 3 * MAX_LIMIT
    remote.close()
