"""A peer holding the vault key publishes a snapshot no memvault device
writes: sealed and chunked as any, so it opens, but its body is not one
memvault parses (bytes that are no body, a text that is not UTF-8, a field
of the wrong kind, a payload that is no object, a NaN). A device joining
the vault passes over it, as it passes over a damaged one, and joins from
the chain; the join is not stopped.

Real parts: the daemons as users run them, a real memvault-server on a
loopback port and the real model. The peer is this test: it opens the
vault key with the recovery key and publishes the snapshot at the head,
its body an honest one altered by hand.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyarrow import ipc

from memvault import Client
from memvault_base.errors import IntegrityError
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.storage.snapshot_body import SnapshotBody, decode_published, encode_body
from memvaultd.sync import recovery, snapshots
from memvaultd.sync.envelope import Envelope
from memvaultd.sync.remotes import open_remote

from .daemon_process import DaemonProcess
from .server_process import ServerProcess, create_token

_HEAD = struct.Struct(">I")  # head_len:u32 BE, then the head's JSON, then its sections
_NEST = "the kestrels nest on the north tower"
_DEPLOY = "the deploy window is friday afternoon"

Change = Callable[[pa.RecordBatch], pa.RecordBatch]


def _honest_body(vector: list[float]) -> bytes:
    """A state of one memory at the head, as a device encodes it."""
    now = time.time()
    memory = Memory(id="f" * 32, text=_NEST + " XYZ", topic_key="birds", created_at=now,
                    last_reinforced_at=now)
    rows = np.asarray([vector], dtype=np.float16)
    return encode_body(SnapshotBody(seq=1, dimension=rows.shape[1],
                                    stamp=Stamp(int(now * 1000), 0, "peer"),
                                    memories=[memory], vectors=rows, tombstones=frozenset(),
                                    turns=[], turn_vectors=rows[:0]))


def _with_memories(body: bytes, change: Change) -> bytes:
    """`body` with its memories' section rewritten, each batch `change`d."""
    (size,) = _HEAD.unpack_from(body)
    head = json.loads(body[_HEAD.size : _HEAD.size + size])
    at, sections = _HEAD.size + size, []
    for length in head["sections"]:
        sections.append(body[at : at + length])
        at += length
    batches = [change(batch) for batch in ipc.open_stream(sections[0])]
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    sections[0] = sink.getvalue().to_pybytes()
    head["sections"] = [len(section) for section in sections]
    encoded = json.dumps(head).encode()
    return _HEAD.pack(len(encoded)) + encoded + b"".join(sections)


def _column(name: str, make: Callable[[pa.Array], pa.Array]) -> Change:
    def change(batch: pa.RecordBatch) -> pa.RecordBatch:
        at = batch.schema.get_field_index(name)
        return batch.set_column(at, name, make(batch.column(at)))
    return change


def _lone_surrogate(texts: pa.Array) -> pa.Array:
    """The text's last three bytes as U+D800's in WTF-8 (ED A0 80): a
    string column's bytes as they are, Arrow's UTF-8 check not run."""
    data = bytearray(texts.buffers()[2].to_pybytes())
    assert data.endswith(b"XYZ")
    data[-3:] = b"\xed\xa0\x80"
    return pa.Array.from_buffers(pa.string(), len(texts),
                                 [None, texts.buffers()[1], pa.py_buffer(bytes(data))])


FORGERIES: dict[str, Callable[[bytes], bytes]] = {
    "no body": lambda body: b"\x00\x00\x00\x02{}" + b"not a snapshot body",
    "a text that is not UTF-8": lambda body: _with_memories(
        body, _column("text", _lone_surrogate)),
    "a text that is a number": lambda body: _with_memories(
        body, _column("text", lambda texts: pa.array([5] * len(texts), pa.int64()))),
    "a payload that is no object": lambda body: _with_memories(
        body, _column("payload", lambda payloads: pa.array(["[1]"] * len(payloads)))),
    "an importance that is no number": lambda body: _with_memories(
        body, _column("importance", lambda values: pa.array([math.nan] * len(values)))),
}


def _publish_at_head(url: str, token: str, recovery_key: str, body: bytes) -> int:
    """What the peer does: `body` sealed as the snapshot at the head."""
    vault_id, secret = recovery.parse_recovery_key(recovery_key)
    remote = open_remote(url, token=token, vault_id=vault_id.hex())
    try:
        envelope = Envelope(recovery.unwrap(remote.get_object(recovery.OBJECT), secret,
                                            vault_id), vault_id)
        head = remote.head()
        digest = hashlib.sha256(remote.versions_after(head - 1, limit=1)[0][1]).digest()
        snapshots.publish(remote, envelope, head, digest, body)
        return head
    finally:
        remote.close()


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_a_joiner_passes_over_a_snapshot_that_opens_but_does_not_parse(
        tmp_path: Path, server: ServerProcess, forgery: str) -> None:
    url = f"grpc://{server.target}"
    tokens = {name: create_token(server.data_dir, name, account="owner")
              for name in ("laptop", "peer", "desk")}
    with DaemonProcess(tmp_path / "a").start() as a, DaemonProcess(tmp_path / "b").start() as b:
        ca, cb = Client(socket=a.socket, timeout=120), Client(socket=b.socket, timeout=120)
        nest = ca.remember(_NEST, topic="birds").id
        deploy = ca.remember(_DEPLOY, topic="ops").id
        recovery_key = ca.init_sync(url, token=tokens["laptop"]).recovery_key
        ca.sync_now()

        honest = _honest_body(list(ca.get(nest, include_vector=True).vector))
        assert len(decode_published(honest).memories) == 1  # the forgery's start parses
        forged = FORGERIES[forgery](honest)
        with pytest.raises(IntegrityError, match="snapshot body does not parse"):
            decode_published(forged)
        head = _publish_at_head(url, tokens["peer"], recovery_key, forged)

        cb.join_sync(url, recovery_key, token=tokens["desk"])
        assert f"snapshot at version {head} passed over" in b.log
        assert cb.get(nest).text == _NEST and cb.get(deploy).text == _DEPLOY
        assert cb.status().memory_count == 2
        assert nest in [hit.memory.id for hit in cb.recall("where do the kestrels nest")]
        status = cb.sync_status()
        assert status.state == "idle" and status.head == head, status
        a.stop()
        b.stop()
