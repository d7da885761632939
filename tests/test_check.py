"""One damaged file never costs the vault: the older snapshot stands in for
a damaged newest one, `memvault check` says what is wrong, and
`memvault check --repair` keeps everything that still authenticates.

A vault is built once by the real daemon (`built`): memories, a clean stop
(the older snapshot), more memories, another clean stop (the newest
snapshot), more memories and a `kill -9` (records in the log after the
newest snapshot). Each test alters a copy of it and runs the real daemon and
the real `memvault` CLI on the copy.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from memvault import Client
from memvault_base.v1 import memory_pb2 as pb
from memvault_base.v1 import memory_pb2_grpc as pb_grpc
from memvaultd.vault.snapshots import DELTA_FROM

from .daemon_process import DaemonProcess, daemon_env
from .test_crash import Expected, _input, differences, exported

SEGMENT_HEADER = 30  # docs/format.md, "Operation log"
RECORD_HEADER = 12
SNAPSHOT_HEADER = 42
# Until SERVING before a stop: a daemon stopped while its model still loads
# lingers until the load is over, long on a crowded machine.
START_S = 180.0


@dataclass(frozen=True)
class Built:
    home: Path
    expected: dict[str, Expected]


def remember(proc: DaemonProcess, first: int, count: int, trial: int) -> dict[str, Expected]:
    acked: dict[str, Expected] = {}
    with grpc.insecure_channel(f"unix://{proc.socket}") as channel:
        stub = pb_grpc.MemoryStub(channel)  # type: ignore[no-untyped-call]
        for number in range(first, first + count):
            message, expected = _input(number, trial)
            reply = stub.Remember(pb.RememberRequest(memory=message), timeout=120,
                                  wait_for_ready=True)
            acked[reply.id] = expected
    return acked


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    home = tmp_path_factory.mktemp("check") / "home"
    expected: dict[str, Expected] = {}
    for trial, (first, count) in enumerate([(0, 3), (3, 2)], start=1):
        with DaemonProcess(home).start(wait=False) as proc:
            expected |= remember(proc, first, count, trial)
            assert proc.stop() == 0  # a clean stop writes a snapshot
    with DaemonProcess(home).start(wait=False) as proc:
        expected |= remember(proc, 5, 3, trial=3)
        proc.kill()
    assert len(snapshots(home / "data")) == 2
    return Built(home, expected)


def copy(built: Built, into: Path) -> Path:
    home = into / "home"
    shutil.copytree(built.home / "data", home / "data")
    return home


def snapshots(data: Path) -> list[Path]:
    return sorted((data / "snapshots").glob("*.snap"))


def segments(data: Path) -> list[Path]:
    return sorted((data / "log").glob("*.log"))


def records(segment: Path) -> list[tuple[int, int, int]]:
    """(seq, start, end) of each record of a segment file."""
    blob = segment.read_bytes()
    out, pos = [], SEGMENT_HEADER
    while pos + RECORD_HEADER <= len(blob):
        length, seq = struct.unpack(">IQ", blob[pos : pos + RECORD_HEADER])
        end = pos + RECORD_HEADER + length
        if end > len(blob):
            break
        out.append((seq, pos, end))
        pos = end
    return out


def eventually(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def listing(data: Path) -> list[tuple[str, int, int, bytes]]:
    """Every file under `data`: path, mode, mtime and bytes."""
    return sorted((str(p.relative_to(data)), p.stat().st_mode, p.stat().st_mtime_ns,
                   p.read_bytes()) for p in data.rglob("*") if p.is_file())


def memvault(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The `memvault` CLI as a user runs it, with the vault's passphrase in
    the environment (the daemon's checker asks for it when no daemon runs)."""
    return subprocess.run([sys.executable, "-m", "memvault.cli.main", *args],
                          env=daemon_env(home), capture_output=True, text=True, timeout=600)


