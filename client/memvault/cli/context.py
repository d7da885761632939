"""The one `Client` of a `memvault` command line, made on first use.

Its own module so that the commands defined apart from `cli.py` (every
`*_commands` module) find the same object even when the CLI runs
as `python -m memvault.cli.main`, where `cli.py` is `__main__` and importing
`memvault.cli.main` again would create a second, empty copy of its classes.
"""

from __future__ import annotations

import re

import click

from memvault.client import Client

# The shape of the ids the daemon makes (uuid4 in hex): taken as whole, with
# no call to resolve them, so a command given one makes the one call it
# always made and says what it always said when the id is unknown.
_DAEMON_ID = re.compile(r"[0-9a-f]{32}")


class LazyClient:
    """Creates the Client on first use, so `--help` and usage errors never connect."""

    def __init__(self, home: str | None, socket: str | None, timeout: float,
                 scopes: tuple[str, ...] = ()) -> None:
        self._args = (home, socket, timeout)
        self.scopes = scopes  # the access it declares (docs/scopes.md); (): full
        self._client: Client | None = None

    @property
    def where(self) -> tuple[str | None, str | None]:
        """The `--home` and `--socket` given (None: not given)."""
        return self._args[0], self._args[1]

    def client(self) -> Client:
        if self._client is None:
            home, socket, timeout = self._args
            self._client = Client(socket, home=home, timeout=timeout, scopes=self.scopes)
            click.get_current_context().call_on_close(self._client.close)
        return self._client


def current_client() -> Client:
    lazy = click.get_current_context().find_object(LazyClient)
    assert lazy is not None, "the memvault group always sets its context object"
    return lazy.client()


def whole_id(ref: str) -> str:
    """The whole id of the one memory `ref` is or begins (the tables show 8
    characters): the daemon decides, so that a prefix never names a memory
    it did not mean; a whole id comes back as it is."""
    if _DAEMON_ID.fullmatch(ref):
        return ref
    return current_client().resolve_id(ref)
