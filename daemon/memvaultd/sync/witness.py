"""A witness: a second remote (any kind) where every device also records
what it has seen of the chain, so that a fork or a frozen view needs both
remotes to collude (`memvault sync witness URL`).

    name   := "seen/" device_id "/" chain:010d "-" head:020d "-" random:8 hex
    object := envelope kind 6 (witness), context = device_id (UTF-8)
    body   := JSON {"device": ID, "chain": C, "scope": SCOPE, "head": N,
                    "hash": HEX64 | "", "at": WALL_S}

Each round a device reads the newest record of every other device before
it pulls, and checks them after (`SyncWorker._check_witnessed`): a device
on its chain that has seen version N must have seen the version this one
holds at N, and N must be on the remote for this one too (a device records
only what the remote acknowledged or handed over). Then it records its own
view, when its head moved (at most every 5 minutes, and at every `sync
now`), and deletes its older records where the remote lets it. The witness
cannot read or forge a record (sealed under a key of the vault key); it
can drop or hold back records, which only delays what they would show.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from memvault_base.errors import ForkDetected, IntegrityError, NotFound
from memvaultd.sync.envelope import WITNESS, Envelope
from memvaultd.sync.remotes.base import Remote

__all__ = ["View", "Witness", "check"]

log = logging.getLogger(__name__)
PREFIX = "seen/"


@dataclass(frozen=True)
class View:
    device: str
    chain: int
    scope: str
    head: int
    hash: bytes
    at: float


class Witness:
    def __init__(self, remote: Remote, envelope: Envelope, device: str) -> None:
        self._remote: Remote | None = remote
        self._open: Callable[[], Remote] | None = None
        self._url = remote.url
        self.envelope = envelope
        self.device = device
        self._recorded: tuple[int, str, int, bytes] | None = None

    @classmethod
    def opened_when_used(cls, url: str, open_remote: Callable[[], Remote],
                         envelope: Envelope, device: str) -> Witness:
        """The witness at `url`, opened at its first use and, while that
        fails, at every use after: a witness that is down when the daemon
        starts (a directory remote opens its folder at once) fails its
        rounds, as one that goes down later does, and never stops sync."""
        witness = cls.__new__(cls)
        witness._remote, witness._open, witness._url = None, open_remote, url
        witness.envelope, witness.device, witness._recorded = envelope, device, None
        return witness

    @property
    def url(self) -> str:
        return self._url

    @property
    def remote(self) -> Remote:
        if self._remote is None:
            assert self._open is not None
            self._remote = self._open()
        return self._remote

    def others(self) -> list[View]:
        """The newest record of every other device (one that does not open
        is passed over: a witness that plants one hides nothing more than
        one that drops it)."""
        newest: dict[str, str] = {}
        for name in self.remote.list_objects(PREFIX):
            device = name[len(PREFIX) :].split("/", 1)[0]
            if device != self.device and name > newest.get(device, ""):
                newest[device] = name
        views = []
        for device, name in sorted(newest.items()):
            try:
                doc = json.loads(self.envelope.open(WITNESS, self.remote.get_object(name),
                                                    device.encode(), name=name))
                views.append(View(device, int(doc["chain"]), str(doc["scope"]),
                                  int(doc["head"]), bytes.fromhex(doc["hash"]),
                                  float(doc["at"])))
            except (IntegrityError, NotFound, ValueError, KeyError, TypeError) as exc:
                log.warning("witness record %s passed over: %s", name, exc)
        return views

    def record(self, chain: int, scope: str, head: int, head_hash: bytes) -> None:
        """Record this device's view, if it changed, and drop the older records."""
        view = (chain, scope, head, head_hash)
        if view == self._recorded:
            return
        mine = f"{PREFIX}{self.device}/"
        name = f"{mine}{chain:010d}-{head:020d}-{secrets.token_hex(4)}"
        body = json.dumps({"device": self.device, "chain": chain, "scope": scope,
                           "head": head, "hash": head_hash.hex(), "at": time.time()})
        self.remote.put_object(name, self.envelope.seal(WITNESS, body.encode(),
                                                        self.device.encode()))
        self._recorded = view
        try:
            for older in self.remote.list_objects(mine):
                if older != name:
                    self.remote.delete_object(older)
        except Exception as exc:
            # memvault-server lets only an admin token delete: the older
            # records stay (4 KiB each, at most one per `_WITNESS_EVERY_S`),
            # and only the newest of each device is read.
            log.debug("older witness records kept (%s)", exc)

    def close(self) -> None:
        if self._remote is not None:
            self._remote.close()


def check(views: list[View], chain: int, scope: str, head: int,
          hash_at: Callable[[int], bytes], agreed: set[tuple[str, int, bytes]], url: str
          ) -> None:
    """Each other device's view agrees with this device's, at version
    `head` of `chain` (`scope`) after a pull: a version it has seen is one
    this device holds too (`hash_at`), else ForkDetected. Views on another
    chain are passed over (a repair in between); `agreed` keeps the views
    found consistent, so each is checked once."""
    for view in views:
        if (view.chain, view.scope) != (chain, scope):
            continue
        if view.head > head:
            raise ForkDetected(
                f"ForkDetected: device {view.device} recorded on the witness {url} that it "
                f"has seen version {view.head}, but the remote shows this device only "
                f"version {head}: it withholds versions from this device (a frozen or "
                "forked view)")
        seen = (view.device, view.head, view.hash)
        if seen in agreed:
            continue
        if hash_at(view.head) != view.hash:
            raise ForkDetected(
                f"ForkDetected: device {view.device} recorded on the witness {url} another "
                f"version {view.head} than this device saw: the remote showed the two "
                "devices different histories (a fork)")
        agreed.add(seen)
