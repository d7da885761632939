"""`Client`: the Python face of the memvault daemon, over its local unix socket.

    with memvault.Client() as mv:               # finds the socket like the daemon does
        mv.remember("prefers pytest over unittest", topic="user.preferences.testing")
        for hit in mv.recall("which test runner?"):
            print(hit.score, hit.memory.text)

The client only translates: keywords to request messages, reply messages to
the plain values of `memvault.types`, and every failed call to the exception
of `memvault.errors` that `error_from_status` names. It holds no logic of its
own beyond telling "the daemon is not running" apart from "the daemon said no".
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from memvault import paths
from memvault.errors import (
    InvalidArgument,
    MemvaultError,
    Unavailable,
    error_from_status,
)
from memvault.types import Event, Hit, Memory, RememberResult, Status
from memvault.v1 import memory_pb2 as pb

__all__ = ["Client", "EventStream"]

_Req = TypeVar("_Req", bound=Message)
_Resp = TypeVar("_Resp", bound=Message)

START_HINT = "Start it with `memvaultd` or ./scripts/run"

# A connect to a local unix socket completes in well under a millisecond; 5 s
# only bounds the case of a daemon that accepted the connection and then hung.
CONNECT_TIMEOUT_S = 5.0

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

# remember()'s keywords; remember_batch() mappings take these plus "text".
_INPUT_KEYS = frozenset(
    {
        "text",
        "type",
        "topic",
        "payload",
        "entity",
        "tags",
        "category",
        "importance",
        "session",
        "source",
        "tier",
        "expires_at",
        "supersedes",
        "vector",
    }
)
# The wire names, accepted too, so a dict shaped like Memory.to_dict() fits.
_INPUT_ALIASES = {"topic_key": "topic", "session_id": "session"}


class Client:
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
        self._get = self._unary("Get", pb.GetRequest, pb.MemoryRecord)
        self._forget = self._unary("Forget", pb.ForgetRequest, pb.ForgetReply)
        self._status = self._unary("Status", pb.StatusRequest, pb.StatusReply)
        self._events = self._channel.unary_stream(
            "/memvault.v1.Memory/Events",
            request_serializer=pb.EventsRequest.SerializeToString,
            response_deserializer=pb.Event.FromString,
        )

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
    ) -> RememberResult:
        """Store a memory (or reinforce the one it restates); returns its id and txid.

        Empty strings and None take the daemon's defaults (type semantic,
        importance 0.5, tier long_term).
        """
        memory = _memory_input(
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
        )
        reply = self._call(self._remember, pb.RememberRequest(memory=memory))
        return _remember_result(reply)

    def remember_batch(self, memories: Iterable[Mapping[str, Any]]) -> list[RememberResult]:
        """Store several memories in one call; one result per input, in input order.

        Each mapping takes "text" and remember()'s keywords ("topic_key" and
        "session_id" are accepted as well). An unknown key raises
        InvalidArgument before anything is sent.
        """
        inputs = [_batch_input(i, m) for i, m in enumerate(memories)]
        reply = self._call(self._remember_batch, pb.RememberBatchRequest(memories=inputs))
        return [_remember_result(r) for r in reply.results]

    def recall(
        self,
        query: str = "",
        *,
        top_k: int = 0,
        min_score: float | None = None,
        filter: Mapping[str, Any] | str | None = None,
        query_vector: Sequence[float] | None = None,
        include_vectors: bool = False,
    ) -> list[Hit]:
        """The memories that best answer `query`, best first; [] when none do.

        `top_k` 0 means the daemon's default (3). `filter` is a filter
        expression, as a dict or as JSON text passed through unchanged, e.g.
        {"AND": [{"category": "development"}, {"tags": {"contains": "testing"}}]}.
        """
        request = pb.RecallRequest(
            query=query,
            top_k=top_k,
            filter_json=_filter_json(filter),
            query_vector=list(query_vector or ()),
            include_vectors=include_vectors,
        )
        if min_score is not None:
            request.min_score = min_score
        reply = self._call(self._recall, request)
        return [_hit(h) for h in reply.hits]

    def get(self, id: str, *, include_vector: bool = False) -> Memory:
        """The memory with this id; raises NotFound when there is none."""
        record = self._call(self._get, pb.GetRequest(id=id, include_vector=include_vector))
        return _memory(record)

    def forget(self, id: str) -> int:
        """Delete the memory with this id (on every synced device); returns the txid."""
        return self._call(self._forget, pb.ForgetRequest(id=id)).txid

    def status(self) -> Status:
        """The daemon's state: model readiness, counts, cache statistics."""
        return _status(self._call(self._status, pb.StatusRequest()))

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
        return Event(type=msg.type, query=msg.query, id=msg.id, at=msg.at)

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


