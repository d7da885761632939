"""The guarded socket: modes, the peer uid check, stale sockets, one daemon per socket.

The other-uid tests run a client as uid 65534 (`setpriv`, we are root in the
suite) against a real daemon whose socket directory and socket were opened up
on purpose, so that only the peer uid check stands in its way.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memvault import Client
from memvault_base.errors import MemvaultError, Unavailable
from memvaultd.serve.front.peer_gate import PeerGate
from memvaultd.serve.front.peercred import peer_credentials
from memvaultd.serve.front.socket_guard import SocketInUse, claim_socket, prepare_socket_dir

from .daemon_process import DaemonProcess

ROOT = Path(__file__).resolve().parent.parent
OTHER_UID = 65534  # "nobody": exists everywhere, owns nothing of ours
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


# -- the directory and the socket file -------------------------------------------


def test_socket_dir_is_created_0700(tmp_path: Path) -> None:
    prepare_socket_dir(tmp_path / "run" / "memvault.sock")
    assert stat.S_IMODE(os.lstat(tmp_path / "run").st_mode) == 0o700


def test_loose_socket_dir_is_tightened(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir(mode=0o777)
    os.chmod(tmp_path / "run", 0o777)
    prepare_socket_dir(tmp_path / "run" / "memvault.sock")
    assert stat.S_IMODE(os.lstat(tmp_path / "run").st_mode) == 0o700


def test_symlinked_socket_dir_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "run").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(MemvaultError, match="symlink"):
        prepare_socket_dir(tmp_path / "run" / "memvault.sock")


def test_socket_dir_of_another_uid_is_refused(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("only root can give a directory to another uid")
    (tmp_path / "run").mkdir(mode=0o700)
    os.chown(tmp_path / "run", OTHER_UID, OTHER_UID)
    with pytest.raises(MemvaultError, match=f"belongs to uid {OTHER_UID}"):
        prepare_socket_dir(tmp_path / "run" / "memvault.sock")


def test_socket_is_0600_from_the_moment_it_exists(tmp_path: Path) -> None:
    # With the process umask wide open, only a umask set around bind() itself
    # can make the file 0600: the gate never chmods after the fact.
    old = os.umask(0)
    try:
        gate = PeerGate(tmp_path / "s.sock", tmp_path / "inner.sock")
        gate.open()
    finally:
        os.umask(old)
    try:
        assert stat.S_IMODE(os.lstat(tmp_path / "s.sock").st_mode) == 0o600
    finally:
        gate.close()
    assert not (tmp_path / "s.sock").exists()


def test_stale_socket_file_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # bound, never listening: what kill -9 leaves
    claim_socket(path)
    assert not path.exists()


def test_live_socket_is_not_taken(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as live:
        live.bind(str(path))
        live.listen(1)
        with pytest.raises(SocketInUse, match="another memvaultd is already running"):
            claim_socket(path)
        assert path.exists()


# -- the gate, in process -------------------------------------------------------------


@pytest.fixture
def echo_inner(tmp_path: Path) -> Iterator[Path]:
    """A stand-in for grpc on the inner socket: echoes every byte back."""
    path = tmp_path / "inner.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(65536):
                    conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield path
    listener.shutdown(socket.SHUT_RDWR)
    listener.close()


def test_gate_relays_the_owners_bytes_both_ways(tmp_path: Path, echo_inner: Path) -> None:
    gate = PeerGate(tmp_path / "s.sock", echo_inner)
    gate.open()
    try:
        payload = os.urandom(4 * 1024 * 1024)  # bigger than any socket buffer
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(tmp_path / "s.sock"))
            sender = threading.Thread(target=lambda: (client.sendall(payload),
                                                      client.shutdown(socket.SHUT_WR)))
            sender.start()
            echoed = _read_all(client)  # EOF arrives only through the half-close
            sender.join()
        assert echoed == payload
        assert gate.refused == 0
    finally:
        gate.close()


def test_closing_the_gate_delivers_what_the_inner_side_wrote_before_it_closed(
        tmp_path: Path) -> None:
    # What the daemon does on SIGTERM: grpc writes its last replies and
    # closes, then the gate closes. The client, still reading slowly, must
    # get every byte, or a committed write loses its reply.
    inner = tmp_path / "inner.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(inner))
    listener.listen(1)
    reply = os.urandom(4 * 1024 * 1024)  # far more than the sockets buffer
    written = threading.Event()

    def answer_and_close() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(16)
            conn.sendall(reply)
        written.set()

    threading.Thread(target=answer_and_close, daemon=True).start()
    gate = PeerGate(tmp_path / "s.sock", inner)
    gate.open()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(tmp_path / "s.sock"))
            client.sendall(b"request")
            head = client.recv(65536)  # the reply is on its way, most of it still inside
            closing = threading.Thread(target=gate.close)
            closing.start()
            received = head + _read_all(client)
            closing.join(10)
        assert written.is_set() and received == reply
    finally:
        listener.close()
        if gate.public.exists():
            gate.close()


def test_gate_refuses_another_uid_with_a_reason(tmp_path: Path, echo_inner: Path) -> None:
    # The gate is told it serves some other uid: we are the stranger here.
    gate = PeerGate(tmp_path / "s.sock", echo_inner, owner=os.getuid() + 4242)
    gate.open()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(tmp_path / "s.sock"))
            client.sendall(PREFACE + b"secret request")
            answer = _read_all(client)
        assert f"memvaultd refused uid {os.getuid()}".encode() in answer
        assert b"secret request" not in answer  # nothing reached the inner socket
        assert gate.refused == 1
    finally:
        gate.close()


def test_peer_credentials_name_the_connecting_process(tmp_path: Path) -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        creds = peer_credentials(a)
    assert creds.uid == os.getuid()
    if sys.platform.startswith("linux"):
        assert creds.pid == os.getpid()


# -- a real daemon, a real stranger ---------------------------------------------------


def _other_uid_command(*command: str) -> list[str]:
    """`command` run as uid OTHER_UID. socat, not this interpreter: in a
    checkout under a 0700 home (or /root) another uid can reach neither the
    virtual environment's Python nor the checkout's packages."""
    if os.getuid() != 0 or shutil.which("setpriv") is None or shutil.which("socat") is None:
        pytest.skip("needs root, setpriv and socat to connect as another uid")
    return ["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups",
            *command]


@contextlib.contextmanager
def _relay_as_other_uid(target: Path) -> Iterator[Path]:
    """A socket that relays each connection to `target` over a connection of
    uid OTHER_UID's own: a client of this process that dials it is, to the
    daemon, that other user."""
    top = Path(tempfile.mkdtemp(prefix="memvault-relay-"))
    os.chown(top, OTHER_UID, OTHER_UID)
    relay = top / "relay.sock"
    proc = subprocess.Popen(_other_uid_command(
        "socat", f"UNIX-LISTEN:{relay},fork,mode=666", f"UNIX-CONNECT:{target}"),
        stderr=subprocess.DEVNULL, cwd="/")
    try:
        deadline = time.monotonic() + 10
        while not relay.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "socat did not listen"
            time.sleep(0.05)
        yield relay
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def open_daemon() -> Iterator[DaemonProcess]:
    """A daemon whose socket any uid could reach, were it not for the peer check."""
    # Under /tmp, not pytest's tmp_path: that one sits in a 0700 directory that
    # uid 65534 could not even traverse.
    top = Path(tempfile.mkdtemp(prefix="memvault-guard-"))
    try:
        with DaemonProcess(top / "home").start() as proc:
            for directory in (top, proc.home, proc.socket.parent):
                os.chmod(directory, 0o755)
            os.chmod(proc.socket, 0o666)
            yield proc
            assert proc.stop() == 0
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_another_uid_is_refused_and_the_owner_is_served(open_daemon: DaemonProcess) -> None:
    raw = subprocess.run(_other_uid_command("socat", "-t", "10", "-",
                                            f"UNIX-CONNECT:{open_daemon.socket}"),
                         input=PREFACE, capture_output=True, timeout=60, cwd="/")
    assert f"memvaultd refused uid {OTHER_UID}".encode() in raw.stdout, raw.stderr
    with (_relay_as_other_uid(open_daemon.socket) as relay,
          Client(socket=relay, timeout=3) as stranger, pytest.raises(Unavailable)):
        stranger.remember("written by a stranger", topic="intruder")
    assert f"refused a connection from uid {OTHER_UID}" in open_daemon.log

    with Client(socket=open_daemon.socket) as owner:
        owner.remember("the owner is served", topic="guard.owner")
        assert [h.memory.text for h in owner.recall("who is served")] == ["the owner is served"]
        assert owner.recall("written by a stranger", filter={"topic_key": "intruder"}) == []
        assert owner.status().memory_count == 1
    assert stat.S_IMODE(os.lstat(open_daemon.socket.parent / "inner").st_mode) == 0o700


def test_grpc_listens_only_behind_the_gate(daemon: DaemonProcess) -> None:
    inner_dir = daemon.socket.parent / "inner"
    assert stat.S_IMODE(os.lstat(inner_dir).st_mode) == 0o700
    assert os.lstat(inner_dir).st_uid == os.getuid()
    # The front's grpc and the daemon's link; the daemon itself runs no grpc.
    assert sorted(path.name for path in inner_dir.iterdir()) == ["front.sock", "link.sock"]
    for name in ("front.sock", "link.sock"):
        assert stat.S_IMODE(os.lstat(inner_dir / name).st_mode) == 0o600, name
    assert stat.S_IMODE(os.lstat(daemon.socket).st_mode) == 0o600


# -- one daemon per socket ----------------------------------------------------------


def test_second_daemon_exits_2_and_leaves_the_first_alone(daemon: DaemonProcess,
                                                          tmp_path: Path) -> None:
    second = DaemonProcess(daemon.home)
    second.log_path = tmp_path / "second.log"
    second.start(wait=False)
    assert second.proc is not None
    assert second.proc.wait(60) == 2
    assert "another memvaultd is already running on" in second.log
    # Refused before it unlocked the key or opened the first one's log.
    assert "vault key" not in second.log
    assert daemon.health() == "SERVING"
    with Client(socket=daemon.socket) as client:
        client.status()


def test_stale_socket_after_kill_9_is_replaced(home: Path) -> None:
    with DaemonProcess(home).start() as first:
        with Client(socket=first.socket) as client:
            client.remember("survives a crash and a stale socket", topic="guard.stale")
        first.kill_all()
    assert first.socket.exists(), "kill -9 should leave the socket file behind"
    with DaemonProcess(home).start() as again:
        assert "another memvaultd" not in again.log
        with Client(socket=again.socket) as client:
            hits = client.recall("crash and stale socket")
        assert [h.memory.text for h in hits] == ["survives a crash and a stale socket"]
        assert again.stop() == 0
    assert not again.socket.exists()
    assert not (again.socket.parent / "inner").exists()


def test_daemon_refuses_a_symlinked_socket_dir(home: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    home.mkdir()
    (home / "run").symlink_to(tmp_path / "elsewhere")
    proc = DaemonProcess(home).start(wait=False)
    assert proc.proc is not None
    assert proc.proc.wait(60) == 2
    assert "symlink" in proc.log
    assert list((tmp_path / "elsewhere").iterdir()) == []
