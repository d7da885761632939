"""Key epochs: a new vault key for everything written from then on.

Epoch 0 is the key of `init` (wrapped under the first recovery key as
`keys/recovery`). Epoch n >= 1 is written in one attempt (8 random bytes,
16 hex digits in names) and committed by its grant:

    keys/epoch/<n:08d>/<attempt>/to/<device>  the key wrapped to the device's X25519
        key (`device_keys.wrap_to`), info = "memvault/epoch/v1" | vault_id:16 | n:u32 |
        attempt:8 | device id (ASCII)
    keys/epoch/<n:08d>/<attempt>/recovery     the key under the new recovery key
        (`recovery.wrap`)
    keys/epoch/<n:08d>/grant  sealed:N (envelope kind EPOCH under epoch n's key,
        context n:u32 | attempt:8) | attempt:8 | signer:8 | signature:64
      body      := JSON {"epoch": n, "by": ID, "at": WALL_S, "previous": HEX64,
                         "previous_epoch": m, "devices": [ID...], "revoked": {ID: HEAD, ...}}
      signature := Ed25519(signer's signing key, "memvault/epoch/v1" | vault_id:16 |
                           n:u32 | attempt:8 | sha256(sealed))

The grant is written last and put-if-absent: it is the epoch's commit
point, and of two devices rotating at once one wins; the other is told to
rotate again once synced. A grant no registered, unrevoked device signed
(a token holder's) is checked first and passed over, by readers and by the
next rotation, which takes the next number: `previous_epoch` names the
epoch a grant follows, so numbers may have gaps. A rotation cut short before its grant leaves an
attempt no grant names, never read; the next one writes a new attempt
(write-once names: a second attempt under the first's names would keep the
first's wrapped keys under the second's grant). The grant carries the
previous epoch's key, so whoever holds the newest key (a device, or the
newest recovery key at `join`) holds every older one (`keys_back`).
`devices` are those given the key; `revoked`, cumulative, maps each
revoked device to the chain's head when it was revoked: its versions
numbered above that are refused by every device (a revoked device keeps
the older keys and its signing key, so nothing else tells its later
writes apart), those at or below it stay, the same on every device.

A device moves to epoch n (`catch_up`) only if the grant opens under the
key wrapped to it, a device registered and not revoked signed it, and its
`previous` is the key this device holds for n-1: a revoked device, which
holds every key up to the revocation but not the one after, cannot make a
later epoch the others would take.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import struct
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from memvault_base.errors import IntegrityError, InvalidArgument, Locked, NotFound
from memvaultd.crypto.aead import KEY_SIZE
from memvaultd.crypto.device_keys import SIGNATURE_SIZE, DeviceKeys, verify, wrap_to
from memvaultd.sync import recovery
from memvaultd.sync.envelope import EPOCH, Envelope
from memvaultd.sync.remotes.base import Remote

__all__ = ["PREFIX", "Epoch", "Revoked", "admits", "catch_up", "committed", "first",
           "from_recovery", "keys_back", "start"]

PREFIX = "keys/epoch/"
_LABEL = b"memvault/epoch/v1"
_ATTEMPT = 8
_SIGNER = 8
_TRAILER = _ATTEMPT + _SIGNER + SIGNATURE_SIZE
# Grants in a row that no registered device signed, passed over before a
# round gives up looking further: each costs every device one download a
# round, and a token holder can write as many as the remote takes.
_PASSED_OVER = 8
# Epochs a recovery key is tried on, newest first, before it is refused:
# each try is an Argon2id derivation (0.125 s at the parameters `init`
# writes, up to the range a key file may name), and a token holder can
# plant as many epochs as the remote takes. A rotation's own recovery key
# opens the newest epoch at the first try.
_RECOVERY_TRIES = 16
log = logging.getLogger("memvaultd.sync")


class Revoked(Exception):
    """A newer epoch exists that was not given to this device."""


@dataclass(frozen=True)
class Epoch:
    number: int
    key: bytes
    devices: tuple[str, ...] = ()
    # (device, the chain's head when it was revoked), sorted.
    revoked: tuple[tuple[str, int], ...] = field(default=())

    def envelope(self, vault_id: bytes) -> Envelope:
        """An envelope of this epoch alone (`Envelope.add_epoch` adds it to another)."""
        return Envelope(self.key, vault_id, self.number)

    def refuses(self, device: str, number: int) -> bool:
        """Whether version `number` signed by `device` is refused: the device
        was revoked when the chain's head was below `number`."""
        return any(d == device and number > head for d, head in self.revoked)


