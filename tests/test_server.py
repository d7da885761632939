"""memvault-server as deployed: tokens, accounts, limits, TLS, restarts, replicas.

Every test runs the real server in a subprocess on an ephemeral loopback
port (`server_process.py`); the replica test runs two of them over one Ceph
RGW bucket. What every remote must do is in test_remote_contract.py.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import json
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import-untyped]

from memvault_base.errors import InvalidArgument, MemvaultError, ResourceExhausted, Unavailable
from memvault_base.v1 import sync_pb2, sync_pb2_grpc
from memvaultd.sync.remotes import Remote, open_remote

from .ceph import CephRGW
from .server_process import ServerProcess, create_token, server_command
from .test_remote_contract import watch_in_thread


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def server(data: Path) -> Iterator[ServerProcess]:
    with ServerProcess(data).start() as proc:
        yield proc


def _stub(target: str) -> tuple[grpc.Channel, sync_pb2_grpc.SyncStub]:
    channel = grpc.insecure_channel(target)
    return channel, sync_pb2_grpc.SyncStub(channel)  # type: ignore[no-untyped-call]


def _code(call: object) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as caught:
        call() if callable(call) else None
    code: grpc.StatusCode = caught.value.code()
    return code


def test_tokens_are_stored_hashed(data: Path) -> None:
    token = create_token(data, "laptop")
    assert token.startswith("mvs_") and len(token) == 4 + 43  # 256 bits, base64url
    stored = (data / "tokens.json").read_text()
    assert token not in stored and token[4:] not in stored
    doc = json.loads(stored)
    assert doc["tokens"][0]["sha256"] == hashlib.sha256(token.encode()).hexdigest()
    assert doc["tokens"][0]["account"] == "laptop"
    assert (data / "tokens.json").stat().st_mode & 0o777 == 0o600
    listed = subprocess.run(server_command("token", "list", "--json", "--data", str(data)),
                            capture_output=True, text=True, check=True).stdout
    assert json.loads(listed)[0]["name"] == "laptop" and token not in listed
    again = subprocess.run(server_command("token", "create", "laptop", "--data", str(data)),
                           capture_output=True, text=True)
    assert again.returncode == 1 and "exists" in again.stderr


def test_missing_wrong_and_revoked_tokens_are_unauthenticated(
        data: Path, server: ServerProcess) -> None:
    token = create_token(data, "laptop")
    channel, stub = _stub(server.target)
    request = sync_pb2.GetHeadRequest(vault_id="v1")
    with channel:
        assert _code(lambda: stub.GetHead(request, timeout=5)) == \
            grpc.StatusCode.UNAUTHENTICATED
        for bad in ("Bearer mvs_wrong", "Bearer ", "Basic " + token, token, "Bearer " + token[:-1]):
            assert _code(lambda bad=bad: stub.GetHead(
                request, timeout=5, metadata=(("authorization", bad),))) == \
                grpc.StatusCode.UNAUTHENTICATED, bad
        good = (("authorization", f"Bearer {token}"),)
        assert stub.GetHead(request, timeout=5, metadata=good).head == 0
        subprocess.run(server_command("token", "revoke", "laptop", "--data", str(data)),
                       check=True)
        assert _code(lambda: stub.GetHead(request, timeout=5, metadata=good)) == \
            grpc.StatusCode.UNAUTHENTICATED  # the running server re-reads tokens.json
        watch = stub.WatchHead(sync_pb2.WatchHeadRequest(vault_id="v1"), timeout=5)
        assert _code(lambda: next(iter(watch))) == grpc.StatusCode.UNAUTHENTICATED


def test_accounts_only_reach_their_own_vaults(data: Path, server: ServerProcess) -> None:
    alice = create_token(data, "alice-laptop", account="alice")
    alice2 = create_token(data, "alice-desktop", account="alice")
    bob = create_token(data, "bob")
    url = f"grpc://{server.target}"
    vault = uuid.uuid4().hex
    mine = open_remote(url, token=alice, vault_id=vault)
    assert mine.put_object("secret", b"sealed bytes")
    assert mine.append_version(1, b"", b"v1")
    same_account = open_remote(url, token=alice2, vault_id=vault)
    assert same_account.get_object("secret") == b"sealed bytes"
    theirs = open_remote(url, token=bob, vault_id=vault)
    calls: list[Callable[[], object]] = [
        lambda: theirs.get_object("secret"), lambda: theirs.put_object("x", b"x"),
        theirs.list_objects, lambda: theirs.delete_object("secret"), theirs.head,
        lambda: theirs.append_version(2, _sha(b"v1"), b"evil"),
        lambda: theirs.versions_after(0), lambda: theirs.watch_head(0, 2)]
    for call in calls:
        with pytest.raises(MemvaultError, match="another account"):
            call()
    assert mine.get_object("secret") == b"sealed bytes" and mine.head() == 1
    # bob's own vault is his.
    own = open_remote(url, token=bob, vault_id=uuid.uuid4().hex)
    assert own.put_object("secret", b"bob's")
    for remote in (mine, same_account, theirs, own):
        remote.close()


def test_parent_must_match_the_stored_version(data: Path, server: ServerProcess) -> None:
    remote = open_remote(f"grpc://{server.target}", token=create_token(data, "t"),
                         vault_id="v1")
    assert remote.append_version(1, b"", b"one")
    with pytest.raises(InvalidArgument, match="parent does not match"):
        remote.append_version(2, _sha(b"not one"), b"two")
    assert remote.head() == 1
    assert remote.append_version(2, _sha(b"one"), b"two")
    remote.close()


def test_object_size_limit(data: Path) -> None:
    token = create_token(data, "t")
    with ServerProcess(data, "--max-object-bytes", "1000").start() as server:
        remote = open_remote(f"grpc://{server.target}", token=token, vault_id="v1")
        assert remote.put_object("fits", b"x" * 1000)
        too_big: list[Callable[[], object]] = [
            lambda: remote.put_object("too-big", b"x" * 1001),
            lambda: remote.append_version(1, b"", b"x" * 1001)]
        for call in too_big:
            with pytest.raises(ResourceExhausted, match="limit of 1000 bytes"):
                call()
        # Far over: gRPC refuses the message before it is read into memory.
        with pytest.raises(ResourceExhausted, match="larger than max"):
            remote.put_object("far-too-big", b"x" * 4_000_000)
        assert remote.list_objects() == ["fits"]
        assert remote.append_version(1, b"", b"x" * 1000)
        remote.close()


def test_request_flood_is_limited_and_the_server_stays_up(data: Path) -> None:
    token = create_token(data, "t")
    with ServerProcess(data, "--rate", "50").start() as server:
        url = f"grpc://{server.target}"
        outcomes: list[str] = []

        def flood() -> None:
            remote = open_remote(url, token=token, vault_id="v1")
            for _ in range(100):
                try:
                    remote.head()
                    outcomes.append("ok")
                except ResourceExhausted as exc:
                    assert "50 calls/s" in str(exc)
                    outcomes.append("limited")
            remote.close()

        threads = [threading.Thread(target=flood) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert outcomes.count("limited") > 500, outcomes.count("ok")
        time.sleep(1.1)  # one second refills the bucket
        remote = open_remote(url, token=token, vault_id="v1")
        assert remote.put_object("still-here", b"yes")
        assert remote.get_object("still-here") == b"yes"
        remote.close()
        with grpc.insecure_channel(server.target) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="memvault.v1.Sync"), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, made here: the server holds no
    crypto code of its own."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "memvault-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_tls(data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = _self_signed(tmp_path)
    token = create_token(data, "t")
    with ServerProcess(data, "--tls-cert", str(cert), "--tls-key", str(key)).start() as server:
        assert "TLS" in server.log
        monkeypatch.setenv("MEMVAULT_TLS_CA", str(cert))
        remote = open_remote(f"grpcs://{server.target}", token=token, vault_id="v1")
        assert remote.put_object("over-tls", b"sealed")
        assert remote.get_object("over-tls") == b"sealed"
        remote.close()
        plain = open_remote(f"grpc://{server.target}", token=token, vault_id="v1")
        with pytest.raises(Unavailable):
            plain.head()
        plain.close()
        monkeypatch.delenv("MEMVAULT_TLS_CA")  # system roots do not know this certificate
        untrusted = open_remote(f"grpcs://{server.target}", token=token, vault_id="v1")
        with pytest.raises(Unavailable):
            untrusted.head()
        untrusted.close()


@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
def test_restart_keeps_objects_and_chain(data: Path, stop: str) -> None:
    token = create_token(data, "t")
    versions = [f"version {n}".encode() for n in range(1, 4)]
    with ServerProcess(data).start() as server:
        remote = open_remote(f"grpc://{server.target}", token=token, vault_id="v1")
        assert remote.put_object("keys/recovery", b"wrapped key")
        parent = b""
        for number, body in enumerate(versions, 1):
            assert remote.append_version(number, parent, body)
            parent = _sha(body)
        remote.close()
        if stop == "sigkill":
            server.kill()  # acknowledged writes were fsynced
    with ServerProcess(data).start() as server:
        remote = open_remote(f"grpc://{server.target}", token=token, vault_id="v1")
        assert remote.get_object("keys/recovery") == b"wrapped key"
        assert remote.head() == 3
        assert remote.versions_after(0) == list(enumerate(versions, 1))
        assert remote.append_version(3, _sha(versions[1]), b"late") is False
        with pytest.raises(InvalidArgument):
            remote.append_version(4, _sha(b"wrong"), b"four")
        assert remote.append_version(4, _sha(versions[2]), b"four")
        other = open_remote(f"grpc://{server.target}", token=create_token(data, "o"),
                            vault_id="v1")
        with pytest.raises(MemvaultError, match="another account"):
            other.head()  # the binding survived too
        other.close()
        remote.close()
    assert not list((data / "store" / ".tmp").iterdir())


def test_cli_basics(data: Path, tmp_path: Path) -> None:
    version = subprocess.run(server_command("--version"), capture_output=True, text=True)
    assert version.returncode == 0 and "memvault-server" in version.stdout
    missing = subprocess.run(server_command("token", "revoke", "nobody", "--data", str(data)),
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "nobody" in missing.stderr
    half_tls = subprocess.run(server_command("serve", "--data", str(data), "--listen",
                                             "127.0.0.1:0", "--tls-cert", __file__),
                              capture_output=True, text=True, timeout=30)
    assert half_tls.returncode == 2 and "go together" in half_tls.stderr
    with ServerProcess(data).start() as first:
        taken = subprocess.run(server_command("serve", "--data", str(tmp_path / "d2"),
                                              "--listen", first.target),
                               capture_output=True, text=True, timeout=30)
        assert taken.returncode == 2 and "cannot start" in taken.stderr


def test_replicas_over_one_bucket(rgw: CephRGW, tmp_path: Path) -> None:
    """Two servers share one RGW bucket: racing appends through both have one
    winner per number, a watcher on one hears of the other's appends, and a
    vault bound through one is bound on both."""
    bucket = f"replicas-{uuid.uuid4().hex[:8]}"
    rgw.create_bucket(bucket)
    store = f"s3://{bucket}/servers"
    data_a, data_b = tmp_path / "a", tmp_path / "b"
    data_a.mkdir()
    alice = create_token(data_a, "alice")
    bob = create_token(data_a, "bob")
    data_b.mkdir()
    shutil.copy(data_a / "tokens.json", data_b / "tokens.json")  # replicas share tokens
    env = rgw.env()
    with ServerProcess(data_a, "--store", store, env=env).start() as a, \
            ServerProcess(data_b, "--store", store, env=env).start() as b:
        vault = uuid.uuid4().hex
        clients = [open_remote(f"grpc://{server.target}", token=alice, vault_id=vault)
                   for server in (a, b) for _ in range(4)]
        parent = b""
        for number in range(1, 11):
            barrier = threading.Barrier(len(clients))
            wins: list[bytes] = []

            def race(client: Remote, body: bytes, number: int = number, parent: bytes = parent,
                     barrier: threading.Barrier = barrier, wins: list[bytes] = wins) -> None:
                barrier.wait()
                if client.append_version(number, parent, body):
                    wins.append(body)

            threads = [threading.Thread(target=race, args=(c, f"{number}:{i}".encode()))
                       for i, c in enumerate(clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert len(wins) == 1, f"version {number}: {len(wins)} winners"
            assert clients[0].versions_after(number - 1, limit=1) == [(number, wins[0])]
            assert clients[-1].versions_after(number - 1, limit=1) == [(number, wins[0])]
            parent = _sha(wins[0])

        watcher, writer = clients[0], clients[-1]  # on a and on b
        latencies = []
        for number in (11, 12, 13):
            thread, woke = watch_in_thread(watcher, number - 1, 10)
            time.sleep(0.3 + 0.3 * (number - 11))
            assert writer.append_version(number, parent, f"v{number}".encode())
            appended = time.monotonic()
            parent = _sha(f"v{number}".encode())
            thread.join(15)
            assert woke and woke[0][0] == number
            latencies.append(woke[0][1] - appended)
        print("\nwatch across replicas (S3 store, 1 s poll): "
              + ", ".join(f"{s * 1000:.0f} ms" for s in latencies))
        assert max(latencies) < 2.5

        intruder = open_remote(f"grpc://{b.target}", token=bob, vault_id=vault)
        with pytest.raises(MemvaultError, match="another account"):
            intruder.head()
        intruder.close()
        for client in clients:
            client.close()
