"""Hostile requests to a real memvault-server (memvault.v1.Sync).

Tokens missing, malformed or wrong; one account reaching for another's
vault; objects over the size limit; floods over the rate limit; and
Hypothesis over every Sync RPC with random vault ids, names, numbers, parents
and data, and raw bytes that no stub would send (invalid UTF-8, corrupt wire
format). Every answer must be a clear status code, never INTERNAL or
UNKNOWN; the server must stay up; a canary vault owned by another account
must be byte-for-byte unchanged on disk at the end.

Stored objects altered on the server's disk are caught by the daemon's sync
(a flipped byte in a version, through a `grpc://` remote with two daemons);
the server itself passes stored bytes through as they are, neither hiding
nor repairing them.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memvault import Client
from memvault_base.errors import MemvaultError
from memvault_base.v1 import sync_pb2 as pb
from memvault_base.v1 import sync_pb2_grpc as pb_grpc

from .daemon_process import DaemonProcess
from .server_process import ServerProcess, create_token

DEADLINE_S = 30.0
LIMIT = 4096  # --max-object-bytes of the servers here
ALLOWED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
           grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.RESOURCE_EXHAUSTED}
# scripts/fuzz_long sets MEMVAULT_FUZZ_SCALE to run every fuzz test that many times longer.
SCALE = int(os.environ.get("MEMVAULT_FUZZ_SCALE", "1"))
FUZZ = settings(max_examples=40 * SCALE, deadline=None, derandomize=SCALE == 1,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])
UNARY = ["PutObject", "GetObject", "ListObjects", "DeleteObject", "AppendVersion",
         "ListVersions", "GetHead"]
REQUESTS: dict[str, Any] = {
    "PutObject": pb.PutObjectRequest, "GetObject": pb.GetObjectRequest,
    "ListObjects": pb.ListObjectsRequest, "DeleteObject": pb.DeleteObjectRequest,
    "AppendVersion": pb.AppendVersionRequest, "ListVersions": pb.ListVersionsRequest,
    "GetHead": pb.GetHeadRequest, "WatchHead": pb.WatchHeadRequest}
CANARY_VAULT = "canary-vault"


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


class Target:
    """One server, a raw stub, and the status of every call made."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.channel = grpc.insecure_channel(
            server.target, options=[("grpc.max_send_message_length", -1),
                                    ("grpc.max_receive_message_length", -1)])
        self.stub = pb_grpc.SyncStub(self.channel)  # type: ignore[no-untyped-call]
        self.calls = 0

    def code(self, method: str, request: object, token: str | None = None,
             authorization: str | None = None) -> tuple[grpc.StatusCode, str]:
        """(status, details) of one call; WatchHead is read for its first event."""
        self.calls += 1
        header = authorization if authorization is not None else (
            f"Bearer {token}" if token else None)
        metadata = (("authorization", header),) if header is not None else ()
        try:
            if method == "WatchHead":
                stream = self.stub.WatchHead(request, timeout=DEADLINE_S, metadata=metadata)
                try:
                    next(iter(stream))
                finally:
                    stream.cancel()
            else:
                getattr(self.stub, method)(request, timeout=DEADLINE_S, metadata=metadata)
        except grpc.RpcError as err:
            return err.code(), err.details() or ""
        return grpc.StatusCode.OK, ""

    def raw(self, method: str, body: bytes, token: str) -> grpc.StatusCode:
        """Send `body` as the request's wire bytes, unchecked by any stub."""
        self.calls += 1
        path = f"/memvault.v1.Sync/{method}"
        metadata = (("authorization", f"Bearer {token}"),)
        try:
            if method == "WatchHead":
                watch: Any = self.channel.unary_stream(path)
                stream: Any = watch(body, timeout=DEADLINE_S, metadata=metadata)
                try:
                    next(iter(stream))
                finally:
                    stream.cancel()
            else:
                unary: Any = self.channel.unary_unary(path)
                unary(body, timeout=DEADLINE_S, metadata=metadata)
        except grpc.RpcError as err:
            code: grpc.StatusCode = err.code()
            return code
        return grpc.StatusCode.OK

    def serving(self) -> bool:
        assert self.server.proc is not None and self.server.proc.poll() is None, self.server.log
        reply = health_pb2_grpc.HealthStub(self.channel).Check(
            health_pb2.HealthCheckRequest(service="memvault.v1.Sync"), timeout=DEADLINE_S)
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def _store_files(data: Path, vault: str) -> dict[str, bytes]:
    root = data / "store" / vault
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Target, dict[str, str]]]:
    """A server with a small object limit and a rate no fuzzing reaches; tokens of
    two accounts; a canary vault of alice's with objects and three versions."""
    data = tmp_path_factory.mktemp("hostile") / "data"
    data.mkdir()
    tokens = {"alice": create_token(data, "alice"), "mallory": create_token(data, "mallory")}
    with ServerProcess(data, "--max-object-bytes", str(LIMIT), "--rate", "100000").start() \
            as server:
        target = Target(server)
        alice = tokens["alice"]
        for name in ("keys/recovery", "snapshots/3", "x"):
            put = pb.PutObjectRequest(vault_id=CANARY_VAULT, name=name, data=name.encode() * 9)
            assert target.code("PutObject", put, alice)[0] == grpc.StatusCode.OK
        parent = b""
        for number in (1, 2, 3):
            body = f"sealed version {number}".encode()
            append = pb.AppendVersionRequest(vault_id=CANARY_VAULT, number=number,
                                             parent=parent, data=body)
            assert target.code("AppendVersion", append, alice)[0] == grpc.StatusCode.OK
            parent = _sha(body)
        before = _store_files(data, CANARY_VAULT)
        assert len(before) == 7  # owner, 3 objects, 3 versions
        yield target, tokens
        assert target.serving()
        assert _store_files(data, CANARY_VAULT) == before, "the canary vault changed"
        assert not list((data / "store" / ".tmp").iterdir())
        target.channel.close()
        assert server.stop() == 0, server.log
        assert "Traceback" not in server.log, server.log
        print(f"\n{target.calls} hostile calls to memvault-server")