def admits(current: int, members: Collection[str], device: str, registered_in: int) -> bool:
    """Whether a device counts as registered at key epoch `current`: named
    in that epoch's grant (`members`: given the key, or revoked, whose
    versions up to its revocation stay), or registered (its oldest record
    sealed) under that epoch or a later one. A device registered under an
    older key alone was registered by whoever held that key, which a
    revoked device or an old recovery key's holder still does."""
    return current == 0 or registered_in >= current or device in members


def first(vault_key: bytes) -> Epoch:
    """Epoch 0: the key of `init`."""
    return Epoch(0, vault_key)


def _folder(number: int) -> str:
    return f"{PREFIX}{number:08d}/"


def _info(vault_id: bytes, number: int, attempt: bytes, device: str) -> bytes:
    return _LABEL + vault_id + struct.pack(">I", number) + attempt + device.encode("ascii")


def _message(vault_id: bytes, number: int, attempt: bytes, sealed: bytes) -> bytes:
    return (_LABEL + vault_id + struct.pack(">I", number) + attempt
            + hashlib.sha256(sealed).digest())


def _context(number: int, attempt: bytes) -> bytes:
    return struct.pack(">I", number) + attempt


def start(remote: Remote, vault_id: bytes, current: Epoch, keys: DeviceKeys, device: str,
          recipients: dict[str, bytes], recovery_secret: bytes, *, head: int,
          key_of: Callable[[str], bytes | None],
          revoke: frozenset[str] = frozenset()) -> Epoch:
    """Publish epoch `current.number + 1`: a new random key wrapped to each
    of `recipients` (device id -> X25519 public key; this device among
    them) and under `recovery_secret`, signed by `device`. A device in
    `revoke` is given nothing and its versions above `head` (the chain's
    head this device has pulled to) are refused from then on.
    `InvalidArgument` if another registered device published that epoch
    first; a grant there that none signed is passed over for the next
    number, as readers pass it over (`catch_up`)."""
    if device in revoke:
        raise InvalidArgument("devices revoke: a device cannot revoke itself")
    given = {d: public for d, public in recipients.items() if d not in revoke}
    if device not in given:
        raise ValueError("the rotating device must be one of the recipients")
    for number in range(current.number + 1, current.number + 1 + _PASSED_OVER):
        epoch = _publish(remote, vault_id, current, number, keys, device, given,
                         recovery_secret, head, revoke)
        if epoch is not None:
            return epoch
        if _signer(remote.get_object(f"{_folder(number)}grant"), vault_id, number, current,
                   key_of) is not None:
            raise InvalidArgument(f"another device started key epoch {number} first; "
                                  "sync, then rotate again")
    raise IntegrityError(f"key epochs {current.number + 1} to {number}: grants no registered "
                         "device signed hold every name (someone holding only the remote's "
                         "token wrote them); remove them from the remote, then rotate again")


