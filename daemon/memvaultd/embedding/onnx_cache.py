"""The cache of exported models: found, checked, or exported once by a child process.

One cache serves every daemon of a user (`memvault_base.paths`: `model_cache`,
~/.cache/memvault/models), whatever its MEMVAULT_HOME or its install. The
export is `<cache dir>/<model name>-<key>.onnx`, the graph, and beside it
`<...>.onnx.data`, the weights, and `<...>.onnx.words`, the word table;
key = the first 16 hex digits of SHA-256 over (FORMAT_VERSION, OPSET, and
the relative path and SHA-256 of each of the model's files): the same
weights installed twice share one export, and a changed model, or a changed
exporter, gets a new file. Hashing MiniLM's 90 MB took 240-320 ms, a
third of a warm start, so each file's digest is kept in
`digests.json` beside the exports, keyed by the file's path, size, mtime_ns,
ctime_ns and inode (any rewrite of a file changes its ctime), and computed
again only when one of them changes.

The weights are a file of their own because ONNX Runtime maps such a file
instead of copying it into the heap, and then packs the matrices it
multiplies by into buffers of its own (~45 MB for MiniLM). The word
embeddings (30,522 x 384 floats, 45 MB) are not in the graph at all: they
are a third file, `<...>.onnx.words`, which the daemon reads a row at a time
(`word_table.py`): mapped, they grew with every new word the daemon saw,
to 18 MB after the benchmark's ~120 texts and to all 45 MB after 300
conversation turns.
The export renames files into place and never writes one in place, so a
daemon reading them keeps the files it opened.

The graph is a plain ONNX model (protobuf: data, no code runs when it loads),
derived from public weights only. Its metadata_props hold

    memvault.format = FORMAT_VERSION
    memvault.probe  = sentence-transformers' own vector for PROBES[0], a JSON list
    memvault.words  = the word table's [rows, dimensions], a JSON list

and every load checks the file still gives that vector (within TOLERANCE): a
damaged file is deleted and exported again rather than serving wrong vectors.

The export imports torch (~800 MB resident, ~4 s), so it runs in a child
process (`python -m memvaultd.embedding.export`, `export.py`) and the daemon
never holds torch. The child writes temporary files in the cache directory,
fsyncs them, checks them against sentence-transformers on all of PROBES,
renames the weights and the word table, then the graph, over the final
names and fsyncs the directory. Daemons starting together take
`<file>.lock` (flock) in turn: one starts the export, the others load its file.
Should one stop waiting (LOCK_WAIT_S), two exports each rename complete files
over the other's, and a reader opens one whole file or the other; the
files of two exports of one key are the same bytes, and the check
below would find any mix that is not.

A child that fails raises `ExportFailed` with its last line of error (the
daemon stops, saying why); a child that finds the model does not reproduce on
ONNX Runtime exits with UNSUPPORTED_EXIT, raised here as `Unsupported` (the
embedder runs that model on torch).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import site
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import memvault_base
import memvaultd
from memvault_base.errors import MemvaultError
from memvault_base.secrecy import private_directory
from memvaultd.embedding.onnx_model import (
    Layout,
    OnnxModel,
    Unsupported,
    read_layout,
    words_file,
)
from memvaultd.model.vector import Vector

log = logging.getLogger("memvaultd.onnx_cache")

# 3: the weights in a file beside the graph, the word embeddings in another.
FORMAT_VERSION = 3
OPSET = 17  # the opset of the measured export
# Largest difference allowed in any component of a unit vector, against
# sentence-transformers: MiniLM measured 2e-7, so 1e-5 leaves a 50 x margin for
# other CPUs' kernels and still rejects a graph that computes anything else.
TOLERANCE = 1e-5
# An export took 6.5-6.9 s here (2 cores at load ~5, most of it importing
# torch); this covers a machine dozens of times slower. Past it, export anyway:
# the rename keeps that safe. A child export is given as long.
LOCK_WAIT_S = 300.0
# The child's exit status for a model the export does not reproduce.
UNSUPPORTED_EXIT = 3
DIGESTS = "digests.json"
# Unequal lengths (the padding mask) and one text past 256 tokens (the cut).
PROBES = ("memvault checks its exported model against sentence-transformers",
          "a short one",
          " ".join(["a text longer than the model's maximum length is cut"] * 40))


class ExportFailed(Exception):
    """The model could not be exported to the cache (the cause is in the message)."""


def load(model_dir: Path, name: str, cache_dir: Path) -> OnnxModel:
    """The model from the cache, exported into it first if missing or damaged."""
    layout = read_layout(model_dir)
    # The daemon runs what it finds here: a cache another user owns, or that
    # a symlink points elsewhere, could hand it a model of their making.
    try:
        private_directory(cache_dir, "the model cache")
    except OSError as exc:
        raise ExportFailed(f"cannot create the model cache {cache_dir}: {exc.strerror}") from exc
    except MemvaultError as exc:
        raise ExportFailed(str(exc)) from None
    path = cache_file(model_dir, name, cache_dir)
    model = _open_cached(path, layout)
    if model is None:
        with _lock(path.with_name(path.name + ".lock")):
            model = _open_cached(path, layout)  # another daemon's, exported while this waited
            if model is None:
                _export(model_dir, path)
                _prune(path)
                model = OnnxModel(path, layout)
                check(model)
    return model


def _open_cached(path: Path, layout: Layout) -> OnnxModel | None:
    if not path.exists():
        return None
    try:
        model = OnnxModel(path, layout)
        check(model)
        return model
    except Exception as exc:  # truncated, damaged, or from another exporter version
        log.warning("cached model %s is unusable (%s); exporting it again", path, exc)
        for part in (path, weights_file(path), words_file(path)):
            part.unlink(missing_ok=True)
        return None


def _export(model_dir: Path, path: Path) -> None:
    """Export in a child process of this interpreter, running this process's
    code: a source tree this one found on its own path (a checkout run with
    `python -m` from its folder) leads the child's PYTHONPATH."""
    started = time.monotonic()
    installed = {str(Path(folder).resolve())
                 for folder in [*site.getsitepackages(), site.getusersitepackages()]}
    roots = [root for module in (memvaultd, memvault_base)
             if (root := str(Path(str(module.__file__)).resolve().parents[1])) not in installed]
    env = dict(os.environ)
    if roots:
        env["PYTHONPATH"] = os.pathsep.join(
            [*dict.fromkeys(roots), *filter(None, [os.environ.get("PYTHONPATH")])])
    try:
        done = subprocess.run([sys.executable, "-P", "-m", "memvaultd.embedding.export",
                               str(model_dir), str(path)],
                              env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=LOCK_WAIT_S, check=False)
    except subprocess.TimeoutExpired as exc:  # run() has killed it
        raise ExportFailed(f"exporting the model took over {LOCK_WAIT_S:.0f} s") from exc
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    if done.returncode == UNSUPPORTED_EXIT:
        raise Unsupported(lines[-1] if lines else "the export does not reproduce the model")
    if done.returncode != 0:
        for line in lines[-20:]:
            log.error("export: %s", line)
        cause = lines[-1] if lines else f"exit status {done.returncode}"
        raise ExportFailed(f"exporting the model to ONNX failed: {cause[:300]}")
    log.info("exported the model to %s in %.1f s", path, time.monotonic() - started)