def _every_rpc(vault_id: str) -> Iterator[tuple[str, object]]:
    yield "PutObject", pb.PutObjectRequest(vault_id=vault_id, name="x", data=b"evil")
    yield "GetObject", pb.GetObjectRequest(vault_id=vault_id, name="x")
    yield "ListObjects", pb.ListObjectsRequest(vault_id=vault_id)
    yield "DeleteObject", pb.DeleteObjectRequest(vault_id=vault_id, name="x")
    yield "AppendVersion", pb.AppendVersionRequest(
        vault_id=vault_id, number=4, parent=_sha(b"sealed version 3"), data=b"evil")
    yield "ListVersions", pb.ListVersionsRequest(vault_id=vault_id)
    yield "GetHead", pb.GetHeadRequest(vault_id=vault_id)
    yield "WatchHead", pb.WatchHeadRequest(vault_id=vault_id)


printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80)


@given(header=st.one_of(printable, printable.map(lambda t: "Bearer " + t),
                        printable.map(lambda t: "Bearer mvs_" + t)))
@FUZZ
def test_missing_and_wrong_tokens_are_unauthenticated(
        hostile: tuple[Target, dict[str, str]], header: str) -> None:
    target, tokens = hostile
    if any(token in header for token in tokens.values()):
        return
    for method, request in _every_rpc(CANARY_VAULT):
        assert target.code(method, request)[0] == grpc.StatusCode.UNAUTHENTICATED, method
        assert target.code(method, request, authorization=header)[0] == \
            grpc.StatusCode.UNAUTHENTICATED, (method, header)


def test_another_account_is_permission_denied(hostile: tuple[Target, dict[str, str]]) -> None:
    target, tokens = hostile
    for method, request in _every_rpc(CANARY_VAULT):
        code, details = target.code(method, request, tokens["mallory"])
        assert code == grpc.StatusCode.PERMISSION_DENIED, (method, code, details)
        assert "another account" in details and "sealed" not in details
    # The same account from another token is let in (the check is by account).
    assert target.code("GetHead", pb.GetHeadRequest(vault_id=CANARY_VAULT),
                       tokens["alice"])[0] == grpc.StatusCode.OK


