"""The catalog served over HTTP by uvicorn, the production ASGI server.

Why uvicorn: it serves an ASGI application from inside Python (so tests and embedders run the
real server in-process on a thread), supervises worker processes itself (a dead worker is
replaced, SIGTERM drains every worker, SIGHUP replaces them one by one), speaks TLS, and parses
HTTP with httptools under uvloop. gunicorn, the other candidate, is a master process driven
from its own command line: it cannot run on a thread, and would need uvicorn's worker class
anyway to serve ASGI.

Workers are processes, so each opens its own database connections and builds its own
application from the `ServeOptions` the parent hands down in an environment variable; the
parent opens the database once first, so the schema is created or migrated once and a bad URL
or credentials file fails before any worker starts. Replayed signatures are recorded in the
catalog's database (skiplake.catalog.auth.DatabaseSignatures), so a replay is caught whichever
worker it reaches.

    skiplake catalog serve --db sqlite:///catalog.db --host 127.0.0.1 --port 9700 --workers 2
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import ssl
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from skiplake.extras import require

require("catalog", "the catalog server")

from skiplake.catalog.app import ACCESS_LOG, GlueApp, Limits
from skiplake.catalog.auth import DatabaseSignatures, Principal, Verifier, load_principals
from skiplake.catalog.service import GlueCatalog
from skiplake.errors import CatalogError, InvalidArgumentError

if TYPE_CHECKING:
    import uvicorn

OPTIONS_ENV = "SKIPLAKE_CATALOG_SERVE"


@dataclass(frozen=True)
class ServeOptions:
    """Everything `skiplake catalog serve` is told; what each worker rebuilds its app from."""
    db: str = "sqlite:///catalog.db"
    host: str = "127.0.0.1"
    port: int = 9700
    credentials: str | None = None      # JSON file of principals; None serves unsigned requests
    workers: int = 1
    tls_cert: str | None = None
    tls_key: str | None = None
    access_log: str | None = "-"        # "-" is stderr, else a file; None logs no requests
    graceful_timeout: float = 30.0      # seconds in-flight requests get after SIGTERM
    keep_alive: int = 5                 # seconds an idle connection stays open
    max_connections: int = 1000         # per worker; beyond it new requests get 503
    limits: Limits = field(default_factory=Limits)

    def check(self) -> None:
        """Raise InvalidArgumentError for options that cannot work: no worker, TLS files unpaired, missing
        or not loading as a certificate chain and its key, limits out of range."""
        if self.workers < 1:
            raise InvalidArgumentError(f"--workers must be at least 1, not {self.workers}")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise InvalidArgumentError("TLS needs both --tls-cert and --tls-key")
        for path in (self.tls_cert, self.tls_key):
            if path and not os.path.isfile(path):
                raise InvalidArgumentError(f"TLS file {path} does not exist")
        if self.tls_cert and self.tls_key:
            try:
                ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(self.tls_cert, self.tls_key)
            except (ssl.SSLError, OSError) as e:
                raise InvalidArgumentError(f"--tls-cert {self.tls_cert} and --tls-key {self.tls_key} do not load as a "
                                           f"PEM certificate chain and its private key: {e}") from None
        if self.limits.max_body_bytes < 1024 or self.limits.body_timeout <= 0 or self.limits.request_timeout <= 0:
            raise InvalidArgumentError("--max-request-bytes must be at least 1024 and the timeouts positive")
        if self.limits.threads < 1 or self.max_connections < 1 or self.keep_alive < 0 or self.graceful_timeout < 0:
            raise InvalidArgumentError("--threads and --max-connections must be at least 1, --keep-alive and "
                                       "--graceful-timeout not negative")

    def to_json(self) -> str:
        """The options as JSON, as the parent hands them to its workers (in OPTIONS_ENV)."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "ServeOptions":
        """The options `to_json` wrote."""
        raw = json.loads(text)
        return cls(**{**raw, "limits": Limits(**raw["limits"])})

    @property
    def scheme(self) -> str:
        """`https` when serving TLS, else `http`."""
        return "https" if self.tls_cert else "http"


def access_log(destination: str | None, name: str = "") -> logging.Logger | None:
    """A logger writing one JSON line per request to stderr ("-") or a file; None for None.
    Each server gets its own (`name`), so servers in one process do not share a destination."""
    if destination is None:
        return None
    log = logging.getLogger(f"{ACCESS_LOG}.{name}" if name else ACCESS_LOG)
    log.propagate = False
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()
    handler = logging.StreamHandler(sys.stderr) if destination == "-" else logging.FileHandler(destination)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    return log


