"""What survives: restarts, kill -9, and what an onlooker of the disk sees."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import keyring
import numpy as np
import pytest

from memvault import Client, NotFound
from memvaultd.config.settings import Config
from memvaultd.embedding.embedder import Embedder
from memvaultd.model.commands import MemoryDraft
from memvaultd.vault import snapshots as vault_snapshots
from memvaultd.vault.events import EventBus
from memvaultd.vault.snapshots import DELTA_FROM
from memvaultd.vault.vault import Vault

from .daemon_process import PASSPHRASE, DaemonProcess


def test_kill_9_keeps_every_acknowledged_memory(home: Path) -> None:
    with DaemonProcess(home).start() as proc:
        with Client(socket=proc.socket) as client:
            ids = [
                client.remember(f"acknowledged fact number {i}", topic=f"t{i}").id
                for i in range(20)
            ]
            ids += [
                r.id
                for r in client.remember_batch(
                    [{"text": f"batched fact {i}", "topic": f"b{i}"} for i in range(30)]
                )
            ]
            forgotten = ids.pop()
            client.forget(forgotten)
        proc.kill()  # no clean shutdown, no snapshot
    with DaemonProcess(home).start() as proc, Client(socket=proc.socket) as client:
        for i, memory_id in enumerate(ids[:20]):
            assert client.get(memory_id).text == f"acknowledged fact number {i}"
        assert client.status().memory_count == 49
        hits = client.recall("batched fact 7", top_k=1, filter={"topic_key": "b7"})
        assert hits[0].memory.text == "batched fact 7"
        assert forgotten not in {h.memory.id for h in client.recall("batched fact", top_k=50)}
        proc.stop()


def test_restart_from_a_snapshot_then_the_log(home: Path) -> None:
    with DaemonProcess(home).start() as proc:
        with Client(socket=proc.socket) as client:
            before = client.remember("written before the snapshot", topic="a").id
        assert proc.stop() == 0  # clean stop writes a snapshot
    snapshots = list((home / "data" / "snapshots").glob("*.snap"))
    assert snapshots, "a clean stop leaves a snapshot"
    with DaemonProcess(home).start() as proc:
        with Client(socket=proc.socket) as client:
            after = client.remember("written after the snapshot", topic="b").id
        proc.kill()
    with DaemonProcess(home).start() as proc, Client(socket=proc.socket) as client:
        assert client.get(before).text == "written before the snapshot"
        assert client.get(after).text == "written after the snapshot"
        proc.stop()


CANARIES = {
    "text": "zebracanary-text-51f3",
    "topic": "zebracanary.topic.8a2e",
    "tag": "zebracanary-tag-c07d",
    "payload": "zebracanary-payload-93b1",
    "category": "zebracanary-category-11aa",
    "query": "zebracanary-query-6d4c",
    "filter": "zebracanary-filter-e2f9",
}


def _encodings(secret: str) -> list[bytes]:
    raw = secret.encode()
    return [raw, raw.hex().encode(), base64.b64encode(raw), secret.encode("utf-16-le")]


def test_no_plaintext_under_the_data_directory_or_in_the_log(home: Path) -> None:
    with DaemonProcess(home).start() as proc:
        with Client(socket=proc.socket) as client:
            client.remember(
                f"the secret is {CANARIES['text']}",
                topic=CANARIES["topic"],
                tags=[CANARIES["tag"]],
                category=CANARIES["category"],
                payload={"k": CANARIES["payload"]},
            )
            client.remember_batch([{"text": f"{CANARIES['text']} batch {i}"} for i in range(3)])
            client.recall(CANARIES["query"], filter={"category": CANARIES["filter"]})
            client.recall("anything", filter={"tags": {"contains": CANARIES["filter"]}})
        proc.kill()
    with DaemonProcess(home).start() as proc:
        assert proc.stop() == 0  # replay, then a clean stop that writes a snapshot
    files = [p for p in home.rglob("*") if p.is_file()] + [proc.log_path]
    assert any(p.suffix == ".snap" for p in files) and any(p.suffix == ".log" for p in files)
    for path in files:
        blob = path.read_bytes()
        for name, secret in CANARIES.items():
            for encoded in _encodings(secret):
                assert encoded not in blob, f"{name} readable in {path}"


def test_wrong_passphrase_refuses_to_start_and_writes_nothing(home: Path) -> None:
    with DaemonProcess(home).start() as proc:
        with Client(socket=proc.socket) as client:
            client.remember("guarded by the passphrase")
        proc.stop()
    listing = sorted((p, p.stat().st_size) for p in home.rglob("*") if p.is_file())
    proc = DaemonProcess(home, MEMVAULT_PASSPHRASE="not the passphrase").start(wait=False)
    assert proc.proc is not None and proc.proc.wait(60) == 2
    assert "passphrase" in proc.log
    assert "Traceback" not in proc.log
    assert sorted((p, p.stat().st_size) for p in home.rglob("*") if p.is_file()) == listing


def _secret_service_available() -> bool:
    return "SecretService" in type(keyring.get_keyring()).__module__


@pytest.mark.skipif(
    not _secret_service_available() and os.environ.get("MEMVAULT_REQUIRE_KEYRING") != "1",
    reason="no Secret Service on this machine (./scripts/test provides gnome-keyring)",
)
def test_key_in_the_os_keyring(home: Path) -> None:
    assert _secret_service_available(), "MEMVAULT_REQUIRE_KEYRING=1 but no Secret Service"
    env = {"PYTHON_KEYRING_BACKEND": "", "MEMVAULT_PASSPHRASE": ""}
    with DaemonProcess(home, **env).start() as proc:
        with Client(socket=proc.socket) as client:
            assert client.status().key_storage == "keyring"
            memory_id = client.remember("kept under a keyring key").id
        proc.stop()
    assert not (home / "data" / "vault.key").exists(), "no key file when the keyring holds it"
    assert "keyring" in proc.log.lower()
    with DaemonProcess(home, **env).start() as proc, Client(socket=proc.socket) as client:
        assert client.get(memory_id).text == "kept under a keyring key"
        proc.stop()


def test_a_stop_seals_what_changed_as_a_delta_that_the_next_start_lays_over(home: Path) -> None:
    """Past `DELTA_FROM` memories a stop seals only what changed since the
    newest snapshot; the next start reads both, and a kill -9 after it
    still loses nothing acknowledged."""
    count = DELTA_FROM + 100
    vectors = np.random.default_rng(7).normal(size=(count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    snapshots = home / "data" / "snapshots"
    with DaemonProcess(home).start() as proc:
        with Client(socket=proc.socket, timeout=120.0) as client:
            ids = [r.id for start in range(0, count, 2000) for r in client.remember_batch(
                {"text": f"loaded fact {i}", "topic": f"load.{i}", "vector": vectors[i].tolist()}
                for i in range(start, min(start + 2000, count)))]
        assert proc.stop() == 0  # no snapshot yet to lay a delta over: the whole state
    (full,) = sorted(snapshots.glob("*.snap"))
    assert not list(snapshots.glob("*.delta"))
    with DaemonProcess(home).start() as proc:
        with Client(socket=proc.socket) as client:
            added = client.remember("written after the snapshot", topic="after").id
            client.update(ids[1], text="loaded fact one, reworded")
            client.forget(ids[2])
            client.forget(ids[3], purge=True)
            client.reinforce(ids[4])
            client.recall("loaded fact 5", mode="vector")  # access marks
        assert proc.stop() == 0
    assert sorted(snapshots.glob("*.snap")) == [full]
    assert len(list(snapshots.glob("*.delta"))) == 1
    with DaemonProcess(home).start() as proc:
        with Client(socket=proc.socket) as client:
            assert client.status().memory_count == count - 1  # +1 added, -1 trashed, -1 purged
            assert client.get(added).text == "written after the snapshot"
            assert client.get(ids[1]).text == "loaded fact one, reworded"
            assert client.get(ids[4]).reinforce_count == 1
            assert client.get(ids[6]).text == "loaded fact 6"
            with pytest.raises(NotFound):
                client.get(ids[3])
            assert client.status().trash_count == 1
            assert ids[2] in {t.memory.id for t in client.trash()}
            hits = client.recall("written after the snapshot", top_k=1)
            assert hits[0].memory.id == added  # the keyword index holds the delta's memories
            later = client.remember("written after the delta", topic="later").id
        proc.kill()
    with DaemonProcess(home).start() as proc, Client(socket=proc.socket) as client:
        assert client.get(later).text == "written after the delta"
        assert client.get(added).text == "written after the snapshot"
        assert client.status().memory_count == count
        proc.stop()


def test_a_background_snapshot_gives_up_at_a_stop_and_the_delta_holds_its_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stop does not wait for a whole background snapshot: it gives up
    (no file), the changes it took count again, and the stop's delta over
    the snapshot before holds them all."""
    monkeypatch.setattr(vault_snapshots, "DELTA_FROM", 10)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    rng = np.random.default_rng(3)

    def drafts(first: int, count: int) -> list[MemoryDraft]:
        vectors = rng.normal(size=(count, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return [MemoryDraft(f"fact {first + i}", topic_key=f"t{first + i}", vector=vector)
                for i, vector in enumerate(vectors.tolist())]

    def opened() -> Vault:
        events = EventBus()
        embedder = Embedder(Config().model, cache_size=1, events=events)  # never started
        vault = Vault.open(tmp_path / "data", Config(), embedder, events, prompt=False)
        vault.load()
        return vault

    vault = opened()
    vault.remember(drafts(0, 40))
    assert vault.snapshot(wait=True)
    snapshots = sorted((tmp_path / "data" / "snapshots").glob("*.snap"))
    vault.remember(drafts(40, 20))
    vault.stopping()  # a stop has begun (the daemon at SIGTERM): writes go on
    assert not vault.snapshot(wait=True)  # given up
    assert sorted((tmp_path / "data" / "snapshots").glob("*.snap")) == snapshots
    assert not list((tmp_path / "data" / "snapshots").glob(".*"))  # no temporary left
    vault.remember(drafts(60, 5))
    vault.close()  # the delta: 25 memories over the 40 of the snapshot
    assert len(list((tmp_path / "data" / "snapshots").glob("*.delta"))) == 1
    vault = opened()
    try:
        assert {m.text for m in vault.memories.memories()} == {f"fact {i}" for i in range(65)}
        assert vault.applied_txid == vault.snapshots.delta_txid == 65  # from the delta
    finally:
        vault.close()
