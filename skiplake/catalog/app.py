"""AWS Glue's wire protocol as an ASGI application, so boto3's Glue client talks to the catalog.

AWS JSON 1.1: every request is a POST whose `X-Amz-Target: AWSGlue.<Operation>` header names
the operation and whose body is the request as JSON; the response is JSON
(`application/x-amz-json-1.1`), timestamps as seconds since the epoch, with an
`x-amzn-RequestId`. An error is a 4xx (5xx when the fault is the server's) with
`{"__type": "<Glue error type>", "message": ...}` and the same type in `x-amzn-ErrorType`, which
is what botocore turns into `client.exceptions.<Type>`.

Order of checks, cheapest first, nothing reaching the catalog until all pass: the declared size
(413), the body arriving within `body_timeout` (408), the target naming an operation, the
SigV4 signature and the principal's role (skiplake.catalog.auth, when principals are given),
the body being a JSON object, Glue's API model (skiplake.catalog.validation, inside
GlueCatalog.call). The catalog runs in a thread pool so the event loop keeps accepting; an
answer slower than `request_timeout` is OperationTimeoutException (the operation may still
complete, as with Glue). `GET /health` answers 200 when the database answers a query, else 503;
it is not signed, for load balancers. One JSON line per request goes to the access log.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from skiplake.extras import CATALOG_STORE, require

require("catalog", "the Glue-compatible catalog", CATALOG_STORE)

import orjson
from sqlalchemy import text

from skiplake.catalog.auth import AuthError, Verifier, is_read
from skiplake.catalog.service import GlueCatalog
from skiplake.errors import CatalogError, ValidationError

CONTENT_TYPE = "application/x-amz-json-1.1"
TARGET_PREFIX = "AWSGlue."
ACCESS_LOG = "skiplake.catalog.access"

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class Limits:
    """What one request may take. Glue's largest requests (a 100-partition batch with column
    schemas) stay well under the default body size."""
    max_body_bytes: int = 8 * 1024 * 1024
    body_timeout: float = 30.0       # seconds for the whole body to arrive once the headers have
    request_timeout: float = 60.0    # seconds for the catalog to answer
    threads: int = 4                 # catalog calls at once per worker (each holds a DB connection)


@dataclass
class Answer:
    """An answer: HTTP status, body, the error type for `x-amzn-ErrorType`, and what the access log records."""
    status: int
    body: bytes
    error: str | None = None
    operation: str = ""
    principal: str = ""


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.timestamp()
    if isinstance(value, dt.date):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__}")


def error(status: int, code: str, message: str, operation: str = "", principal: str = "") -> Answer:
    """An error answer with Glue's `{"__type", "message"}` body; `code` is its error type."""
    return Answer(status, json.dumps({"__type": code, "message": message}).encode(), code, operation, principal)


