"""Watched note folders: files on disk mirrored into memories, live.

Two threads per set of folders. The watch thread waits on the file system
(watchfiles, inotify / FSEvents) and hands the paths that changed to the
sync thread. The sync thread first scans every folder and reconciles it
with the vault (what a restart needs: nothing duplicated, nothing lost, an
unchanged file costs a hash and no model call), then reconciles each file
the watch thread reports. Reconciling is idempotent, so a path reported
twice, or changed during the scan, is simply checked again.

A burst of saves is one change: watchfiles yields once `_STEP_MS` pass
without a new event (at most `_DEBOUNCE_MS` after the first), and the file
is read then, as it finally is. Save to recall then takes ~0.1 s plus the
embedding of the changed chunks (docs/watch.md has the measured figures).

Progress of a scan goes to the event stream as `{"type": "watch", "id":
"<done>/<total>"}` (at most twice a second, and once at the end) and to the
log every 5 s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import watchfiles

from memvaultd.config.settings import WatchFolder
from memvaultd.notes.note_folder import SOURCE_PREFIX, FilePlan, NoteFolder
from memvaultd.vault.events import EventBus
from memvaultd.vault.vault import Vault

log = logging.getLogger("memvaultd.watch")

# An editor's save is a burst of events within a few ms (write a temp file,
# rename, touch); 100 ms of quiet ends it, and a stream of saves is cut at
# 1 s so a file being rewritten continuously is still picked up.
_DEBOUNCE_MS = 1000
_STEP_MS = 100
# Chunks embedded and written per commit during a scan: ~0.5 s of model time,
# so progress moves and a recall never waits long behind the scan.
_SCAN_BATCH = 64
_EVENT_EVERY_S = 0.5
_LOG_EVERY_S = 5.0
_RETRY_S = 5.0
_STOP_WAIT_S = 15.0


class NoteWatcher:
    """Mirrors the `[[watch]]` folders into the vault; `set_folders` swaps them live."""

    def __init__(self, vault: Vault, events: EventBus) -> None:
        self.vault = vault
        self.events = events
        self._lock = threading.Lock()
        self._session: _Session | None = None

    def set_folders(self, specs: Sequence[WatchFolder]) -> None:
        """Watch exactly `specs` from now on (no-op when they are unchanged)."""
        with self._lock:
            current = self._session
            if current is not None and current.specs == tuple(specs):
                return
            if current is not None:
                current.stop()
            self._session = _Session(self.vault, self.events, tuple(specs)) if specs else None
            if self._session is not None:
                self._session.start()

    def stop(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.stop()
                self._session = None


class _Session:
    def __init__(self, vault: Vault, events: EventBus, specs: tuple[WatchFolder, ...]) -> None:
        self.vault = vault
        self.events = events
        self.specs = specs
        self.folders = [NoteFolder(spec) for spec in specs]
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._pending: set[Path] = set()
        self._pending_lock = threading.Lock()
        self._threads = [threading.Thread(target=self._watch, name="watch", daemon=True),
                         threading.Thread(target=self._sync, name="watch-sync", daemon=True)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(_STOP_WAIT_S)

    # -- the watch thread --------------------------------------------------

    def _watch(self) -> None:
        roots = [f.root for f in self.folders if f.root.is_dir()]
        for folder in self.folders:
            if not folder.root.is_dir():
                log.warning("watch folder %s is not a directory; not watched (its memories stay)",
                            folder.root)
        while roots and not self._stop.is_set():
            try:
                for changes in watchfiles.watch(*roots, watch_filter=None,
                                                debounce=_DEBOUNCE_MS, step=_STEP_MS,
                                                stop_event=self._stop, rust_timeout=1000,
                                                raise_interrupt=False):
                    with self._pending_lock:
                        self._pending.update(Path(path) for _, path in changes)
                    self._wake.set()
            except Exception as exc:  # a folder unmounted or removed: try again later
                log.warning("watching the note folders failed: %s; retrying in %.0f s", exc,
                            _RETRY_S)
                self._stop.wait(_RETRY_S)
                roots = [root for root in roots if root.is_dir()]

    # -- the sync thread ---------------------------------------------------

    def _sync(self) -> None:
        while not self.vault.loaded:
            if self._stop.wait(0.1):
                return
        try:
            self._scan()
        except Exception:
            log.exception("the scan of the watched folders failed")
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            with self._pending_lock:
                paths, self._pending = self._pending, set()
            plans = [p for p in self._plans_for(paths) if not p[1].empty]
            if plans and not self._stop.is_set():
                self._write(plans)

    def _scan(self) -> None:
        started = time.monotonic()
        extra: list[str] = []
        memories = self.vault.memories.memories_where("source", _mirrors_a_file)
        for folder in self.folders:
            extra += folder.index(memories)
        if extra:
            self.vault.replace_chunks([], extra)
            log.info("forgot %d duplicate chunk memories", len(extra))
        work = [(folder, rel) for folder in self.folders if folder.root.is_dir()
                for rel in sorted(set(folder.files()) | set(folder.known))]
        total = len(work)
        log.info("scanning %d files in %d watched folders", total, len(self.folders))
        progress = _Progress(self.events, total)
        batch: list[tuple[NoteFolder, FilePlan]] = []
        counts = [0, 0, 0]  # new, changed, forgotten
        for done, (folder, rel) in enumerate(work, 1):
            if self._stop.is_set():
                return
            plan = folder.plan(rel, self.vault.memories.get)
            if not plan.empty:
                batch.append((folder, plan))
                counts[0] += len(plan.drafts) - plan.changed
                counts[1] += plan.changed
                counts[2] += len(plan.forget)
            if sum(len(p.drafts) for _, p in batch) >= _SCAN_BATCH or done == total:
                self._write(batch)
                batch = []
            progress.advance(done)
        progress.finish()
        log.info("%d files scanned in %.1f s: %d chunks added, %d changed, %d forgotten",
                 total, time.monotonic() - started, *counts)

    def _plans_for(self, paths: set[Path]) -> list[tuple[NoteFolder, FilePlan]]:
        plans: list[tuple[NoteFolder, FilePlan]] = []
        for folder in self.folders:
            files: set[str] = set()
            for path in paths:
                rel = folder.relative(path)
                if rel is None or rel == ".":
                    continue
                if folder.covers(rel):
                    files.add(rel)
                files.update(folder.known_under(rel))  # a directory moved or deleted
                if path.is_dir():  # a directory moved in
                    files.update(folder.files(rel))
            plans += [(folder, folder.plan(rel, self.vault.memories.get)) for rel in sorted(files)]
        return plans

    def _write(self, plans: list[tuple[NoteFolder, FilePlan]]) -> None:
        if not plans:
            return
        try:
            ids = self.vault.replace_chunks([d for _, p in plans for d in p.drafts],
                                            [i for _, p in plans for i in p.forget])
        except Exception as exc:
            if len(plans) > 1:  # find the file at fault; write the others
                for one in plans:
                    self._write([one])
                return
            log.error("could not mirror %s: %s", plans[0][1].file, exc)
            return
        for folder, plan in plans:
            folder.applied(plan, ids[:len(plan.drafts)])
            ids = ids[len(plan.drafts):]
            log.debug("%s: %d written, %d forgotten", plan.file, len(plan.drafts),
                      len(plan.forget))


class _Progress:
    """A scan's progress, published at most every 0.5 s and logged every 5 s."""

    def __init__(self, events: EventBus, total: int) -> None:
        self.events = events
        self.total = total
        self.done = 0
        self._published = self._logged = time.monotonic()
        events.publish("watch", id=f"0/{total}")

    def advance(self, done: int) -> None:
        self.done = done
        now = time.monotonic()
        if now - self._published >= _EVENT_EVERY_S:
            self._published = now
            self.events.publish("watch", id=f"{done}/{self.total}")
        if now - self._logged >= _LOG_EVERY_S:
            self._logged = now
            log.info("scanned %d/%d files of the watched folders", done, self.total)

    def finish(self) -> None:
        self.events.publish("watch", id=f"{self.total}/{self.total}")


def _mirrors_a_file(source: str) -> bool:
    return source.startswith(SOURCE_PREFIX)
