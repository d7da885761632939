"""Remotes: where a vault's sealed objects and version chain are kept.

    open_remote("file:///srv/memvault", vault_id=V)         a directory
    open_remote("s3://bucket/prefix", vault_id=V)           an S3-compatible bucket
    open_remote("grpc://host:7433", token=T, vault_id=V)    a memvault-server
    open_remote("grpcs://host:7433", token=T, vault_id=V)   the same over TLS
    open_remote("memory://name", vault_id=V)                this process, for tests

Every one keeps the contract of `base.Remote`; tests/test_remote_contract.py
holds them to it.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from memvault_base.errors import InvalidArgument
from memvault_base.objects.names import check_vault_id
from memvaultd.sync.remotes.base import Remote

__all__ = ["Remote", "open_remote", "redact"]

SCHEMES = ("file", "s3", "grpc", "grpcs", "memory")


def open_remote(url: str, *, token: str | None = None, vault_id: str) -> Remote:
    """The remote `url` names, scoped to `vault_id` (objects under `<vault_id>/`).

    Raises `InvalidArgument` for an unknown scheme or a malformed URL or vault
    id, `Unavailable` if a directory cannot be created. Network remotes
    connect lazily: a server or bucket that is down fails the first call.
    """
    check_vault_id(vault_id)
    parts = urlsplit(url)
    shown = redact(url)
    if parts.scheme == "memory":
        from memvaultd.sync.remotes.memory import MemoryRemote

        return MemoryRemote(shown, parts.netloc + parts.path, vault_id)
    if parts.scheme == "file":
        from memvaultd.sync.remotes.directory import open_directory

        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise InvalidArgument(f"{shown!r}: a directory remote is file:///absolute/path")
        return open_directory(shown, Path(parts.path), vault_id)
    if parts.scheme == "s3":
        from memvaultd.sync.remotes.s3 import open_s3

        return open_s3(shown, parts.netloc, parts.path, vault_id)
    if parts.scheme in ("grpc", "grpcs"):
        from memvaultd.sync.remotes.grpc_remote import GrpcRemote

        if not parts.hostname or not parts.port or parts.path not in ("", "/"):
            raise InvalidArgument(f"{shown!r}: a server remote is {parts.scheme}://host:port")
        target = f"[{parts.hostname}]:{parts.port}" if ":" in parts.hostname else (
            f"{parts.hostname}:{parts.port}")
        return GrpcRemote(shown, target, parts.scheme == "grpcs", token, vault_id)
    raise InvalidArgument(f"{shown!r}: unknown remote; use one of "
                          + ", ".join(f"{s}://" for s in SCHEMES))


def redact(url: str) -> str:
    """`url` without a password or query (where a secret could hide)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2] if "@" in parts.netloc else parts.netloc
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
