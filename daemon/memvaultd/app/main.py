"""`memvaultd`: start the daemon in the foreground.

    memvaultd [--home DIR] [--socket PATH] [--log-level LEVEL]
    memvaultd [--home DIR] [--socket PATH] check [--repair] [--json] [--no-remote]

(`check` is `check.py`: the vault's files checked, and repaired, with no
daemon running.)

Order of start-up: read the config, start loading the model (background),
unlock the vault key (may prompt for a passphrase on a terminal), bind the
socket, then load the memories (snapshot + log) while already accepting
connections; health turns SERVING once both the memories and the model are
ready. SIGTERM or SIGINT stop it cleanly: in-flight calls finish, a snapshot
is written, the socket file is removed.

Exit codes: 0 clean stop; 1 failed while running (e.g. the stored data does
not authenticate); 2 cannot start (bad config, key locked, socket in use, the
model cannot load or be exported, the vault needs more memory than is
available: `vault/footprint.py`).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import NoReturn

import click

from memvault_base.errors import MemvaultError
from memvault_base.paths import resolve
from memvault_base.resident import release_code_pages, resident_file_bytes
from memvault_base.secrecy import forbid_dumps, private_directory
from memvaultd import __version__
from memvaultd.app.check import check_command, check_served
from memvaultd.app.live_config import ConfigWatcher, applier
from memvaultd.app.notify import notify
from memvaultd.app.sweep_schedule import SweepSchedule
from memvaultd.config.settings import Config, load
from memvaultd.embedding.embedder import Embedder
from memvaultd.index.heap import arrow_from_malloc, fix_thresholds, huge_pages, limit_arenas
from memvaultd.notes.watcher import NoteWatcher
from memvaultd.serve.endpoint import Endpoint
from memvaultd.serve.front.socket_guard import claim_socket, prepare_socket_dir
from memvaultd.storage.keys import forget_passphrase, take_passphrase_from_env
from memvaultd.sync.setup import Syncing
from memvaultd.vault.events import EventBus
from memvaultd.vault.footprint import NotEnoughMemory
from memvaultd.vault.vault import Vault

log = logging.getLogger("memvaultd")


@click.group(invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", envvar="MEMVAULT_HOME", type=click.Path(file_okay=False),
              help="Keep config, data and socket under this directory (MEMVAULT_HOME).")
@click.option("--socket", "socket_path", type=click.Path(dir_okay=False),
              help="Serve on this socket instead of the default.")
@click.option("--log-level", default=None, help="debug, info, warning or error.")
@click.version_option(__version__, prog_name="memvaultd")
@click.pass_context
def main(ctx: click.Context, home: str | None, socket_path: str | None,
         log_level: str | None) -> None:
    """Run the memvault daemon in the foreground."""
    # Everything the daemon creates is the user's alone (as systemd's UMask=0077).
    os.umask(0o077)
    # It holds the vault key and every memory in clear: no core file, no dump
    # (memvault_base.secrecy), before anything is read.
    forbid_dumps()
    if ctx.invoked_subcommand is not None:
        _setup_logging(log_level or "warning")
        ctx.obj = (home, socket_path)
        return
    paths = resolve(home)
    # Before the model's export child or the front process starts: neither
    # inherits the passphrase.
    take_passphrase_from_env()
    try:
        # The daemon loads what it finds in the cache (the exported model,
        # under `models/` when MEMVAULT_CACHE_DIR moves it here).
        private_directory(paths.cache_dir, "the cache")
    except (OSError, MemvaultError) as exc:
        _cannot_start(f"{exc}")
    try:
        config = load(paths.config_file)
    except MemvaultError as exc:
        _cannot_start(f"bad configuration: {exc}")
    _setup_logging(log_level or config.log_level)
    socket = Path(socket_path).absolute() if socket_path else paths.socket
    code = run(config, paths.data_dir, socket, config_file=paths.config_file,
               cache_dir=paths.model_cache)
    # Everything a stop keeps is on disk once `run` returns (each write was
    # fsynced to the log before it was acknowledged; the stop's delta or
    # snapshot is written). The interpreter's own exit would then free the
    # vault's millions of objects one by one: 1.1 s of a 1.4 s stop at 100k.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(config: Config, data_dir: Path, socket: Path, *, config_file: Path | None = None,
        cache_dir: Path | None = None) -> int:
    huge_pages(False)  # until the vault is loaded (`index/heap.py`)
    limit_arenas()  # before the model's thread, the first the daemon starts
    fix_thresholds()
    arrow_from_malloc()  # before the vault's first Arrow buffer
    one_blas_thread()
    events = EventBus()
    embedder = Embedder(config.model, cache_size=config.cache_size, events=events,
                        runtime=config.model_runtime, cache_dir=cache_dir)
    embedder.start()
    stop = threading.Event()
    failure: list[tuple[str, int]] = []

    def fail(why: str, code: int = 1) -> None:
        failure.append((why, code))
        stop.set()

    try:
        # A live daemon on this socket owns the vault: refuse before opening its
        # log (which may cut a "torn" tail the other one is writing) or asking
        # for a passphrase. server.start() checks again just before binding.
        prepare_socket_dir(socket)
        claim_socket(socket)
        vault = Vault.open(data_dir, config, embedder, events, prompt=sys.stdin.isatty())
        forget_passphrase()
        syncing = Syncing(vault, marks_every_s=config.access_marks_every_hours * 3600,
                          freeze_bound_s=config.freeze_bound_hours * 3600)
        server = Endpoint(vault, syncing, events, socket, on_failure=fail,
                          check=lambda remote: check_served(vault, remote=remote))
        server.start()
    except MemvaultError as exc:
        _cannot_start(str(exc))
    log.info("memvaultd %s listening on %s (data in %s)", __version__, socket, data_dir)
    # Ready once the socket is bound: callers connect at once and wait for the
    # state they need; STATUS says what start-up is still doing.
    notify("READY=1", "STATUS=loading memories")

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        notify("STOPPING=1", "STATUS=finishing calls, writing a snapshot")
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def become_ready() -> None:
        try:
            syncing.keep_unpushed()
            vault.load()
            huge_pages(True)
            if syncing.resume():
                notify("STATUS=syncing")
        except NotEnoughMemory as exc:  # no restart frees the memory: as a bad config
            fail(str(exc), 2)
            return
        except MemvaultError as exc:
            fail(str(exc))
            return
        notify("STATUS=warming the model")
        try:
            # A first start's export is bounded by its own timeout (300 s, onnx_cache.py).
            embedder.wait_ready(timeout=600.0)
        except MemvaultError as exc:  # a model that cannot load: the daemon cannot start
            fail(str(exc), 2)
            return
        server.set_serving(True)
        # Starting touched ~85 MB of library pages at 100k memories (the
        # imports, the model's session, Arrow's snapshot read) that serving
        # touches a third of: the rest goes back (`memvault_base/resident.py`).
        held = resident_file_bytes()
        release_code_pages()
        if held is not None:
            log.info("start-up's library pages given back: %.0f -> %.0f MB of file pages resident",
                     held / 2**20, (resident_file_bytes() or 0) / 2**20)
        events.publish("ready")
        notify(f"STATUS=ready: {len(vault.memories)} memories")
        log.info("ready: %d memories, model %s", len(vault.memories), embedder.model_name)

    threading.Thread(target=become_ready, name="start-up", daemon=True).start()
    # The background sweep waits for the vault itself (sweep_schedule.py).
    sweeps = SweepSchedule(vault)
    sweeps.start()
    # Watched note folders sync once the vault is loaded; config.toml is
    # applied live from here on (live_config.py).
    notes = NoteWatcher(vault, events)
    notes.set_folders(config.watch)
    live = (ConfigWatcher(config_file, config, events, applier(vault, embedder, notes))
            if config_file is not None else None)
    if live is not None:
        live.start()
    stop.wait()
    # A background snapshot gives up now, while the calls in flight finish,
    # not after them: `vault.close` waits for it.
    vault.stopping()
    if live is not None:
        live.stop()
    notes.stop()
    sweeps.stop()
    server.stop()
    syncing.stop()
    try:
        vault.close()
    finally:
        embedder.close()
    if failure:
        log.error("stopped: %s", failure[0][0])
        return failure[0][1]
    log.info("stopped")
    return 0


def one_blas_thread() -> None:
    """Run NumPy's BLAS (OpenBLAS) on the calling thread only.

    Every recall scores its candidates with a matrix-vector product. OpenBLAS
    splits each one over its own pool of threads (one per core), and several
    recalls at once then fight over that pool: 8 clients of a 10k vault got
    92 calls/s together, against 335/s for one client alone, with every
    serving thread found inside the product. On one thread per call the same
    8 clients made 390 calls/s (p50 19 ms against 70 ms), and two recalls
    use the two cores, since the product runs without the GIL. The product
    is memory-bound: a second thread would only shorten one scan that reads
    everything (an exact scan of 100k rows), which the IVF already avoids.
    """
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # no py.typed

    threadpool_limits(limits=1, user_api="blas")


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Libraries' chatter (progress bars, HTTP probes) has no place in a daemon log.
    for noisy in ("sentence_transformers", "transformers", "httpx", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


main.add_command(check_command)


def _cannot_start(message: str) -> NoReturn:
    """One line, exit status 2, at once.

    The model is loading on its own thread meanwhile (a first start exports
    it, importing torch for 4-6 s), and an import cannot be interrupted. A
    normal exit waits for that thread, whose imports then run into the
    interpreter's shutdown and log "can't register atexit after shutdown"
    under the line that matters. Nothing needs closing here: the memories are
    not loaded and nothing is served yet, and what the vault wrote so far is
    as safe as at a `kill -9`, which every write is built to survive."""
    click.echo(f"memvaultd: {message}", err=True)
    sys.stderr.flush()
    os._exit(2)


if __name__ == "__main__":
    main()
