"""Loopback helpers the test servers share."""
from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator


def free_port() -> int:
    """A port free on 127.0.0.1 now (another process may take it before it is used)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ServedCatalog:
    process: subprocess.Popen
    endpoint: str
    log: Path   # the server's stderr: its own messages and the access log


@contextlib.contextmanager
def catalog_process(db_url: str, *args: str, log: Path | None = None,
                    source: Path | None = None) -> Iterator[ServedCatalog]:
    """`skiplake catalog serve` in a subprocess on a free port, answering when yielded; with
    `source`, the skiplake package in that folder serves (an older release, for comparisons)."""
    port = free_port()
    if log is None:
        fd, name = tempfile.mkstemp(prefix="catalog-serve-", suffix=".log")
        os.close(fd)
        log = Path(name)
    with open(log, "ab") as out:
        env = {**os.environ, **({"PYTHONPATH": str(source)} if source else {})}
        proc = subprocess.Popen([sys.executable, "-m", "skiplake.cli", "catalog", "serve", "--db", db_url,
                                 "--port", str(port), *args], stderr=out, env=env, cwd=source)
    scheme = "https" if "--tls-cert" in args else "http"
    served = ServedCatalog(proc, f"{scheme}://127.0.0.1:{port}", log)
    try:
        _wait_for_port(port, proc)
        yield served
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _wait_for_port(port: int, proc: subprocess.Popen) -> None:
    for _ in range(300):
        if proc.poll() is not None:
            raise RuntimeError(f"catalog serve exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"catalog serve did not listen on {port}")


@contextlib.contextmanager
def catalog_serve(db_url: str, *args: str) -> Iterator[str]:
    """`skiplake catalog serve` in a subprocess on a free port; yields its endpoint."""
    with catalog_process(db_url, *args) as served:
        yield served.endpoint


def glue_post(endpoint: str, operation: str, body: bytes, headers: dict[str, str] | None = None,
              timeout: float = 30) -> tuple[int, dict, dict[str, str]]:
    """POST one Glue request as bytes (no client checks in the way): status, JSON body, headers."""
    host, port = endpoint.split("://")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    conn.request("POST", "/", body=body, headers=headers or {
        "X-Amz-Target": f"AWSGlue.{operation}", "Content-Type": "application/x-amz-json-1.1"})
    answer = conn.getresponse()
    data = answer.read()
    conn.close()
    return answer.status, json.loads(data) if data else {}, {k.lower(): v for k, v in answer.getheaders()}


def signed_headers(endpoint: str, operation: str, data: bytes, key: str, secret: str) -> dict[str, str]:
    """The headers boto3 would send for `data`, signed with SigV4 by (key, secret)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    request = AWSRequest(method="POST", url=endpoint + "/", data=data, headers={
        "X-Amz-Target": f"AWSGlue.{operation}", "Content-Type": "application/x-amz-json-1.1"})
    SigV4Auth(Credentials(key, secret), "glue", "us-east-1").add_auth(request)
    return dict(request.headers.items())


def retry_while_starting(call: Callable[[], object], attempts: int = 100) -> None:
    """Make `call` succeed once, retrying while a server is still starting."""
    for _ in range(attempts):
        try:
            call()
            return
        except Exception:  # noqa: BLE001 (the server is still starting)
            time.sleep(0.1)
    call()
