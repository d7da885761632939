"""A `file://` remote in a folder others can write (a NAS, a Syncthing or
Dropbox folder): whatever they plant there, the directory store acts only on
its own files.

Planted: a symbolic link for `tmp/` (the device used to delete every file
over an hour old in the directory it pointed to), a FIFO as a version (it
hung the sync thread), a link to `/dev/zero` as a version (it filled the
memory), a link as an object, an object over the largest this project
writes, and version names of non-ASCII digits. Through real daemons syncing
with that folder: each is refused with a clear error in `sync status` (or by
`join`), nothing outside the folder is touched, the daemon keeps serving,
and once the plant is gone sync resumes. The store's own rules are checked
directly below, against every kind of planted entry.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memvault import Client
from memvault_base.errors import IntegrityError, MemvaultError, NotFound
from memvault_base.objects.directory import DirectoryStore
from memvault_base.objects.names import MAX_OBJECT, object_key, version_key

from .daemon_process import DaemonProcess

HOUR = 3600.0


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `folder`: its bytes and modification time."""
    return {str(path.relative_to(folder)): (path.read_bytes(), path.stat().st_mtime_ns)
            for path in sorted(folder.rglob("*")) if path.is_file()}


def eventually(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout:g} s")


@dataclass
class Site:
    """Daemon `a` syncing with `shared`; `b` a device that may join it;
    `outside` a directory of the user's next to the folder."""

    root: Path
    a: DaemonProcess
    b: DaemonProcess
    recovery_key: str = ""
    vault_id: str = ""
    ca: Client = field(init=False)
    cb: Client = field(init=False)

    def __post_init__(self) -> None:
        self.ca, self.cb = Client(socket=self.a.socket), Client(socket=self.b.socket)

    @property
    def shared(self) -> Path:
        return self.root / "shared"

    @property
    def vault(self) -> Path:
        return self.shared / self.vault_id

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    def next_version(self) -> Path:
        return self.vault / "versions" / f"{self.ca.sync_status().head + 1:020d}"

    def restart_a(self) -> None:
        self.ca.close()
        self.a.stop()
        self.a.start()
        self.ca = Client(socket=self.a.socket)

    def refused(self, timeout: float = 30.0) -> str:
        """`a`'s sync error, once a new memory made it look at the remote."""
        tag = uuid.uuid4().hex[:8]
        self.ca.remember(f"written to make the device sync {tag}", topic=f"poke.{tag}")
        eventually(lambda: self.ca.sync_status().state == "stopped", timeout,
                   "sync stops on the planted entry")
        return self.ca.sync_status().last_error

    def serving(self) -> None:
        tag = uuid.uuid4().hex[:8]
        text = f"the daemon still serves {tag}"
        memory = self.ca.remember(text, topic=f"serving.{tag}")
        assert self.ca.get(memory.id).text == text
        assert memory.id in {hit.memory.id for hit in
                             self.ca.recall("the daemon still serves", topic=f"serving.{tag}")}

    def synced_again(self) -> None:
        """After the plant is removed: a restart resumes sync, and every
        memory written meanwhile reaches the folder."""
        self.restart_a()
        self.ca.sync_now()
        status = self.ca.sync_status()
        assert status.state == "idle" and status.pending == 0, status


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("hostile-folder")
    a = DaemonProcess(root / "a").start(wait=False)
    b = DaemonProcess(root / "b").start(wait=False)
    a.wait_serving()
    b.wait_serving()
    site = Site(root, a, b)
    site.ca.remember("the laptop knew this before sync", topic="before")
    site.recovery_key = site.ca.init_sync(site.shared.as_uri()).recovery_key
    site.vault_id = site.ca.status().vault_id
    site.outside.mkdir()
    # What the review's symbolic link made the device delete: any file over
    # an hour old in the directory it pointed to.
    for name in ("thesis.pdf", "0123456789abcdef.tmp"):
        (site.outside / name).write_bytes(b"the user's own file, not memvault's")
        os.utime(site.outside / name, (time.time() - 2 * HOUR,) * 2)
    yield site
    site.ca.close()
    site.cb.close()
    for daemon in (a, b):
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.stop()


def test_a_symlinked_tmp_deletes_and_writes_nothing_outside_the_folder(site: Site) -> None:
    before = snapshot(site.outside)
    tmp = site.vault / "tmp"
    shutil.rmtree(tmp)
    tmp.symlink_to(site.outside, target_is_directory=True)
    site.restart_a()  # a start clears the device's leftovers from tmp/
    assert snapshot(site.outside) == before, "nothing deleted through the link"
    error = site.refused()
    assert str(tmp) in error and "symbolic link" in error, error
    assert snapshot(site.outside) == before, "nothing written through the link"
    site.serving()
    tmp.unlink()
    tmp.mkdir()
    site.synced_again()


