"""Remotes: where a vault's sealed objects and version chain are kept.

    open_remote("file:///srv/memvault", vault_id=V)         a directory
    open_remote("s3://bucket/prefix", vault_id=V)           an S3-compatible bucket
    open_remote("grpc://host:7433", token=T, vault_id=V)    a memvault-server
    open_remote("grpcs://host:7433", token=T, vault_id=V)   the same over TLS
    open_remote("memory://name", vault_id=V)                this process, for tests

Every one keeps the contract of `base.Remote`; tests/test_remote_contract.py
holds them to it.

Setting sync up (`init`, `join`) checks a remote before a vault is trusted
to it: a memvault-server token is not sent in clear (`grpc://`) to a host
other than this one unless the user said so, and an S3 store must refuse a
second put-if-absent of one key (`s3.py`). A remote resumed at start was
checked when it was set up.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from memvault_base.errors import InvalidArgument
from memvault_base.objects.names import check_vault_id
from memvaultd.sync.remotes.base import Remote

__all__ = ["Remote", "open_remote", "redact"]

SCHEMES = ("file", "s3", "grpc", "grpcs", "memory")


def open_remote(url: str, *, token: str | None = None, vault_id: str, device: str = "",
                setting_up: bool = False, allow_cleartext_token: bool = False) -> Remote:
    """The remote `url` names, scoped to `vault_id` (objects under `<vault_id>/`).

    `device` (this device's id) names what this device leaves in a shared
    directory, so that it deletes only its own leftovers. `setting_up` runs
    the checks of `init` and `join` (above); `allow_cleartext_token` lets a
    token go to another host over `grpc://`.

    Raises `InvalidArgument` for an unknown scheme or a malformed URL or vault
    id, or a remote those checks refuse; `Unavailable` if a directory cannot
    be created. Network remotes connect lazily: a server or bucket that is
    down fails the first call (the S3 check is that call).
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
        return open_directory(shown, Path(parts.path), vault_id, device)
    if parts.scheme == "s3":
        from memvaultd.sync.remotes.s3 import open_s3

        return open_s3(shown, parts.netloc, parts.path, vault_id, probe=setting_up)
    if parts.scheme in ("grpc", "grpcs"):
        from memvaultd.sync.remotes.grpc_remote import GrpcRemote

        if not parts.hostname or not parts.port or parts.path not in ("", "/"):
            raise InvalidArgument(f"{shown!r}: a server remote is {parts.scheme}://host:port")
        if (setting_up and token and parts.scheme == "grpc" and not allow_cleartext_token
                and not _is_loopback(parts.hostname)):
            raise InvalidArgument(
                f"remote: {shown} would send the device token unencrypted to "
                f"{parts.hostname}: use grpcs:// (TLS), or, on a network you trust, allow "
                "it with --allow-cleartext-token (allow_cleartext_token=True in Python)")
        target = f"[{parts.hostname}]:{parts.port}" if ":" in parts.hostname else (
            f"{parts.hostname}:{parts.port}")
        return GrpcRemote(shown, target, parts.scheme == "grpcs", token, vault_id)
    raise InvalidArgument(f"{shown!r}: unknown remote; use one of "
                          + ", ".join(f"{s}://" for s in SCHEMES))


def _is_loopback(host: str) -> bool:
    """Whether `host` is this machine by its very name: "localhost" or a
    loopback address. Other names are not resolved: a resolver can lie."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redact(url: str) -> str:
    """`url` without a password or query (where a secret could hide)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2] if "@" in parts.netloc else parts.netloc
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
