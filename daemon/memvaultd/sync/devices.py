"""The vault's registry of devices, on the remote beside the chain.

    name   := "devices/" device_id "/" at_ms:015d "-" random:8 hex
    object := envelope kind 7 (device), context = device_id (UTF-8)
    body   := JSON {"device": ID, "name": NAME, "sign": HEX64, "receive": HEX64,
                    "added": WALL_S, "at": WALL_S}

A device publishes its record (its name and public keys: Ed25519 `sign`,
X25519 `receive`) before it pushes its first version; a rename publishes a
new record of the renamed device, from any device. A device's keys are
those of its oldest record that opens: a later record with other keys is
passed over, so a rename cannot re-key a device. Of the rest, the newest
(by name: its time) gives the name.

Records are sealed under a key of the vault key, so only a holder of the
vault key (a device that created or joined the vault, or whoever holds the
recovery key) can register a device; a server token alone cannot
(docs/threat-model.md). Each device reads the registry when it meets a
version signed by a device it does not know yet (`key_of`), and for
`memvault devices`. "Last seen" is not stored: it is this device's view
(the newest operation of each device it pulled), so that no record is
written at every sync for the remote to time.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from memvault_base.errors import IntegrityError, InvalidArgument, NotFound
from memvaultd.crypto.device_keys import PUBLIC_SIZE, DeviceKeys
from memvaultd.sync.envelope import DEVICE, Envelope, epoch_of
from memvaultd.sync.remotes.base import Remote

__all__ = ["PREFIX", "DeviceRecord", "Registry", "read_records"]

log = logging.getLogger(__name__)
PREFIX = "devices/"
MAX_NAME = 64


@dataclass(frozen=True)
class DeviceRecord:
    device: str
    name: str
    sign: bytes
    receive: bytes
    added: float
    at: float
    # The key epoch its oldest record is sealed under (`epochs.admits`).
    epoch: int = 0


def check_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > MAX_NAME or not name.isprintable():
        raise InvalidArgument(f"a device name is 1 to {MAX_NAME} printable characters, "
                              f"not {name!r}")
    return name


class Registry:
    """The devices of one vault, as its remote holds them."""

    def __init__(self, remote: Remote, envelope: Envelope, device: str, keys: DeviceKeys
                 ) -> None:
        self.remote = remote
        self.envelope = envelope
        self.device = device
        self.keys = keys
        self._records: dict[str, DeviceRecord] = {}
        self._lock = threading.Lock()
        # Whether a registered device's key counts (`epochs.admits`: after a
        # key epoch, not a device registered under an older key alone).
        self.admits: Callable[[DeviceRecord], bool] = lambda record: True

    def records(self) -> dict[str, DeviceRecord]:
        """Every registered device, read from the remote now."""
        with self._lock:
            self._refresh()
            return dict(self._records)

    def key_of(self, device: str) -> bytes | None:
        """The signing key of `device`, reading the remote once if it is
        not known yet; None if it is not registered."""
        with self._lock:
            if device not in self._records:
                self._refresh()
            record = self._records.get(device)
            return record.sign if record and self.admits(record) else None

    def register(self, name: str) -> None:
        """Publish this device's record, unless the registry has it."""
        with self._lock:
            self._refresh()
            mine = self._records.get(self.device)
            if mine is not None:
                if mine.sign != self.keys.sign_public:
                    raise IntegrityError(
                        f"the registry holds other keys for device {self.device} than this "
                        "device's (its key was lost?): versions it signed would be refused; "
                        "leave sync and join again from a new data directory")
                return
            now = time.time()
            self._publish(DeviceRecord(self.device, check_name(name), self.keys.sign_public,
                                       self.keys.receive_public, now, now))

    def rename(self, old: str, new: str) -> DeviceRecord:
        """Name the device called `old` (or whose id starts with it) `new`."""
        new = check_name(new)
        with self._lock:
            self._refresh()
            record = self._find(old)
            if any(r.name == new and r.device != record.device for r in self._records.values()):
                raise InvalidArgument(f"devices rename: another device is named {new!r}")
            renamed = replace(record, name=new, at=max(time.time(), record.at + 0.001))
            self._publish(renamed)
            return renamed

    def find(self, wanted: str) -> DeviceRecord:
        """The device named `wanted` (or whose id starts with it), read
        from the remote now; InvalidArgument if none or several."""
        with self._lock:
            self._refresh()
            return self._find(wanted)

    def _find(self, wanted: str) -> DeviceRecord:
        named = [r for r in self._records.values() if r.name == wanted]
        if not named:
            named = [r for r in self._records.values() if r.device.startswith(wanted)]
        if len(named) != 1:
            known = ", ".join(sorted(r.name for r in self._records.values())) or "none"
            raise InvalidArgument(f"devices: {'no' if not named else 'more than one'} device "
                                  f"named {wanted!r} (registered: {known})")
        return named[0]

    def _publish(self, record: DeviceRecord) -> None:
        body = json.dumps({"device": record.device, "name": record.name,
                           "sign": record.sign.hex(), "receive": record.receive.hex(),
                           "added": record.added, "at": record.at})
        name = (f"{PREFIX}{record.device}/{round(record.at * 1000):015d}-"
                f"{secrets.token_hex(4)}")
        self.remote.put_object(name, self.envelope.seal(DEVICE, body.encode(),
                                                        record.device.encode()))
        self._records[record.device] = record

    def _refresh(self) -> None:
        self._records = read_records(self.remote, self.envelope)


def read_records(remote: Remote, envelope: Envelope) -> dict[str, DeviceRecord]:
    """Every device registered on `remote`, by id (see the module's docstring)."""
    found: dict[str, DeviceRecord] = {}
    for name in remote.list_objects(PREFIX):
        device = name[len(PREFIX):].split("/", 1)[0]
        record = _read(remote, envelope, name, device)
        if record is None:
            continue
        first = found.get(device)
        if first is None:
            found[device] = record
        elif (record.sign, record.receive) != (first.sign, first.receive):
            log.warning("device record %s passed over: it changes the device's keys", name)
        else:
            found[device] = replace(record, added=first.added, epoch=first.epoch)
    return found


def _read(remote: Remote, envelope: Envelope, name: str, device: str) -> DeviceRecord | None:
    try:
        blob = remote.get_object(name)
        doc = json.loads(envelope.open(DEVICE, blob, device.encode(), name=name))
        record = DeviceRecord(str(doc["device"]), check_name(str(doc["name"])),
                              bytes.fromhex(doc["sign"]), bytes.fromhex(doc["receive"]),
                              float(doc["added"]), float(doc["at"]), epoch_of(blob))
    except (IntegrityError, InvalidArgument, NotFound, ValueError, KeyError,
            TypeError) as exc:
        # One that does not open was not sealed by a holder of the vault
        # key: passing it over hides nothing more than dropping it.
        log.warning("device record %s passed over: %s", name, exc)
        return None
    if (record.device != device or len(record.sign) != PUBLIC_SIZE
            or len(record.receive) != PUBLIC_SIZE):
        log.warning("device record %s passed over: malformed", name)
        return None
    return record
