"""A real S3 server for tests: a one-node Ceph cluster in RAM with a RADOS Gateway.

Every daemon listens on 127.0.0.1 only, keeps its data in memory (memstore,
2 GiB ceiling), and runs in the foreground as a child of the test process, so
stopping the cluster is terminating the pids it started. Start-up order:

    keys (mon., client.admin, client.rgw.a) -> monmap -> ceph-mon --mkfs, ceph-mon
    -> `ceph osd new` -> ceph-osd --mkfs, ceph-osd -> radosgw -> the port answers
    -> `radosgw-admin user create` with a fixed access key

About 12 s from an empty directory on a 2-core machine. Authentication inside
the cluster is off (`auth ... required = none`): everything is on loopback and
torn down with the test session. The gateway itself checks S3 signatures.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

COMMANDS = ("ceph-authtool", "monmaptool", "ceph-mon", "ceph-osd", "radosgw", "radosgw-admin",
            "ceph")
ACCESS_KEY = "memvaulttestaccess"
SECRET_KEY = "memvault-test-secret-key-not-a-secret"
REGION = "us-east-1"  # RGW's default zonegroup answers to any region name in signatures


def missing_commands() -> list[str]:
    return [name for name in COMMANDS if shutil.which(name) is None]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class CephRGW:
    """One cluster under `root`; `start()` returns once S3 answers on `endpoint`."""

    root: Path
    rgw_port: int = field(default_factory=_free_port)
    started_in: float = 0.0
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.rgw_port}"

    @property
    def conf(self) -> Path:
        return self.root / "ceph.conf"

    def env(self) -> dict[str, str]:
        """The variables an `s3://` remote or store reads."""
        return {"MEMVAULT_S3_ENDPOINT": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION}

    def start(self, timeout: float = 120.0) -> CephRGW:
        begun = time.monotonic()
        deadline = begun + timeout
        fsid = str(uuid.uuid4())
        mon_v2, mon_v1 = _free_port(), _free_port()
        for sub in ("run", "log", "mon", "osd"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self._write_conf(fsid, mon_v2, mon_v1)
        keyring = self.root / "keyring"
        self._run("ceph-authtool", "--create-keyring", str(keyring), "--gen-key", "-n", "mon.",
                  "--cap", "mon", "allow *")
        self._run("ceph-authtool", str(keyring), "--gen-key", "-n", "client.admin",
                  "--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mgr", "allow *")
        self._run("ceph-authtool", str(keyring), "--gen-key", "-n", "client.rgw.a",
                  "--cap", "mon", "allow rw", "--cap", "osd", "allow rwx")
        monmap = self.root / "monmap"
        self._run("monmaptool", "--create", "--fsid", fsid, "--addv", "a",
                  f"[v2:127.0.0.1:{mon_v2},v1:127.0.0.1:{mon_v1}]", str(monmap))
        self._run("ceph-mon", "-c", str(self.conf), "--mkfs", "-i", "a", "--monmap", str(monmap),
                  "--keyring", str(keyring))
        self._spawn("ceph-mon", "-c", str(self.conf), "-f", "-i", "a")
        osd_uuid = str(uuid.uuid4())
        osd_id = self._run("ceph", "-c", str(self.conf), "--connect-timeout", "30",
                           "osd", "new", osd_uuid).strip()
        (self.root / "osd" / osd_id).mkdir(exist_ok=True)
        self._run("ceph-osd", "-c", str(self.conf), "-i", osd_id, "--mkfs", "--osd-uuid", osd_uuid)
        self._spawn("ceph-osd", "-c", str(self.conf), "-f", "-i", osd_id)
        self._spawn("radosgw", "-c", str(self.conf), "-f", "-n", "client.rgw.a")
        self._wait_for_gateway(deadline)
        self._run("radosgw-admin", "-c", str(self.conf), "user", "create", "--uid", "memvault",
                  "--display-name", "memvault tests", "--access-key", ACCESS_KEY,
                  "--secret-key", SECRET_KEY)
        self.started_in = time.monotonic() - begun
        return self

    def create_bucket(self, name: str) -> None:
        """PUT /name, signed with AWS Signature V4 (the S3 clients used here cannot create
        buckets; a user creates theirs with their provider's tools)."""
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT", data=b"",
                                         headers=_sigv4_headers("PUT", self.rgw_port, f"/{name}"))
        with urllib.request.urlopen(request, timeout=30) as reply:
            reply.read()

    def delete_bucket(self, name: str) -> None:
        """DELETE /name (the bucket must be empty), signed as `create_bucket` is."""
        request = urllib.request.Request(
            f"{self.endpoint}/{name}", method="DELETE",
            headers=_sigv4_headers("DELETE", self.rgw_port, f"/{name}"))
        with urllib.request.urlopen(request, timeout=30) as reply:
            reply.read()

    def stop(self) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self._procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for path in sorted((self.root / "log").glob("*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def _write_conf(self, fsid: str, mon_v2: int, mon_v1: int) -> None:
        r = self.root
        self.conf.write_text(f"""[global]
fsid = {fsid}
mon host = [v2:127.0.0.1:{mon_v2},v1:127.0.0.1:{mon_v1}]
mon initial members = a
public addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
keyring = {r}/keyring
osd objectstore = memstore
memstore device bytes = 2147483648
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon max pg per osd = 1000
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
run dir = {r}/run
admin socket = {r}/run/$name.asok
log file = {r}/log/$name.log
pid file = {r}/run/$name.pid
mon data = {r}/mon/$id
osd data = {r}/osd/$id

[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:{self.rgw_port} tcp_nodelay=1
rgw data = {r}/rgw
ms mon client mode = crc
""")

    def _run(self, *argv: str) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:3])} failed ({done.returncode}):\n"
                               f"{done.stdout}{done.stderr}\n{self.log_tail()}")
        return done.stdout

    def _spawn(self, *argv: str) -> None:
        log = open(self.root / "log" / f"{argv[0]}.out", "ab")  # noqa: SIM115 - the child's
        self._procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, env=dict(os.environ)))
        log.close()

    def _wait_for_gateway(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}:\n"
                                       f"{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.endpoint, timeout=1):
                    return
            except urllib.error.HTTPError:
                return  # any HTTP answer (403 for an anonymous list) means it is up
            except OSError:
                time.sleep(0.2)
        raise TimeoutError(f"radosgw not answering on {self.endpoint}:\n{self.log_tail()}")