def _publish(remote: Remote, vault_id: bytes, current: Epoch, number: int, keys: DeviceKeys,
             device: str, given: dict[str, bytes], recovery_secret: bytes, head: int,
             revoke: frozenset[str]) -> Epoch | None:
    """Epoch `number`, published; None if its grant's name was taken."""
    key, attempt = secrets.token_bytes(KEY_SIZE), secrets.token_bytes(_ATTEMPT)
    folder = f"{_folder(number)}{attempt.hex()}/"
    for d, public in sorted(given.items()):
        remote.put_object(f"{folder}to/{d}",
                          wrap_to(public, key, info=_info(vault_id, number, attempt, d)))
    remote.put_object(f"{folder}recovery", recovery.wrap(key, recovery_secret, vault_id))
    revoked = dict(current.revoked) | {d: head for d in revoke if d not in dict(current.revoked)}
    epoch = Epoch(number, key, tuple(sorted(given)), tuple(sorted(revoked.items())))
    body = json.dumps({"epoch": number, "by": device, "at": time.time(),
                       "previous": current.key.hex(), "previous_epoch": current.number,
                       "devices": list(epoch.devices),
                       "revoked": revoked}).encode()
    sealed = epoch.envelope(vault_id).seal(EPOCH, body, _context(number, attempt))
    grant = (sealed + attempt + bytes.fromhex(device)
             + keys.sign(_message(vault_id, number, attempt, sealed)))
    return epoch if remote.put_object(f"{_folder(number)}grant", grant) else None


def catch_up(remote: Remote, vault_id: bytes, current: Epoch, keys: DeviceKeys,
             device: str, key_of: Callable[[str], bytes | None]) -> Epoch:
    """The newest epoch this device can move to from `current`, one grant
    at a time. `Revoked` if a later epoch was not given to this device;
    IntegrityError if one was and its grant does not hold."""
    while True:
        for number in range(current.number + 1, current.number + 1 + _PASSED_OVER):
            try:
                grant = remote.get_object(f"{_folder(number)}grant")
            except NotFound:
                return current
            if _signer(grant, vault_id, number, current, key_of) is not None:
                break
            # Checked before anything else: a token holder's grant must
            # neither stop sync nor pass for this device's revocation.
            log.warning("key epoch %d's grant passed over: no registered, unrevoked "
                        "device signed it", number)
        else:
            return current
        attempt = _attempt(grant, number)
        try:
            wrapped = remote.get_object(f"{_folder(number)}{attempt.hex()}/to/{device}")
        except NotFound:
            raise Revoked(f"key epoch {number} was not given to this device "
                          "(it was revoked)") from None
        key = keys.unwrap(wrapped, info=_info(vault_id, number, attempt, device))
        current = _open_grant(grant, vault_id, number, key, current, key_of)


def from_recovery(remote: Remote, vault_id: bytes, secret: bytes) -> Epoch:
    """The newest epoch `secret` (a recovery key's) opens, with its devices
    and revocations as its grant lists them (the recovery key is trusted as
    the vault key is: no signature is needed to believe it). `Locked` if it
    opens none, not even epoch 0's `keys/recovery`."""
    numbers = sorted({int(name[len(PREFIX):].split("/", 1)[0])
                      for name in remote.list_objects(PREFIX)}, reverse=True)
    tries = 0
    for number in numbers:
        try:
            grant = remote.get_object(f"{_folder(number)}grant")
            attempt = _attempt(grant, number)
            wrapped = remote.get_object(f"{_folder(number)}{attempt.hex()}/recovery")
        except (IntegrityError, NotFound):
            continue
        tries += 1
        if tries > _RECOVERY_TRIES:
            raise Locked(f"the recovery key opens none of the newest {_RECOVERY_TRIES} key "
                         "epochs on the remote: it is not this vault's, or a rotation "
                         "replaced it (`memvault recovery-key rotate`); nothing was changed")
        try:
            key = recovery.unwrap(wrapped, secret, vault_id)
        except (Locked, IntegrityError):
            continue
        _, _, _, epoch = _read_grant(grant, vault_id, number, key)
        return epoch
    return first(recovery.unwrap(remote.get_object(recovery.OBJECT), secret, vault_id))


def committed(remote: Remote, vault_id: bytes, current: Epoch,
              key_of: Callable[[str], bytes | None]) -> int:
    """The newest epoch after `current` whose grant a registered device
    signed (`current.number` if none)."""
    numbers = sorted((int(name[len(PREFIX):].split("/", 1)[0])
                      for name in remote.list_objects(PREFIX) if name.endswith("/grant")),
                     reverse=True)
    for number in numbers:
        if number <= current.number:
            break
        if _signer(remote.get_object(f"{_folder(number)}grant"), vault_id, number, current,
                   key_of) is not None:
            return number
    return current.number


