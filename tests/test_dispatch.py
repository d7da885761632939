"""Which thread a unary call runs on behind grpc's asyncio server.

`aio_bridge.unary` with real executors and a real event loop; the gRPC
context is a stand-in (only `done` and `abort` are asked of it). The daemon
end to end is tests/test_daemon.py.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from memvaultd.serve import aio_bridge


class _Context:
    def done(self) -> bool:
        return False

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise RuntimeError(f"{code}: {details}")


def _thread_name(request: dict[str, Any], call: aio_bridge.WorkerContext) -> str:
    gate = request.get("gate")
    if gate is not None:
        assert gate.wait(10)
    return threading.current_thread().name


@pytest.fixture
def pools() -> Any:
    shared = ThreadPoolExecutor(max_workers=8, thread_name_prefix="shared")
    computing = ThreadPoolExecutor(max_workers=2, thread_name_prefix="computing")
    yield shared, computing
    shared.shutdown()
    computing.shutdown()


def test_a_ready_call_computes_on_its_own_pool_and_one_that_may_wait_on_the_shared(
        pools: Any) -> None:
    shared, computing = pools
    handle = aio_bridge.unary(_thread_name, shared, computing=aio_bridge.Computing(
        computing, lambda request: request["ready"]))

    async def both() -> list[str]:
        return list(await asyncio.gather(handle({"ready": True}, _Context()),
                                         handle({"ready": False}, _Context())))

    ready, waiting = asyncio.run(both())
    assert ready.startswith("computing") and waiting.startswith("shared")


def test_calls_that_may_wait_run_while_every_computing_thread_is_busy(pools: Any) -> None:
    shared, computing = pools
    handle = aio_bridge.unary(_thread_name, shared, computing=aio_bridge.Computing(
        computing, lambda request: request["ready"]))
    release = threading.Event()

    async def scenario() -> tuple[list[str], list[str]]:
        busy = [asyncio.ensure_future(handle({"ready": True, "gate": release}, _Context()))
                for _ in range(3)]  # two computing, one queued behind them
        await asyncio.sleep(0.1)
        waiting = await asyncio.wait_for(
            asyncio.gather(*(handle({"ready": False}, _Context()) for _ in range(4))), 5)
        assert not any(task.done() for task in busy)
        release.set()
        return list(waiting), list(await asyncio.gather(*busy))

    waiting, computed = asyncio.run(scenario())
    assert all(name.startswith("shared") for name in waiting)
    assert all(name.startswith("computing") for name in computed)


def test_at_once_answers_on_the_loop_without_a_worker(pools: Any) -> None:
    shared, computing = pools
    loop_thread: list[str] = []

    def at_once(request: dict[str, Any], call: aio_bridge.WorkerContext) -> str | None:
        loop_thread.append(threading.current_thread().name)
        return "answered" if request["cached"] else None

    handle = aio_bridge.unary(_thread_name, shared, at_once, aio_bridge.Computing(
        computing, lambda request: True))

    async def both() -> list[str]:
        return [await handle({"cached": True}, _Context()),
                await handle({"cached": False}, _Context())]

    answered, declined = asyncio.run(both())
    assert answered == "answered" and declined.startswith("computing")
    assert loop_thread == [threading.current_thread().name] * 2
