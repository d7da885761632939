"""`Client`: the Python face of the memvault daemon, over its local unix socket.

    with memvault.Client() as mv:               # finds the socket like the daemon does
        mv.remember("prefers pytest over unittest", topic="user.preferences.testing")
        for hit in mv.recall("which test runner?"):
            print(hit.score, hit.memory.text)

The client only translates (through `memvault.wire`): keywords to request
messages, reply messages to the plain values of `memvault.types`, and every
failed call to the exception of `memvault_base.errors` that
`memvault_base.rpc.error_from_status` names. It holds no logic of its own
beyond telling "the daemon is not running" apart from "the daemon said no"
(`memvault.connection`).

Its calls come in families, a module each, all over one `Connection`:
`memvault.writes` (remember, update, forget, ...), `memvault.reads` (recall,
get, ...), `memvault.transfer` (export, import), `memvault.sync` and
`memvault.upkeep` (sweep, consolidate), `memvault.trash` (what forget put
in the trash, restore, empty), `memvault.check` (check). The daemon's own state (status,
readiness, events) is asked for here.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import TracebackType

import grpc

from memvault import wire
from memvault.check import CheckCalls
from memvault.connection import CONNECT_TIMEOUT_S as CONNECT_TIMEOUT_S
from memvault.connection import START_HINT as START_HINT
from memvault.connection import Connection
from memvault.event_stream import EventStream
from memvault.reads import ReadCalls
from memvault.sync import SyncCalls
from memvault.transfer import IMPORT_BATCH_SIZE as IMPORT_BATCH_SIZE
from memvault.transfer import TransferCalls
from memvault.trash import TrashCalls
from memvault.types import Status
from memvault.upkeep import UpkeepCalls
from memvault.writes import WriteCalls
from memvault_base.errors import Unavailable
from memvault_base.v1 import memory_pb2 as pb

__all__ = ["Client", "EventStream"]


class Client(WriteCalls, ReadCalls, TransferCalls, SyncCalls, UpkeepCalls, TrashCalls,
             CheckCalls,
             Connection):
    """A connection to the memvault daemon of this user (or of `home`).

    `socket` names the daemon's socket; when None it is found by the same rule
    the daemon uses (`--home` / `MEMVAULT_HOME`, else the platform's runtime
    directory). `timeout` bounds every call in seconds. Calls are thread-safe.

    `scopes`, `topics` and `read_only` declare, with every call, what this
    client may reach (docs/scopes.md): `scopes=["project:api"]` sees that
    project's memories and the user's and writes only in the project;
    `topics=["work.*"]` keeps it to those topics; `read_only=True` refuses
    every write. None of them: full access.
    """

    def _make_stubs(self) -> None:
        self._status = self._unary("Status", pb.StatusRequest, pb.StatusReply)
        self._events = self._stream("Events", pb.EventsRequest, pb.Event)
        self._write_stubs()
        self._read_stubs()
        self._transfer_stubs()
        self._sync_stubs()
        self._upkeep_stubs()
        self._trash_stubs()
        self._check_stubs()

    def status(self, *, bands: bool = False) -> Status:
        """The daemon's state: model readiness, counts, cache statistics, the
        last sweep and consolidation; `bands=True` also counts the memories
        per heat band (a pass over the vault, ~0.1 s per 100k memories)."""
        return wire.status(self._call(self._status, pb.StatusRequest(include_bands=bands)))

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until the daemon reports its model ready.

        Polls `Status`, so it also waits for a daemon that is still starting
        and has not bound its socket yet. Raises Unavailable after `timeout`
        seconds, or at once if the daemon reports that its model failed.
        """
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            remaining = deadline - time.monotonic()
            try:
                state = self._call(
                    self._status,
                    pb.StatusRequest(),
                    timeout=max(0.05, min(remaining, self.timeout)),
                ).model_state
                why = f"model {state}"
            except Unavailable as err:
                state, why = "", str(err)
            if state == "ready":
                return
            if state == "failed":
                raise Unavailable(
                    f"memvault daemon at {self.socket} could not load its model; "
                    "see its log, then restart it"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Unavailable(
                    f"memvault daemon not ready after {timeout:g} s ({why}). {START_HINT}"
                )
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.5)

    def events(self, types: Sequence[str] = ()) -> EventStream:
        """Stream what the daemon does ("hit", "miss", "remember", "forget", "restore", "ready").

        Runs until closed: use `with client.events() as stream: for ev in stream: ...`
        or call `stream.cancel()` (from any thread); the iteration then ends.
        """
        self._connect()
        try:
            call = self._events(pb.EventsRequest(types=list(types)), metadata=self._metadata)
        except grpc.RpcError as err:
            raise self._error(err) from None
        return EventStream(call, self._error)

    def close(self) -> None:
        """Close the connection; open event streams end."""
        self._close_channel()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client(socket={str(self.socket)!r})"