def keys_back(remote: Remote, vault_id: bytes, epoch: Epoch) -> dict[int, bytes]:
    """Every epoch's key from `epoch` down to 0, each grant giving the one
    before: what a device that came in at `epoch` needs to read the chain."""
    found, number, key = {epoch.number: epoch.key}, epoch.number, epoch.key
    while number > 0:
        doc, _, _, _ = _read_grant(remote.get_object(f"{_folder(number)}grant"), vault_id,
                                   number, key)
        previous = doc["previous_epoch"]
        if not isinstance(previous, int) or not 0 <= previous < number:
            raise IntegrityError(f"remote object {_folder(number)}grant: malformed")
        number, key = previous, bytes.fromhex(str(doc["previous"]))
        found[number] = key
    return found


def _signer(grant: bytes, vault_id: bytes, number: int, current: Epoch,
            key_of: Callable[[str], bytes | None]) -> str | None:
    """The device that signed epoch `number`'s grant, if registered and
    not revoked by `current`, and its signature verifies; else None."""
    if len(grant) <= _TRAILER:
        return None
    sealed, attempt = grant[:-_TRAILER], grant[-_TRAILER:-_TRAILER + _ATTEMPT]
    by = grant[-_TRAILER + _ATTEMPT:-SIGNATURE_SIZE].hex()
    public = None if by in dict(current.revoked) else key_of(by)
    if public is None or not verify(public, grant[-SIGNATURE_SIZE:],
                                    _message(vault_id, number, attempt, sealed)):
        return None
    return by


def _attempt(grant: bytes, number: int) -> bytes:
    if len(grant) <= _TRAILER:
        raise IntegrityError(f"remote object {_folder(number)}grant: truncated")
    return grant[-_TRAILER:-_TRAILER + _ATTEMPT]


def _read_grant(grant: bytes, vault_id: bytes, number: int, key: bytes
                ) -> tuple[dict[str, object], bytes, str, Epoch]:
    """(body, sealed part, signer, epoch) of epoch `number`'s grant, its
    signature not checked yet."""
    name = f"{_folder(number)}grant"
    attempt = _attempt(grant, number)
    sealed, by = grant[:-_TRAILER], grant[-_TRAILER + _ATTEMPT:-SIGNATURE_SIZE].hex()
    envelope = Envelope(key, vault_id, number)
    try:
        doc = json.loads(envelope.open(EPOCH, sealed, _context(number, attempt), name=name))
        epoch = Epoch(number, key, tuple(map(str, doc["devices"])),
                      tuple(sorted((str(d), int(h)) for d, h in doc["revoked"].items())))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise IntegrityError(f"remote object {name}: malformed ({exc})") from None
    if doc.get("epoch") != number:
        raise IntegrityError(f"remote object {name}: the grant of another epoch")
    return doc, sealed, by, epoch


def _open_grant(grant: bytes, vault_id: bytes, number: int, key: bytes, current: Epoch,
                key_of: Callable[[str], bytes | None]) -> Epoch:
    name = f"{_folder(number)}grant"
    doc, _, by, epoch = _read_grant(grant, vault_id, number, key)
    if _signer(grant, vault_id, number, current, key_of) != by:
        raise IntegrityError(f"remote object {name}: not signed by a registered, "
                             f"unrevoked device (signer {by})")
    if (doc.get("by") != by or doc.get("previous") != current.key.hex()
            or doc.get("previous_epoch") != current.number):
        raise IntegrityError(f"remote object {name}: does not follow key epoch "
                             f"{current.number} (another chain of epochs)")
    if not set(current.revoked) <= set(epoch.revoked):
        raise IntegrityError(f"remote object {name}: takes back a revocation")
    return epoch
