"""Random bytes for ids, fetched from the OS in blocks.

`os.urandom` is one getrandom(2) call, and CPython releases the interpreter
lock around it. Taking the lock back waits behind whichever thread is
computing: 10,000 12-byte nonces took 5 ms alone and 2.3 s beside one busy
thread. A `RememberBatch` of 10,000 memories draws 30,000 values (memory
ids, operation ids, nonces), so a batch that met a snapshot being encoded
took up to 10 s instead of 1.5 (loading 600k memories, docs/benchmarks.md),
and under 8 concurrent clients every remember paid it too. Fetching 4 KiB at
a time makes that one call per ~300 values.

The bytes are the OS's CSPRNG output, unchanged; only when they are fetched
differs. Each thread has its own block (no lock to wait on), and a forked
child never uses its parent's: a fork drops every block. Keys, salts and
recovery secrets do not come from here; they are drawn straight from the OS
when they are made (`keys.py`, `keyfile.py`, `sync/recovery.py`), so no
block in memory ever held one; nor do nonces (`aead.py`): a virtual machine
restored from a snapshot replays the blocks it held, and a nonce must never
repeat.
"""

from __future__ import annotations

import os
import threading

__all__ = ["new_id", "random_bytes"]

_BLOCK = 4096
_local = threading.local()
_generation = 0  # bumped in a forked child: blocks of an older generation are dropped


def _forked() -> None:
    global _generation
    _generation += 1


os.register_at_fork(after_in_child=_forked)


def random_bytes(size: int) -> bytes:
    """`size` bytes from the OS's CSPRNG, as `os.urandom(size)`."""
    if size > _BLOCK // 4:
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
