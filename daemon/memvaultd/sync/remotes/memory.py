"""`memory://NAME`: a remote in this process's memory, for unit tests.

Every `open_remote("memory://NAME", vault_id=V)` in one process shares the
same space, so two "devices" in one test see each other; another NAME is
another space. Nothing survives the process. Like the directory and S3
remotes it stores blobs only: the parent hash is not checked. `watch_head`
wakes at once (a condition variable, no polling).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from memvault_base.errors import InvalidArgument, NotFound
from memvault_base.objects.names import (
    check_limit,
    check_name,
    check_object_size,
    check_prefix,
    check_version,
)


@dataclass
class _Vault:
    objects: dict[str, bytes] = field(default_factory=dict)
    versions: list[bytes] = field(default_factory=list)  # versions[i] is version i+1
    changed: threading.Condition = field(default_factory=threading.Condition)


_SPACES: dict[tuple[str, str], _Vault] = {}
_SPACES_LOCK = threading.Lock()


def _vault(space: str, vault_id: str) -> _Vault:
    with _SPACES_LOCK:
        return _SPACES.setdefault((space, vault_id), _Vault())


class MemoryRemote:
    def __init__(self, url: str, space: str, vault_id: str) -> None:
        self.url = url
        self._vault = _vault(space, vault_id)

    def put_object(self, name: str, data: bytes) -> bool:
        check_name(name)
        check_object_size(data, f"object {name!r}")
        with self._vault.changed:
            if name in self._vault.objects:
                return False
            self._vault.objects[name] = bytes(data)
            return True

    def get_object(self, name: str) -> bytes:
        check_name(name)
        with self._vault.changed:
            try:
                return self._vault.objects[name]
            except KeyError:
                raise NotFound(f"no object {name!r} in {self.url}") from None

    def list_objects(self, prefix: str = "") -> list[str]:
        check_prefix(prefix)
        with self._vault.changed:
            return sorted(name for name in self._vault.objects if name.startswith(prefix))

    def delete_object(self, name: str) -> None:
        check_name(name)
        with self._vault.changed:
            self._vault.objects.pop(name, None)

    def append_version(self, number: int, parent: bytes, data: bytes) -> bool:
        check_version(number, parent)
        check_object_size(data, f"version {number}")
        with self._vault.changed:
            if len(self._vault.versions) != number - 1:
                return False
            self._vault.versions.append(bytes(data))
            self._vault.changed.notify_all()
            return True

    def versions_after(self, number: int, limit: int = 1000) -> list[tuple[int, bytes]]:
        check_limit(limit)
        if number < 0:
            raise InvalidArgument(f"version number must be >= 0, got {number}")
        with self._vault.changed:
            chosen = self._vault.versions[number:number + limit]
            return [(number + 1 + i, data) for i, data in enumerate(chosen)]

    def head(self) -> int:
        with self._vault.changed:
            return len(self._vault.versions)

    def watch_head(self, after: int, timeout: float) -> int:
        deadline = time.monotonic() + max(0.0, timeout)
        with self._vault.changed:
            while len(self._vault.versions) <= after:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._vault.changed.wait(remaining)
            return len(self._vault.versions)

    def close(self) -> None:
        pass