@pytest.mark.parametrize("plant", ["fifo", "link to /dev/zero", "oversized"])
def test_a_planted_version_is_refused_unread(site: Site, plant: str) -> None:
    version = site.next_version()
    if plant == "fifo":
        os.mkfifo(version)
        expected = "is a FIFO, not a regular file"
    elif plant == "link to /dev/zero":
        version.symlink_to("/dev/zero")
        expected = "is a symbolic link, not a regular file"
    else:
        with version.open("wb") as sparse:
            sparse.truncate(MAX_OBJECT + 1)
        expected = f"is over {MAX_OBJECT} bytes ({MAX_OBJECT + 1})"
    error = site.refused(timeout=20.0)
    assert str(version) in error and expected in error, error
    site.serving()
    version.unlink()
    site.synced_again()


def test_a_symlinked_object_is_refused_by_join(site: Site) -> None:
    recovery = site.vault / "objects" / "keys+recovery"
    aside = site.root / "recovery-aside"
    recovery.rename(aside)
    decoy = site.outside / "planted-recovery"
    shutil.copyfile(aside, decoy)
    recovery.symlink_to(decoy)
    before = snapshot(site.outside)
    held = site.cb.remember("the desktop knew this before joining", topic="held").id
    with pytest.raises(IntegrityError, match="keys\\+recovery is a symbolic link"):
        site.cb.join_sync(site.shared.as_uri(), site.recovery_key)
    assert not site.cb.sync_status().configured
    assert site.cb.get(held).id == held, "the joining device keeps what it held"
    assert snapshot(site.outside) == before
    recovery.unlink()
    aside.rename(recovery)
    site.cb.join_sync(site.shared.as_uri(), site.recovery_key)
    assert site.cb.sync_status().configured


def test_version_names_of_other_digits_are_not_versions(site: Site) -> None:
    # str.isdigit() holds for both; int() refuses the first and reads the
    # second as a number whose file is another name.
    for digits in ("\u00b2" * 20, "\u0661" * 20):
        (site.vault / "versions" / digits).write_bytes(b"planted")
    memory = site.ca.remember("written beside strange version names", topic="digits").id
    site.ca.sync_now()
    # The worker may start a round of its own right after (woken by the
    # write): wait for it to settle rather than catch it in the middle.
    eventually(lambda: site.ca.sync_status().state == "idle", 20, "sync settles")
    status = site.ca.sync_status()
    assert status.pending == 0 and not status.last_error, status
    site.cb.sync_now()
    eventually(lambda: _has(site.cb, memory), 20, "the other device pulls it")


def _has(client: Client, memory_id: str) -> bool:
    try:
        client.get(memory_id)
    except MemvaultError:
        return False
    return True


# -- the store's rules, directly -------------------------------------------------

VAULT = "v1"


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[tuple[DirectoryStore, Path, Path]]:
    """A shared store in `root` with one object and one version, and the
    user's directory `outside` beside it."""
    root, outside = tmp_path / "shared", tmp_path / "outside"
    outside.mkdir()
    for name in ("thesis.pdf", "0123456789abcdef.tmp"):
        (outside / name).write_bytes(b"mine")
        os.utime(outside / name, (time.time() - 2 * HOUR,) * 2)
    store = DirectoryStore(root, tmp=root / VAULT / "tmp", shared=True, writer="w-",
                           max_object=MAX_OBJECT)
    assert store.put_if_absent(object_key(VAULT, "keys/recovery"), b"wrapped")
    assert store.put_if_absent(version_key(VAULT, 1), b"one")
    yield store, root, outside
    store.close()


