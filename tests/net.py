"""Loopback helpers the test servers share."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from typing import Callable, Iterator


def free_port() -> int:
    """A port free on 127.0.0.1 now (another process may take it before it is used)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def catalog_serve(db_url: str, *args: str) -> Iterator[str]:
    """`skiplake catalog serve` in a subprocess on a free port; yields its endpoint."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "skiplake.cli", "catalog", "serve", "--db", db_url,
                             "--port", str(port), *args], stderr=subprocess.PIPE, env={**os.environ})
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def retry_while_starting(call: Callable[[], object], attempts: int = 100) -> None:
    """Make `call` succeed once, retrying while a server is still starting."""
    for _ in range(attempts):
        try:
            call()
            return
        except Exception:  # noqa: BLE001 (the server is still starting)
            time.sleep(0.1)
    call()