# -- translation: keywords -> messages ------------------------------------------


def _memory_input(
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
) -> pb.MemoryInput:
    if isinstance(tags, str):  # a lone string would become one tag per character
        tags = [tags]
    memory = pb.MemoryInput(
        text=text,
        type=type,
        topic_key=topic,
        payload_json=_payload_json(payload),
        entity=entity,
        tags=list(tags),
        category=category,
        session_id=session,
        source=source,
        tier=tier,
        expires_at=expires_at,
        supersedes=supersedes,
        vector=list(vector or ()),
    )
    if importance is not None:
        memory.importance = importance
    return memory


def _batch_input(index: int, mapping: Mapping[str, Any]) -> pb.MemoryInput:
    kwargs = {_INPUT_ALIASES.get(k, k): v for k, v in mapping.items()}
    unknown = sorted(set(kwargs) - _INPUT_KEYS)
    if unknown:
        raise InvalidArgument(f"memories[{index}]: unknown key(s) {', '.join(unknown)}")
    if "text" not in kwargs:
        raise InvalidArgument(f"memories[{index}]: missing key text")
    return _memory_input(**kwargs)


def _payload_json(payload: Mapping[str, Any] | None) -> str:
    if payload is None:
        return ""
    try:
        return json.dumps(dict(payload), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InvalidArgument(f"payload is not a JSON object: {err}") from None


def _filter_json(filter: Mapping[str, Any] | str | None) -> str:
    if filter is None:
        return ""
    if isinstance(filter, str):
        return filter  # the daemon validates it and names what is wrong
    try:
        return json.dumps(dict(filter), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InvalidArgument(f"filter is not JSON: {err}") from None


# -- translation: messages -> values ---------------------------------------------


def _memory(record: pb.MemoryRecord) -> Memory:
    return Memory(
        id=record.id,
        text=record.text,
        type=record.type,
        topic_key=record.topic_key,
        payload=_payload(record.payload_json),
        entity=record.entity,
        tags=tuple(record.tags),
        category=record.category,
        importance=record.importance,
        session_id=record.session_id,
        source=record.source,
        tier=record.tier,
        created_at=record.created_at,
        last_reinforced_at=record.last_reinforced_at,
        reinforce_count=record.reinforce_count,
        access_count=record.access_count,
        expires_at=record.expires_at,
        superseded_by=record.superseded_by,
        supersedes=record.supersedes,
        vector=tuple(record.vector),
    )


def _payload(text: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise MemvaultError(
            f"the daemon returned a payload that is not a JSON object: {text[:80]!r}"
        )
    return value


def _hit(hit: pb.Hit) -> Hit:
    return Hit(
        memory=_memory(hit.memory),
        score=hit.score,
        similarity=hit.similarity,
        decay=hit.decay,
        reinforcement=hit.reinforcement,
    )


def _remember_result(reply: pb.RememberReply) -> RememberResult:
    return RememberResult(id=reply.id, txid=reply.txid, reinforced=reply.reinforced)


def _status(reply: pb.StatusReply) -> Status:
    return Status(
        version=reply.version,
        model_state=reply.model_state,
        model=reply.model,
        dimension=reply.dimension,
        memory_count=reply.memory_count,
        applied_txid=reply.applied_txid,
        socket=reply.socket,
        data_dir=reply.data_dir,
        key_storage=reply.key_storage,
        cache_hits=reply.cache_hits,
        cache_misses=reply.cache_misses,
        cache_size=reply.cache_size,
        uptime_s=reply.uptime_s,
        vault_id=reply.vault_id,
    )
