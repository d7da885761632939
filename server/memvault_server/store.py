"""Where the server keeps its bytes: one protocol, two stores.

    DirStore   (dir_store.py)  a local directory; the default (`--data DIR`)
    S3Store    (s3_store.py)   an S3-compatible bucket (`--store s3://bucket/prefix`),
                               shareable by several server replicas

Keys are `names.py`'s layout (`<vault>/objects/<name>`, `<vault>/versions/<n>`,
`<vault>/owner`). A store knows nothing of vaults, accounts or chains: the
chain's rules live in `chain.py` on top of put-if-absent, so the S3 store is
as safe with many replicas as the directory store is with one server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class Store(Protocol):
    shared: bool
    """True if other server processes may write the same store (S3): heads
    must then be read from the store, not from this process's memory."""

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write `data` under `key` unless the key exists. True if written.
        Atomic (a reader sees all or nothing, also after a crash) and durable
        when it returns True; of concurrent writers of one key (in any
        process sharing the store) exactly one gets True."""
        ...

    def get(self, key: str) -> bytes:
        """The bytes under `key`; `memvault_base.errors.NotFound` if there are none."""
        ...

    def exists(self, key: str) -> bool:
        """Whether `key` holds bytes now."""
        ...

    def list(self, prefix: str, start_after: str = "", limit: int | None = None) -> list[str]:
        """Keys that start with `prefix` (a string prefix) and sort after
        `start_after`, sorted, at most `limit` of them (all if None)."""
        ...

    def delete(self, key: str) -> None:
        """Remove `key`; a missing key is fine."""
        ...

    def close(self) -> None: ...


def open_store(spec: str | None, data_dir: Path) -> Store:
    """`--store` as given: None (the directory `data_dir/store`) or `s3://bucket/prefix`."""
    if spec is None or spec == "":
        from memvault_base.objects.directory import DirStore

        return DirStore(data_dir / "store")
    if spec.startswith("s3://"):
        from memvault_base.objects.s3 import open_s3_store

        return open_s3_store(spec)
    from memvault_base.errors import InvalidArgument

    raise InvalidArgument(f"--store {spec!r}: use s3://bucket/prefix, or leave it out for "
                          f"the data directory")