def test_objects_over_the_limit_are_refused_naming_it(
        hostile: tuple[Target, dict[str, str]]) -> None:
    target, tokens = hostile
    vault, mallory = "mallory-big", tokens["mallory"]
    for size in (LIMIT + 1, 2 * LIMIT, 10 * 1024 * 1024):  # the last is refused unread
        put = pb.PutObjectRequest(vault_id=vault, name=f"big-{size}", data=b"b" * size)
        code, details = target.code("PutObject", put, mallory)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (size, code, details)
        assert f"limit of {LIMIT} bytes" in details or "larger than max" in details, details
        append = pb.AppendVersionRequest(vault_id=vault, number=1, data=b"b" * size)
        code, details = target.code("AppendVersion", append, mallory)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (size, code, details)
        assert f"limit of {LIMIT} bytes" in details or "larger than max" in details, details
    assert target.code("GetObject", pb.GetObjectRequest(vault_id=vault, name=f"big-{LIMIT + 1}"),
                       mallory)[0] == grpc.StatusCode.NOT_FOUND
    head = target.stub.GetHead(pb.GetHeadRequest(vault_id=vault), timeout=DEADLINE_S,
                               metadata=(("authorization", f"Bearer {mallory}"),)).head
    assert head == 0
    exact = pb.PutObjectRequest(vault_id=vault, name="exact", data=b"e" * LIMIT)
    assert target.code("PutObject", exact, mallory)[0] == grpc.StatusCode.OK
    assert target.serving()


def test_a_flood_is_refused_and_the_server_still_answers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    flooder, bystander = create_token(data, "flooder"), create_token(data, "bystander")
    with ServerProcess(data, "--rate", "20").start() as server:
        target = Target(server)
        codes: list[grpc.StatusCode] = []
        details: set[str] = set()

        def flood() -> None:
            for _ in range(60):
                code, why = target.code("GetHead", pb.GetHeadRequest(vault_id="flood"), flooder)
                codes.append(code)
                if code != grpc.StatusCode.OK:
                    details.add(why)

        threads = [threading.Thread(target=flood) for _ in range(4)]
        for thread in threads:
            thread.start()
        # Another token is not slowed by the flood: its bucket is its own.
        assert target.code("GetHead", pb.GetHeadRequest(vault_id="calm"), bystander)[0] == \
            grpc.StatusCode.OK
        for thread in threads:
            thread.join()
        assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED}, set(codes)
        assert codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) > 100, codes.count(
            grpc.StatusCode.OK)
        assert details and all("20 calls/s" in why for why in details), details
        assert target.serving()
        # Once the bucket refills (20 tokens at 20/s: one second), the flooder's
        # normal calls are served again. Polling instead could succeed on the
        # last fraction of a token and see the next call refused.
        time.sleep(1.2)
        put = pb.PutObjectRequest(vault_id="flood", name="after", data=b"still here")
        assert target.code("PutObject", put, flooder)[0] == grpc.StatusCode.OK
        assert target.code("GetObject", pb.GetObjectRequest(vault_id="flood", name="after"),
                           flooder)[0] == grpc.StatusCode.OK
        target.channel.close()
        assert server.stop() == 0, server.log


# -- Hypothesis over the Sync RPCs -------------------------------------------------

vault_ids = st.one_of(st.sampled_from([CANARY_VAULT, "mallory-fuzz", "m", ""]),
                      st.from_regex(r"[a-z0-9][a-z0-9_-]{0,70}", fullmatch=True),
                      st.text(max_size=80))
names = st.one_of(st.sampled_from(["x", "keys/recovery", "../owner", "a/../../b", "..", "/",
                                   "a//b", "owner", "x" * 200, "x" * 201, ".tmp/x"]),
                  st.from_regex(r"[a-z0-9/_.+-]{0,210}", fullmatch=True),
                  st.text(max_size=300))
uint64 = st.one_of(st.sampled_from([0, 1, 2, 3, 4, 2**31, 2**32, 2**63 - 1, 2**63, 2**64 - 1,
                                    10**19]),
                   st.integers(0, 2**64 - 1))
uint32 = st.one_of(st.sampled_from([0, 1, 1000, 1001, 2**31, 2**32 - 1]),
                   st.integers(0, 2**32 - 1))
