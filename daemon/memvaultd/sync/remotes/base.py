"""The contract every remote keeps: what the sync worker may rely on.

A remote stores opaque bytes for one vault and never sees a key. It holds two
things:

- **objects**: write-once blobs under a name. A name, once written, keeps its
  bytes until it is deleted; a second write of the same name changes nothing.
- **versions**: a linear chain 1, 2, 3, ... Version N is accepted only if no
  version N exists and N-1 is the head (N == 1: the chain is empty). Of
  several writers racing for N, exactly one wins; the others are told so and
  pull, merge and retry (TaskChampion's version chain).

The remote is untrusted: it may lose, replay, reorder or alter anything. The
contract below describes an honest remote; the reader above it checks the
chain (parent hashes, AEAD) after decrypting. `tests/test_remote_contract.py`
runs this contract against every implementation.

Names: 1..200 characters of `[a-z0-9/_.-]`, no leading, trailing or doubled
`/`, no `.` or `..` component (`memvault_base.objects.names`, the rules
memvault-server checks too). A bad name is `InvalidArgument` before anything
reaches the remote. Failures to reach the remote are `Unavailable`; a remote
that answers with something the contract does not allow is `MemvaultError`.

Sizes: an object or version is at most `names.MAX_OBJECT` bytes (16 MiB, the
largest memvault writes). A larger one is `ResourceExhausted` before it is
sent; one the remote hands back is `IntegrityError`, refused unread where
the remote says its size first. So are listings past `names.MAX_LISTED`
names and answers out of order: a hostile remote cannot make a device hold
more than the bounds before anything is authenticated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable


class Remote(Protocol):
    """One vault's space on a remote (a server, a bucket prefix, a directory)."""

    url: str
    """Where it is, as the user gave it, minus any secret (no token, no key)."""

    def put_object(self, name: str, data: bytes) -> bool:
        """Store `data` under `name` if no object of that name exists.

        Returns True if written, False if the name was taken (the stored bytes
        are unchanged, whatever `data` is). Atomic: a reader sees the whole
        object or none of it, also after a crash of the writer. Durable once
        True is returned.
        """
        ...

    def get_object(self, name: str) -> bytes:
        """The bytes stored under `name`. Raises `NotFound` if there are none."""
        ...

    def list_objects(self, prefix: str = "") -> list[str]:
        """Every object name that starts with `prefix` (a plain string prefix,
        not only whole path components), sorted. Versions are not objects and
        never appear here."""
        ...

    def delete_object(self, name: str) -> None:
        """Remove `name`, for pruning behind snapshots. A missing object is not
        an error. After it returns, `get_object(name)` raises `NotFound` and
        `put_object(name, ...)` may write the name again."""
        ...

    def append_version(self, number: int, parent: bytes, data: bytes) -> bool:
        """Append version `number` to the chain (compare-and-swap).

        Accepted only if version `number` does not exist and either
        `number == 1` or version `number - 1` exists (is the head). Returns
        True if appended (durable), False if not: someone else appended
        `number` first, or the chain is not at `number - 1`. The loser pulls,
        merges and retries with the next number.

        `parent` is the caller's sha256 of version `number - 1`'s bytes: empty
        for number 1, else 32 bytes (`InvalidArgument` otherwise; also for
        `number < 1`). The memvault-server checks it against the stored
        version and refuses a mismatch with `InvalidArgument`; the directory,
        S3 and memory remotes store blobs only and leave that check to the
        reader, which verifies the chain after decrypting.

        After `Unavailable` the append may or may not have landed (the reply
        was lost, not the request); a retry then returns False although the
        stored version is the caller's own. Compare the stored bytes
        (`versions_after(number - 1, 1)`) before treating False as a loss.
        The same holds for `put_object`.
        """
        ...

    def versions_after(self, number: int, limit: int = 1000) -> list[tuple[int, bytes]]:
        """`(number, data)` of the versions with a number greater than `number`,
        ascending, at most `limit` (1..1000) of them. Fewer than `limit` means
        the chain ends there. Versions pruned from the remote are skipped."""
        ...

    def head(self) -> int:
        """The highest version number, 0 if the chain is empty."""
        ...

    def watch_head(self, after: int, timeout: float) -> int:
        """Block until the head is greater than `after`, or `timeout` seconds
        pass; return the head either way.

        How soon it wakes after an append by another client depends on the
        remote: memory at once (a condition), memvault-server at once (the
        server pushes on a stream), directory within 0.5 s and S3 within 2 s
        (they poll the head at that interval). It may also return early with
        an unchanged head when a server ends the stream (it is stopping):
        callers loop.
        """
        ...

    def close(self) -> None:
        """Release connections and threads. The remote is unusable afterwards."""
        ...


@runtime_checkable
class DeviceTokens(Protocol):
    """A remote whose tokens are bound to devices (memvault-server): a
    revoked device's token is revoked there (docs/decisions/0013-key-epochs.md)."""

    def bind_device(self, device: str, public_key: bytes) -> None: ...

    def revoke_device(self, target: str, signer: str, sign: Callable[[bytes], bytes]) -> str: ...
