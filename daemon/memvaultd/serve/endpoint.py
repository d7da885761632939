"""The daemon's endpoint, as the core runs it: the front, the link, the loop.

The public socket is served by the front process (`front/relay.py`): its
gate, grpc, health and reflection. The core starts it (`front_process.py`)
and answers it over the link (`link_server.py`), on a socket in
`<run>/inner/` (0700) where only the front connects: every Memory call,
unary or streaming, and the core's serving state, which the front's health
service reports: NOT_SERVING until the vault is loaded and the model is
warm, then SERVING (readiness is reported, never guessed), and NOT_SERVING
for good once the daemon stops. The core runs no grpc and never loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import uvloop

from memvault_base.v1 import memory_pb2
from memvaultd.serve.dispatch import Dispatch, Stream, Unary
from memvaultd.serve.front.link import State
from memvaultd.serve.front.socket_guard import claim_socket, prepare_socket_dir
from memvaultd.serve.front_process import FrontProcess
from memvaultd.serve.link_server import LinkServer
from memvaultd.serve.servicer import MemoryServicer
from memvaultd.sync.setup import Syncing
from memvaultd.vault.check import CheckReport
from memvaultd.vault.events import EventBus
from memvaultd.vault.vault import Vault

T = TypeVar("T")
log = logging.getLogger("memvaultd.server")
# Worker threads: an Events stream holds one while it waits for its next
# event, and a RememberBatch one while the model embeds; 32 leaves room for
# both beside a dozen concurrent calls.
_WORKERS = 32


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


# Recalls that go to workers (every recall in a vault above 500k memories;
# below, one the loop declined only because the access marks' lock was busy)
# and will wait for nothing else (`Reads.recall_ready`: no load,
# transaction or model call) have threads of their own, one per core: more
# only queue on the interpreter lock, with the kernel free to preempt
# whichever thread holds it, while a recall's vector work, which runs
# without the lock, needs no more than the cores. At 1M memories, 8 mixed
# clients made 167-185 calls/s with every recall on the shared pool (the
# daemon 1.44-1.47 of 2 cores busy, 50-59 voluntary thread switches a call),
# 187-198 calls/s on two threads of their own (1.53-1.56 cores, 31-41
# switches), 171-192 on three; the same runs alternating
# (docs/benchmarks.md). A semaphore letting two of the shared pool's threads
# compute at once gave no gain (162-168 calls/s): the other threads still
# took turns on the lock. A recall that may wait stays on the shared pool,
# holding none of these threads meanwhile.
RECALL_THREADS = max(2, _cores())
# In-flight calls get this long to finish on SIGTERM: a RememberBatch of 96
# texts took 4.9 s on a busy 2-core machine (test_service.py), so 5 s was
# too tight. The unit's TimeoutStopSec=90 leaves 70 s for the final snapshot,
# which took 15-21 s at 1M memories (~1.5 s at 100k).
_STOP_GRACE_S = 20.0


def memory_methods(servicer: MemoryServicer) -> dict[str, Unary | Stream]:
    """Every method of the Memory service, as the dispatch runs it."""
    methods: dict[str, Unary | Stream] = {}
    for method in memory_pb2.DESCRIPTOR.services_by_name["Memory"].methods:
        request = getattr(memory_pb2, method.input_type.name)
        behaviour = getattr(servicer, method.name)
        if method.server_streaming:
            methods[method.name] = Stream(request, behaviour)
        else:
            methods[method.name] = Unary(request, behaviour)
    methods["Recall"] = Unary(memory_pb2.RecallRequest, servicer.Recall,
                              prepare=servicer.recall_call, at_once=servicer.recall_at_once,
                              ready=servicer.recall_ready)
    return methods


class Endpoint:
    """The core's side of serving: the link's server and the dispatch on an
    event loop of their own (`dispatch.py` says why), and the front process,
    which serves the public socket. Its methods are called from other
    threads."""

    def __init__(self, vault: Vault, syncing: Syncing, events: EventBus, socket_path: Path,
                 on_failure: Callable[[str], None] | None = None,
                 check: Callable[[bool], CheckReport] | None = None) -> None:
        self.socket_path = socket_path
        inner = socket_path.parent / "inner"
        self.link_socket = inner / "link.sock"  # the core's end of the link
        self.front_socket = inner / "front.sock"  # the front's grpc, behind its gate
        self._on_failure = on_failure
        self._pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="rpc")
        self._recall_pool = ThreadPoolExecutor(max_workers=RECALL_THREADS,
                                               thread_name_prefix="recall")
        servicer = MemoryServicer(vault, syncing, events, str(socket_path), time.time(),
                                  check)
        self._dispatch = Dispatch(memory_methods(servicer), self._pool, self._recall_pool)
        self._link = LinkServer(self._dispatch)
        # uvloop: the link's every hop is a turn of this loop, and libuv's turns
        # cost less than asyncio's own (docs/benchmarks.md, "uvloop").
        self._loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rpc-loop",
                                        daemon=True)
        self._thread.start()
        self._front = FrontProcess(socket_path, self.front_socket, self.link_socket,
                                   _STOP_GRACE_S, self._front_exited)

    def _on_loop(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def _call_on_loop(self, call: Callable[[], None]) -> None:
        async def run() -> None:
            call()

        self._on_loop(run())

    def start(self) -> None:
        prepare_socket_dir(self.socket_path)
        claim_socket(self.socket_path)
        prepare_socket_dir(self.link_socket)
        for path in (self.link_socket, self.front_socket):
            path.unlink(missing_ok=True)  # claim_socket proved nobody serves
        old_umask = os.umask(0o177)  # the socket is 0600 from the moment it exists
        try:
            self._on_loop(self._link.start(self.link_socket))
        finally:
            os.umask(old_umask)
        self._front.start()  # returns once it serves the public socket

    def _front_exited(self, code: int) -> None:
        if code == 0:
            # Stopped by a SIGTERM of its own (a `kill`, or a service manager
            # signalling the whole group): the daemon stops as that would stop it.
            log.info("the front process was stopped; stopping")
            os.kill(os.getpid(), signal.SIGTERM)
            return
        why = f"the front process exited unasked (status {code}); the socket is not served"
        log.error("%s", why)
        if self._on_failure is not None:
            self._on_failure(why)

    def set_serving(self, serving: bool) -> None:
        state = State.SERVING if serving else State.NOT_SERVING
        self._call_on_loop(lambda: self._link.set_state(state))

    def stop(self, grace: float = _STOP_GRACE_S) -> None:
        """Refuse new calls, let in-flight ones finish for up to `grace` s."""
        self._call_on_loop(lambda: self._link.set_state(State.STOPPING))
        self._call_on_loop(self._dispatch.end_streams)
        # The front closes the public socket, lets its calls finish (the core
        # still answers them) and exits; it has `grace` and a little more.
        self._front.stop(grace + 5.0)
        self._call_on_loop(self._link.close)
        for path in (self.link_socket, self.front_socket):
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.link_socket.parent.rmdir()
        self._pool.shutdown(wait=False)
        self._recall_pool.shutdown(wait=False)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5.0)