def build_app(options: ServeOptions, catalog: GlueCatalog | None = None,
              principals: Mapping[str, Principal] | None = None, log_name: str = "") -> GlueApp:
    """The ASGI app of `options` on `catalog` (else a new one on options.db). With `principals` (else
    those of the credentials file, if any), requests must be signed by one of them, and replays are
    recorded in the database."""
    catalog = catalog or GlueCatalog(options.db)
    if principals is None and options.credentials:
        principals = load_principals(options.credentials)
    verifier = Verifier(principals, DatabaseSignatures(catalog.engine)) if principals else None
    return GlueApp(catalog, verifier, options.limits, access_log(options.access_log, log_name))


def worker_app() -> GlueApp:
    """uvicorn's factory in each worker process: the app from the options the parent set."""
    return build_app(ServeOptions.from_json(os.environ[OPTIONS_ENV]))


def _uvicorn_config(options: ServeOptions, app: GlueApp | str, log_level: str = "info") -> uvicorn.Config:
    import uvicorn
    return uvicorn.Config(
        app, host=options.host, port=options.port, workers=options.workers, factory=isinstance(app, str),
        loop="auto", http="auto", lifespan="on", access_log=False, log_level=log_level, server_header=False,
        proxy_headers=False, ws="none", timeout_keep_alive=options.keep_alive,
        # uvicorn annotates it int, but only hands it to asyncio.wait_for as a timeout in seconds
        timeout_graceful_shutdown=options.graceful_timeout,  # type: ignore[arg-type]  # uvicorn says int; a float works
        limit_concurrency=options.max_connections,
        ssl_certfile=options.tls_cert, ssl_keyfile=options.tls_key)


def serve(options: ServeOptions) -> None:
    """Serve until SIGTERM or SIGINT, then drain: what `skiplake catalog serve` runs."""
    options.check()
    if options.credentials:
        load_principals(options.credentials)   # a bad file fails here, once, not in every worker
    GlueCatalog(options.db).engine.dispose()   # create or migrate the schema once
    os.environ[OPTIONS_ENV] = options.to_json()
    import uvicorn
    from uvicorn.supervisors import Multiprocess
    config = _uvicorn_config(options, "skiplake.catalog.server:worker_app")
    if options.workers > 1:
        Multiprocess(config, sockets=[config.bind_socket()]).run()
    else:
        uvicorn.Server(config).run()


class CatalogServer:
    """The catalog served in this process on a thread, one worker: for tests and embedding.

    `CatalogServer(catalog).start()` binds (port 0 picks a free one), `.endpoint` is its URL,
    `.stop()` drains it."""

    def __init__(self, catalog: GlueCatalog, host: str = "127.0.0.1", port: int = 0,
                 principals: Mapping[str, Principal] | None = None, options: ServeOptions | None = None) -> None:
        """With `principals`, every request must carry a valid SigV4 signature of one of them."""
        import uvicorn
        self.catalog = catalog
        self.options = dataclasses.replace(options or ServeOptions(access_log=None), host=host, port=port,
                                           workers=1)
        self.options.check()
        self.app = build_app(self.options, catalog, principals, log_name=f"server{id(self)}")
        self._socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        # Embedded, uvicorn's own start and stop lines would only interleave with the host's output.
        self._server = uvicorn.Server(_uvicorn_config(self.options, self.app, log_level="warning"))
        self._thread: threading.Thread | None = None
        self._failure: Exception | None = None   # why the server thread ended, for start() to report

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) the socket is bound to: the port the system picked when 0 was asked."""
        host, port = self._socket.getsockname()[:2]
        return host, port

    @property
    def endpoint(self) -> str:
        """The server's URL, e.g. `http://127.0.0.1:54321` (an IPv6 host in brackets)."""
        host, port = self.address
        return f"{self.options.scheme}://{f'[{host}]' if ':' in host else host}:{port}"

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        except Exception as e:  # noqa: BLE001 (kept for start() to report, e.g. a certificate that does not load)
            self._failure = e

    def start(self) -> "CatalogServer":
        """Serve on a thread; the server, once uvicorn is up (CatalogError saying why when it does not come up)."""
        self._failure = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="catalog-server")
        self._thread.start()
        while not self._server.started and self._thread.is_alive():
            threading.Event().wait(0.01)
        if not self._server.started:
            endpoint = self.endpoint
            self._socket.close()
            self.app.close()
            raise CatalogError(f"the catalog server on {endpoint} did not start ({self._why_not_started()})")
        return self

    def _why_not_started(self) -> str:
        # Its own method: the server thread sets _failure after start() resets it, so read inline
        # in start() the type checker would take it for still None.
        failure = self._failure
        return f"{type(failure).__name__}: {failure}" if failure else "uvicorn logged why"

    def stop(self) -> None:
        """Ask the server to exit, wait up to graceful_timeout + 5 s for it to drain, and close its socket."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(self.options.graceful_timeout + 5)
        self._socket.close()
