"""What a caller can make a real memvault-server hold, and what it may change.

- An unauthenticated caller is refused from its headers, before its message
  is read: 24 concurrent 32 MiB requests without a valid token leave the
  server's peak memory where it was.
- The rate limit is charged to the token's account, after the header is
  parsed strictly: `bearer t` and `Bearer t` share one bucket, `Bearer  t`
  is no token at all; the limiter forgets idle accounts.
- A read never creates a vault (no directory, no owner).
- Each account has quotas of objects and bytes, counted again at start.
- A device token deletes nothing; an admin token may.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import-untyped]

from memvault_base.v1 import sync_pb2 as pb
from memvault_base.v1 import sync_pb2_grpc as pb_grpc
from memvault_server.limits import RateLimiter

from .server_process import ServerProcess, create_token, server_command

DEADLINE_S = 60.0
MiB = 1024 * 1024


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


class Caller:
    """A raw stub on one channel: (status, details) of each call."""

    def __init__(self, server: ServerProcess) -> None:
        self.channel = grpc.insecure_channel(
            server.target, options=[("grpc.max_send_message_length", -1),
                                    ("grpc.max_receive_message_length", -1)])
        self.stub = pb_grpc.SyncStub(self.channel)  # type: ignore[no-untyped-call]

    def call(self, method: str, request: object,
             authorization: str | None = None) -> tuple[grpc.StatusCode, str, object]:
        metadata = (("authorization", authorization),) if authorization is not None else ()
        try:
            if method == "WatchHead":
                stream = self.stub.WatchHead(request, timeout=DEADLINE_S, metadata=metadata)
                try:
                    reply = next(iter(stream))
                finally:
                    stream.cancel()
            else:
                reply = getattr(self.stub, method)(request, timeout=DEADLINE_S,
                                                   metadata=metadata)
        except grpc.RpcError as err:
            return err.code(), err.details() or "", None
        return grpc.StatusCode.OK, "", reply

    def close(self) -> None:
        self.channel.close()


def _bearer(token: str) -> str:
    return f"Bearer {token}"


def _memory_mib(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (the peak since start), in MiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) // 1024
    return found


# -- reading before checking -------------------------------------------------------

def test_unauthenticated_large_requests_are_refused_unread(tmp_path: Path) -> None:
    """Against a server with the default limits (gRPC would read a message up
    to 33 MiB): 24 concurrent 32 MiB PutObject, AppendVersion and health
    requests with no token, a wrong one and malformed headers, one connection
    each; then 4 connections of 64 concurrent 2 MiB requests each. Every Sync
    call is refused, and the server's peak memory grows by less than one
    32 MiB request over both rounds."""
    data = tmp_path / "data"
    data.mkdir()
    create_token(data, "alice")
    with ServerProcess(data).start() as server:
        assert server.proc is not None
        pid = server.proc.pid
        time.sleep(0.5)
        before = _memory_mib(pid)
        codes = _attack(server.target, connections=24, streams=1, size=32 * MiB)
        middle = _memory_mib(pid)
        codes += _attack(server.target, connections=4, streams=64, size=2 * MiB)
        after = _memory_mib(pid)
        print(f"\nmemvault-server memory (MiB), RSS / peak: {before['VmRSS']} / "
              f"{before['VmHWM']} at start, {middle['VmRSS']} / {middle['VmHWM']} after 24 "
              f"unauthenticated 32 MiB requests, {after['VmRSS']} / {after['VmHWM']} after "
              f"256 more of 2 MiB")
        sync_codes = {code for method, code in codes if "Health" not in method}
        assert len(codes) == 24 + 256
        assert sync_codes == {grpc.StatusCode.UNAUTHENTICATED}, sync_codes
        assert after["VmHWM"] - before["VmHWM"] < 32, (before, middle, after)
        # A health check is answered without its message: the server's status.
        with grpc.insecure_channel(server.target) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="memvault.v1.Sync"), timeout=DEADLINE_S)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        assert server.stop() == 0, server.log


def _attack(target: str, connections: int, streams: int,
            size: int) -> list[tuple[str, grpc.StatusCode]]:
    """`streams` concurrent calls of `size` bytes on each of `connections`
    channels, none with a valid token; (method, status) of each."""
    body = b"\x0a\x01v\x12\x01x\x1a" + _varint(size) + b"x" * size  # a PutObjectRequest
    headers = [None, "Bearer mvs_" + "A" * 43, "Bearer  junk", "Basic dXNlcjpwYXNz"]
    methods = ["/memvault.v1.Sync/PutObject", "/memvault.v1.Sync/AppendVersion",
               "/grpc.health.v1.Health/Check"]
    codes: list[tuple[str, grpc.StatusCode]] = []

    def send(channel: grpc.Channel, index: int) -> None:
        header = headers[index % len(headers)]
        metadata = (("authorization", header),) if header else ()
        method = methods[index % len(methods)]
        unary: Any = channel.unary_unary(method)
        try:
            unary(body, timeout=DEADLINE_S, metadata=metadata)
            codes.append((method, grpc.StatusCode.OK))
        except grpc.RpcError as err:
            codes.append((method, err.code()))

    channels = [grpc.insecure_channel(target, options=[("grpc.max_send_message_length", -1)])
                for _ in range(connections)]
    threads = [threading.Thread(target=send, args=(channel, c * streams + s))
               for c, channel in enumerate(channels) for s in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for channel in channels:
        channel.close()
    return codes


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


# -- the rate limit's key and its table ----------------------------------------------

def test_the_rate_is_charged_to_the_account_whatever_the_header_spelling(
        tmp_path: Path) -> None:
    """`bearer t`, `BEARER t` and `Bearer t`, and a second token of the same
    account, draw on one bucket; `Bearer  t` (two spaces), a trailing space
    or a tab is no token (UNAUTHENTICATED), so it cannot open a bucket of its
    own."""
    data = tmp_path / "data"
    data.mkdir()
    laptop = create_token(data, "laptop", account="alice")
    desktop = create_token(data, "desktop", account="alice")
    bob = create_token(data, "bob")
    with ServerProcess(data, "--rate", "20").start() as server:
        caller = Caller(server)
        for bad in (f"Bearer  {laptop}", f"Bearer {laptop} ", f" Bearer {laptop}",
                    f"Bearer {laptop} x", f"Bearer{laptop}"):
            code, details, _ = caller.call("GetHead", pb.GetHeadRequest(vault_id="v"), bad)
            assert code == grpc.StatusCode.UNAUTHENTICATED, (bad, code, details)
        spellings = [f"Bearer {laptop}", f"bearer {laptop}", f"BEARER {laptop}",
                     f"bEaReR {laptop}", f"Bearer {desktop}"]
        ok = limited = 0
        started = time.monotonic()
        for index in range(100):
            code, details, _ = caller.call("GetHead", pb.GetHeadRequest(vault_id="v"),
                                           spellings[index % len(spellings)])
            if code == grpc.StatusCode.OK:
                ok += 1
            else:
                assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (code, details)
                assert "account alice" in details and "20 calls/s" in details, details
                limited += 1
        elapsed = time.monotonic() - started
        # One bucket: a burst of 20 and 20/s refill, whatever the spelling.
        assert ok <= 20 + 20 * elapsed + 1, (ok, elapsed)
        assert limited > 0
        # Another account's bucket is its own.
        assert caller.call("GetHead", pb.GetHeadRequest(vault_id="w"),
                           _bearer(bob))[0] == grpc.StatusCode.OK
        caller.close()
        assert server.stop() == 0, server.log


def test_the_rate_table_forgets_idle_accounts(tmp_path: Path) -> None:
    """400 accounts call once each; a second later the limiter's table is
    swept back to the one account still calling (its debug log says so)."""
    data = tmp_path / "data"
    data.mkdir()
    tokens = [f"mvs_{index:043d}" for index in range(400)]
    (data / "tokens.json").write_text(json.dumps({"format": 1, "tokens": [
        {"name": f"t{index}", "account": f"a{index}",
         "sha256": hashlib.sha256(token.encode()).hexdigest(), "created_at": 0.0}
        for index, token in enumerate(tokens)]}))
    with ServerProcess(data, "--log-level", "debug").start() as server:
        caller = Caller(server)
        for index, token in enumerate(tokens):
            assert caller.call("GetHead", pb.GetHeadRequest(vault_id=f"v{index}"),
                               _bearer(token))[0] == grpc.StatusCode.OK
        time.sleep(1.5)  # every bucket has refilled: an entry is as good as none
        assert caller.call("GetHead", pb.GetHeadRequest(vault_id="v0"),
                           _bearer(tokens[0]))[0] == grpc.StatusCode.OK
        caller.close()
        assert server.stop() == 0, server.log
    sweeps = [(int(dropped), int(kept)) for dropped, kept in re.findall(
        r"rate limiter: dropped (\d+) idle accounts?, (\d+) kept", server.log)]
    assert sweeps and max(dropped for dropped, _ in sweeps) >= 399, sweeps
    assert sweeps[-1][1] <= 1, sweeps


def test_the_limiter_table_is_bounded_by_the_accounts_of_one_second() -> None:
    """Unit: 100,000 distinct accounts, 1,000 a second; the table never holds
    more than about two seconds' worth, and an entry dropped was full again."""
    now = [0.0]
    limiter = RateLimiter(10.0, clock=lambda: now[0])
    most = 0
    for index in range(100_000):
        now[0] = index / 1000
        limiter.charge(f"account-{index}")
        most = max(most, len(limiter))
    assert most <= 2_001, most
    # Dropping an idle entry changes nothing: its bucket would be full.
    now[0] += 10
    for _ in range(10):
        limiter.charge("account-0")