def _prune(path: Path) -> None:
    """Drop exports of older versions of this model (~90 MB each for MiniLM), and
    what exports killed midway left (called holding the lock, after an export)."""
    stem = path.name.rsplit("-", 1)[0]
    pattern = re.compile(re.escape(stem)
                         + r"-[0-9a-f]{16}\.onnx(\.data|\.words)?(\.lock|\.\d+\.tmp)?")
    keep = (path.name, f"{path.name}.lock", weights_file(path).name, words_file(path).name)
    for old in path.parent.iterdir():
        if pattern.fullmatch(old.name) and old.name not in keep:
            old.unlink(missing_ok=True)


@contextmanager
def _lock(path: Path) -> Iterator[None]:
    try:
        handle = open(path, "a")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise ExportFailed(f"cannot write to the model cache {path.parent}: "
                           f"{exc.strerror}") from exc
    with handle:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    log.warning("%s still held after %.0f s; exporting anyway", path, LOCK_WAIT_S)
                    break
                time.sleep(0.1)
        yield  # closing the file releases the lock


def check(model: OnnxModel) -> None:
    """Raise unless `model` gives the vector recorded when it was exported."""
    if model.metadata.get("memvault.format") != str(FORMAT_VERSION):
        raise ValueError(f"format {model.metadata.get('memvault.format')!r}, "
                         f"expected {FORMAT_VERSION}")
    expected = np.array([json.loads(model.metadata["memvault.probe"])], dtype=np.float32)
    compare(model.encode([PROBES[0]]), expected, "the vector recorded at export")


def weights_file(path: Path) -> Path:
    """The weights of the graph at `path` (named in the graph, relative to it)."""
    return path.with_name(f"{path.name}.data")


def cache_file(model_dir: Path, name: str, cache_dir: Path) -> Path:
    """Where the export of the model in `model_dir` is, named for its content."""
    root = model_dir.resolve()
    files = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))  # .git, .cache
        files += [Path(directory) / n for n in sorted(names) if not n.startswith(".")]
    digests = _digests(files, cache_dir / DIGESTS)
    entries = [[str(file.relative_to(root)), digests[str(file)]] for file in files]
    key = json.dumps([FORMAT_VERSION, OPSET, entries]).encode()
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:64] or "model"
    return cache_dir / f"{stem}-{hashlib.sha256(key).hexdigest()[:16]}.onnx"


def _digests(files: list[Path], memo: Path) -> dict[str, str]:
    """SHA-256 of each file, taken from `memo` while the file's stat is unchanged."""
    try:
        known = json.loads(memo.read_text())
    except (OSError, ValueError):  # none yet, or torn by a crash: hash again
        known = {}
    known = known if isinstance(known, dict) else {}
    found, changed = {}, False
    for file in files:
        stat = file.stat()
        seen = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
        entry = known.get(str(file))
        if isinstance(entry, list) and entry[:-1] == seen:
            found[str(file)] = str(entry[-1])
            continue
        with open(file, "rb") as handle:
            found[str(file)] = hashlib.file_digest(handle, "sha256").hexdigest()
        known[str(file)] = [*seen, found[str(file)]]
        changed = True
    if changed:
        _write_memo(memo, {name: entry for name, entry in known.items()
                           if os.path.exists(name)})
    return found


def _write_memo(memo: Path, known: dict[str, object]) -> None:
    # Whole or not at all (two daemons may write it at once); no fsync: a
    # lost memo costs one hashing.
    temporary = memo.with_name(f"{memo.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        temporary.write_text(json.dumps(known))
        os.replace(temporary, memo)
    except OSError as exc:  # a read-only cache still loads its export
        log.warning("cannot keep the model's digests in %s: %s", memo, exc.strerror)
    finally:
        temporary.unlink(missing_ok=True)


def compare(got: Vector, expected: Vector, against: str) -> None:
    worst = float(np.abs(got - expected).max()) if got.shape == expected.shape else np.inf
    if not worst <= TOLERANCE:
        raise Unsupported(f"vectors differ from {against} by up to {worst:.1e} "
                          f"(allowed: {TOLERANCE:.0e})")