@pytest.mark.parametrize("directory", ["", "objects", "versions", "tmp"])
def test_no_directory_is_entered_through_a_link(
        folder: tuple[DirectoryStore, Path, Path], directory: str) -> None:
    store, root, outside = folder
    planted = root / VAULT / directory if directory else root / VAULT
    moved = root.parent / "moved"
    planted.rename(moved)
    shutil.copytree(moved, outside, dirs_exist_ok=True)
    planted.symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    calls: list[Callable[[], object]] = []
    if directory != "versions":
        calls.append(lambda: store.put_if_absent(object_key(VAULT, "new"), b"x"))
    if directory != "objects":
        calls.append(lambda: store.put_if_absent(version_key(VAULT, 2), b"two"))
    if directory != "tmp":
        kind = "versions" if directory == "versions" else "objects"
        key = version_key(VAULT, 1) if kind == "versions" else object_key(VAULT, "keys/recovery")
        calls += [lambda: store.get(key), lambda: store.exists(key),
                  lambda: store.list(f"{VAULT}/{kind}/"), lambda: store.delete(key)]
    for call in calls:
        with pytest.raises(IntegrityError, match=f"{planted} is a symbolic link, not a directory"):
            call()
    DirectoryStore(root, tmp=root / VAULT / "tmp", shared=True, writer="")  # clears leftovers
    assert snapshot(outside) == before


def test_only_regular_files_are_read_and_none_is_opened_first(
        folder: tuple[DirectoryStore, Path, Path]) -> None:
    store, root, outside = folder
    versions = root / VAULT / "versions"
    os.mkfifo(versions / "00000000000000000002")
    (versions / "00000000000000000003").symlink_to("/dev/zero")
    (versions / "00000000000000000004").symlink_to(outside / "thesis.pdf")
    (versions / "00000000000000000005").mkdir()
    kinds = {2: "a FIFO", 3: "a symbolic link", 4: "a symbolic link", 5: "a directory"}
    for number, kind in kinds.items():
        answers: list[BaseException] = []
        reader = threading.Thread(target=_call, args=(store.get, version_key(VAULT, number),
                                                     answers), daemon=True)
        reader.start()
        reader.join(5.0)
        assert answers, f"reading version {number} ({kind}) blocked"
        assert isinstance(answers[0], IntegrityError), answers
        assert f"is {kind}, not a regular file" in str(answers[0])
        with pytest.raises(IntegrityError, match=kind):
            store.exists(version_key(VAULT, number))
    assert store.get(version_key(VAULT, 1)) == b"one"


def _call(function: Callable[[str], object], key: str, answers: list[BaseException]) -> None:
    try:
        function(key)
    except BaseException as exc:
        answers.append(exc)
    else:
        answers.append(AssertionError(f"{key} was read"))


def test_reads_stop_at_the_largest_object_memvault_writes(
        folder: tuple[DirectoryStore, Path, Path]) -> None:
    store, root, _ = folder
    objects = root / VAULT / "objects"
    with (objects / "largest").open("wb") as largest:
        largest.truncate(MAX_OBJECT)
    with (objects / "larger").open("wb") as larger:
        larger.truncate(MAX_OBJECT + 1)
    assert len(store.get(object_key(VAULT, "largest"))) == MAX_OBJECT
    with pytest.raises(IntegrityError, match=f"over {MAX_OBJECT} bytes"):
        store.get(object_key(VAULT, "larger"))


def test_a_link_at_an_object_name_is_neither_read_nor_followed(
        folder: tuple[DirectoryStore, Path, Path]) -> None:
    store, root, outside = folder
    planted = root / VAULT / "objects" / "snapshots+00000000000000000200"
    planted.symlink_to(outside / "thesis.pdf")
    before = snapshot(outside)
    key = object_key(VAULT, "snapshots/00000000000000000200")
    with pytest.raises(IntegrityError, match="symbolic link"):
        store.get(key)
    assert not store.put_if_absent(key, b"a snapshot"), "the name is taken, by the link"
    store.delete(key)  # pruning removes the link, never what it points to
    assert not planted.is_symlink() and snapshot(outside) == before
    with pytest.raises(NotFound):
        store.get(key)
    assert store.put_if_absent(key, b"a snapshot")
    assert store.get(key) == b"a snapshot"


def test_leftovers_of_other_writers_are_never_deleted(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    tmp = root / VAULT / "tmp"
    tmp.mkdir(parents=True)
    names = ["mine-0123456789abcdef.tmp", "theirs-0123456789abcdef.tmp",
             "mine-0123456789abcdef.tmp.partial", "mine-notours.tmp"]
    for name in names:
        (tmp / name).write_bytes(b"x")
        os.utime(tmp / name, (time.time() - 30 * 24 * HOUR,) * 2)
    (tmp / "mine-fedcba9876543210.tmp").mkdir()  # a directory is never a leftover
    DirectoryStore(root, tmp=tmp, shared=True, writer="mine-")
    assert sorted(os.listdir(tmp)) == sorted([*names[1:], "mine-fedcba9876543210.tmp"])
