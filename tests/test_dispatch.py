"""How the core's dispatch runs a call: which thread, which status, how a stream ends.

`dispatch.Dispatch` with real executors and a real event loop, and methods
of the test's own over real protobuf messages. The link around it is
tests/test_front.py's; the daemon end to end is tests/test_daemon.py.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from memvault_base.errors import InvalidArgument, NotFound, Status
from memvault_base.v1 import memory_pb2 as pb
from memvaultd.model.scopes import FULL, Access
from memvaultd.serve.dispatch import UNDECODABLE, Call, Dispatch, Ended, Stream, Unary

# The requests: GetRequest, its id saying what the test wants; the replies:
# StatusReply, its `version` naming the thread that answered.
READY, WAITING = "ready", "waiting"


def _request(what: str) -> bytes:
    return pb.GetRequest(id=what).SerializeToString()


def _thread(payload: bytes | Ended) -> str:
    assert isinstance(payload, bytes), payload
    return pb.StatusReply.FromString(payload).version


def _thread_name(request: pb.GetRequest, access: Access) -> pb.StatusReply:
    return pb.StatusReply(version=threading.current_thread().name)


@pytest.fixture
def pools() -> Any:
    shared = ThreadPoolExecutor(max_workers=8, thread_name_prefix="shared")
    computing = ThreadPoolExecutor(max_workers=2, thread_name_prefix="computing")
    yield shared, computing
    shared.shutdown()
    computing.shutdown()


def _ready(request: pb.GetRequest) -> bool:
    return request.id.startswith(READY)


def test_a_ready_call_computes_on_its_own_pool_and_one_that_may_wait_on_the_shared(
        pools: Any) -> None:
    dispatch = Dispatch({"Get": Unary(pb.GetRequest, _thread_name, ready=_ready)}, *pools)

    async def both() -> list[bytes | Ended]:
        return list(await asyncio.gather(dispatch.unary("Get", _request(READY)),
                                         dispatch.unary("Get", _request(WAITING))))

    ready, waiting = asyncio.run(both())
    assert _thread(ready).startswith("computing") and _thread(waiting).startswith("shared")


def test_calls_that_may_wait_run_while_every_computing_thread_is_busy(pools: Any) -> None:
    release = threading.Event()

    def gated(request: pb.GetRequest, access: Access) -> pb.StatusReply:
        if request.id.endswith("gated"):
            assert release.wait(10)
        return _thread_name(request, access)

    dispatch = Dispatch({"Get": Unary(pb.GetRequest, gated, ready=_ready)}, *pools)

    async def scenario() -> tuple[list[bytes | Ended], list[bytes | Ended]]:
        busy = [asyncio.ensure_future(dispatch.unary("Get", _request(READY + " gated")))
                for _ in range(3)]  # two computing, one queued behind them
        await asyncio.sleep(0.1)
        waiting = await asyncio.wait_for(asyncio.gather(
            *(dispatch.unary("Get", _request(WAITING)) for _ in range(4))), 5)
        assert not any(task.done() for task in busy)
        release.set()
        return list(waiting), list(await asyncio.gather(*busy))

    waiting, computed = asyncio.run(scenario())
    assert all(_thread(answer).startswith("shared") for answer in waiting)
    assert all(_thread(answer).startswith("computing") for answer in computed)


def test_at_once_answers_on_the_loop_without_a_worker(pools: Any) -> None:
    loop_thread: list[str] = []

    def at_once(request: pb.GetRequest) -> pb.StatusReply | None:
        loop_thread.append(threading.current_thread().name)
        return _thread_name(request, FULL) if request.id == "cached" else None

    dispatch = Dispatch({"Get": Unary(pb.GetRequest, _thread_name, at_once=at_once,
                                      ready=lambda request: True)}, *pools)

    async def both() -> list[bytes | Ended]:
        return [await dispatch.unary("Get", _request("cached")),
                await dispatch.unary("Get", _request("not cached"))]

    answered, declined = asyncio.run(both())
    here = threading.current_thread().name
    assert _thread(answered) == here and _thread(declined).startswith("computing")
    assert loop_thread == [here] * 2


def test_a_request_is_prepared_once_for_every_path(pools: Any) -> None:
    # A recall's query is converted once, whichever of at-once, ready and
    # the worker see it.
    prepared: list[str] = []

    def prepare(request: pb.GetRequest, access: Access) -> list[str]:
        prepared.append(request.id)
        return [request.id]

    seen: list[object] = []

    def at_once(query: list[str]) -> None:
        seen.append(query)

    def ready(query: list[str]) -> bool:
        seen.append(query)
        return False

    def run(query: list[str], access: Access) -> pb.StatusReply:
        seen.append(query)
        return pb.StatusReply(version=query[0])

    dispatch = Dispatch({"Get": Unary(pb.GetRequest, run, prepare=prepare, at_once=at_once,
                                      ready=ready)}, *pools)
    answer = asyncio.run(dispatch.unary("Get", _request("q")))
    assert _thread(answer) == "q"
    assert prepared == ["q"]
    assert len(seen) == 3 and all(query is seen[0] for query in seen)


# -- errors become statuses, in one place --------------------------------------------


def _failing(exc: Exception) -> Unary:
    def run(request: pb.GetRequest, access: Access) -> pb.StatusReply:
        raise exc

    return Unary(pb.GetRequest, run)


def test_domain_errors_get_their_codes_and_bugs_internal_without_the_request(
        pools: Any, caplog: pytest.LogCaptureFixture) -> None:
    dispatch = Dispatch({"Refuse": _failing(InvalidArgument("text: must not be empty")),
                         "Missing": _failing(NotFound("no memory with id m-1")),
                         "Crash": _failing(KeyError("a bug"))}, *pools)

    async def all_three() -> list[bytes | Ended]:
        return [await dispatch.unary(name, _request("the secret query"))
                for name in ("Refuse", "Missing", "Crash")]

    with caplog.at_level(logging.ERROR, logger="memvaultd.dispatch"):
        refused, missing, crashed = asyncio.run(all_three())
    assert refused == Ended(Status.INVALID_ARGUMENT, "text: must not be empty")
    assert missing == Ended(Status.NOT_FOUND, "no memory with id m-1")
    assert crashed == Ended(Status.INTERNAL, "Crash failed; see the daemon's log")
    assert "Crash failed" in caplog.text and "KeyError" in caplog.text
    assert "the secret query" not in caplog.text


def test_at_once_errors_are_answered_on_the_loop(pools: Any) -> None:
    def at_once(request: pb.GetRequest) -> pb.StatusReply | None:
        raise InvalidArgument("filter_json: does not parse")

    dispatch = Dispatch({"Get": Unary(pb.GetRequest, _thread_name, at_once=at_once)}, *pools)
    assert asyncio.run(dispatch.unary("Get", _request("x"))) == Ended(
        Status.INVALID_ARGUMENT, "filter_json: does not parse")


def test_undecodable_bytes_are_invalid_argument_and_unknown_methods_unimplemented(
        pools: Any) -> None:
    dispatch = Dispatch({"Get": Unary(pb.GetRequest, _thread_name),
                         "Events": Stream(pb.EventsRequest,
                                          lambda request, access, call: iter(()))},
                        *pools)
    bad_utf8 = b"\x0a\x01\xff"  # field 1 (id), one byte that is no UTF-8

    async def answers() -> list[bytes | Ended]:
        return [await dispatch.unary("Get", bad_utf8),
                await dispatch.unary("Get", b"\xff\xff\xff"),
                await dispatch.stream("Events", b"\x0a\x05ab", Call(_no_send)),
                await dispatch.unary("Nope", b""),
                await dispatch.stream("Get", b"", Call(_no_send))]

    utf8, corrupt, stream, unknown, not_a_stream = asyncio.run(answers())
    for answer in (utf8, corrupt, stream):
        assert isinstance(answer, Ended) and answer.status == Status.INVALID_ARGUMENT
        assert answer.details.startswith(UNDECODABLE + ": ")
    assert unknown == Ended(Status.UNIMPLEMENTED, "no unary method 'Nope'")
    assert isinstance(not_a_stream, Ended) and not_a_stream.status == Status.UNIMPLEMENTED


async def _no_send(item: bytes) -> None:
    raise AssertionError("nothing to send")


def test_a_reply_over_the_message_limit_is_resource_exhausted(
        pools: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from memvaultd.serve import dispatch as module

    monkeypatch.setattr(module, "MAX_MESSAGE", 1000)
    dispatch = Dispatch({"Get": Unary(
        pb.GetRequest, lambda r, access: pb.StatusReply(version="v" * 2000))},
                        *pools)
    answer = asyncio.run(dispatch.unary("Get", _request("x")))
    assert isinstance(answer, Ended) and answer.status == Status.RESOURCE_EXHAUSTED


# -- streams ---------------------------------------------------------------------------


class _Events:
    """A stream method like Events: waits for items, checking its call every 0.05 s."""

    def __init__(self) -> None:
        self.closed = threading.Event()
        self.items: list[str] = []

    def __call__(self, request: pb.EventsRequest, access: Access, call: Call
                 ) -> Iterator[pb.Event]:
        try:
            sent = 0
            while call.is_active():
                if sent < len(self.items):
                    sent += 1
                    yield pb.Event(type=self.items[sent - 1])
                else:
                    time.sleep(0.05)
        finally:
            self.closed.set()


def test_a_stream_sends_its_items_from_the_loop_and_ends_ok(pools: Any) -> None:
    def export(request: pb.ExportRequest, access: Access, call: Call
               ) -> Iterator[pb.MemoryRecord]:
        for i in range(5):
            yield pb.MemoryRecord(id=f"m-{i}", text=threading.current_thread().name)

    dispatch = Dispatch({"Export": Stream(pb.ExportRequest, export)}, *pools)
    sent: list[tuple[str, str]] = []

    async def send(item: bytes) -> None:
        record = pb.MemoryRecord.FromString(item)
        sent.append((record.id, record.text))
        assert threading.current_thread() is threading.main_thread()

    ended = asyncio.run(dispatch.stream("Export", b"", Call(send)))
    assert ended == Ended(Status.OK)
    assert [i for i, _ in sent] == [f"m-{i}" for i in range(5)]
    assert all(thread.startswith("shared") for _, thread in sent)


def test_a_stream_that_fails_ends_with_its_status(pools: Any) -> None:
    def export(request: pb.ExportRequest, access: Access, call: Call
               ) -> Iterator[pb.MemoryRecord]:
        yield pb.MemoryRecord(id="m-0")
        raise NotFound("the vault went away")

    dispatch = Dispatch({"Export": Stream(pb.ExportRequest, export)}, *pools)
    items: list[bytes] = []

    async def send(item: bytes) -> None:
        items.append(item)

    ended = asyncio.run(dispatch.stream("Export", b"", Call(send)))
    assert ended == Ended(Status.NOT_FOUND, "the vault went away") and len(items) == 1


def test_end_streams_ends_a_waiting_stream_ok_and_closes_its_method(pools: Any) -> None:
    events = _Events()
    dispatch = Dispatch({"Events": Stream(pb.EventsRequest, events)}, *pools)

    async def send(item: bytes) -> None:
        pass

    async def scenario() -> Ended:
        call = Call(send)
        running = asyncio.ensure_future(dispatch.stream("Events", b"", call))
        await asyncio.sleep(0.2)
        assert not running.done() and call.is_active()
        dispatch.end_streams()
        assert not call.is_active()
        return await asyncio.wait_for(running, 2)

    assert asyncio.run(scenario()) == Ended(Status.OK)
    assert events.closed.wait(2)


def test_a_cancelled_stream_closes_its_method_after_the_item_in_hand(pools: Any) -> None:
    events = _Events()
    dispatch = Dispatch({"Events": Stream(pb.EventsRequest, events)}, *pools)

    async def send(item: bytes) -> None:
        pass

    async def scenario() -> Call:
        call = Call(send)
        running = asyncio.ensure_future(dispatch.stream("Events", b"", call))
        await asyncio.sleep(0.2)
        running.cancel()  # what the link does on a CANCEL
        with pytest.raises(asyncio.CancelledError):
            await running
        return call

    call = asyncio.run(scenario())
    assert not call.is_active()
    assert events.closed.wait(2), "the method's finally never ran"
