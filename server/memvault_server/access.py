"""Who is calling, and what they may touch.

A call presents a bearer token in one header, `authorization: Bearer <token>`,
parsed strictly: the scheme in any case, exactly one space, the token's
RFC 6750 characters and nothing else (no other whitespace anywhere). A header
that does not parse is no token at all. The token names an account
(`tokens.py`); the caller is that account, whatever spelling of the header
carried the token, so limits and quotas are the account's.

The first write naming a vault binds it to the writer's account: the store's
put-if-absent of `<vault_id>/owner` (the account name, UTF-8) decides, so two
accounts racing for a new vault id, even through different replicas, cannot
both win. A read binds nothing and creates nothing: a vault nobody has
written to reads as empty to everyone. Every call from another account to a
bound vault is PERMISSION_DENIED, and says nothing about what the vault
holds. Bindings never change and are cached once found.

Deleting is an admin token's power only (`token create --admin`): a device
writes its objects once and never deletes (the daemon calls no delete), and
a device token that could delete could destroy `keys/recovery` or the
snapshots, the way back for every other device of the vault.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from memvault_base.errors import MemvaultError, NotFound
from memvault_base.objects.names import check_vault_id, owner_key
from memvault_base.objects.store import Store
from memvault_server.tokens import TokenBook

# RFC 6750's b64token after exactly one space; the scheme in any case.
_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] ([A-Za-z0-9._~+/-]+=*)")


class Unauthenticated(MemvaultError):
    """No valid bearer token: pass one made by `memvault-server token create`."""


class PermissionDenied(MemvaultError):
    """This vault belongs to another account, or the token may not do this."""


@dataclass(frozen=True)
class Caller:
    account: str
    token_name: str
    admin: bool


def bearer_token(authorization: str | None) -> str:
    """The token of an `authorization` header value, or `Unauthenticated`."""
    found = _BEARER.fullmatch(authorization or "")
    if found is None:
        raise Unauthenticated("missing or malformed bearer token (authorization: Bearer "
                              "<token>, one space, nothing else)")
    return found.group(1)


class Access:
    def __init__(self, tokens: TokenBook, store: Store) -> None:
        self.tokens = tokens
        self.store = store
        self._owners: dict[str, str] = {}
        self._lock = threading.Lock()

    def caller(self, authorization: str | None) -> Caller:
        """Who presents `authorization` (a header value), or `Unauthenticated`."""
        entry = self.tokens.entry_of(bearer_token(authorization))
        if entry is None:
            raise Unauthenticated("unknown or revoked token")
        return Caller(entry.account, entry.name, entry.admin)

    def owner(self, vault_id: str) -> str | None:
        """The account `vault_id` is bound to, or None if nobody has written to it."""
        check_vault_id(vault_id)
        with self._lock:
            owner = self._owners.get(vault_id)
        if owner is not None:
            return owner
        try:
            owner = self.store.get(owner_key(vault_id)).decode()
        except NotFound:
            return None
        with self._lock:
            self._owners[vault_id] = owner
        return owner

    def check_read(self, caller: Caller, vault_id: str) -> bool:
        """Whether `vault_id` exists; `PermissionDenied` if another account owns it."""
        owner = self.owner(vault_id)
        self._refuse_others(caller, vault_id, owner)
        return owner is not None

    def check_write(self, caller: Caller, vault_id: str) -> None:
        """`PermissionDenied` if another account owns `vault_id` (nothing is bound yet)."""
        self._refuse_others(caller, vault_id, self.owner(vault_id))

    def bind(self, caller: Caller, vault_id: str) -> None:
        """Bind `vault_id` to the caller's account unless bound; `PermissionDenied`
        if another account got it first."""
        if self.owner(vault_id) is None:
            self.store.put_if_absent(owner_key(vault_id), caller.account.encode())
        self._refuse_others(caller, vault_id, self.owner(vault_id))

    def check_delete(self, caller: Caller, vault_id: str) -> bool:
        """As `check_read`, and `PermissionDenied` unless the token is an admin's."""
        exists = self.check_read(caller, vault_id)
        if not caller.admin:
            raise PermissionDenied(
                f"token {caller.token_name!r} may not delete: only an admin token "
                f"(memvault-server token create NAME --account {caller.account} --admin) "
                f"deletes objects")
        return exists

    @staticmethod
    def _refuse_others(caller: Caller, vault_id: str, owner: str | None) -> None:
        if owner is not None and owner != caller.account:
            raise PermissionDenied(f"vault {vault_id} belongs to another account")
