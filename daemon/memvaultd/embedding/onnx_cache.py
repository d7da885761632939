"""The cache of exported models: found, checked, or exported from torch once.

The file is `<cache dir>/<model name>-<key>.onnx`, key = the first 16 hex digits
of SHA-256 over (FORMAT_VERSION, OPSET, the model directory, and the relative
path, size and mtime_ns of each of its files): a changed model, or a changed
exporter, gets a new file. It is a plain ONNX model (protobuf: data, no code
runs when it loads), derived from public weights only. Its metadata_props hold

    memvault.format = FORMAT_VERSION
    memvault.probe  = sentence-transformers' own vector for PROBES[0], a JSON list

and every load checks the file still gives that vector (within TOLERANCE): a
damaged file is deleted and exported again rather than serving wrong vectors.

An export (the only code here that imports torch, ~7 s) writes a temporary file
in the cache directory, fsyncs it, checks it against sentence-transformers on
all of PROBES, renames it over the final name and fsyncs the directory.
Daemons starting together take `<file>.lock` (flock) in turn: one exports, the
others load its file. Should one stop waiting (LOCK_WAIT_S), two exports each
rename a complete file over the other, and a reader opens one whole file or the
other, never a mix.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memvault_base.durable import sync_dir
from memvaultd.embedding.onnx_model import (
    INPUTS,
    Layout,
    OnnxModel,
    Unsupported,
    read_layout,
    tokenizer,
)
from memvaultd.model.vector import Vector

log = logging.getLogger("memvaultd.onnx_cache")

FORMAT_VERSION = 1
OPSET = 17  # the opset of the measured export
# Largest difference allowed in any component of a unit vector, against
# sentence-transformers: MiniLM measured 2e-7, so 1e-5 leaves a 50 x margin for
# other CPUs' kernels and still rejects a graph that computes anything else.
TOLERANCE = 1e-5
# An export took 6.5-6.9 s here (2 cores at load ~5, most of it importing
# torch); this covers a machine dozens of times slower. Past it, export anyway:
# the rename keeps that safe.
LOCK_WAIT_S = 300.0
# Unequal lengths (the padding mask) and one text past 256 tokens (the cut).
PROBES = ("memvault checks its exported model against sentence-transformers",
          "a short one",
          " ".join(["a text longer than the model's maximum length is cut"] * 40))


def load(model_dir: Path, name: str, cache_dir: Path) -> OnnxModel:
    """The model from the cache, exported into it first if missing or damaged."""
    layout = read_layout(model_dir)
    path = cache_file(model_dir, name, cache_dir)
    model = _open_cached(path, layout)
    if model is None:
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with _lock(path.with_name(path.name + ".lock")):
            model = _open_cached(path, layout)  # another daemon's, exported while this waited
            if model is None:
                _export(model_dir, layout, path)
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
        path.unlink(missing_ok=True)
        return None


def _export(model_dir: Path, layout: Layout, path: Path) -> None:
    started = time.monotonic()
    import onnx
    import torch

    from memvaultd.embedding.torch_model import sentence_transformer

    model = sentence_transformer(str(model_dir))
    transformer: Any = model[0].auto_model
    transformer.eval()
    names = [name for name in INPUTS if name in model.tokenizer.model_input_names]

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer  # a submodule: its weights become initialisers

        # By keyword: BertModel's positional parameters have use_cache among them.
        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            hidden: torch.Tensor = self.transformer(**dict(zip(names, inputs, strict=True))
                                                    ).last_hidden_state
            return hidden

    # Traced on two texts of unequal length, so the graph keeps the padding mask.
    sample = tokenizer(layout).encode_batch(list(PROBES[:2]))
    inputs = tuple(torch.tensor([getattr(e, INPUTS[name]) for e in sample]) for name in names)
    expected = model.encode(list(PROBES), normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with warnings.catch_warnings(), torch.no_grad():
            # The legacy exporter's deprecation, and the tracer's notes on Python
            # branches over shapes: what the graph computes is checked below.
            warnings.simplefilter("ignore")
            torch.onnx.export(Hidden(), inputs, str(temporary), input_names=names,
                              output_names=["last_hidden_state"], opset_version=OPSET,
                              dynamic_axes={name: {0: "batch", 1: "sequence"}
                                            for name in [*names, "last_hidden_state"]},
                              dynamo=False)
        graph = onnx.load(str(temporary))
        for key, value in (("memvault.format", str(FORMAT_VERSION)),
                           ("memvault.probe", json.dumps(expected[0].tolist()))):
            graph.metadata_props.add(key=key, value=value)
        with open(temporary, "wb") as out:
            out.write(graph.SerializeToString())
            out.flush()
            os.fsync(out.fileno())
        exported = OnnxModel(temporary, layout).encode(list(PROBES))
        compare(exported, expected, "sentence-transformers")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    sync_dir(path.parent)
    log.info("exported the model to %s in %.1f s", path, time.monotonic() - started)


def _prune(path: Path) -> None:
    """Drop exports of older versions of this model (~90 MB each for MiniLM), and
    what exports killed midway left (called holding the lock, after an export)."""
    stem = path.name.rsplit("-", 1)[0]
    pattern = re.compile(re.escape(stem) + r"-[0-9a-f]{16}\.onnx(\.lock|\.\d+\.tmp)?")
    for old in path.parent.iterdir():
        if pattern.fullmatch(old.name) and old.name not in (path.name, f"{path.name}.lock"):
            old.unlink(missing_ok=True)


@contextmanager
def _lock(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
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


def cache_file(model_dir: Path, name: str, cache_dir: Path) -> Path:
    root = model_dir.resolve()
    entries = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))  # .git, .cache
        for file in sorted(f for f in files if not f.startswith(".")):
            stat = (Path(directory) / file).stat()
            entries.append([str((Path(directory) / file).relative_to(root)), stat.st_size,
                            stat.st_mtime_ns])
    key = json.dumps([FORMAT_VERSION, OPSET, str(root), entries]).encode()
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:64] or "model"
    return cache_dir / f"{stem}-{hashlib.sha256(key).hexdigest()[:16]}.onnx"


def compare(got: Vector, expected: Vector, against: str) -> None:
    worst = float(np.abs(got - expected).max()) if got.shape == expected.shape else np.inf
    if not worst <= TOLERANCE:
        raise Unsupported(f"vectors differ from {against} by up to {worst:.1e} "
                          f"(allowed: {TOLERANCE:.0e})")
