"""`memvault check`: what each file of a vault holds and whether it authenticates.

Every snapshot and every delta is read whole (every chunk opened, the body
parsed); every record of every log segment is opened (`storage.log_scan`,
which changes no byte and reads past damage); the log must hold every seq
after the snapshot the vault starts from. Nothing here writes: the repair is `salvage.py`.

The report is a list of findings, one per object (a snapshot, a segment,
the log as a whole, the key, `vault.json`, and from the layers above the
sync state and the remote's chain), each `ok`, `damaged`, `warning` (works,
but a person should know) or `unchecked` (could not be checked from here),
plus what is lost: the seqs after that snapshot that no record
authenticates for. Any `damaged` finding makes the vault unsound (the CLI
exits 1).

Run by the daemon (`check_running`) the files are read beside the running
vault: no snapshot is written and so nothing pruned meanwhile, and the log
is read up to the last seq appended when the check began.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memvault_base.errors import IntegrityError, Locked, MemvaultError
from memvaultd.crypto.kdf import PURPOSE_LOG, PURPOSE_SNAPSHOT, derive_key
from memvaultd.storage.keys import (
    ENV_PASSPHRASE,
    ENV_PASSPHRASE_FILE,
    KEY_FILE_NAME,
    load_vault_key,
)
from memvaultd.storage.log_scan import LogScan, SegmentScan, Take, scan_log
from memvaultd.storage.set_aside import set_aside_folders
from memvaultd.storage.snapshot_body import SnapshotBody, decode_body
from memvaultd.storage.snapshots import SnapshotStore
from memvaultd.storage.vault_info import FILE_NAME as VAULT_JSON
from memvaultd.storage.vault_info import VaultInfo
from memvaultd.vault.core import VaultCore
from memvaultd.vault.snapshots import Snapshots

__all__ = ["DAMAGED", "OK", "REPAIR_HINT", "REPAIR_STAGING", "UNCHECKED", "WARNING",
           "CheckReport", "Examination", "Finding", "check_running", "refuse_unfinished_repair",
           "seqs_named", "unfinished_repair", "vault_id_hint"]

OK, DAMAGED, WARNING, UNCHECKED = "ok", "damaged", "warning", "unchecked"
# Where `check --repair` builds the sound vault before it takes the place of
# the damaged one; with COMPLETE in it, the swap may be half done.
REPAIR_STAGING = "repair.new"
REPAIR_COMPLETE = "COMPLETE"
REPAIR_HINT = ("`memvault check` says what can be kept, and `memvault check --repair` "
               "keeps it")
_SHOWN_DAMAGE = 3  # damages listed per segment; the rest are counted

SeqRange = tuple[int, int | None]  # first, last (None: to an end nobody can tell)


@dataclass(frozen=True)
class Finding:
    object: str  # a path under the data directory, or what was checked ("remote", "log")
    kind: str  # snapshot | log segment | log | key | vault.json | sync state | remote | set aside
    status: str  # ok | damaged | warning | unchecked
    detail: str
    seqs: tuple[SeqRange, ...] = ()  # log seqs this finding is about (lost ones, for damage)

    def to_dict(self) -> dict[str, Any]:
        return {"object": self.object, "kind": self.kind, "status": self.status,
                "detail": self.detail, "seqs": [list(r) for r in self.seqs]}


@dataclass
class CheckReport:
    checked_by: str  # "daemon": the running daemon; "offline": `memvaultd check`
    findings: list[Finding] = field(default_factory=list)
    memory_count: int = 0  # memories of the state the vault starts from
    snapshot_seq: int = 0  # the snapshot it starts from (0: none)
    lost: list[SeqRange] = field(default_factory=list)  # seqs after it that are lost
    lost_memories: list[str] = field(default_factory=list)  # named later, their puts lost
    repaired: str = ""  # after a repair: where the replaced files were set aside

    @property
    def sound(self) -> bool:
        return not any(f.status == DAMAGED for f in self.findings)

    def add(self, *findings: Finding) -> None:
        self.findings.extend(findings)

    def to_dict(self) -> dict[str, Any]:
        return {"sound": self.sound, "checked_by": self.checked_by,
                "memory_count": self.memory_count, "snapshot_seq": self.snapshot_seq,
                "lost": [list(r) for r in self.lost], "lost_memories": list(self.lost_memories),
                "repaired": self.repaired, "findings": [f.to_dict() for f in self.findings]}


def seqs_named(ranges: Sequence[SeqRange]) -> str:
    """"seq 7" or "seqs 7-9, 12, 40 and on"."""
    single = len(ranges) == 1 and ranges[0][0] == ranges[0][1]
    return f"{'seq' if single else 'seqs'} {seqs_text(ranges)}"


def seqs_text(ranges: Iterable[SeqRange]) -> str:
    parts = []
    for first, last in ranges:
        if last is None:
            parts.append(f"{first} and on")
        else:
            parts.append(str(first) if first == last else f"{first}-{last}")
    return ", ".join(parts)


@dataclass(frozen=True)
class _Snapshot:
    seq: int
    path: Path
    memories: int  # -1: it does not authenticate
    problem: str = ""


@dataclass(frozen=True)
class _Delta:
    seq: int
    path: Path
    base: int  # the snapshot it is made against
    changed: int  # memories and turns it holds, and the gone ones
    problem: str = ""  # why it does not authenticate or parse ("": it does)


class Examination:
    """The snapshots and the log of one vault, read and never changed."""

    def __init__(self, data_dir: Path, info: VaultInfo, key: bytes) -> None:
        self.data_dir = data_dir
        self.vault_id = info.vault_id_bytes
        self.store = SnapshotStore(data_dir / "snapshots",
                                   derive_key(key, purpose=PURPOSE_SNAPSHOT), self.vault_id,
                                   read_only=True)
        self.log_key = derive_key(key, purpose=PURPOSE_LOG)
        self._snapshots: list[_Snapshot] = []
        self._deltas: list[_Delta] = []

    def _name(self, path: Path) -> str:
        return str(path.relative_to(self.data_dir))

    def read_snapshots(self, *, keep: bool = True) -> SnapshotBody | None:
        """Every snapshot, read whole; the newest that authenticates (the
        vault starts from it), or None (always, unless `keep`: one decoded
        snapshot at a time is held, beside a running vault's own state)."""
        usable: SnapshotBody | None = None
        for seq, path in reversed(self.store.files()):
            try:
                body = decode_body(self.store.read(seq))
            except IntegrityError as exc:
                problem = str(exc).removeprefix(f"snapshot {path.name}: ")
                self._snapshots.append(_Snapshot(seq, path, -1, problem))
                continue
            self._snapshots.append(_Snapshot(seq, path, len(body.memories)))
            if keep and usable is None:
                usable = body
            del body
        for seq, path in self.store.deltas():
            try:
                delta = decode_body(self.store.read_delta(seq))
            except IntegrityError as exc:
                problem = str(exc).removeprefix(f"snapshot {path.name}: ")
                self._deltas.append(_Delta(seq, path, -1, 0, problem))
                continue
            changed = len(delta.memories) + len(delta.turns) + len(delta.gone)
            self._deltas.append(_Delta(seq, path, delta.base, changed))
            del delta
        return usable

    def read_log(self, *, upto: int | None = None, take: Take | None = None) -> LogScan:
        return scan_log(self.data_dir / "log", self.log_key, self.vault_id, upto=upto, take=take)

    def report(self, report: CheckReport, scan: LogScan) -> None:
        """The findings of the snapshots and the log (after `read_snapshots`
        and `read_log`), and what is lost after the snapshot the vault
        starts from."""
        base = next((s.seq for s in self._snapshots if s.memories >= 0), 0)
        report.snapshot_seq = base
        for snapshot in reversed(self._snapshots):
            report.add(self._snapshot_finding(snapshot, base, scan))
        for delta in self._deltas:
            report.add(self._delta_finding(delta, base, scan))
        for segment in scan.segments:
            report.add(self._segment_finding(segment))
        report.lost = scan.missing(after=base)
        report.add(_continuity(scan, base, report.lost))

    def _snapshot_finding(self, snapshot: _Snapshot, base: int, scan: LogScan) -> Finding:
        name = self._name(snapshot.path)
        if snapshot.memories < 0:
            return Finding(name, "snapshot", DAMAGED, snapshot.problem)
        detail = f"seq {snapshot.seq}, {snapshot.memories} memories"
        if snapshot.seq == base:
            return Finding(name, "snapshot", OK, f"{detail}: the vault starts from it")
        missing = scan.missing(after=snapshot.seq)
        if snapshot.seq > base or not missing:
            return Finding(name, "snapshot", OK, f"{detail}: older, can stand in for the newest")
        return Finding(name, "snapshot", OK, f"{detail}: older, cannot stand in for the newest "
                       f"(the log lacks {seqs_named(missing)})")

    def _delta_finding(self, delta: _Delta, base: int, scan: LogScan) -> Finding:
        """A delta is never the only copy of a write: the log after its
        snapshot holds every one (a delta prunes no log). One that does not
        authenticate is damage all the same, as a snapshot's would be; what
        the log lacks is the continuity finding's."""
        name = self._name(delta.path)
        after = f"the log after snapshot {base}" if base else "the log"
        if delta.problem:
            return Finding(name, "delta", DAMAGED, f"{delta.problem}: a start does not use it "
                           f"and replays {after} instead, which holds the same writes")
        detail = (f"seq {delta.seq} over snapshot {delta.base}, {delta.changed} memories and "
                  "turns changed")
        if delta.base != base or delta.seq > scan.last_seq:
            return Finding(name, "delta", WARNING, f"{detail}: does not fit snapshot {base} and "
                           f"the log up to {scan.last_seq}, so a start does not use it")
        return Finding(name, "delta", OK, f"{detail}: a start lays it over the snapshot")

    def _segment_finding(self, segment: SegmentScan) -> Finding:
        name = self._name(segment.path)
        span = (f"seqs {segment.runs[0][0]}-{segment.runs[-1][1]}" if segment.runs
                else "no record")
        if segment.sound:
            tail = (f"; {segment.torn_tail} bytes a crash tore off its end are cut at the next "
                    "start (never acknowledged)" if segment.torn_tail else "")
            return Finding(name, "log segment", OK, f"{span}, {segment.records} records{tail}")
        problems = ([f"header: {segment.header}"] if segment.header else []) + segment.damage
        shown = "; ".join(problems[:_SHOWN_DAMAGE])
        more = len(problems) - _SHOWN_DAMAGE
        shown += f"; and {more} more" if more > 0 else ""
        return Finding(name, "log segment", DAMAGED,
                       f"{shown} ({segment.records} records authenticate)", tuple(segment.lost))

    def set_aside(self, report: CheckReport) -> None:
        """A finding per folder of files set aside earlier."""
        for folder in set_aside_folders(self.data_dir):
            why = folder / "why.txt"
            lines = why.read_text(errors="replace").splitlines() if why.is_file() else []
            first = f" ({lines[0]})" if lines else ""
            report.add(Finding(self._name(folder), "set aside", WARNING,
                               f"damaged or replaced files kept by memvault, never read "
                               f"again{first}: delete the folder once you no longer need them"))


def _continuity(scan: LogScan, base: int, lost: list[SeqRange]) -> Finding:
    start = f"after snapshot {base}" if base else "from the start (no snapshot)"
    if lost:
        return Finding("log", "log", DAMAGED,
                       f"{start}, the log cannot give {seqs_named(lost)} (missing or "
                       "damaged): the operations held there are lost", tuple(lost))
    if scan.last_seq <= base:
        return Finding("log", "log", OK, f"no record {start}")
    return Finding("log", "log", OK, f"every seq from {base + 1} to {scan.last_seq} "
                   "authenticates")


def check_running(core: VaultCore, snapshots: Snapshots) -> CheckReport:
    """The files of the vault this daemon serves, read beside it."""
    core.await_loaded()
    report = CheckReport("daemon")
    report.add(_vault_json_running(core), _key_running(core))
    examination = Examination(core.data_dir, core.info, core.vault_key)
    with snapshots.exclusive():
        with core.write_lock:
            upto = core.log.last_seq
        examination.read_snapshots(keep=False)
        scan = examination.read_log(upto=upto)
    examination.report(report, scan)
    examination.set_aside(report)
    report.memory_count = len(core.memories)
    if report.lost:
        report.add(Finding("log", "log", WARNING,
                           "this daemon read those records at start and holds them: stop it "
                           "(its snapshot at stop keeps them), then run `memvault check` again"))
    return report


def _vault_json_running(core: VaultCore) -> Finding:
    try:
        info = VaultInfo.load(core.data_dir)
    except MemvaultError as exc:
        return Finding(VAULT_JSON, "vault.json", DAMAGED, str(exc))
    if info is None:
        return Finding(VAULT_JSON, "vault.json", DAMAGED, "missing: the next start would make "
                       "a new, empty vault beside this one's files")
    if (info.vault_id, info.model, info.dimension) != (
            core.info.vault_id, core.info.model, core.info.dimension):
        return Finding(VAULT_JSON, "vault.json", DAMAGED,
                       f"changed since this daemon started: it names vault {info.vault_id}, "
                       f"model {info.model}; the vault is {core.info.vault_id}, "
                       f"{core.info.model}")
    return Finding(VAULT_JSON, "vault.json", OK, f"vault {info.vault_id}, model {info.model}, "
                   f"{info.dimension} dimensions")


def _key_running(core: VaultCore) -> Finding:
    keyfile = (core.data_dir / KEY_FILE_NAME).exists()
    name, kind = (KEY_FILE_NAME, "key") if keyfile else ("keyring", "key")
    if keyfile and not (ENV_PASSPHRASE in os.environ or ENV_PASSPHRASE_FILE in os.environ):
        return Finding(name, kind, UNCHECKED, "its passphrase was typed or given in "
                       f"{ENV_PASSPHRASE} when the daemon started, and is not kept: stop the "
                       "daemon and run `memvault check` to check it")
    try:
        key = load_vault_key(core.data_dir, core.info.vault_id_bytes, prompt=False)
    except Locked as exc:
        status = DAMAGED if keyfile else WARNING
        return Finding(name, kind, status, f"does not open now: {exc}")
    except IntegrityError as exc:
        return Finding(name, kind, DAMAGED, str(exc))
    if key.key != core.vault_key:
        return Finding(name, kind, DAMAGED, "holds another key than the one this vault is "
                       "sealed with")
    return Finding(name, kind, OK, f"opens to this vault's key: {key.detail}")


def unfinished_repair(data_dir: Path) -> Finding | None:
    """A repair a crash cut short after its sound vault was complete."""
    if not (data_dir / REPAIR_STAGING / REPAIR_COMPLETE).exists():
        return None
    return Finding(REPAIR_STAGING, "repair", DAMAGED, "a repair was interrupted before it put "
                   "the sound vault in place: the daemon will not start until "
                   "`memvault check --repair` finishes it")


def vault_id_hint(data_dir: Path) -> str | None:
    """The vault id a segment or snapshot header names (unauthenticated: a
    hint for restoring a lost `vault.json`), or None when there is none."""
    for folder, magic in (("log", b"MVLOG"), ("snapshots", b"MVSNP")):
        for path in sorted((data_dir / folder).glob("*")) if (data_dir / folder).is_dir() else []:
            with contextlib.suppress(OSError), path.open("rb") as src:
                head = src.read(22)
                if head[:5] == magic and len(head) == 22:
                    return head[6:22].hex()
    return None


def refuse_unfinished_repair(data_dir: Path) -> None:
    """A repair stopped halfway through putting the sound vault in place:
    starting now would serve half of it."""
    if (data_dir / REPAIR_STAGING / REPAIR_COMPLETE).exists():
        raise IntegrityError(f"a repair of {data_dir} was interrupted before it finished: run "
                             "`memvault check --repair` again to finish it")