parents = st.one_of(st.binary(max_size=80), st.sampled_from(
    [b"", _sha(b"sealed version 1"), _sha(b"sealed version 3"), bytes(32)]))
blobs = st.one_of(st.binary(max_size=2048), st.just(b"\xff" * (LIMIT + 1)))

requests = st.one_of(
    st.builds(lambda v, n, d: ("PutObject", pb.PutObjectRequest(vault_id=v, name=n, data=d)),
              vault_ids, names, blobs),
    st.builds(lambda v, n: ("GetObject", pb.GetObjectRequest(vault_id=v, name=n)),
              vault_ids, names),
    st.builds(lambda v, p, s: ("ListObjects", pb.ListObjectsRequest(vault_id=v, prefix=p,
                                                                     start_after=s)),
              vault_ids, names, names),
    st.builds(lambda v, n: ("DeleteObject", pb.DeleteObjectRequest(vault_id=v, name=n)),
              vault_ids, names),
    st.builds(lambda v, n, p, d: ("AppendVersion", pb.AppendVersionRequest(
        vault_id=v, number=n, parent=p, data=d)), vault_ids, uint64, parents, blobs),
    st.builds(lambda v, a, limit: ("ListVersions", pb.ListVersionsRequest(
        vault_id=v, after=a, limit=limit)), vault_ids, uint64, uint32),
    st.builds(lambda v: ("GetHead", pb.GetHeadRequest(vault_id=v)), vault_ids),
    st.builds(lambda v: ("WatchHead", pb.WatchHeadRequest(vault_id=v)), vault_ids),
)


@given(calls=st.lists(requests, min_size=1, max_size=8))
@settings(FUZZ, max_examples=60 * SCALE)
def test_random_requests_get_clear_answers(hostile: tuple[Target, dict[str, str]],
                                           calls: list[tuple[str, object]]) -> None:
    target, tokens = hostile
    for method, request in calls:
        code, details = target.code(method, request, tokens["mallory"])
        assert code in ALLOWED, (method, request, code, details)
    assert target.serving()


def _field(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _field(number, 2) + _varint(len(payload)) + payload


# Wire bytes the stubs refuse to build: invalid UTF-8 in a string field, a
# negative int64 (ten-byte varint) in a uint64 field, truncated fields,
# unknown fields and wrong wire types.
crafted = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda junk: _length_delimited(1, junk), st.binary(min_size=1, max_size=40)),
    st.builds(lambda junk: _length_delimited(1, b"v1") + _length_delimited(2, junk),
              st.binary(min_size=1, max_size=40)),
    st.builds(lambda n: _length_delimited(1, b"mallory-fuzz") + _field(2, 0)
              + _varint(n % 2**64), st.integers(-(2**63), 2**64 - 1)),
    st.sampled_from([
        _length_delimited(1, b"\xff\xfe"),  # invalid UTF-8 in vault_id
        _length_delimited(1, b"mallory-fuzz") + _length_delimited(2, b"caf\xc3"),
        _length_delimited(1, b"mallory-fuzz") + _field(2, 0) + b"\xff" * 11,  # overlong varint
        _length_delimited(1, b"mallory-fuzz") + _field(2, 2) + _varint(1000) + b"x",
        _length_delimited(1, b"mallory-fuzz") + _field(99, 0) + _varint(7),  # unknown field
        _field(1, 0) + _varint(5),  # a varint where a string belongs
        _field(1, 5) + b"\x00\x00",  # a truncated fixed32
    ]),
)


@given(method=st.sampled_from([*UNARY, "WatchHead"]), body=crafted)
@settings(FUZZ, max_examples=80 * SCALE)
def test_undecodable_requests_are_invalid_argument(hostile: tuple[Target, dict[str, str]],
                                                    method: str, body: bytes) -> None:
    target, tokens = hostile
    code = target.raw(method, body, tokens["mallory"])
    assert code in ALLOWED, (method, body, code)
    assert target.serving()


def test_fuzzed_vault_keeps_a_whole_chain(hostile: tuple[Target, dict[str, str]]) -> None:
    """Whatever the fuzzing appended to its own vault forms one chain 1..head."""
    target, tokens = hostile
    metadata = (("authorization", f"Bearer {tokens['mallory']}"),)
    head = target.stub.GetHead(pb.GetHeadRequest(vault_id="mallory-fuzz"), timeout=DEADLINE_S,
                               metadata=metadata).head
    listed = target.stub.ListVersions(pb.ListVersionsRequest(vault_id="mallory-fuzz"),
                                      timeout=DEADLINE_S, metadata=metadata)
    assert [v.number for v in listed.versions] == list(range(1, head + 1))


