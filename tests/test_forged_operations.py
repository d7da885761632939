"""A peer holding the vault key pushes an operation no memvault device
writes: its JSON carries an escaped lone surrogate ("\\ud800"), a string
no honest device writes (`operations.encode` is strict UTF-8) and no reply
can carry (protobuf refuses to serialise it), or a field of the wrong kind
(`"text": 5`), which once applied failed every start after. The device
that pulls it refuses the record as it refuses any that authenticates but
does not parse, and goes on serving, and starting.

Real parts: the daemon as users run it, a real memvault-server on a
loopback port, the real model, and the CLI's `sync status`. The peer is
this test: it opens the vault key with the recovery key, registers a device
of its own and pushes the next version, signed, its record built by hand.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import struct
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memvault import Client
from memvault_base.errors import MemvaultError
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.operations import PUT, Operation, encode
from memvaultd.sync import recovery
from memvaultd.sync.envelope import Envelope
from memvaultd.sync.remotes import open_remote
from memvaultd.sync.version_body import pack_ops

from .daemon_process import DaemonProcess
from .server_process import ServerProcess, create_token
from .signed_chain import registered, signed_version
from .test_cli import memvault


def _version_body(record: bytes) -> bytes:
    """version body := count:u32 | (len:u32 | operation record)*, as
    `pack_ops` packs it."""
    return struct.pack(">I", 1) + struct.pack(">I", len(record)) + record


def _with_field(name: str, value: Any) -> Callable[[Operation], bytes]:
    """A forgery: `op`'s record with the memory's field `name` set to `value`
    (json_len:u32 BE | json | vector f32 LE). `json.dumps` escapes a lone
    surrogate as the six ASCII bytes `\\ud800`."""
    def forge(op: Operation) -> bytes:
        record = encode(op)
        (size,) = struct.unpack_from(">I", record)
        doc = json.loads(record[4 : 4 + size])
        doc["memory"][name] = value
        body = json.dumps(doc, separators=(",", ":")).encode()
        return struct.pack(">I", len(body)) + body + record[4 + size :]
    return forge


_KESTRELS = "the kestrels nest on the north tower"
_WITH_LONE_SURROGATE = _with_field("text", _KESTRELS + " \ud800")


def _push_forged_put(url: str, token: str, recovery_key: str, vector: Sequence[float],
                     forge: Callable[[Operation], bytes] = _WITH_LONE_SURROGATE) -> str:
    """What the peer does: the next version, holding one put `forge` made
    of an honest one, signed by a device it registered. Returns the forged
    memory's id."""
    vault_id, secret = recovery.parse_recovery_key(recovery_key)
    remote = open_remote(url, token=token, vault_id=vault_id.hex())
    try:
        envelope = Envelope(recovery.unwrap(remote.get_object(recovery.OBJECT), secret,
                                            vault_id), vault_id)
        device = registered(remote, envelope, "peer")
        now = time.time()
        memory = Memory(id=secrets.token_hex(16), text=_KESTRELS, topic_key="birds",
                        tags=("field",), created_at=now, last_reinforced_at=now)
        op = Operation(secrets.token_hex(16), PUT, Stamp(int(now * 1000), 0, device.device),
                       memory=memory, vector=np.asarray(vector, dtype=np.float32))
        honest = pack_ops([op])
        assert _version_body(encode(op)) == honest  # the layout pack_ops writes
        body = _version_body(forge(op))
        head = remote.head()
        parent = hashlib.sha256(remote.versions_after(head - 1, limit=1)[0][1]).digest()
        assert remote.append_version(head + 1, parent,
                                     signed_version(device, head + 1, parent, body))
        return memory.id
    finally:
        remote.close()


def test_a_put_with_a_lone_surrogate_is_refused_and_the_rest_is_served(
        tmp_path: Path, server: ServerProcess) -> None:
    url = f"grpc://{server.target}"
    tokens = {name: create_token(server.data_dir, name, account="owner")
              for name in ("laptop", "peer")}
    with DaemonProcess(tmp_path / "a").start() as a:
        ca = Client(socket=a.socket, timeout=120)
        nest = ca.remember("the kestrels nest on the north tower", topic="birds").id
        other = ca.remember("the deploy window is friday afternoon", topic="ops").id
        recovery_key = ca.init_sync(url, token=tokens["laptop"]).recovery_key
        ca.sync_now()
        head = ca.sync_status().head
        held = sorted((m.to_dict() for m in ca.export()), key=lambda m: m["id"])

        forged = _push_forged_put(url, tokens["peer"], recovery_key,
                                  ca.get(nest, include_vector=True).vector)
        with pytest.raises(MemvaultError, match="lone surrogate"):
            ca.sync_now()

        # What the user sees: sync stopped, naming the record and what is wrong.
        shown = memvault(a.home, "sync", "status", "--json")
        assert shown.returncode == 0, shown.stderr
        status = json.loads(shown.stdout)
        assert status["state"] == "stopped", status
        assert "operation record" in status["last_error"], status
        assert "lone surrogate" in status["last_error"], status
        assert status["head"] == head and status["bad_version"] == head + 1, status

        # Nothing of it got in, nothing else changed, and every call answers.
        with pytest.raises(MemvaultError, match="no memory"):
            ca.get(forged)
        assert sorted((m.to_dict() for m in ca.export()), key=lambda m: m["id"]) == held
        hits = [hit.memory.id for hit in ca.recall("where do the kestrels nest")]
        assert nest in hits and forged not in hits, hits
        assert ca.get(other).text == "the deploy window is friday afternoon"
        later = ca.remember("written after the refused version", topic="late").id
        assert ca.get(later).topic_key == "late"
        a.stop()


@pytest.mark.parametrize(("name", "value"), [("text", 5), ("topic_key", None),
                                             ("tags", "field"), ("payload", [1])])
def test_a_put_with_a_field_of_the_wrong_kind_is_refused_and_the_vault_starts(
        tmp_path: Path, server: ServerProcess, name: str, value: Any) -> None:
    url = f"grpc://{server.target}"
    tokens = {who: create_token(server.data_dir, who, account="owner")
              for who in ("laptop", "peer")}
    a = DaemonProcess(tmp_path / "a")
    with a.start():
        ca = Client(socket=a.socket, timeout=120)
        nest = ca.remember("the kestrels nest on the north tower", topic="birds").id
        recovery_key = ca.init_sync(url, token=tokens["laptop"]).recovery_key
        ca.sync_now()
        forged = _push_forged_put(url, tokens["peer"], recovery_key,
                                  ca.get(nest, include_vector=True).vector,
                                  _with_field(name, value))
        with pytest.raises(MemvaultError, match=f"the field '{name}'"):
            ca.sync_now()
        status = ca.sync_status()
        assert status.state == "stopped" and name in status.last_error, status
        a.stop()
    # Nothing of it was logged: the vault starts, and serves what it held.
    with a.start():
        ca = Client(socket=a.socket, timeout=120)
        assert ca.get(nest).text == "the kestrels nest on the north tower"
        with pytest.raises(MemvaultError, match="no memory"):
            ca.get(forged)
        assert nest in [hit.memory.id for hit in ca.recall("where do the kestrels nest")]
        a.stop()
