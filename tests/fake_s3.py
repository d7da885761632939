"""A small S3-compatible server in this process, to be hostile with.

It speaks as much of the S3 API as memvault's bucket code uses, path-style
and unsigned (signatures are not checked): PUT, GET, HEAD and DELETE of an
object, DeleteObjects (`POST ?delete`, how obstore deletes) and
ListObjectsV2. Honest by default; each attribute makes it wrong
in one way a real store (or whoever runs it) can be:

- `ignore_if_none_match`: a PUT with `If-None-Match: *` overwrites an
  existing key instead of answering 412 (stores that lack conditional
  writes let the last writer win);
- `huge`: key -> size; a GET of such a key streams that many zero bytes,
  its Content-Length saying so;
- `endless_list`: every ListObjectsV2 page holds 1,000 new keys and says
  there are more.

`requests` counts the requests by method; `sent` the bytes of GET bodies
written before the client went away.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape, unescape

_MODIFIED = "Mon, 01 Jan 2024 00:00:00 GMT"
_MODIFIED_ISO = "2024-01-01T00:00:00.000Z"
_CHUNK = 1 << 20


class FakeS3(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.objects: dict[str, bytes] = {}
        self.ignore_if_none_match = False
        self.huge: dict[str, int] = {}
        self.endless_list = False
        self.requests: Counter[str] = Counter()
        self.sent = 0
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def env(self) -> dict[str, str]:
        """What an `s3://` remote reads to reach this server."""
        return {"MEMVAULT_S3_ENDPOINT": self.endpoint, "AWS_ACCESS_KEY_ID": "fake",
                "AWS_SECRET_ACCESS_KEY": "fake", "AWS_REGION": "us-east-1"}


@contextmanager
def fake_s3() -> Iterator[FakeS3]:
    server = FakeS3()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: FakeS3
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _key(self) -> tuple[str, str, dict[str, list[str]]]:
        parts = urlsplit(self.path)
        bucket, _, key = unquote(parts.path).lstrip("/").partition("/")
        return bucket, key, parse_qs(parts.query, keep_blank_values=True)

    def _answer(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None
                ) -> None:
        self.send_response(code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, code: int, what: str) -> None:
        self._answer(code, f"<Error><Code>{what}</Code></Error>".encode(),
                     {"Content-Type": "application/xml"})

    def _count(self) -> None:
        with self.server.lock:
            self.server.requests[self.command] += 1

    def do_PUT(self) -> None:
        self._count()
        _, key, _ = self._key()
        data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            if (self.headers.get("If-None-Match") == "*" and key in self.server.objects
                    and not self.server.ignore_if_none_match):
                self._error(412, "PreconditionFailed")
                return
            self.server.objects[key] = data
        self._answer(200, headers={"ETag": f'"{hash(data) & 0xFFFFFFFF:08x}"'})

    def do_DELETE(self) -> None:
        self._count()
        _, key, _ = self._key()
        with self.server.lock:
            self.server.objects.pop(key, None)
        self._answer(204)

    def do_POST(self) -> None:
        self._count()
        _, _, query = self._key()
        if "delete" not in query:
            self._error(501, "NotImplemented")
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        keys = [unescape(key) for key in re.findall(r"<Key>(.*?)</Key>", body)]
        with self.server.lock:
            for key in keys:
                self.server.objects.pop(key, None)
        deleted = "".join(f"<Deleted><Key>{escape(key)}</Key></Deleted>" for key in keys)
        self._answer(200, f'<?xml version="1.0" encoding="UTF-8"?><DeleteResult>{deleted}'
                          "</DeleteResult>".encode(), {"Content-Type": "application/xml"})

    def do_HEAD(self) -> None:
        self._count()
        self._get(head=True)

    def do_GET(self) -> None:
        self._count()
        _, key, query = self._key()
        if not key and "list-type" in query:
            self._list(query)
        else:
            self._get(head=False)

    def _get(self, head: bool) -> None:
        _, key, _ = self._key()
        size = self.server.huge.get(key)
        data = self.server.objects.get(key)
        if size is None and data is None:
            self._error(404, "NoSuchKey")
            return
        length = size if size is not None else len(data or b"")
        self.send_response(200)
        for name, value in (("Content-Length", str(length)), ("ETag", '"fake"'),
                            ("Last-Modified", _MODIFIED)):
            self.send_header(name, value)
        self.end_headers()
        if head:
            return
        if size is None:
            self.wfile.write(data or b"")
            return
        try:
            for start in range(0, size, _CHUNK):
                chunk = bytes(min(_CHUNK, size - start))
                self.wfile.write(chunk)
                with self.server.lock:
                    self.server.sent += len(chunk)
        except OSError:
            pass  # the client went away, as it should

    def _list(self, query: dict[str, list[str]]) -> None:
        prefix = query.get("prefix", [""])[0]
        after = query.get("start-after", [""])[0]
        if self.server.endless_list:
            page = int(query.get("continuation-token", ["0"])[0])
            keys = [f"{prefix}endless-{page:012d}-{i:04d}" for i in range(1000)]
            token = str(page + 1)
            sizes = dict.fromkeys(keys, 1)
        else:
            with self.server.lock:
                sizes = {key: len(data) for key, data in self.server.objects.items()}
                sizes.update(self.server.huge)
            keys = sorted(key for key in sizes if key.startswith(prefix) and key > after)
            token = ""
        contents = "".join(
            f"<Contents><Key>{escape(key)}</Key><LastModified>{_MODIFIED_ISO}</LastModified>"
            f'<ETag>"fake"</ETag><Size>{sizes[key]}</Size>'
            "<StorageClass>STANDARD</StorageClass></Contents>" for key in keys)
        more = (f"<IsTruncated>true</IsTruncated>"
                f"<NextContinuationToken>{escape(token)}</NextContinuationToken>"
                if token else "<IsTruncated>false</IsTruncated>")
        body = ('<?xml version="1.0" encoding="UTF-8"?>'
                '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<Name>bucket</Name><Prefix>{escape(prefix)}</Prefix>"
                f"<KeyCount>{len(keys)}</KeyCount><MaxKeys>1000</MaxKeys>"
                f"{more}{contents}</ListBucketResult>")
        self._answer(200, body.encode(), {"Content-Type": "application/xml"})