def _sigv4_headers(method: str, port: int, path: str) -> dict[str, str]:
    """Headers of an empty-bodied request signed with AWS Signature V4 (AWS's
    "Signature Version 4 signing process", with `host`, `x-amz-content-sha256`
    and `x-amz-date` as the signed headers)."""
    now = datetime.datetime.now(datetime.UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    body_hash = hashlib.sha256(b"").hexdigest()
    headers = {"host": f"127.0.0.1:{port}", "x-amz-content-sha256": body_hash,
               "x-amz-date": stamp}
    signed = ";".join(sorted(headers))
    canonical = "\n".join([method, path, "", *(f"{k}:{headers[k]}" for k in sorted(headers)),
                           "", signed, body_hash])
    scope = f"{day}/{REGION}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = f"AWS4{SECRET_KEY}".encode()
    for part in (day, REGION, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/{scope}, "
                                f"SignedHeaders={signed}, Signature={signature}")
    del headers["host"]  # urllib sends it itself, with the same value
    return headers


def session_rgw(root: Path) -> Iterator[CephRGW]:
    """The body of conftest's `rgw` fixture: start once, yield, stop.

    Without the Ceph commands, or when the cluster does not come up, the
    tests that need it are skipped, unless `MEMVAULT_REQUIRE_RGW=1`
    (scripts/test sets it after installing the packages): then they fail.
    """
    import pytest

    give_up = pytest.fail if os.environ.get("MEMVAULT_REQUIRE_RGW") == "1" else pytest.skip
    missing = missing_commands()
    if missing:
        give_up(f"Ceph RGW not installed (missing {', '.join(missing)}); "
                f"run scripts/setup --system")
    cluster = CephRGW(root)
    try:
        cluster.start()
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        cluster.stop()
        give_up(f"Ceph RGW did not start: {exc}")
    print(f"\nCeph RGW ready on {cluster.endpoint} in {cluster.started_in:.1f} s")
    try:
        yield cluster
    finally:
        cluster.stop()