def check(home: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = memvault(home, "check", "--json", *args)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def findings(report: dict[str, Any], status: str) -> dict[str, dict[str, Any]]:
    return {f["object"]: f for f in report["findings"] if f["status"] == status}


def flip(path: Path, offset: int) -> None:
    blob = bytearray(path.read_bytes())
    blob[offset] ^= 0x01
    path.write_bytes(bytes(blob))


def test_a_damaged_newest_snapshot_falls_back_to_the_older_one(built: Built,
                                                               tmp_path: Path) -> None:
    home = copy(built, tmp_path)
    newest = snapshots(home / "data")[-1]
    flip(newest, (SNAPSHOT_HEADER + newest.stat().st_size) // 2)
    with DaemonProcess(home).start(timeout=START_S) as proc:
        held = exported(proc.socket, include_vectors=True)
        assert proc.stop() == 0
    assert differences(built.expected, held, check_vectors=True) == ([], [])
    warnings = [line for line in proc.log.splitlines() if " WARNING " in line]
    assert any(newest.name in line and "older snapshot" in line for line in warnings), proc.log
    # Kept aside for a person to look at, never deleted, and out of the way.
    assert not newest.exists()
    assert [p.name for p in (home / "data" / "damaged").rglob("*.snap")] == [newest.name]
    # And the vault goes on: the next start needs no fallback.
    before = len(proc.log)
    with DaemonProcess(home).start(timeout=START_S) as proc:
        assert differences(built.expected, exported(proc.socket)) == ([], [])
        assert proc.stop() == 0
    assert "older snapshot" not in proc.log[before:], proc.log[before:]


def test_a_sound_vault_checks_sound_and_not_a_byte_changes(built: Built, tmp_path: Path) -> None:
    home = copy(built, tmp_path)
    before = listing(home / "data")
    code, report = check(home)
    assert code == 0, report
    assert report["sound"] and report["checked_by"] == "offline"
    assert report["memory_count"] == len(built.expected) and report["lost"] == []
    kinds = {f["kind"] for f in report["findings"]}
    assert {"vault.json", "key", "snapshot", "log segment", "log"} <= kinds
    assert set(findings(report, "ok")) >= {f"snapshots/{p.name}" for p in snapshots(
        home / "data")} | {f"log/{p.name}" for p in segments(home / "data")}
    assert listing(home / "data") == before, "check changed the vault"
    assert not (home / "run" / "memvault.sock").exists()
    # The words a person reads say the same.
    done = memvault(home, "check")
    assert done.returncode == 0 and "sound" in done.stdout + done.stderr
    assert listing(home / "data") == before
    # Asked of the running daemon, which reads its files beside serving.
    with DaemonProcess(home).start() as proc:
        code, served = check(home)
        assert code == 0 and served["checked_by"] == "daemon", served
        assert served["memory_count"] == len(built.expected) and served["sound"]
        # One JSON shape, whoever checked.
        assert set(served) == set(report)
        assert {frozenset(f) for f in served["findings"]} == {frozenset(report["findings"][0])}
        proc.stop()


def test_a_damaged_log_segment_is_reported_then_repaired(built: Built, tmp_path: Path) -> None:
    home = copy(built, tmp_path)
    data = home / "data"
    newest = snapshots(data)[-1]
    segment = segments(data)[-1]  # written after the newest snapshot, by the killed session
    seq, start, end = records(segment)[1]
    assert seq > int(newest.name[:20])
    flip(segment, (start + end) // 2)
    with DaemonProcess(home).start(wait=False) as proc:
        assert proc.proc is not None and proc.proc.wait(120) != 0  # today's refusal stands
    assert segment.name in proc.log and "memvault check" in proc.log

    before = listing(data)
    code, report = check(home)
    assert code == 1 and not report["sound"]
    damaged = findings(report, "damaged")
    assert damaged[f"log/{segment.name}"]["seqs"] == [[seq, seq]]
    assert str(seq) in damaged[f"log/{segment.name}"]["detail"]
    assert report["lost"] == [[seq, seq]]
    assert listing(data) == before, "check without --repair changed the vault"

    code, repaired = check(home, "--repair")
    assert code == 0 and repaired["sound"], repaired
    assert repaired["lost"] == [[seq, seq]] and repaired["repaired"].startswith("damaged/")
    kept = data / repaired["repaired"]
    assert (kept / "log" / segment.name).read_bytes() == dict(
        (name, blob) for name, _, _, blob in before)[f"log/{segment.name}"]
    assert (kept / "why.txt").is_file()

    with DaemonProcess(home).start(wait=False) as proc:
        held = exported(proc.socket, include_vectors=True)
        lost, altered = differences(built.expected, held, check_vectors=True)
        assert len(lost) == 1 and altered == [] and set(held) <= set(built.expected)
        # New writes go after the repaired snapshot and survive a crash.
        after = remember(proc, 50, 2, trial=9)
        proc.kill()
    with DaemonProcess(home).start(timeout=START_S) as proc:
        held = exported(proc.socket)
        assert set(after) <= set(held) and len(held) == len(built.expected) - 1 + 2
        code, served = check(home)
        assert code == 0, served
        assert proc.stop() == 0


def test_the_running_daemon_reports_a_damaged_older_snapshot(built: Built,
                                                              tmp_path: Path) -> None:
    home = copy(built, tmp_path)
    older = snapshots(home / "data")[0]
    with DaemonProcess(home).start() as proc:
        flip(older, SNAPSHOT_HEADER + 20)  # read by nothing at start: only a check finds it
        code, report = check(home)
        assert code == 1 and report["checked_by"] == "daemon"
        assert set(findings(report, "damaged")) == {f"snapshots/{older.name}"}
        assert report["lost"] == [] and report["memory_count"] == len(built.expected)
        refused = memvault(home, "check", "--repair")
        assert refused.returncode == 2, refused  # a repair needs the vault to itself
        assert "already running" in refused.stderr and "Traceback" not in refused.stderr
        proc.kill()  # a clean stop's snapshot would rotate the damaged one out
    code, repaired = check(home, "--repair")
    assert code == 0 and repaired["lost"] == [], repaired
    assert set(findings(repaired, "repaired")) == {f"snapshots/{older.name}"}
    with DaemonProcess(home).start(timeout=START_S) as proc:
        assert differences(built.expected, exported(proc.socket, include_vectors=True),
                           check_vectors=True) == ([], [])
        assert proc.stop() == 0


@pytest.fixture(scope="module")
def with_delta(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """A vault past `DELTA_FROM` memories whose last stop sealed a delta over
    its snapshot; `expected` holds the writes made after the snapshot."""
    home = tmp_path_factory.mktemp("delta") / "home"
    vectors = np.random.default_rng(11).normal(size=(DELTA_FROM + 100, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with DaemonProcess(home).start(timeout=START_S) as proc:
        with Client(socket=proc.socket, timeout=120.0) as client:
            for start in range(0, len(vectors), 2000):
                client.remember_batch(
                    {"text": f"loaded fact {i}", "topic": f"load.{i}",
                     "vector": vectors[i].tolist()}
                    for i in range(start, min(start + 2000, len(vectors))))
        assert proc.stop() == 0  # the whole state: no snapshot yet to lay a delta over
    with DaemonProcess(home).start(timeout=START_S) as proc:
        expected = remember(proc, 0, 3, trial=1)
        assert proc.stop() == 0
    assert len(deltas(home / "data")) == 1 and len(snapshots(home / "data")) == 1
    return Built(home, expected)


def deltas(data: Path) -> list[Path]:
    return sorted((data / "snapshots").glob("*.delta"))


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_a_damaged_delta_is_reported_and_the_start_replays_the_log(
        with_delta: Built, tmp_path: Path, damage: str) -> None:
    """A delta that does not authenticate: `memvault check` names it, exits
    as for any damage and changes nothing; a start lays no delta over the
    snapshot, replays the log after it (which holds every write the delta
    held), sets the delta aside, and the vault checks sound again."""
    home = copy(with_delta, tmp_path)
    (delta,) = deltas(home / "data")
    if damage == "flipped":
        flip(delta, (SNAPSHOT_HEADER + delta.stat().st_size) // 2)
    else:
        delta.write_bytes(delta.read_bytes()[:-100])
    before = listing(home / "data")
    code, report = check(home)
    assert code == 1 and not report["sound"], report
    name = f"snapshots/{delta.name}"
    assert set(findings(report, "damaged")) == {name}, report
    assert findings(report, "damaged")[name]["kind"] == "delta"
    assert report["lost"] == [], report  # the log holds every write the delta held
    assert listing(home / "data") == before, "check changed the vault"
    done = memvault(home, "check")
    assert done.returncode == 1 and delta.name in done.stdout + done.stderr, done
    with DaemonProcess(home).start(timeout=START_S) as proc:
        held = exported(proc.socket)
        assert differences(with_delta.expected, held) == ([], [])
        assert len(held) == DELTA_FROM + 100 + len(with_delta.expected)
        proc.kill()  # a clean stop would seal a new delta: the start alone set it aside
    assert any(delta.name in line and "nothing lost" in line
               for line in proc.log.splitlines() if " WARNING " in line), proc.log
    assert not delta.exists()
    assert [p.name for p in (home / "data" / "damaged").rglob("*.delta")] == [delta.name]
    code, report = check(home)
    assert code == 0 and report["sound"], report
    assert {f["kind"] for f in findings(report, "warning").values()} == {"set aside"}


def test_a_sound_delta_is_reported_as_the_one_a_start_lays_over(with_delta: Built,
                                                                tmp_path: Path) -> None:
    home = copy(with_delta, tmp_path)
    (delta,) = deltas(home / "data")
    code, report = check(home)
    assert code == 0 and report["sound"], report
    finding = findings(report, "ok")[f"snapshots/{delta.name}"]
    assert finding["kind"] == "delta" and "lays it over" in finding["detail"], finding


def test_a_repair_cut_short_is_finished_by_the_next(built: Built, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut between setting the old files aside and putting the new ones in
    place: the daemon refuses to start on half a vault, and the next
    `check --repair` finishes the job."""
    from memvaultd.storage.keys import load_vault_key
    from memvaultd.storage.vault_info import VaultInfo
    from memvaultd.vault import salvage

    home = copy(built, tmp_path)
    data = home / "data"
    segment = segments(data)[-1]
    _, start, end = records(segment)[1]
    flip(segment, (start + end) // 2)
    for name, value in daemon_env(home).items():
        monkeypatch.setenv(name, value)
    info = VaultInfo.load(data)
    assert info is not None
    key = load_vault_key(data, info.vault_id_bytes, prompt=False)
    set_aside = salvage.set_aside

    def power_cut(data_dir: Path, files: list[tuple[Path, str]]) -> Path:
        set_aside(data_dir, files)
        raise KeyboardInterrupt("the power went")

    monkeypatch.setattr(salvage, "set_aside", power_cut)
    with pytest.raises(KeyboardInterrupt):
        salvage.repair(data, info, key.key, keep_after=None)
    monkeypatch.undo()
    assert not (data / "log").exists() and (data / "repair.new" / "COMPLETE").exists()

    with DaemonProcess(home).start(wait=False) as proc:
        assert proc.proc is not None and proc.proc.wait(120) != 0
    assert "interrupted" in proc.log and "memvault check --repair" in proc.log

    code, repaired = check(home, "--repair")
    assert code == 0 and repaired["sound"], repaired
    assert any(f["kind"] == "repair" and "interrupted" in f["detail"]
               for f in repaired["findings"])
    assert not (data / "repair.new").exists()
    with DaemonProcess(home).start(timeout=START_S) as proc:
        lost, altered = differences(built.expected, exported(proc.socket))
        assert len(lost) == 1 and altered == []
        assert proc.stop() == 0


def test_a_syncing_vault_takes_back_from_the_remote_what_its_log_lost(tmp_path: Path) -> None:
    """The records of a vault that syncs reached the remote within a second:
    a repair takes back from the chain what a damaged segment cost, and
    sync goes on from where it stood. The remote's chain is checked too."""
    remote_dir = tmp_path / "remote"
    home = tmp_path / "home"
    with DaemonProcess(home).start() as proc, Client(socket=proc.socket) as client:
        recovery_key = client.init_sync(remote_dir.as_uri()).recovery_key
        acked = remember(proc, 0, 4, trial=1)
        assert client.sync_now().pending == 0
        code, report = check(home)
        assert code == 0, report
        assert findings(report, "ok")["remote"]["detail"].count("versions") == 1
        proc.kill()
    data = home / "data"
    segment = [p for p in segments(data) if records(p)][-1]
    seq, start, end = records(segment)[1]
    flip(segment, (start + end) // 2)
    code, report = check(home)
    assert code == 1 and report["lost"] == [[seq, seq]]

    code, repaired = check(home, "--repair")
    assert code == 0 and repaired["sound"], repaired
    assert repaired["lost"] == [[seq, seq]] and repaired["memory_count"] == len(acked)
    taken_back = [f for f in repaired["findings"] if f["kind"] == "repair"
                  and f["detail"].startswith("taken back from the remote")]
    assert taken_back and "1 memories more" in taken_back[0]["detail"], repaired

    with DaemonProcess(home).start() as proc, Client(socket=proc.socket) as client:
        held = exported(proc.socket)
        assert differences(acked, held) == ([], [])
        more = remember(proc, 10, 2, trial=2)
        status = client.sync_now()
        assert status.state == "idle" and not status.last_error, status
        proc.stop()
    # What was written after the repair reached the chain: a new device has it all.
    with DaemonProcess(tmp_path / "other").start() as other, \
            Client(socket=other.socket) as joined:
        joined.join_sync(remote_dir.as_uri(), recovery_key)
        eventually(lambda: set(acked) | set(more) <= set(exported(other.socket)))
        other.stop()


def test_a_damaged_version_on_the_remote_is_reported(tmp_path: Path) -> None:
    remote_dir = tmp_path / "remote"
    home = tmp_path / "home"
    with DaemonProcess(home).start() as proc, Client(socket=proc.socket) as client:
        client.init_sync(remote_dir.as_uri())
        remember(proc, 0, 2, trial=1)
        assert client.sync_now().pending == 0
        version = sorted(remote_dir.rglob("versions/*"))[0]
        blob = bytearray(version.read_bytes())
        blob[100] ^= 0x01
        version.write_bytes(bytes(blob))
        code, report = check(home)
        assert code == 1 and set(findings(report, "damaged")) == {"remote"}, report
        assert "version 1" in findings(report, "damaged")["remote"]["detail"]
        code, skipped = check(home, "--no-remote")
        assert code == 0 and findings(skipped, "unchecked")["remote"]
        proc.stop()


def test_no_daemon_starts_while_the_checker_holds_the_vault(built: Built,
                                                            tmp_path: Path) -> None:
    from memvaultd.app.check import holding

    home = copy(built, tmp_path)
    socket = home / "run" / "memvault.sock"
    with holding(socket):
        with DaemonProcess(home).start(wait=False) as proc:
            assert proc.proc is not None and proc.proc.wait(120) == 2
        assert "already running" in proc.log
        done = memvault(home, "status")
        assert done.returncode == 3, done  # a client is told at once: no daemon here
    assert not socket.exists()