class GlueApp:
    """The ASGI application: `GlueApp(catalog, verifier)` is what uvicorn serves."""

    def __init__(self, catalog: GlueCatalog, verifier: Verifier | None = None, limits: Limits = Limits(),
                 log: logging.Logger | None = None) -> None:
        """`log` gets one JSON line per request at INFO; None logs nothing."""
        self.catalog = catalog
        self.verifier = verifier
        self.limits = limits
        self.log = log
        self._pool = ThreadPoolExecutor(limits.threads, thread_name_prefix="catalog")
        # Health checks get their own thread, so a busy server is not reported as down.
        self._health_pool = ThreadPoolExecutor(1, thread_name_prefix="catalog-health")

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """The ASGI entry point: lifespan events and HTTP requests (no other scope is served)."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)
        # websockets are not served: uvicorn refuses the upgrade when the app does not accept it

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                # In-flight requests have finished (uvicorn waits for them): release the database.
                self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def close(self) -> None:
        """Shut the thread pools and release the database's connections."""
        # Calls still queued were cancelled with their requests; only running ones are awaited.
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._health_pool.shutdown(wait=True, cancel_futures=True)
        self.catalog.engine.dispose()

    async def _http(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        request_id = str(uuid.uuid4())
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        size = 0
        if scope["path"] == "/health" and scope["method"] in ("GET", "HEAD"):
            answer = await self._health()
        elif scope["method"] != "POST":
            answer = error(405, "InvalidInputException", f"{scope['method']} is not served: Glue's API is POST to /, "
                           "health is GET /health")
        else:
            body_or_answer = await self._read_body(headers, receive)
            if isinstance(body_or_answer, Answer):
                answer = body_or_answer
            else:
                size = len(body_or_answer)
                answer = await self._answer(scope, headers, body_or_answer)
        await self._send(send, answer, request_id, head_only=scope["method"] == "HEAD")
        self._log(scope, answer, request_id, size, started)

    async def _read_body(self, headers: dict[str, str], receive: Receive) -> bytes | Answer:
        limit = self.limits.max_body_bytes
        try:
            declared = int(headers.get("content-length") or 0)
        except ValueError:
            return error(400, "InvalidInputException", "Content-Length is not a number")
        if declared > limit:
            return error(413, "InvalidInputException", f"the request body of {declared:,} bytes is over the "
                         f"server's limit of {limit:,} (catalog serve --max-request-bytes)")
        chunks: list[bytes] = []
        total = 0

        async def read() -> Answer | None:
            nonlocal total
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return error(400, "InvalidInputException", "the client went away before the body arrived")
                chunk = message.get("body", b"")
                total += len(chunk)
                if total > limit:
                    return error(413, "InvalidInputException", f"the request body is over the server's limit of "
                                 f"{limit:,} bytes (catalog serve --max-request-bytes)")
                chunks.append(chunk)
                if not message.get("more_body"):
                    return None

        try:
            refused = await asyncio.wait_for(read(), self.limits.body_timeout)
        except asyncio.TimeoutError:
            return error(408, "InvalidInputException", f"the request body did not arrive within "
                         f"{self.limits.body_timeout:g} s (catalog serve --body-timeout)")
        return refused if refused is not None else b"".join(chunks)

    async def _answer(self, scope: dict[str, Any], headers: dict[str, str], body: bytes) -> Answer:
        path = scope["path"] + (("?" + scope["query_string"].decode("latin-1")) if scope["query_string"] else "")
        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(self._pool, self.handle, path, headers, body)
        try:
            # On timeout the call is cancelled if it has not started; one already running
            # finishes on its thread (a database call cannot be interrupted) and is dropped.
            return await asyncio.wait_for(work, self.limits.request_timeout)
        except asyncio.TimeoutError:
            target = headers.get("x-amz-target", "")
            return error(400, "OperationTimeoutException", f"the catalog did not answer within "
                         f"{self.limits.request_timeout:g} s; the operation may still complete "
                         "(catalog serve --request-timeout)", target.removeprefix(TARGET_PREFIX))

    def handle(self, path: str, headers: dict[str, str], body: bytes) -> Answer:
        """One request, start to finish, in a worker thread; always an answer in Glue's shape."""
        try:
            return self._handle(path, headers, body)
        except Exception as e:  # noqa: BLE001 (a server answers, it does not die: e.g. the database went away)
            return error(500, "InternalServiceException", f"{type(e).__name__}: {str(e)[:1000]}")

    def _handle(self, path: str, headers: dict[str, str], body: bytes) -> Answer:
        target = headers.get("x-amz-target", "")
        if not target.startswith(TARGET_PREFIX):
            return error(400, "InvalidInputException", f"X-Amz-Target must be {TARGET_PREFIX}<Operation>, "
                         f"not {target!r}")
        operation = target[len(TARGET_PREFIX):]
        principal = ""
        if self.verifier is not None:
            try:
                who = self.verifier.verify("POST", path, headers, body, once=not is_read(operation))
            except AuthError as e:
                return error(e.status, e.code, e.message, operation)
            principal = who.access_key_id
            if not who.may_call(operation):
                return error(403, "AccessDeniedException", f"principal {who.access_key_id} is {who.role} and may "
                             f"not call {operation}", operation, principal)
        try:
            params = orjson.loads(body or b"{}")   # refuses invalid UTF-8 and nesting past 1024 levels
            if not isinstance(params, dict):
                raise ValidationError("1 validation error detected: the request body must be a JSON object")
            result = self.catalog.call(operation, params)
            return Answer(200, orjson.dumps(result, default=_json_default, option=orjson.OPT_PASSTHROUGH_DATETIME),
                          None, operation, principal)
        except CatalogError as e:
            return error(400, e.code, e.message, operation, principal)
        except (ValueError, TypeError, RecursionError) as e:  # not JSON, not UTF-8, nested too deep
            return error(400, "InvalidInputException", f"bad request: {str(e)[:300]}", operation, principal)
        except Exception as e:  # noqa: BLE001 (a server answers, it does not die)
            return error(500, "InternalServiceException", str(e)[:1000], operation, principal)

    async def _health(self) -> Answer:
        def ping() -> None:
            with self.catalog.engine.connect() as conn:
                conn.execute(text("SELECT 1"))

        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(loop.run_in_executor(self._health_pool, ping), 5.0)
        except Exception as e:  # noqa: BLE001 (any failure means: do not send traffic here)
            return Answer(503, json.dumps({"status": "unavailable", "message": str(e)[:300] or type(e).__name__,
                                           "pid": os.getpid()}).encode(), "ServiceUnavailable")
        return Answer(200, json.dumps({"status": "ok", "database": self.catalog.engine.dialect.name,
                                       "pid": os.getpid()}).encode())

    @staticmethod
    async def _send(send: Send, answer: Answer, request_id: str, head_only: bool = False) -> None:
        headers = [(b"content-type", CONTENT_TYPE.encode()), (b"content-length", str(len(answer.body)).encode()),
                   (b"x-amzn-requestid", request_id.encode())]
        if answer.error:
            headers.append((b"x-amzn-errortype", answer.error.encode()))
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if head_only else answer.body})

    def _log(self, scope: dict[str, Any], answer: Answer, request_id: str, size: int, started: float) -> None:
        if self.log is None:
            return
        client = scope.get("client") or ("", 0)
        self.log.info(json.dumps({
            "time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
            "request_id": request_id, "client": f"{client[0]}:{client[1]}", "method": scope["method"],
            "path": scope["path"], "operation": answer.operation or None, "principal": answer.principal or None,
            "status": answer.status, "error": answer.error, "bytes_in": size, "bytes_out": len(answer.body),
            "ms": round((time.perf_counter() - started) * 1000, 2), "pid": os.getpid()}))
