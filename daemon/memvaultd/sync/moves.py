"""Moving a vault to a fresh chain: how `memvault sync repair` gets a vault
past a version that will never open, a rollback or a fork.

A vault's first chain lives on the remote under the vault's id. A repair
starts the next one under a scope of its own, and says so in a sealed
notice under the vault's id, where every device and every joiner looks:

    moves/{random:32 hex}     envelope kind 5, context ""
    body  := {"chain": C, "scope": SCOPE}            (UTF-8 JSON)
    SCOPE := vault id (32 hex) | "-" | 16 random hex digits

The notice is sealed under the vault key, so only a device of the vault can
write one; its name is random, so nobody can take the name first; and the
scope is random and named only inside it, so someone holding a token but
not the key (whoever appended the bad version) cannot find the new chain.
The newest chain wins: the highest C, then the lowest scope (two repairs
at once agree on one). A notice that fails to open is ignored.

A device that moves (the repairing one at once; the others when they next
look: while stopped, about once a minute and at `sync now`; otherwise at
the first round after a start, `sync now` and once an hour) puts its whole
vault into the new chain (`Replication.repush`) and pulls the others'. So
every memory any device held is on the new chain, whatever each had seen
of the old one. The old chain is left as it is: no device writes to it,
and joiners go to the newest chain.
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass

from memvault_base.errors import IntegrityError, NotFound
from memvault_base.objects.names import check_vault_id
from memvaultd.sync.envelope import MOVE, Envelope
from memvaultd.sync.remotes.base import Remote

log = logging.getLogger("memvaultd.sync")

PREFIX = "moves/"
# Notices read at one look. A vault has one per repair; names planted by
# someone holding only a token are read too (each fails to open), and this
# bounds what they cost: 1,000 reads of ~4 KiB.
_READ_AT_MOST = 1000


@dataclass(frozen=True)
class Move:
    """Chain `chain` of the vault lives under `scope` on the remote."""

    chain: int
    scope: str


def new_move(vault_id: str, chain: int) -> Move:
    return Move(chain, f"{vault_id}-{secrets.token_hex(8)}")


def announce(base: Remote, envelope: Envelope, move: Move) -> None:
    """Write the notice of `move` under the vault's id (`base`)."""
    body = json.dumps({"chain": move.chain, "scope": move.scope}).encode()
    base.put_object(f"{PREFIX}{secrets.token_hex(16)}", envelope.seal(MOVE, body))


def newest(base: Remote, envelope: Envelope, vault_id: str) -> Move | None:
    """The newest chain a notice under the vault's id names; None if none does."""
    found = []
    for name in base.list_objects(PREFIX)[:_READ_AT_MOST]:
        try:
            found.append(_read(base, envelope, name, vault_id))
        except (IntegrityError, NotFound) as exc:
            log.warning("move notice %s ignored: %s", name, exc)
    return min(found, key=lambda move: (-move.chain, move.scope), default=None)


def _read(base: Remote, envelope: Envelope, name: str, vault_id: str) -> Move:
    body = envelope.open(MOVE, base.get_object(name), name=name)
    try:
        doc = json.loads(body)
        move = Move(int(doc["chain"]), str(doc["scope"]))
        check_vault_id(move.scope)
    except (ValueError, KeyError, TypeError) as exc:
        raise IntegrityError(f"remote object {name}: not a move notice ({exc})") from exc
    if move.chain < 2 or not move.scope.startswith(f"{vault_id}-"):
        raise IntegrityError(f"remote object {name}: names chain {move.chain} in "
                             f"{move.scope!r}, not a later chain of this vault")
    return move
