"""`Client`: the Python face of the memvault daemon, over its local unix socket.

    with memvault.Client() as mv:               # finds the socket like the daemon does
        mv.remember("prefers pytest over unittest", topic="user.preferences.testing")
        for hit in mv.recall("which test runner?"):
            print(hit.score, hit.memory.text)

The client only translates (through `memvault.wire`): keywords to request
messages, reply messages to the plain values of `memvault.types`, and every
failed call to the exception of `memvault.errors` that `error_from_status`
names. It holds no logic of its own beyond telling "the daemon is not running"
apart from "the daemon said no".
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from memvault import paths, wire
from memvault.errors import (
    InvalidArgument,
    MemvaultError,
    Unavailable,
    error_from_status,
)
from memvault.types import (
    AppendResult,
    Event,
    Facet,
    ForgetResult,
    Hits,
    ImportResult,
    InitResult,
    JoinResult,
    Memory,
    ReinforceResult,
    RememberResult,
    Status,
    SyncInfo,
    UpdateResult,
)
from memvault.upkeep import UpkeepCalls
from memvault.v1 import memory_pb2 as pb

__all__ = ["Client", "EventStream"]

_Req = TypeVar("_Req", bound=Message)
_Resp = TypeVar("_Resp", bound=Message)

START_HINT = "Start it with `memvaultd` or ./scripts/run"

# A connect to a local unix socket completes in well under a millisecond; 5 s
# only bounds the case of a daemon that accepted the connection and then hung.
CONNECT_TIMEOUT_S = 5.0

# 500 records with 384-float vectors and a paragraph of text each are ~1 MB:
# a quarter of gRPC's default 4 MiB receive limit, at one fsync per batch.
IMPORT_BATCH_SIZE = 500

_CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    # A recall of 1000 hits with vectors is ~2-3 MB, close to gRPC's 4 MiB
    # default: leave room rather than fail on the largest legal answer.
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    # gRPC's default reconnect backoff grows to 120 s. A local daemon that was
    # restarted should be found again within a second, not minutes later.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]

# What gRPC core says when the transport, not the daemon, failed. A daemon's
# own UNAVAILABLE ("model still loading") carries the daemon's words instead.
_TRANSPORT_FAILURES = (
    "failed to connect",
    "connection refused",
    "connection reset",
    "socket closed",
    "broken pipe",
    "no such file",
)


class Client(UpkeepCalls):
    """A connection to the memvault daemon of this user (or of `home`).

    `socket` names the daemon's socket; when None it is found by the same rule
    the daemon uses (`--home` / `MEMVAULT_HOME`, else the platform's runtime
    directory). `timeout` bounds every call in seconds. Calls are thread-safe.
    """

    def __init__(
        self,
        socket: str | os.PathLike[str] | None = None,
        *,
        home: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        raw = Path(socket) if socket is not None else paths.resolve(home).socket
        self.socket: Path = raw.expanduser().absolute()
        self.timeout = timeout
        self._channel = grpc.insecure_channel(f"unix://{self.socket}", options=_CHANNEL_OPTIONS)
        self._connected = False
        # Typed call table rather than the generated MemoryStub, which carries
        # no type information; method names match memory.proto.
        self._remember = self._unary("Remember", pb.RememberRequest, pb.RememberReply)
        self._remember_batch = self._unary(
            "RememberBatch", pb.RememberBatchRequest, pb.RememberBatchReply
        )
        self._recall = self._unary("Recall", pb.RecallRequest, pb.RecallReply)
        self._get = self._unary("Get", pb.GetRequest, pb.GetReply)
        self._forget = self._unary("Forget", pb.ForgetRequest, pb.ForgetReply)
        self._update = self._unary("Update", pb.UpdateRequest, pb.UpdateReply)
        self._supersede = self._unary("Supersede", pb.SupersedeRequest, pb.RememberReply)
        self._reinforce = self._unary("Reinforce", pb.ReinforceRequest, pb.ReinforceReply)
        self._list_topics = self._unary("ListTopics", pb.ListRequest, pb.ListReply)
        self._list_entities = self._unary("ListEntities", pb.ListRequest, pb.ListReply)
        self._append_turns = self._unary("AppendTurns", pb.AppendTurnsRequest, pb.AppendTurnsReply)
        self._import = self._unary("Import", pb.ImportRequest, pb.ImportReply)
        self._status = self._unary("Status", pb.StatusRequest, pb.StatusReply)
        self._init_sync = self._unary("InitSync", pb.InitSyncRequest, pb.InitSyncReply)
        self._join_sync = self._unary("JoinSync", pb.JoinSyncRequest, pb.JoinSyncReply)
        self._sync_now = self._unary("SyncNow", pb.SyncStatusRequest, pb.SyncStatusReply)
        self._sync_status = self._unary("SyncStatus", pb.SyncStatusRequest, pb.SyncStatusReply)
        self._export = self._stream("Export", pb.ExportRequest, pb.MemoryRecord)
        self._events = self._stream("Events", pb.EventsRequest, pb.Event)
        self._upkeep_stubs()

    # -- the API ---------------------------------------------------------------

    def remember(
        self,
        text: str,
        *,
        type: str = "",
        topic: str = "",
        payload: Mapping[str, Any] | None = None,
        entity: str = "",
        tags: Sequence[str] = (),
        category: str = "",
        importance: float | None = None,
        session: str = "",
        source: str = "",
        tier: str = "",
        expires_at: float = 0,
        supersedes: str = "",
        vector: Sequence[float] | None = None,
        protected: bool | None = None,
    ) -> RememberResult:
        """Store a memory (or reinforce the one it restates); returns its id and txid.

        Empty strings and None take the daemon's defaults (type semantic,
        importance 0.5, tier long_term). `supersedes=ID` replaces that memory,
        as `supersede()` does. `protected=True` keeps it out of the forgetting
        sweep and consolidation.
        """
        memory = wire.memory_input(
            text,
            type=type,
            topic=topic,
            payload=payload,
            entity=entity,
            tags=tags,
            category=category,
            importance=importance,
            session=session,
            source=source,
            tier=tier,
            expires_at=expires_at,
            supersedes=supersedes,
            vector=vector,
            protected=protected,
        )
        reply = self._call(self._remember, pb.RememberRequest(memory=memory))
        return wire.remember_result(reply)

    def remember_batch(self, memories: Iterable[Mapping[str, Any]]) -> list[RememberResult]:
        """Store several memories in one call; one result per input, in input order.

        Each mapping takes "text" and remember()'s keywords ("topic_key" and
        "session_id" are accepted as well). An unknown key raises
        InvalidArgument before anything is sent.
        """
        inputs = [wire.batch_input(i, m) for i, m in enumerate(memories)]
        reply = self._call(self._remember_batch, pb.RememberBatchRequest(memories=inputs))
        return [wire.remember_result(r) for r in reply.results]

    def recall(
        self,
        query: str = "",
        *,
        top_k: int = 0,
        min_score: float | None = None,
        filter: Mapping[str, Any] | str | None = None,
        query_vector: Sequence[float] | None = None,
        include_vectors: bool = False,
        mode: str = "",
        types: Sequence[str] = (),
        topic: str = "",
        session: str = "",
        source: str = "",
        tiers: Sequence[str] = (),
        include_superseded: bool = False,
        max_tokens: int = 0,
        offset: int = 0,
        mark_accessed: bool = True,
        min_txid: int = 0,
        include_turns: bool = False,
        band: str = "",
    ) -> Hits:
        """The memories that best answer `query`, best first; empty when none do.

        `top_k` 0 means the daemon's default (3). `filter` is a filter
        expression, as a dict or as JSON text passed through unchanged, e.g.
        {"AND": [{"category": "development"}, {"tags": {"contains": "testing"}}]}.
        `mode` is "hybrid" (the default), "vector" or "keyword". `types`,
        `topic` (and the topics below it), `session`, `source` and `tiers`
        (default working + long_term) narrow the search. `max_tokens` stops
        adding hits once their text would pass that many tokens; `offset`
        skips ranked hits, and the result's `has_more` says whether more
        remain. `mark_accessed=False` is a preview that leaves access counts
        alone. `min_txid` waits until the daemon has applied that write.
        `include_turns` also searches the transcript turns, returned apart in
        the result's `turns`. `band` ("hot", "warm", "cold", "frozen") keeps
        only memories of that heat band; every hit carries `heat` and `band`.
        """
        request = pb.RecallRequest(
            query=query,
            top_k=top_k,
            filter_json=wire.filter_json(filter),
            query_vector=list(query_vector or ()),
            include_vectors=include_vectors,
            mode=mode,
            types=wire.strings(types),
            topic_key=topic,
            session_id=session,
            source=source,
            tiers=wire.strings(tiers),
            include_superseded=include_superseded,
            max_tokens=max_tokens,
            offset=offset,
            min_txid=min_txid,
            include_turns=include_turns,
            band=band,
        )
        if min_score is not None:
            request.min_score = min_score
        if not mark_accessed:  # unset means the daemon's documented default, true
            request.mark_accessed = False
        return wire.hits(self._call(self._recall, request))

    def get(self, id: str, *, include_vector: bool = False) -> Memory:
        """The memory with this id; raises NotFound when there is none."""
        reply = self._call(self._get, pb.GetRequest(id=id, include_vector=include_vector))
        return wire.memory(reply.memory)

    def history(self, id: str) -> list[Memory]:
        """The supersession chain this memory belongs to, oldest first, itself included.

        A single memory when it never replaced another and was never replaced.
        Raises NotFound when there is no such memory.
        """
        reply = self._call(self._get, pb.GetRequest(id=id))
        return [wire.memory(link) for link in reply.chain]

    def forget(self, id: str) -> int:
        """Delete the memory with this id (on every synced device); returns the txid."""
        return self._call(self._forget, pb.ForgetRequest(id=id)).txid

    def forget_where(
        self, filter: Mapping[str, Any] | str, *, dry_run: bool = False
    ) -> ForgetResult:
        """Delete every memory the filter expression matches; returns their ids.

        `dry_run=True` only lists them (txid 0). An empty filter raises
        InvalidArgument before anything is sent: forgetting everything takes
        a filter that says so.
        """
        text = wire.filter_json(filter)
        if not text.strip() or not filter:
            raise InvalidArgument("forget_where needs a filter expression, not an empty one")
        reply = self._call(self._forget, pb.ForgetRequest(filter_json=text, dry_run=dry_run))
        return ForgetResult(txid=reply.txid, ids=tuple(reply.ids))

    def update(
        self,
        id: str,
        *,
        text: str | None = None,
        type: str | None = None,
        topic: str | None = None,
        payload: Mapping[str, Any] | None = None,
        entity: str | None = None,
        tags: Sequence[str] | None = None,
        category: str | None = None,
        importance: float | None = None,
        session: str | None = None,
        source: str | None = None,
        tier: str | None = None,
        expires_at: float | None = None,
        vector: Sequence[float] | None = None,
        protected: bool | None = None,
    ) -> UpdateResult:
        """Edit the memory in place (same id); only the keywords given change.

        An empty value clears a field (`tags=[]`, `expires_at=0`). `vector`
        is the embedding of a new `text` (bring-your-own); without text it is
        refused. Nothing given raises InvalidArgument before anything is sent.
        """
        changes: dict[str, Any] = {
            "text": text,
            "type": type,
            "topic": topic,
            "payload": payload,
            "entity": entity,
            "tags": tags,
            "category": category,
            "importance": importance,
            "session": session,
            "source": source,
            "tier": tier,
            "expires_at": expires_at,
            "protected": protected,
        }
        reply = self._call(self._update, wire.update_request(id, changes, vector))
        return UpdateResult(txid=reply.txid, memory=wire.memory(reply.memory))

    def supersede(
        self,
        id: str,
        text: str,
        *,
        type: str = "",
        topic: str = "",
        payload: Mapping[str, Any] | None = None,
        entity: str = "",
        tags: Sequence[str] = (),
        category: str = "",
        importance: float | None = None,
        session: str = "",
        source: str = "",
        tier: str = "",
        expires_at: float = 0,
        vector: Sequence[float] | None = None,
    ) -> RememberResult:
        """Store `text` as the new version of memory `id`, which recall then hides.

        The old memory gets `superseded_by`; `history()` of either returns
        both. Keywords as for remember().
        """
        memory = wire.memory_input(
            text,
            type=type,
            topic=topic,
            payload=payload,
            entity=entity,
            tags=tags,
            category=category,
            importance=importance,
            session=session,
            source=source,
            tier=tier,
            expires_at=expires_at,
            vector=vector,
        )
        reply = self._call(self._supersede, pb.SupersedeRequest(id=id, memory=memory))
        return wire.remember_result(reply)

    def reinforce(self, id: str) -> ReinforceResult:
        """Count the memory as confirmed once more (it decays more slowly)."""
        reply = self._call(self._reinforce, pb.ReinforceRequest(id=id))
        return ReinforceResult(txid=reply.txid, reinforce_count=reply.reinforce_count)

    def list_topics(self, filter: Mapping[str, Any] | str | None = None) -> list[Facet]:
        """The topic keys of the memories (the filter matches), with counts and last activity."""
        request = pb.ListRequest(filter_json=wire.filter_json(filter))
        return wire.facets(self._call(self._list_topics, request))

    def list_entities(self, filter: Mapping[str, Any] | str | None = None) -> list[Facet]:
        """The entities of the memories (the filter matches), with counts and last activity."""
        request = pb.ListRequest(filter_json=wire.filter_json(filter))
        return wire.facets(self._call(self._list_entities, request))

    def append_turns(self, session: str, turns: Iterable[Mapping[str, Any]]) -> AppendResult:
        """Store raw conversation turns of `session` in the transcript layer.

        Each mapping: "speaker", "text", optionally "at" (seconds since the
        epoch; now when absent) and "payload" (a JSON object). Turns are found
        by `recall(..., include_turns=True)`, never mixed into the memories.
        """
        messages = [wire.turn(i, t) for i, t in enumerate(turns)]
        request = pb.AppendTurnsRequest(session_id=session, turns=messages)
        reply = self._call(self._append_turns, request)
        return AppendResult(ids=tuple(reply.ids), txid=reply.txid)

    def export(self, *, include_vectors: bool = False) -> Iterator[Memory]:
        """Every memory of the vault, streamed; superseded ones included.

        There is no overall deadline: a large vault streams for as long as its
        reader takes. Leaving the loop early cancels the stream.
        """
        self._connect()
        try:
            call = self._export(pb.ExportRequest(include_vectors=include_vectors))
        except grpc.RpcError as err:
            raise self._error(err) from None
        return _stream_memories(call, self._error)

    def import_memories(
        self,
        memories: Iterable[Memory | Mapping[str, Any]],
        *,
        batch_size: int = IMPORT_BATCH_SIZE,
    ) -> ImportResult:
        """Import whole memories (ids, times, counts, vectors kept), `batch_size` per call.

        A mapping is what `Memory.to_dict()` gives (an `export` line). Nothing
        is duplicated: the daemon keeps what it already holds and counts a
        restatement as a reinforcement. Batches are converted and sent one
        after another, so a bad item stops the import after the batches
        before it were stored.
        """
        if batch_size < 1:
            raise InvalidArgument(f"batch_size must be at least 1, not {batch_size}")
        added = reinforced = txid = 0
        items = enumerate(memories)
        while batch := list(itertools.islice(items, batch_size)):
            records = [wire.import_record(i, m) for i, m in batch]
            reply = self._call(self._import, pb.ImportRequest(memories=records))
            added += reply.added
            reinforced += reply.reinforced
            txid = reply.txid
        return ImportResult(added=added, reinforced=reinforced, txid=txid)

    def init_sync(self, remote: str, *, token: str | None = None) -> InitResult:
        """Set up sync with an empty remote; returns the recovery key, once."""
        reply = self._call(self._init_sync, pb.InitSyncRequest(remote=remote, token=token or ""))
        return InitResult(reply.vault_id, reply.recovery_key)

    def join_sync(self, remote: str, recovery_key: str, *, token: str | None = None
                  ) -> JoinResult:
        """Join the vault the recovery key names; this device's memories are kept."""
        reply = self._call(self._join_sync, pb.JoinSyncRequest(
            remote=remote, token=token or "", recovery_key=recovery_key), timeout=600.0)
        return JoinResult(reply.vault_id, reply.memory_count)

    def sync_now(self) -> SyncInfo:
        """Pull and push at once, then report."""
        return _sync_info(self._call(self._sync_now, pb.SyncStatusRequest(), timeout=600.0))

    def sync_status(self) -> SyncInfo:
        return _sync_info(self._call(self._sync_status, pb.SyncStatusRequest()))

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
        """Stream what the daemon does ("hit", "miss", "remember", "forget", "ready").

        Runs until closed: use `with client.events() as stream: for ev in stream: ...`
        or call `stream.cancel()` (from any thread); the iteration then ends.
        """
        self._connect()
        try:
            call = self._events(pb.EventsRequest(types=list(types)))
        except grpc.RpcError as err:
            raise self._error(err) from None
        return EventStream(call, self._error)

    def close(self) -> None:
        """Close the connection; open event streams end."""
        self._channel.close()

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

    # -- plumbing --------------------------------------------------------------

    def _unary(
        self, method: str, request: type[_Req], reply: type[_Resp]
    ) -> grpc.UnaryUnaryMultiCallable[_Req, _Resp]:
        return self._channel.unary_unary(
            f"/memvault.v1.Memory/{method}",
            request_serializer=request.SerializeToString,
            response_deserializer=reply.FromString,
        )

    def _stream(
        self, method: str, request: type[_Req], reply: type[_Resp]
    ) -> grpc.UnaryStreamMultiCallable[_Req, _Resp]:
        return self._channel.unary_stream(
            f"/memvault.v1.Memory/{method}",
            request_serializer=request.SerializeToString,
            response_deserializer=reply.FromString,
        )

    def _call(
        self,
        method: grpc.UnaryUnaryMultiCallable[_Req, _Resp],
        request: _Req,
        *,
        timeout: float | None = None,
    ) -> _Resp:
        timeout = self.timeout if timeout is None else timeout
        self._connect(min(timeout, CONNECT_TIMEOUT_S))
        try:
            return method(request, timeout=timeout)
        except grpc.RpcError as err:
            raise self._error(err, timeout) from None

    def _connect(self, timeout: float = CONNECT_TIMEOUT_S) -> None:
        """Fail fast, with a message that says what to do, when no daemon answers.

        Checked once per Client: after the first connection gRPC reconnects on
        its own, and a call on a broken connection fails at once (no
        wait-for-ready), so `_error` reports it.
        """
        if self._connected:
            return
        if not self.socket.exists():
            raise Unavailable(self._not_running(f"no socket at {self.socket}"))
        settled = threading.Event()
        seen: list[grpc.ChannelConnectivity] = []

        def on_change(state: grpc.ChannelConnectivity) -> None:
            seen.append(state)
            if state is not grpc.ChannelConnectivity.IDLE and (
                state is not grpc.ChannelConnectivity.CONNECTING
            ):
                settled.set()

        self._channel.subscribe(on_change, try_to_connect=True)
        try:
            settled.wait(timeout)
        finally:
            self._channel.unsubscribe(on_change)
        state = seen[-1] if seen else None
        if state is grpc.ChannelConnectivity.READY:
            self._connected = True
        elif state is grpc.ChannelConnectivity.TRANSIENT_FAILURE:
            raise Unavailable(self._not_running(f"socket at {self.socket} refuses connections"))
        elif state is grpc.ChannelConnectivity.SHUTDOWN:
            raise Unavailable("this memvault Client is closed")
        else:
            raise Unavailable(
                f"memvault daemon at {self.socket} did not accept a connection "
                f"within {timeout:g} s; it may be hung. Restart it (`memvaultd`)"
            )

    def _not_running(self, why: str) -> str:
        return f"memvault daemon is not running ({why}). {START_HINT}"

    def _error(self, err: grpc.RpcError, timeout: float | None = None) -> MemvaultError:
        """The memvault exception for a failed call."""
        if not isinstance(err, grpc.Call):  # every RpcError gRPC raises is also a Call
            return MemvaultError(str(err))
        code, details = err.code(), err.details() or ""
        if code == grpc.StatusCode.UNAVAILABLE and any(
            marker in details.lower() for marker in _TRANSPORT_FAILURES
        ):
            why = "no socket at" if not self.socket.exists() else "connection lost to"
            return Unavailable(self._not_running(f"{why} {self.socket}"))
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            limit = f" within {timeout:g} s" if timeout is not None else ""
            return Unavailable(f"memvault daemon at {self.socket} did not answer{limit}")
        return error_from_status(code, details)


