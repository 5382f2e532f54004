"""An HTTP proxy in front of an S3 server, for tests and benchmarks: it counts the requests a
client makes (CountingProxy), or also drops If-None-Match from each (StrippingProxy), which makes
a store that ignores conditional writes, as some S3-compatible stores do, or answers conditional
PUTs with 409 ConditionalRequestConflict (ConflictingProxy). The Host header is
forwarded as the client sent it, so SigV4 signatures still verify upstream (stripping a signed
header does not: StrippingProxy goes in front of an unsigned server)."""
from __future__ import annotations

import http.client
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

_HOP = {"connection", "transfer-encoding", "keep-alive"}


class CountingProxy:
    strip_if_none_match = False

    def __init__(self, upstream: str) -> None:
        target = urlparse(upstream)
        proxy = self
        self._lock = threading.Lock()
        self.by_method: Counter[str] = Counter()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if proxy.conflict_now(self.command, self.headers):
                    return self._conflict()
                dropped = _HOP | ({"if-none-match"} if proxy.strip_if_none_match else set())
                headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
                with proxy._lock:
                    proxy.by_method[self.command] += 1
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                if proxy.drop_answer_now(self.command, self.headers):
                    self.close_connection = True  # the write happened; its answer is lost on the way
                    conn.close()
                    return
                self.send_response(answer.status)
                for k, v in answer.getheaders():
                    if k.lower() not in _HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            def _conflict(self) -> None:
                data = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>ConditionalRequestConflict</Code>'
                        b'<Message>A conflicting conditional operation is currently in progress against this '
                        b'resource.</Message></Error>')
                self.send_response(409)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def conflict_now(self, method: str, headers) -> bool:
        return False

    def drop_answer_now(self, method: str, headers) -> bool:
        return False

    @property
    def count(self) -> int:
        return sum(self.by_method.values())

    def __enter__(self) -> "CountingProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class StrippingProxy(CountingProxy):
    strip_if_none_match = True


class ConflictingProxy(CountingProxy):
    """Answers the next `conflicts` conditional PUTs (once armed) with 409
    ConditionalRequestConflict, as S3 does when conditional writes of one key overlap."""

    def __init__(self, upstream: str, conflicts: int) -> None:
        super().__init__(upstream)
        self.conflicts, self.conflicts_sent, self.armed = conflicts, 0, False

    def conflict_now(self, method: str, headers) -> bool:
        with self._lock:
            if self.armed and method == "PUT" and headers.get("If-None-Match") and self.conflicts > 0:
                self.conflicts -= 1
                self.conflicts_sent += 1
                return True
            return False


class LostAnswerProxy(CountingProxy):
    """Forwards the next conditional PUT (once armed) but drops its answer, as a network failure
    after the store wrote the object would: the SDK retries, and the retry meets our own object."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.armed, self.dropped = False, 0

    def drop_answer_now(self, method: str, headers) -> bool:
        with self._lock:
            if self.armed and method == "PUT" and headers.get("If-None-Match") and not self.dropped:
                self.dropped += 1
                return True
            return False
