"""memvault-server's device tokens: binding a token to a device, and one
device's signed request to revoke another's token
(docs/decisions/0013-key-epochs.md, "The revoked device's server token")."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from memvault_base.device_revocation import WINDOW_MS, request_bytes
from memvault_base.errors import InvalidArgument, NotFound, PermissionDenied
from memvault_base.v1 import sync_pb2
from memvault_server.access import Caller
from memvault_server.revocation import Revocations
from memvault_server.tokens import TokenBook

from .server_process import ServerProcess, create_token, server_command
from .test_server import _code, _stub

LAPTOP, DESKTOP = "a" * 32, "b" * 32


def _key() -> tuple[Ed25519PrivateKey, bytes]:
    key = Ed25519PrivateKey.generate()
    return key, key.public_key().public_bytes_raw()


def test_first_bind_wins(tmp_path: Path) -> None:
    book = TokenBook(tmp_path)
    for name in ("laptop", "desktop"):
        book.create(name, account="owner")
    book.create("other", account="someone-else")
    revocations = Revocations(book)
    _, public = _key()
    _, another = _key()
    laptop = Caller("owner", "laptop", False)
    revocations.bind(laptop, LAPTOP, public)
    revocations.bind(laptop, LAPTOP, public)  # the same again: nothing changes
    for device, key in ((DESKTOP, public), (LAPTOP, another)):
        with pytest.raises(PermissionDenied):
            revocations.bind(laptop, device, key)
    with pytest.raises(PermissionDenied, match="another token"):
        revocations.bind(Caller("owner", "desktop", False), LAPTOP, another)
    revocations.bind(Caller("someone-else", "other", False), LAPTOP, another)  # another account
    for device, key in (("", public), ("../x", public), (DESKTOP, public[:31])):
        with pytest.raises(InvalidArgument):
            revocations.bind(Caller("owner", "desktop", False), device, key)
    assert TokenBook(tmp_path).entry_named("laptop").device_key == public.hex()  # type: ignore[union-attr]
    assert book.bound_to("owner", LAPTOP).name == "laptop"  # type: ignore[union-attr]


def test_only_a_signed_fresh_request_of_another_bound_device_revokes(tmp_path: Path) -> None:
    book = TokenBook(tmp_path)
    for name in ("laptop", "desktop", "spare"):
        book.create(name, account="owner")
    revocations = Revocations(book)
    laptop_key, laptop_public = _key()
    stolen_key, desktop_public = _key()
    laptop, desktop = Caller("owner", "laptop", False), Caller("owner", "desktop", False)
    revocations.bind(laptop, LAPTOP, laptop_public)
    revocations.bind(desktop, DESKTOP, desktop_public)
    now = int(time.time() * 1000)

    def signed(key: Ed25519PrivateKey, signer: str, target: str, at: int = now) -> bytes:
        return key.sign(request_bytes(signer, target, at))

    refused = [
        (Caller("owner", "spare", False), signed(laptop_key, LAPTOP, DESKTOP), now),  # unbound
        (laptop, b"", now),
        (laptop, b"\x00" * 64, now),
        (laptop, signed(stolen_key, LAPTOP, DESKTOP), now),  # not the bound key
        (laptop, signed(laptop_key, LAPTOP, LAPTOP), now),  # another target
        (laptop, signed(laptop_key, LAPTOP, DESKTOP, now - WINDOW_MS - 1), now - WINDOW_MS - 1),
        (desktop, signed(laptop_key, LAPTOP, DESKTOP), now),  # the laptop's, on another token
    ]
    for caller, signature, at in refused:
        with pytest.raises(PermissionDenied):
            revocations.revoke(caller, DESKTOP, at, signature)
    with pytest.raises(PermissionDenied, match="itself"):
        revocations.revoke(laptop, LAPTOP, now, signed(laptop_key, LAPTOP, LAPTOP))
    assert {e.name for e in book.entries()} == {"laptop", "desktop", "spare"}

    request = signed(laptop_key, LAPTOP, DESKTOP)
    assert revocations.revoke(laptop, DESKTOP, now, request) == "desktop"
    assert {e.name for e in TokenBook(tmp_path).entries()} == {"laptop", "spare"}
    with pytest.raises(PermissionDenied, match="replay"):
        revocations.revoke(laptop, DESKTOP, now, request)
    # The same request on a server that restarted: nothing left to revoke.
    with pytest.raises(NotFound):
        Revocations(TokenBook(tmp_path)).revoke(laptop, DESKTOP, now, request)


def test_revoke_device_through_the_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    tokens = {name: create_token(data, name, account="owner")
              for name in ("laptop", "desktop", "mallory")}
    laptop_key, laptop_public = _key()
    _, desktop_public = _key()
    with ServerProcess(data).start() as server:
        channel, stub = _stub(server.target)

        def auth(name: str) -> tuple[tuple[str, str]]:
            return (("authorization", f"Bearer {tokens[name]}"),)

        with channel:
            for name, device, public in (("laptop", LAPTOP, laptop_public),
                                         ("desktop", DESKTOP, desktop_public)):
                stub.BindDevice(sync_pb2.BindDeviceRequest(device_id=device, public_key=public),
                                metadata=auth(name), timeout=5)
            assert _code(lambda: stub.BindDevice(sync_pb2.BindDeviceRequest(
                device_id=DESKTOP, public_key=desktop_public), metadata=auth("laptop"),
                timeout=5)) == grpc.StatusCode.PERMISSION_DENIED
            listed = subprocess.run(server_command("token", "list", "--json", "--data", str(data)),
                                    check=True, capture_output=True, text=True).stdout
            assert {e["name"]: e["device"] for e in json.loads(listed)} == {
                "laptop": LAPTOP, "desktop": DESKTOP, "mallory": ""}

            now = int(time.time() * 1000)
            # The holder of the desktop's token, or of an unbound one, without
            # a bound device's private key, revokes nobody.
            for name in ("desktop", "mallory"):
                assert _code(lambda name=name: stub.RevokeDevice(sync_pb2.RevokeDeviceRequest(
                    device_id=LAPTOP, issued_at=now, signature=b"\x01" * 64),
                    metadata=auth(name), timeout=5)) == grpc.StatusCode.PERMISSION_DENIED
            head = sync_pb2.GetHeadRequest(vault_id="v1")
            assert stub.GetHead(head, metadata=auth("laptop"), timeout=5).head == 0

            request = sync_pb2.RevokeDeviceRequest(
                device_id=DESKTOP, issued_at=now,
                signature=laptop_key.sign(request_bytes(LAPTOP, DESKTOP, now)))
            reply = stub.RevokeDevice(request, metadata=auth("laptop"), timeout=5)
            assert reply.token_name == "desktop"
            assert _code(lambda: stub.GetHead(head, metadata=auth("desktop"), timeout=5)) == \
                grpc.StatusCode.UNAUTHENTICATED
            assert _code(lambda: stub.RevokeDevice(request, metadata=auth("laptop"),
                                                   timeout=5)) == \
                grpc.StatusCode.PERMISSION_DENIED  # a replay
            assert stub.GetHead(head, metadata=auth("laptop"), timeout=5).head == 0
