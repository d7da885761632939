"""Random bytes for ids: from the OS at each call, or in blocks within one
write.

`os.urandom` is one getrandom(2) call, and CPython releases the interpreter
lock around it. Taking the lock back waits behind whichever thread is
computing: 10,000 12-byte values took 5 ms alone and 2.3 s beside one busy
thread. A `RememberBatch` of 10,000 memories draws 20,000 ids (memories and
operations), so a batch that met a snapshot being encoded took up to 10 s
instead of 1.5 (loading 600k memories, docs/benchmarks.md). Within
`drawing()`, which the vault's batch writes enter, ids come from a 4 KiB
block fetched at the first draw: one call per ~250 ids.

A block lives only as long as the write that fetched it. A virtual machine
restored from a snapshot (or cloned) resumes with the memory it held then;
a block kept between writes would hand the next writes the ids the
discarded run had already used and pushed, and every other device would
drop those operations as already seen. Outside `drawing()` each id is its
own draw. The bytes are the OS's CSPRNG output, unchanged; a forked child
never uses its parent's block. Keys, salts, recovery secrets and nonces do
not come from here: they are drawn straight from the OS when made
(`keys.py`, `keyfile.py`, `sync/recovery.py`, `aead.py`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["drawing", "new_id", "random_bytes"]

_BLOCK = 4096
_local = threading.local()
_generation = 0  # bumped in a forked child: blocks of an older generation are dropped


def _forked() -> None:
    global _generation
    _generation += 1


os.register_at_fork(after_in_child=_forked)


@contextmanager
def drawing() -> Iterator[None]:
    """Within this (one write, on this thread), ids come from blocks of OS
    randomness; the block is dropped when the outermost `drawing()` ends.
    Usable as a decorator."""
    depth: int = getattr(_local, "depth", 0)
    _local.depth = depth + 1
    try:
        yield
    finally:
        _local.depth = depth
        if depth == 0:
            _local.block = None


def random_bytes(size: int) -> bytes:
    """`size` bytes from the OS's CSPRNG, as `os.urandom(size)`."""
    if size > _BLOCK // 4 or not getattr(_local, "depth", 0):
        return os.urandom(size)
    block: bytes | None = getattr(_local, "block", None)
    start: int = getattr(_local, "offset", 0)
    if block is None or _local.generation != _generation or start + size > len(block):
        block, start = os.urandom(_BLOCK), 0
        _local.block, _local.generation = block, _generation
    _local.offset = start + size
    return block[start : start + size]


def new_id() -> str:
    """A random (version 4) UUID in hex, as `uuid.uuid4().hex`: the version
    and variant bits set by hand, 0.64 us against 1.9 us through `uuid.UUID`
    (`init` draws one per memory of the vault)."""
    raw = bytearray(random_bytes(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # variant RFC 4122
    return raw.hex()