# -- reads create nothing ----------------------------------------------------------

def test_a_read_creates_no_vault(tmp_path: Path) -> None:
    """Every read of a vault nobody has written to answers as for an empty
    vault and leaves nothing on disk, nor binds the id to the reader."""
    data = tmp_path / "data"
    data.mkdir()
    alice = _bearer(create_token(data, "alice"))
    bob = _bearer(create_token(data, "bob"))
    with ServerProcess(data).start() as server:
        caller = Caller(server)
        vault = "never-written"
        reads: list[tuple[str, object, grpc.StatusCode]] = [
            ("GetHead", pb.GetHeadRequest(vault_id=vault), grpc.StatusCode.OK),
            ("GetObject", pb.GetObjectRequest(vault_id=vault, name="keys/recovery"),
             grpc.StatusCode.NOT_FOUND),
            ("ListObjects", pb.ListObjectsRequest(vault_id=vault), grpc.StatusCode.OK),
            ("ListVersions", pb.ListVersionsRequest(vault_id=vault), grpc.StatusCode.OK),
            ("WatchHead", pb.WatchHeadRequest(vault_id=vault), grpc.StatusCode.OK)]
        for method, request, expected in reads:
            code, details, reply = caller.call(method, request, alice)
            assert code == expected, (method, code, details)
            if method in ("GetHead", "WatchHead"):
                assert reply.head == 0  # type: ignore[attr-defined]
        # Nor does a write that writes nothing: a version its chain cannot take,
        # an object over the size limit, a delete.
        append = pb.AppendVersionRequest(vault_id=vault, number=3, parent=bytes(32), data=b"v")
        code, details, reply = caller.call("AppendVersion", append, alice)
        assert code == grpc.StatusCode.OK and not reply.appended, (code, details)  # type: ignore[attr-defined]
        assert reply.head == 0  # type: ignore[attr-defined]
        big = pb.PutObjectRequest(vault_id=vault, name="big", data=b"b" * (16 * MiB + 1))
        assert caller.call("PutObject", big, alice)[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
        delete = pb.DeleteObjectRequest(vault_id=vault, name="keys/recovery")
        assert caller.call("DeleteObject", delete, alice)[0] == grpc.StatusCode.PERMISSION_DENIED
        assert not (data / "store" / vault).exists()
        assert sorted(p.name for p in (data / "store").iterdir()) == [".tmp"]
        # The read bound nothing: bob may still create the vault, and then
        # alice's reads are refused.
        put = pb.PutObjectRequest(vault_id=vault, name="keys/recovery", data=b"sealed")
        assert caller.call("PutObject", put, bob)[0] == grpc.StatusCode.OK
        assert (data / "store" / vault / "owner").read_bytes() == b"bob"
        code, details, _ = caller.call("GetHead", pb.GetHeadRequest(vault_id=vault), alice)
        assert code == grpc.StatusCode.PERMISSION_DENIED, (code, details)
        caller.close()
        assert server.stop() == 0, server.log


# -- quotas ------------------------------------------------------------------------

def test_quotas_of_objects_and_bytes_per_account(tmp_path: Path) -> None:
    """--quota-objects and --quota-bytes hold across an account's vaults and
    tokens, count versions as objects, name the quota when refusing, leave
    other accounts alone, and are counted again from the store at start."""
    data = tmp_path / "data"
    data.mkdir()
    laptop = _bearer(create_token(data, "laptop", account="alice"))
    desktop = _bearer(create_token(data, "desktop", account="alice"))
    bob = _bearer(create_token(data, "bob"))
    quotas = ("--quota-objects", "6", "--quota-bytes", "10000")
    with ServerProcess(data, *quotas).start() as server:
        caller = Caller(server)
        for index, (vault, who) in enumerate([("v1", laptop), ("v1", desktop),
                                              ("v2", laptop), ("v2", desktop)]):
            put = pb.PutObjectRequest(vault_id=vault, name=f"o{index}", data=b"x" * 1000)
            assert caller.call("PutObject", put, who)[0] == grpc.StatusCode.OK
        append = pb.AppendVersionRequest(vault_id="v1", number=1, data=b"v" * 1000)
        assert caller.call("AppendVersion", append, laptop)[0] == grpc.StatusCode.OK
        # 5 objects, 5,000 bytes: 5,001 more bytes is over the byte quota.
        put = pb.PutObjectRequest(vault_id="v3", name="big", data=b"x" * 5001)
        code, details, _ = caller.call("PutObject", put, laptop)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (code, details)
        assert "account alice" in details and "--quota-bytes" in details, details
        assert "10000" in details, details
        assert not (data / "store" / "v3").exists()  # nothing was created for it
        # The sixth object fits; the seventh is over the object quota.
        put = pb.PutObjectRequest(vault_id="v2", name="sixth", data=b"x")
        assert caller.call("PutObject", put, desktop)[0] == grpc.StatusCode.OK
        append = pb.AppendVersionRequest(vault_id="v1", number=2, parent=_sha(b"v" * 1000),
                                         data=b"v")
        code, details, _ = caller.call("AppendVersion", append, laptop)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (code, details)
        assert "account alice" in details and "--quota-objects" in details, details
        # A write that changes nothing (the name is taken) costs nothing.
        again = pb.PutObjectRequest(vault_id="v1", name="o0", data=b"x")
        code, details, reply = caller.call("PutObject", again, laptop)
        assert code == grpc.StatusCode.OK and not reply.written, (code, details)  # type: ignore[attr-defined]
        # bob is not alice.
        put = pb.PutObjectRequest(vault_id="b1", name="x", data=b"x" * 9000)
        assert caller.call("PutObject", put, bob)[0] == grpc.StatusCode.OK
        caller.close()
        assert server.stop() == 0, server.log
    with ServerProcess(data, *quotas).start() as server:
        caller = Caller(server)
        put = pb.PutObjectRequest(vault_id="v1", name="after-restart", data=b"x")
        code, details, _ = caller.call("PutObject", put, laptop)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "--quota-objects" in details, \
            (code, details)
        put = pb.PutObjectRequest(vault_id="b1", name="y", data=b"y" * 1001)
        code, details, _ = caller.call("PutObject", put, bob)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "--quota-bytes" in details, \
            (code, details)
        put = pb.PutObjectRequest(vault_id="b1", name="y", data=b"y" * 1000)
        assert caller.call("PutObject", put, bob)[0] == grpc.StatusCode.OK
        caller.close()
        assert server.stop() == 0, server.log
    assert "counted" in server.log  # the start-up count is logged with its figures


# -- deletes -----------------------------------------------------------------------

@pytest.fixture
def vault_with_keys(tmp_path: Path) -> Iterator[tuple[Caller, str, Path]]:
    data = tmp_path / "data"
    data.mkdir()
    device = _bearer(create_token(data, "laptop", account="alice"))
    with ServerProcess(data).start() as server:
        caller = Caller(server)
        for name in ("keys/recovery", "keys/description", "snapshots/00000000000000000200",
                     "snapshots/00000000000000000400", "states/00000000000000000400/ab",
                     "x"):
            put = pb.PutObjectRequest(vault_id="v", name=name, data=name.encode())
            assert caller.call("PutObject", put, device)[0] == grpc.StatusCode.OK
        yield caller, device, data
        caller.close()
        assert server.stop() == 0, server.log


def test_a_device_token_cannot_delete(
        vault_with_keys: tuple[Caller, str, Path]) -> None:
    caller, device, data = vault_with_keys
    before = {p.name: p.read_bytes() for p in (data / "store" / "v" / "objects").iterdir()}
    for name in ("keys/recovery", "keys/description", "snapshots/00000000000000000200",
                 "states/00000000000000000400/ab", "x", "never/was"):
        code, details, _ = caller.call("DeleteObject",
                                       pb.DeleteObjectRequest(vault_id="v", name=name), device)
        assert code == grpc.StatusCode.PERMISSION_DENIED, (name, code, details)
        assert "admin" in details, details
    after = {p.name: p.read_bytes() for p in (data / "store" / "v" / "objects").iterdir()}
    assert after == before
    got = caller.call("GetObject", pb.GetObjectRequest(vault_id="v", name="keys/recovery"),
                      device)
    assert got[0] == grpc.StatusCode.OK and got[2].data == b"keys/recovery"  # type: ignore[union-attr]


def test_an_admin_token_of_the_account_may_delete(
        vault_with_keys: tuple[Caller, str, Path]) -> None:
    caller, device, data = vault_with_keys
    admin = _bearer(create_token(data, "ops", account="alice", admin=True))
    other = _bearer(create_token(data, "mallory-admin", account="mallory", admin=True))
    listed = json.loads(subprocess.run(
        server_command("token", "list", "--json", "--data", str(data)),
        capture_output=True, text=True, timeout=60, check=True).stdout)
    assert {entry["name"]: entry["admin"] for entry in listed} == {
        "laptop": False, "ops": True, "mallory-admin": True}
    delete = pb.DeleteObjectRequest(vault_id="v", name="snapshots/00000000000000000200")
    assert caller.call("DeleteObject", delete, other)[0] == grpc.StatusCode.PERMISSION_DENIED
    assert caller.call("DeleteObject", delete, admin)[0] == grpc.StatusCode.OK
    code, _, _ = caller.call("GetObject", pb.GetObjectRequest(
        vault_id="v", name="snapshots/00000000000000000200"), device)
    assert code == grpc.StatusCode.NOT_FOUND
    assert (data / "store" / "v" / "objects" / "keys+recovery").exists()