class EventStream(Iterator[Event]):
    """The daemon's events as they happen; ends when cancelled or closed.

    Iterate it; `cancel()` (alias `close()`, also on leaving a `with` block)
    ends the iteration cleanly from any thread.
    """

    def __init__(
        self,
        call: grpc._CallIterator[pb.Event],
        translate: Callable[[grpc.RpcError], MemvaultError],
    ) -> None:
        self._call = call
        self._translate = translate
        self._cancelled = False

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Event:
        try:
            msg = next(self._call)
        except grpc.RpcError as err:
            if self._cancelled or (
                isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.CANCELLED
            ):
                raise StopIteration from None
            raise self._translate(err) from None
        return wire.event(msg)

    def cancel(self) -> None:
        self._cancelled = True
        self._call.cancel()

    close = cancel

    def __enter__(self) -> EventStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cancel()


def _stream_memories(
    call: grpc._CallIterator[pb.MemoryRecord],
    translate: Callable[[grpc.RpcError], MemvaultError],
) -> Iterator[Memory]:
    try:
        for record in call:
            yield wire.memory(record)
    except grpc.RpcError as err:
        raise translate(err) from None
    finally:
        call.cancel()  # a no-op once the stream ended; frees it when the reader stopped early


def _sync_info(reply: pb.SyncStatusReply) -> SyncInfo:
    return SyncInfo(reply.configured, reply.remote, reply.state, reply.head, reply.pushed_seq,
                    reply.pending, reply.last_push, reply.last_pull, reply.last_error)
