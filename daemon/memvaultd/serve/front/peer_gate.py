"""The socket's gate: only processes of our own uid get through to gRPC.

grpc's Python server owns accept(), and nothing it hands a servicer names the
peer of a unix socket: `context.peer()` is "unix:", and `auth_context()` holds
only the transport type, with insecure and with local (UDS) credentials
alike. No Python API hands an accepted fd to grpc either. So the daemon
accepts connections itself, asks the kernel who connected (`peercred`), and

- refuses another uid: it answers with an HTTP/2 GOAWAY whose debug text says
  why (the client's error reads "... Debug Text: memvaultd refused uid 65534
  ...") and closes;
- relays the owner's bytes, both ways, to grpc listening on an inner socket
  in a 0700 directory of its own (`<run>/inner/`), which no other uid can
  reach even when the public socket's directory is opened up.

The cost is one extra hop and copy per byte through this process, measured
on a loaded 2-core machine with calls to the gate and straight to the inner
socket interleaved: a cached top-3 recall goes from p50 0.781 ms to 0.803 ms
(median paired difference +0.025 ms), a top-200 recall with vectors (~330 KB
reply) from 11.09 ms to 11.22 ms (+0.087 ms); see docs/service.md. Two relay
threads per connection; an agent keeps one connection open, so a busy user
runs a handful.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

from memvault_base.errors import MemvaultError
from memvaultd.serve.front.peercred import peer_credentials

log = logging.getLogger("memvaultd.gate")

_CHUNK = 256 * 1024  # above the 208 KiB default unix socket buffer: one read takes all queued
_BACKLOG = 128
_REFUSAL_S = 1.0
_DRAIN_S = 2.0
# HTTP/2 (RFC 9113): the server preface is a SETTINGS frame; GOAWAY is frame
# type 7 carrying last-stream-id 0, error INADEQUATE_SECURITY (0xc) and debug
# text. Frame header: length:24 type:8 flags:8 reserved:1 stream-id:31.
_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_INADEQUATE_SECURITY = 0xC


def goaway(reason: str) -> bytes:
    """The bytes that tell an HTTP/2 client why it is turned away."""
    payload = struct.pack(">II", 0, _INADEQUATE_SECURITY) + reason.encode()
    return _SETTINGS + struct.pack(">I", len(payload))[1:] + b"\x07\x00" + b"\x00" * 4 + payload


class PeerGate:
    """Accepts on `public`, lets uid `owner` through to grpc on `inner`."""

    def __init__(self, public: Path, inner: Path, owner: int | None = None) -> None:
        self.public = public
        self.inner = inner
        self.owner = os.getuid() if owner is None else owner
        self._listener: socket.socket | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._relays: set[_Relay] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept_loop, name="gate", daemon=True)
        self.refused = 0
        # At most 16 strangers are told why at once, each for at most 1 s.
        self._refusing = threading.BoundedSemaphore(16)

    def open(self) -> None:
        """Bind the public socket, 0600 from the moment it exists, and start accepting."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            listener.bind(str(self.public))
        except OSError as exc:
            listener.close()
            raise MemvaultError(f"cannot listen on {self.public}: {exc.strerror}") from None
        finally:
            os.umask(old_umask)
        listener.listen(_BACKLOG)
        self._listener = listener
        self._thread.start()

    def stop_accepting(self) -> None:
        """New connections are refused by the kernel; open ones keep relaying."""
        os.write(self._wake_w, b"x")
        if self._thread.is_alive():
            self._thread.join(5)
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def close(self, drain: float = _DRAIN_S) -> None:
        """Stop accepting, let the relays pass on what grpc wrote before it
        closed their inner ends (for up to `drain` s), cut those still open,
        remove the public socket file.

        Cutting at once lost replies: grpc's stop returns once a call's
        status is written to the inner socket, not once the client has it,
        and under load a 96-memory RememberBatch, committed, was cut off
        from its reply about one time in four."""
        self.stop_accepting()
        with self._lock:
            relays = list(self._relays)
        deadline = time.monotonic() + drain
        for relay in relays:
            relay.join_out(max(0.0, deadline - time.monotonic()))
        for relay in relays:
            relay.close()
        for relay in relays:
            relay.join(5)
        os.close(self._wake_r)
        os.close(self._wake_w)
        self.public.unlink(missing_ok=True)

    def _accept_loop(self) -> None:
        assert self._listener is not None
        listener = self._listener
        while True:
            ready, _, _ = select.select([listener.fileno(), self._wake_r], [], [])
            if self._wake_r in ready:
                return
            try:
                conn, _ = listener.accept()
            except OSError as exc:  # EMFILE and friends: log, keep serving the others
                log.warning("accept failed: %s", exc)
                continue
            try:
                self._admit(conn)
            except OSError as exc:
                log.warning("dropped a connection: %s", exc)
                conn.close()

    def _admit(self, conn: socket.socket) -> None:
        peer = peer_credentials(conn)
        if peer.uid != self.owner:
            self.refused += 1
            log.warning("refused a connection from uid %d (pid %d): this socket serves "
                        "uid %d only", peer.uid, peer.pid, self.owner)
            reason = f"memvaultd refused uid {peer.uid}: this daemon serves uid {self.owner} only"
            if self._refusing.acquire(blocking=False):
                threading.Thread(target=self._turn_away, args=(conn, reason), daemon=True,
                                 name="gate-refuse").start()
            else:  # a flood: no explanations, no threads
                conn.close()
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(str(self.inner))
        except OSError:
            upstream.close()
            raise
        relay = _Relay(conn, upstream, self._forget)
        with self._lock:
            self._relays.add(relay)
        relay.start()

    def _turn_away(self, conn: socket.socket, reason: str) -> None:
        """Say why, then read what the stranger sent until it hangs up (at most 1 s).

        Closing a unix socket with unread bytes in it resets the peer, which
        then loses the GOAWAY still waiting in its own buffer: hence the drain.
        Nothing read here goes anywhere.
        """
        try:
            conn.settimeout(_REFUSAL_S)
            conn.sendall(goaway(reason))
            conn.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + _REFUSAL_S
            while conn.recv(_CHUNK) and time.monotonic() < deadline:
                pass
        except OSError:
            pass  # it hung up or timed out: refused all the same
        finally:
            conn.close()
            self._refusing.release()

    def _forget(self, relay: _Relay) -> None:
        with self._lock:
            self._relays.discard(relay)


class _Relay:
    """Copies bytes both ways between a client and grpc until either side closes."""

    def __init__(self, client: socket.socket, upstream: socket.socket,
                 on_done: Callable[[_Relay], None]) -> None:
        self._sockets = (client, upstream)
        self._on_done = on_done
        self._threads = (
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True,
                             name="relay-in"),
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True,
                             name="relay-out"),
        )
        self._finished = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        buffer = bytearray(_CHUNK)
        view = memoryview(buffer)
        try:
            while n := source.recv_into(buffer):
                sink.sendall(view[:n])
        except OSError:
            pass  # a reset on either side ends this direction like an EOF
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
            self._one_done()

    def _one_done(self) -> None:
        with self._lock:
            self._finished += 1
            last = self._finished == 2
        if last:
            for sock in self._sockets:
                sock.close()
            self._on_done(self)

    def close(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def join(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)

    def join_out(self, timeout: float) -> None:
        """Wait until grpc's side closed and all it wrote reached the client."""
        self._threads[1].join(timeout)

