"""Versions as devices of a vault push them: sealed, then signed by a device
registered on the remote (`memvaultd.sync.signatures`, `.devices`), for
tests that drive a `SyncWorker` against a remote they fill by hand."""

from __future__ import annotations

import secrets
from typing import Any

from memvaultd.crypto.device_keys import DeviceKeys
from memvaultd.sync import signatures
from memvaultd.sync.devices import Registry
from memvaultd.sync.envelope import VERSION, Envelope, chain_context
from memvaultd.sync.remotes.base import Remote


def registered(remote: Remote, envelope: Envelope, name: str = "other") -> Registry:
    """A new device, registered on `remote` under `name`."""
    registry = Registry(remote, envelope, secrets.token_hex(8), DeviceKeys.new())
    registry.register(name)
    return registry


def worker_devices(remote: Remote, envelope: Envelope) -> dict[str, Any]:
    """The `registry` and `device_name` arguments of a `SyncWorker`: a
    device of its own, registered at its first round."""
    return {"registry": Registry(remote, envelope, secrets.token_hex(8), DeviceKeys.new()),
            "device_name": "worker"}


def signed_version(device: Registry, number: int, parent: bytes, body: bytes) -> bytes:
    """Version `number` on `parent` holding `body`, as `device` pushes it."""
    envelope = device.envelope
    sealed = envelope.seal(VERSION, body, chain_context(number, parent),
                           reserve=signatures.TRAILER)
    return signatures.sign(device.keys, device.device, envelope.vault_id, number, sealed)
