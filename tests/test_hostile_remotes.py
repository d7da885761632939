"""A hostile remote cannot exhaust the daemon before anything authenticates,
and a bucket that cannot keep the chain safe is refused.

Bounded, each from what memvault itself writes (`memvault_base.objects.names`):
a reply from memvault-server (gRPC refuses one over `MAX_REPLY` unread), an
object or version (`MAX_OBJECT`, also on S3 and in a directory), a listing
(`MAX_LISTED` names, and it must move forward), and the Argon2 parameters of
the recovery key file, checked before the KDF runs.

Real parts: daemons as users run them, a real memvault-server, and between
them `HostileProxy`, a gRPC relay in this process that forwards every call
unless told to answer one itself; `fake_s3.FakeS3`, a small S3 server that
can ignore `If-None-Match: *`, serve huge objects or list forever; and the
real Ceph RGW (`rgw`), which honours conditional writes.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import obstore
import pytest

from memvault import Client
from memvault_base.errors import IntegrityError, InvalidArgument, MemvaultError
from memvault_base.objects.names import MAX_LISTED, MAX_OBJECT
from memvault_base.objects.s3 import bucket_client
from memvault_base.v1 import sync_pb2 as pb
from memvaultd.storage.keyfile import MAX_MEMORY_KIB
from memvaultd.sync.remotes import open_remote
from memvaultd.sync.remotes.grpc_remote import MAX_REPLY

from .ceph import CephRGW
from .daemon_process import DaemonProcess
from .fake_s3 import FakeS3, fake_s3
from .server_process import ServerProcess, create_token

MIB = 1024 * 1024
_SERVICE = pb.DESCRIPTOR.services_by_name["Sync"]
_STREAMING = frozenset(m.name for m in _SERVICE.methods if m.server_streaming)
_UNLIMITED = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
# What a refused join may cost the daemon at its peak: the real recovery
# key's Argon2 (64 MiB, before the snapshots are listed; measured +64 MiB),
# 100,000 names (~10 MB) and slack; against the 300 MiB object, the 512 MiB
# Argon2 or the million names a hostile server offers here.
PEAK_BOUND = 128 * MIB

# Answers one call itself: (request bytes, a function asking the real server)
# in, reply bytes out; None forwards the call.
Answer = Callable[[bytes, Callable[[], bytes]], bytes | None]


class HostileProxy(grpc.GenericRpcHandler):
    """memvault-server as a hostile operator (or a man in the middle) serves it:
    every call of `memvault.v1.Sync` goes to `upstream` unless `answers`
    names its method and the answer is not None."""

    def __init__(self, upstream: str | None) -> None:
        self.answers: dict[str, Answer] = {}
        self.calls: list[str] = []
        self._channel = grpc.insecure_channel(upstream, options=_UNLIMITED) if upstream else None
        self._server = grpc.server(ThreadPoolExecutor(max_workers=16), handlers=[self],
                                   options=_UNLIMITED)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()

    @property
    def url(self) -> str:
        return f"grpc://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.stop(grace=None)
        if self._channel is not None:
            self._channel.close()

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method: str = handler_call_details.method
        if method.rsplit("/", 1)[-1] in _STREAMING:
            return grpc.unary_stream_rpc_method_handler(
                lambda request, context: self._stream(method, request, context))
        return grpc.unary_unary_rpc_method_handler(
            lambda request, context: self._unary(method, request, context))

    def _unary(self, method: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        name = method.rsplit("/", 1)[-1]
        self.calls.append(name)
        answer = self.answers.get(name)
        reply = None
        if answer is not None:
            reply = answer(request, lambda: self._forward(method, request, context))
        if reply is not None:
            return reply
        return self._forward(method, request, context)

    def _forward(self, method: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        if self._channel is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "no upstream")
        forward: Any = self._channel.unary_unary(method)  # type: ignore[union-attr]
        try:
            reply: bytes = forward(request, timeout=context.time_remaining(),
                                   metadata=context.invocation_metadata())
        except grpc.RpcError as exc:
            context.abort(exc.code(), exc.details() or "")
        return reply

    def _stream(self, method: str, request: bytes, context: grpc.ServicerContext
                ) -> Iterator[bytes]:
        if self._channel is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "no upstream")
        forward: Any = self._channel.unary_stream(method)  # type: ignore[union-attr]
        upstream = forward(request, timeout=context.time_remaining(),
                           metadata=context.invocation_metadata())
        context.add_callback(upstream.cancel)
        try:
            yield from upstream
        except grpc.RpcError:
            return


def peak_growth(daemon: DaemonProcess, action: Callable[[], object]) -> int:
    """How far the daemon's peak resident memory rose above where it stood
    when `action` began (VmHWM, reset to the current size first)."""
    assert daemon.proc is not None
    status = Path(f"/proc/{daemon.proc.pid}/status")
    Path(f"/proc/{daemon.proc.pid}/clear_refs").write_text("5")  # resets VmHWM

    def kib(field_name: str) -> int:
        line = next(x for x in status.read_text().splitlines() if x.startswith(field_name))
        return int(line.split()[1]) * 1024

    before = kib("VmRSS:")
    action()
    return kib("VmHWM:") - before


def raises_within(seconds: float, call: Callable[[], object]) -> BaseException:
    """The exception `call` ends with, which it must within `seconds`."""
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(AssertionError("the call succeeded"))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still running after {seconds:g} s"
    return outcome[0]


# -- memvault-server, hostile: a device joining through it ----------------------


@dataclass
class Site:
    server: ServerProcess
    token: str
    proxy: HostileProxy
    a: DaemonProcess  # set sync up with the real server, directly
    b: DaemonProcess  # joins through the proxy
    recovery_key: str = ""
    cb: Client = field(init=False)

    def __post_init__(self) -> None:
        self.cb = Client(socket=self.b.socket)

    def join(self) -> Any:
        return self.cb.join_sync(self.proxy.url, self.recovery_key, token=self.token)

    def refused_join(self, seconds: float = 60.0) -> tuple[BaseException, int]:
        """(the error, the daemon's peak growth) of a join that must fail."""
        errors: list[BaseException] = []
        begun = time.monotonic()
        growth = peak_growth(self.b, lambda: errors.append(raises_within(seconds, self.join)))
        print(f"\nrefused in {time.monotonic() - begun:.2f} s, peak +{growth / MIB:.1f} MiB: "
              f"{type(errors[0]).__name__}: {errors[0]}")
        assert not self.cb.sync_status().configured
        memory = self.cb.remember(f"the daemon still serves {uuid.uuid4().hex[:8]}")
        assert self.cb.get(memory.id).id == memory.id
        return errors[0], growth


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("hostile-server")
    data = root / "server"
    data.mkdir()
    token = create_token(data, "devices")
    a = DaemonProcess(root / "a").start(wait=False)
    b = DaemonProcess(root / "b").start(wait=False)
    with ServerProcess(data).start() as server:
        proxy = HostileProxy(server.target)
        a.wait_serving()
        b.wait_serving()
        site = Site(server, token, proxy, a, b)
        with Client(socket=a.socket) as ca:
            ca.remember("the laptop knew this before sync", topic="before")
            site.recovery_key = ca.init_sync(f"grpc://{server.target}", token=token).recovery_key
        yield site
        site.cb.close()
        proxy.close()
        for daemon in (a, b):
            if daemon.proc is not None and daemon.proc.poll() is None:
                daemon.stop()


@pytest.fixture(autouse=True)
def honest(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "site" in request.fixturenames:
        request.getfixturevalue("site").proxy.answers.clear()


def test_a_300_mib_object_is_refused_unread(site: Site) -> None:
    huge = pb.GetObjectResponse(data=bytes(300 * MIB)).SerializeToString()
    site.proxy.answers["GetObject"] = lambda request, forward: huge
    error, growth = site.refused_join()
    assert isinstance(error, IntegrityError), error
    assert f"sent a reply over {MAX_REPLY} bytes" in str(error)
    assert growth < PEAK_BOUND, f"the daemon's peak rose {growth / MIB:.0f} MiB"


def test_a_listing_ten_times_the_bound_is_refused(site: Site) -> None:
    pages = iter(range(100))  # 100 pages of 10,000 names: 1M, 10x MAX_LISTED

    def long(request: bytes, forward: Callable[[], bytes]) -> bytes:
        asked = pb.ListObjectsRequest.FromString(request)
        page = next(pages, None)
        if page is None:
            return pb.ListObjectsResponse().SerializeToString()
        return pb.ListObjectsResponse(
            names=[f"{asked.prefix}{page:08d}/{i:05d}" for i in range(10_000)],
            truncated=True).SerializeToString()

    site.proxy.answers["ListObjects"] = long
    error, growth = site.refused_join()
    assert isinstance(error, IntegrityError), error
    assert f"listed more than {MAX_LISTED} objects" in str(error)
    assert growth < PEAK_BOUND, f"the daemon's peak rose {growth / MIB:.0f} MiB"


def test_a_listing_that_repeats_itself_is_refused(site: Site) -> None:
    def stuck(request: bytes, forward: Callable[[], bytes]) -> bytes:
        asked = pb.ListObjectsRequest.FromString(request)
        return pb.ListObjectsResponse(names=[f"{asked.prefix}00000000000000000200"],
                                      truncated=True).SerializeToString()

    site.proxy.answers["ListObjects"] = stuck
    error, _ = site.refused_join(seconds=30)
    assert isinstance(error, IntegrityError) and "after" in str(error), error


def test_hostile_kdf_parameters_are_refused_before_hashing(site: Site) -> None:
    memory_kib = 2 * MAX_MEMORY_KIB  # 512 MiB, which Argon2 would allocate

    def planted_key_file(request: bytes, forward: Callable[[], bytes]) -> bytes | None:
        if pb.GetObjectRequest.FromString(request).name != "keys/recovery":
            return None
        blob = pb.GetObjectResponse.FromString(forward()).data
        altered = blob[:11] + memory_kib.to_bytes(4, "big") + blob[15:]
        return pb.GetObjectResponse(data=altered).SerializeToString()

    site.proxy.answers["GetObject"] = planted_key_file
    begun = time.monotonic()
    error, growth = site.refused_join()
    assert isinstance(error, IntegrityError), error
    assert "keys/recovery" in str(error) and "out of range" in str(error), error
    assert time.monotonic() - begun < 10
    assert growth < PEAK_BOUND, f"the daemon's peak rose {growth / MIB:.0f} MiB"


def test_through_the_honest_proxy_the_join_works(site: Site) -> None:
    assert site.join().vault_id
    assert site.cb.sync_status().configured


# -- memvault-server, hostile: the client's checks, one by one -------------------


@pytest.fixture
def liar() -> Iterator[HostileProxy]:
    """A memvault-server of its own making: every answer is the test's."""
    proxy = HostileProxy(None)
    yield proxy
    proxy.close()


def _remote(proxy: HostileProxy) -> Any:
    return open_remote(proxy.url, token="t", vault_id="v")


def test_an_object_over_the_largest_memvault_writes_is_refused(liar: HostileProxy) -> None:
    liar.answers["GetObject"] = lambda request, forward: pb.GetObjectResponse(
        data=bytes(MAX_OBJECT + 1)).SerializeToString()
    with pytest.raises(IntegrityError, match=f"over {MAX_OBJECT}"):
        _remote(liar).get_object("keys/recovery")


@pytest.mark.parametrize("lie", ["too many", "backwards", "repeated", "too big"])
def test_versions_are_taken_only_as_asked(liar: HostileProxy, lie: str) -> None:
    def versions(request: bytes, forward: Callable[[], bytes]) -> bytes:
        after = pb.ListVersionsRequest.FromString(request).after
        chosen = {"too many": [(after + 1 + i, b"v") for i in range(60)],
                  "backwards": [(after + 2, b"v"), (after + 1, b"v")],
                  "repeated": [(after, b"v")],
                  "too big": [(after + 1, bytes(MAX_OBJECT + 1))]}[lie]
        return pb.ListVersionsResponse(versions=[pb.Version(number=n, data=d) for n, d in chosen],
                                       truncated=True).SerializeToString()

    liar.answers["ListVersions"] = versions
    with pytest.raises(IntegrityError, match="never does"):
        _remote(liar).versions_after(4, limit=50)


@pytest.mark.parametrize("name", ["other/1", "snapshots/A", "snapshots//x"])
def test_listed_names_must_be_names_under_the_prefix(liar: HostileProxy, name: str) -> None:
    liar.answers["ListObjects"] = lambda request, forward: pb.ListObjectsResponse(
        names=[name]).SerializeToString()
    with pytest.raises(IntegrityError, match="listed"):
        _remote(liar).list_objects("snapshots/")


# -- S3 ---------------------------------------------------------------------------


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeS3]:
    with fake_s3() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        yield server


def test_s3_reads_stop_at_the_largest_object_memvault_writes(fake: FakeS3) -> None:
    remote = open_remote("s3://bucket/p", vault_id="v")
    fake.huge["p/v/objects/keys/recovery"] = 300 * MIB
    fake.huge["p/v/versions/00000000000000000001"] = MAX_OBJECT + 1
    with pytest.raises(IntegrityError, match=f"over {MAX_OBJECT} bytes"):
        remote.get_object("keys/recovery")
    with pytest.raises(IntegrityError, match=f"over {MAX_OBJECT} bytes"):
        remote.versions_after(0)
    assert fake.sent < PEAK_BOUND, f"{fake.sent / MIB:.0f} MiB were sent before the refusal"
    remote.close()


def test_an_s3_listing_that_never_ends_is_refused(fake: FakeS3) -> None:
    remote = open_remote("s3://bucket/p", vault_id="v")
    fake.endless_list = True
    begun = time.monotonic()
    with pytest.raises(IntegrityError, match=f"more than {MAX_LISTED} objects"):
        remote.list_objects("states/")
    assert remote.head() == 0, "no version among the names: the head listing stops"
    assert time.monotonic() - begun < 60
    remote.close()


def test_rgw_objects_over_the_bound_are_refused(rgw: CephRGW,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in rgw.env().items():
        monkeypatch.setenv(name, value)
    rgw.create_bucket("memvault-hostile")
    prefix = uuid.uuid4().hex[:8]
    raw = bucket_client("memvault-hostile")
    obstore.put(raw, f"{prefix}/v/objects/largest", bytes(MAX_OBJECT))
    obstore.put(raw, f"{prefix}/v/objects/planted", bytes(MAX_OBJECT + 1))
    remote = open_remote(f"s3://memvault-hostile/{prefix}", vault_id="v")
    assert len(remote.get_object("largest")) == MAX_OBJECT
    with pytest.raises(IntegrityError, match=f"over {MAX_OBJECT} bytes"):
        remote.get_object("planted")
    remote.close()


def test_rgw_honours_conditional_writes_and_the_probe_leaves_nothing(
        rgw: CephRGW, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in rgw.env().items():
        monkeypatch.setenv(name, value)
    rgw.create_bucket("memvault-probe")
    prefix = uuid.uuid4().hex[:8]
    remote = open_remote(f"s3://memvault-probe/{prefix}", vault_id="v", setting_up=True)
    remote.close()
    left = [meta["path"] for page in obstore.list(bucket_client("memvault-probe"), prefix)
            for meta in page]
    assert left == []


def test_a_store_that_ignores_conditional_writes_is_refused_at_join(fake: FakeS3) -> None:
    fake.ignore_if_none_match = True
    with pytest.raises(InvalidArgument, match="ignores conditional writes"):
        open_remote("s3://bucket/p", vault_id="v", setting_up=True)
    assert fake.objects == {}, "the probe key is deleted"
    open_remote("s3://bucket/p", vault_id="v").close()  # resuming does not probe


def test_init_refuses_a_store_that_ignores_conditional_writes(tmp_path: Path) -> None:
    with fake_s3() as fake, DaemonProcess(tmp_path / "a", **fake.env()).start() as a, \
            Client(socket=a.socket) as client:
        mine = client.remember("kept whatever the store is").id
        fake.ignore_if_none_match = True
        with pytest.raises(InvalidArgument) as refused:
            client.init_sync("s3://bucket/vaults")
        message = str(refused.value)
        assert "ignores conditional writes" in message and fake.endpoint in message, message
        assert "If-None-Match" in message
        assert not client.sync_status().configured and client.get(mine).id == mine
        fake.ignore_if_none_match = False  # the same store, honest: sync is set up
        assert client.init_sync("s3://bucket/vaults").recovery_key
        assert client.sync_status().configured
        assert any("/versions/" in key for key in fake.objects)
        a.stop()


def test_the_honest_fake_is_a_store_the_bucket_code_works_with(fake: FakeS3) -> None:
    """Put-if-absent, get, list and the head, as on RGW: what the tests above
    make it do wrong is all that is wrong with it."""
    remote = open_remote("s3://bucket/p", vault_id="v", setting_up=True)
    assert remote.put_object("keys/recovery", b"k") and not remote.put_object("keys/recovery", b"x")
    assert remote.append_version(1, b"", b"one") and remote.append_version(2, b"h" * 32, b"two")
    assert remote.head() == 2 and remote.versions_after(0) == [(1, b"one"), (2, b"two")]
    assert remote.list_objects() == ["keys/recovery"]
    with pytest.raises(MemvaultError):
        remote.get_object("missing")
    remote.close()
    assert os.environ["MEMVAULT_S3_ENDPOINT"] == fake.endpoint
