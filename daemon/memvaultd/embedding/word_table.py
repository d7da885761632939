"""The model's word embeddings, read from their file a row at a time.

The first step of the model is a lookup: each token's row of the word
embedding table (MiniLM: 30,522 x 384 float32, 45 MB). Inside the ONNX
graph that table is an initializer, which ONNX Runtime maps from the
weights file; the kernel maps 64 KiB around each page a lookup touches, so
a serving daemon's mapping of it grew with every new word, to 18 MB after
the ~120 texts of `scripts/bench_recall.py` and to the whole 45 MB after a
few hundred texts of conversation. The export therefore leaves the lookup
out of the graph (which takes `inputs_embeds`) and writes the table to a
file of its own (`docs/format.md`, "The model cache"); `gather` reads the
rows a batch needs with one `pread` each into a buffer the batch owns. A
query of ~15 tokens costs ~15 reads, a few microseconds beside its 4-5 ms
in the model. The process holds no part of the table: the pages read stay
in the page cache, unmapped, the first memory the kernel takes back
(decision 0016). The graph computes the same vectors to the bit (the
lookup moved, not the arithmetic).

Layout: `rows` x `dims` float32 values, little-endian, row-major, nothing
else; `rows` and `dims` are recorded in the graph's metadata
(`memvault.words`), and a file of any other size is refused.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path

import numpy as np
import numpy.typing as npt

VALUE = np.dtype("<f4")


class WordTable:
    """An open word-embedding file of `rows` x `dims` values."""

    def __init__(self, path: Path, rows: int, dims: int) -> None:
        self.path, self.rows, self.dims = path, rows, dims
        self._row_bytes = dims * VALUE.itemsize
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        # The file stays open for the model's life: the export renames a new
        # file into place, never writes this one, so reads stay whole.
        self._close = weakref.finalize(self, os.close, fd)
        self._fd = fd
        size = os.fstat(fd).st_size
        if size != rows * self._row_bytes:
            self._close()
            raise ValueError(f"{path.name} holds {size} bytes; {rows} x {dims} float32 "
                             f"rows are {rows * self._row_bytes}")

    def gather(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """The rows of `ids` (any shape), as float32 of shape `ids.shape + (dims,)`."""
        unique, inverse = np.unique(ids.ravel(), return_inverse=True)
        if len(unique) and not (unique[0] >= 0 and unique[-1] < self.rows):
            raise ValueError(f"token ids {int(unique[0])}..{int(unique[-1])} are outside "
                             f"the table's {self.rows} rows")
        size = self._row_bytes
        read = [os.pread(self._fd, size, token * size) for token in unique.tolist()]
        for token, row in zip(unique.tolist(), read, strict=True):
            if len(row) != size:
                raise OSError(f"{self.path.name} ends before row {token}")
        found = np.frombuffer(b"".join(read), VALUE).reshape(len(unique), self.dims)
        rows: npt.NDArray[np.float32] = found.astype(np.float32, copy=False)[inverse]
        return rows.reshape(*ids.shape, self.dims)

    def close(self) -> None:
        self._close()
