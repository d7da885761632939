"""Who may touch which vault.

A call presents a bearer token (`authorization: Bearer <token>`); the token
names an account (`tokens.py`). The first call naming a vault binds it to
that account: the store's put-if-absent of `<vault_id>/owner` (the account
name, UTF-8) decides, so two accounts racing for a new vault id, even
through different replicas, cannot both win. Every later call from another
account is PERMISSION_DENIED, and says nothing about what the vault holds.
Bindings never change and are cached.
"""

from __future__ import annotations

import threading

from memvault_base.errors import MemvaultError
from memvault_base.objects.names import check_vault_id, owner_key
from memvault_base.objects.store import Store
from memvault_server.tokens import TokenBook


class Unauthenticated(MemvaultError):
    """No valid bearer token: pass one made by `memvault-server token create`."""


class PermissionDenied(MemvaultError):
    """This vault belongs to another account."""


class Access:
    def __init__(self, tokens: TokenBook, store: Store) -> None:
        self.tokens = tokens
        self.store = store
        self._owners: dict[str, str] = {}
        self._lock = threading.Lock()

    def account(self, authorization: str | None) -> str:
        """The account of an `authorization` header value, or `Unauthenticated`."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("missing bearer token (authorization: Bearer <token>)")
        account = self.tokens.account_of(token.strip())
        if account is None:
            raise Unauthenticated("unknown or revoked token")
        return account

    def check_vault(self, account: str, vault_id: str) -> None:
        """Bind `vault_id` to `account` on first use; `PermissionDenied` if another owns it."""
        check_vault_id(vault_id)
        with self._lock:
            owner = self._owners.get(vault_id)
        if owner is None:
            self.store.put_if_absent(owner_key(vault_id), account.encode())
            owner = self.store.get(owner_key(vault_id)).decode()
            with self._lock:
                self._owners[vault_id] = owner
        if owner != account:
            raise PermissionDenied(f"vault {vault_id} belongs to another account")
