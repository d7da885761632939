"""The contract of an object store: write-once bytes under string keys.

Two implementations: `directory.DirectoryStore` (a local directory) and
`s3.S3Store` (an S3-compatible bucket). memvault-server keeps every vault in
one of them (`--data DIR` or `--store s3://...`, `memvault_server.store`), and
the daemon's `file://` and `s3://` remotes are its `BlobRemote` over one.
tests/test_remote_contract.py holds both to this contract, through the
daemon's remotes and through the server.

Keys follow `names.py`'s layout, `<vault_id>/<kind>` or
`<vault_id>/<kind>/<name>`, but a store knows nothing of vaults, accounts or
chains: the chain's rules are written once on top of `put_if_absent` (the
server's `chain.py`, the daemon's `BlobRemote`), so a store shared by many
writers is as safe as one used by a single process.

Failures to reach the store are `Unavailable`; a missing key is `NotFound`
(both `memvault_base.errors`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol


class Store(Protocol):
    shared: bool
    """True if other processes may write the same keys (a bucket, a directory
    several devices sync through): what this process saw stored may be stale
    at once, so a head must be read from the store, not from memory."""

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Store `data` under `key` unless the key exists.

        Returns True if written, False if the key was taken (the stored bytes
        are unchanged, whatever `data` is). Atomic: a reader sees all of the
        bytes or none, also after a crash of the writer. Durable once True is
        returned. Of concurrent writers of one key, in any process sharing
        the store, exactly one gets True. After `Unavailable` the write may or
        may not have landed.
        """
        ...

    def get(self, key: str) -> bytes:
        """The bytes stored under `key`; `NotFound` if there are none."""
        ...

    def exists(self, key: str) -> bool:
        """Whether `key` holds bytes now."""
        ...

    def list(self, prefix: str, start_after: str = "", limit: int | None = None) -> list[str]:
        """The keys that start with `prefix` (a plain string prefix, not only
        whole path components) and sort after `start_after`, ascending, at
        most `limit` of them (all if None). `prefix` reaches at least as far
        as `<vault_id>/<kind>/`."""
        ...

    def inventory(self) -> Iterator[tuple[str, int]]:
        """Every key the store holds with its size in bytes, in no particular
        order (memvault-server counts each account's quota from it at start)."""
        ...

    def delete(self, key: str) -> None:
        """Remove `key`; a missing key is not an error. Afterwards `get(key)`
        raises `NotFound` and `put_if_absent(key, ...)` may write it again."""
        ...

    def close(self) -> None:
        """Release connections. The store is unusable afterwards."""
        ...