# -- objects altered on the server's disk ------------------------------------------

def test_server_passes_altered_objects_through_as_stored(tmp_path: Path) -> None:
    """The server does not check what it stores: a flipped or truncated version
    is served as it lies on disk, never an error or a crash. Catching it is
    the daemon's job (next test, and test_sync.py for a file:// remote)."""
    data = tmp_path / "data"
    data.mkdir()
    token = create_token(data, "t")
    with ServerProcess(data).start() as server:
        target = Target(server)
        bodies = [bytes([n]) * 500 for n in (1, 2, 3)]
        parent = b""
        for number, body in enumerate(bodies, 1):
            assert target.code("AppendVersion", pb.AppendVersionRequest(
                vault_id="v", number=number, parent=parent, data=body), token)[0] == \
                grpc.StatusCode.OK
            parent = _sha(body)
        versions = sorted((data / "store" / "v" / "versions").iterdir())
        flipped = bytearray(bodies[1])
        flipped[100] ^= 1
        versions[1].write_bytes(bytes(flipped))
        versions[2].write_bytes(bodies[2][:10])
        metadata = (("authorization", f"Bearer {token}"),)
        listed = target.stub.ListVersions(pb.ListVersionsRequest(vault_id="v"),
                                          timeout=DEADLINE_S, metadata=metadata)
        assert [v.data for v in listed.versions] == [bodies[0], bytes(flipped), bodies[2][:10]]
        target.channel.close()
        assert server.stop() == 0


def _eventually(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def _has(client: Client, memory_id: str) -> bool:
    try:
        client.get(memory_id)
    except MemvaultError:
        return False
    return True


def _refused(client: Client) -> list[int]:
    """The versions `client`'s sync refused."""
    try:
        return [number for number, _ in client.sync_status().refused]
    except MemvaultError:  # not listening yet
        return []


def test_a_version_altered_on_the_server_is_refused_by_the_daemon(tmp_path: Path) -> None:
    """Two daemons through a grpc:// remote; a byte of the newest version is
    flipped in the server's store while one of them is off: on its next start
    its sync refuses the version (its signature no longer verifies), names it
    in `sync status`, and applies nothing from it. (The
    daemons are killed at the end: a clean stop with sync waits ~5 s for the
    watch thread.) The
    other forgeries (truncated, swapped) take the same path in the daemon and
    are exercised through a file:// remote in test_sync.py."""
    server = ServerProcess(tmp_path / "server").start()
    token = create_token(server.data_dir, "laptop")
    remote = f"grpc://{server.target}"
    try:
        with DaemonProcess(tmp_path / "a").start(wait=False) as a, \
                DaemonProcess(tmp_path / "b").start(wait=False) as b:
            a.wait_serving()
            b.wait_serving()
            ca, cb = Client(socket=a.socket), Client(socket=b.socket)
            key = ca.init_sync(remote, token=token).recovery_key
            cb.join_sync(remote, key, token=token)
            early = ca.remember("written before the desktop went off", topic="early").id
            ca.sync_now()
            _eventually(lambda: _has(cb, early))
            b.kill()  # the desktop goes off (its acknowledged state is on disk)
            late = ca.remember("written while the desktop was off", topic="late").id
            ca.sync_now()
            versions = sorted((server.data_dir / "store").rglob("versions/*"))
            newest = versions[-1]
            original = newest.read_bytes()
            newest.write_bytes(original[:100] + bytes([original[100] ^ 1]) + original[101:])
            b.start(wait=False)
            cb = Client(socket=b.socket)
            _eventually(lambda: bool(_refused(cb)), timeout=90)
            assert _refused(cb) == [int(newest.name)], cb.sync_status()
            assert not _has(cb, late), "nothing from a forged version is applied"
            assert _has(cb, early)
            b.wait_serving()
            for client in (ca, cb):
                client.close()
    finally:
        server.stop()
