"""Live configuration: `config.toml` is watched and applied without a restart.

The file's directory is watched (watchfiles), so an editor that saves by
writing a new file and renaming it over the old one is seen like any other
save. Each change is read with the same `config.load` as at start-up:

- a valid file is applied at once: `vault.config` is replaced (the vault
  reads `half_lives`, `fusion`, `restatement_threshold` and `snapshot_every`
  from it on every use), the query cache is resized, the watch list is
  swapped, the log level set. `model`, `model_runtime`, `key_storage`,
  `memory_check` and `memory_limit_mb` only take effect at the next start:
  the vault was opened (and weighed) with them;
- an invalid file is logged with the reason and published as a `config`
  event, and the configuration in force stays as it was;
- a deleted file means the defaults, as at a start without one.

Every outcome is published on the event stream: `{"type": "config", "id":
"applied"}` or `{"type": "config", "id": "invalid", "query": "<reason>"}`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path

import watchfiles

from memvault_base.errors import MemvaultError
from memvaultd.config.settings import Config, load
from memvaultd.embedding.embedder import Embedder
from memvaultd.notes.watcher import NoteWatcher
from memvaultd.vault.events import EventBus
from memvaultd.vault.vault import Vault

log = logging.getLogger("memvaultd.config")

# A save is one event burst; 200 ms of quiet ends it.
_STEP_MS = 200
_DEBOUNCE_MS = 1000
# How often to look again for a config directory that does not exist yet.
_ABSENT_DIR_POLL_S = 2.0
RESTART_ONLY = ("model", "model_runtime", "key_storage", "memory_check", "memory_limit_mb")


class ConfigWatcher:
    """Applies `path` whenever it changes; `on_change(old, new)` does the work."""

    def __init__(self, path: Path, current: Config, events: EventBus,
                 on_change: Callable[[Config, Config], None]) -> None:
        self.path = path
        self.current = current
        self.events = events
        self.on_change = on_change
        self.error = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="config-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def reload(self) -> bool:
        """Read the file again and apply it if valid; returns whether it was."""
        try:
            new = load(self.path)
        except MemvaultError as exc:
            self.error = " ".join(str(exc).split())
            log.error("%s; the previous configuration stays in force", self.error)
            self.events.publish("config", id="invalid", query=self.error)
            return False
        self.error = ""
        if new != self.current:
            old, self.current = self.current, new
            self.on_change(old, new)
        self.events.publish("config", id="applied")
        return True

    def _run(self) -> None:
        directory, name = self.path.parent, self.path.name
        while not self._stop.is_set():
            if not directory.is_dir():
                self._stop.wait(_ABSENT_DIR_POLL_S)
                continue
            try:
                for _ in watchfiles.watch(directory, watch_filter=lambda _, p: Path(p).name == name,
                                          debounce=_DEBOUNCE_MS, step=_STEP_MS, recursive=False,
                                          stop_event=self._stop, rust_timeout=1000,
                                          raise_interrupt=False):
                    self.reload()
            except Exception as exc:  # the directory went away: wait for it again
                log.warning("cannot watch %s: %s", directory, exc)
                self._stop.wait(_ABSENT_DIR_POLL_S)


def applier(vault: Vault, embedder: Embedder, watcher: NoteWatcher
            ) -> Callable[[Config, Config], None]:
    """What a changed configuration does to the running daemon."""

    def apply(old: Config, new: Config) -> None:
        changed = [f.name for f in fields(Config) if getattr(old, f.name) != getattr(new, f.name)]
        kept = {name: getattr(vault.config, name) for name in RESTART_ONLY}
        vault.config = replace(new, **kept)
        if new.cache_size != old.cache_size:
            embedder.resize_cache(new.cache_size)
        if new.log_level != old.log_level:
            try:
                logging.getLogger().setLevel(new.log_level.upper())
            except ValueError:
                log.warning("unknown log_level %r; the level stays", new.log_level)
        watcher.set_folders(new.watch)
        for name in RESTART_ONLY:
            if name in changed:
                log.warning("a change of %s takes effect at the next start", name)
        log.info("configuration applied (%s)", ", ".join(changed) or "no change")

    return apply
