"""AWS Glue's wire protocol over HTTP, so boto3's Glue client talks to the catalog.

AWS JSON 1.1: every request is a POST whose `X-Amz-Target: AWSGlue.<Operation>` header names
the operation and whose body is the request as JSON; the response is JSON
(`application/x-amz-json-1.1`), timestamps as seconds since the epoch. An error is HTTP 400
with `{"__type": "<Glue error type>", "message": ...}` and the same type in
`x-amzn-ErrorType`, which is what botocore turns into `client.exceptions.<Type>`.

Requests are checked against Glue's API model (skiplake.catalog.validation) and refused with
ValidationException before they reach the catalog. Given principals (`--credentials FILE`), the
server checks each request's AWS Signature Version 4 (skiplake.catalog.auth) and lets read-only
principals call Get*/BatchGet* only; without them it trusts every request (loopback use).

    skiplake catalog serve --db sqlite:///catalog.db --host 127.0.0.1 --port 9700
"""
from __future__ import annotations

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Mapping

from skiplake.catalog.auth import AuthError, Principal, Verifier
from skiplake.catalog.service import GlueCatalog
from skiplake.errors import CatalogError, ValidationError

CONTENT_TYPE = "application/x-amz-json-1.1"
TARGET_PREFIX = "AWSGlue."


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.timestamp()
    if isinstance(value, dt.date):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__}")


def _refusal(verifier: Verifier | None, path: str, headers: dict[str, str], body: bytes,
             operation: str) -> AuthError | None:
    """Why the request's sender may not make it (bad or no signature, a read-only principal
    writing), or None; always None on a server without principals."""
    if verifier is None:
        return None
    try:
        principal = verifier.verify("POST", path, headers, body)
    except AuthError as e:
        return e
    if not principal.may_call(operation):
        return AuthError("AccessDeniedException", f"principal {principal.access_key_id} is {principal.role} "
                         f"and may not call {operation}")
    return None


def _handler(catalog: GlueCatalog, verifier: Verifier | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
            pass  # one line per request would drown the server's own output

        def _send(self, status: int, body: dict[str, Any], error_type: str | None = None) -> None:
            data = json.dumps(body, default=_json_default).encode()
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            if error_type:
                self.send_header("x-amzn-ErrorType", error_type)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            target = self.headers.get("X-Amz-Target", "")
            if not target.startswith(TARGET_PREFIX):
                self._send(400, {"__type": "InvalidInputException",
                                 "message": f"X-Amz-Target must be {TARGET_PREFIX}<Operation>, not {target!r}"},
                           "InvalidInputException")
                return
            operation = target[len(TARGET_PREFIX):]
            refused = _refusal(verifier, self.path, dict(self.headers.items()), raw if length else b"", operation)
            if refused is not None:
                self._send(refused.status, {"__type": refused.code, "message": refused.message}, refused.code)
                return
            try:
                params = json.loads(raw or b"{}")
                if not isinstance(params, dict):
                    raise ValidationError("1 validation error detected: the request body must be a JSON object")
                result = catalog.call(operation, params)
            except CatalogError as e:
                self._send(400, {"__type": e.code, "message": e.message}, e.code)
                return
            except (ValueError, TypeError, RecursionError) as e:  # not JSON, not UTF-8, nested too deep
                self._send(400, {"__type": "InvalidInputException", "message": f"bad request: {str(e)[:300]}"},
                           "InvalidInputException")
                return
            except Exception as e:  # noqa: BLE001 (a server answers, it does not die)
                self._send(500, {"__type": "InternalServiceException", "message": str(e)[:1000]},
                           "InternalServiceException")
                return
            self._send(200, result)

    return Handler


class CatalogServer:
    """The catalog served over HTTP on (host, port); port 0 picks a free one."""

    def __init__(self, catalog: GlueCatalog, host: str = "127.0.0.1", port: int = 0,
                 principals: Mapping[str, Principal] | None = None) -> None:
        """With `principals`, every request must carry a valid SigV4 signature of one of them."""
        self.catalog = catalog
        verifier = Verifier(principals) if principals else None
        self.httpd = ThreadingHTTPServer((host, port), _handler(catalog, verifier))
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "CatalogServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="catalog-server")
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
