"""AWS Signature Version 4, checked by the catalog server as AWS checks it.

A request carries `Authorization: AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/<service>/aws4_request,
SignedHeaders=<h1;h2;...>, Signature=<hex>` and `X-Amz-Date`. The server rebuilds the canonical
request from what it received (method, path, query, the signed headers, the body's SHA-256),
derives the signing key from the principal's secret and the credential scope, and compares
signatures in constant time. A request older or newer than 5 minutes is refused (as AWS does), and
so is a write whose signature was already seen in that window (a replay; an old UpdateTable
replayed would undo a newer one). Reads are not tracked: boto3 signs an identical read made
twice in one second identically, and repeating a read changes nothing.

Principals come from a JSON file: `{"principals": [{"access_key_id": ..., "secret_access_key":
..., "role": "read-write" | "read-only"}]}`. A read-only principal may call Get* and BatchGet*
operations only.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import threading
from dataclasses import dataclass
from typing import Mapping, Protocol
from urllib.parse import parse_qsl, quote

from skiplake.extras import CATALOG_STORE, require

require("catalog", "the Glue-compatible catalog", CATALOG_STORE)

from sqlalchemy import delete, insert, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from skiplake.catalog import store
from skiplake.errors import CatalogError, InvalidArgumentError

MAX_SKEW = dt.timedelta(minutes=5)
ROLES = ("read-write", "read-only")


class AuthError(CatalogError):
    """A request the server does not accept from its sender; `code` and `status` are AWS's."""

    def __init__(self, code: str, message: str, status: int = 403) -> None:
        """An error of AWS type `code` saying `message`, answered with HTTP `status`."""
        self.code = code
        self.status = status
        super().__init__(message)


@dataclass(frozen=True)
class Principal:
    """One principal of the credentials file: its access key id, secret access key and role."""
    access_key_id: str
    secret_access_key: str
    role: str = "read-write"

    def may_call(self, operation: str) -> bool:
        """Whether its role allows `operation`: read-write calls anything, read-only only reads."""
        return self.role == "read-write" or is_read(operation)


def is_read(operation: str) -> bool:
    """Whether `operation` only reads the catalog (Glue's Get* and BatchGet*)."""
    return operation.startswith(("Get", "BatchGet"))


def load_principals(path: str) -> dict[str, Principal]:
    """The principals of a credentials file (InvalidArgumentError says what is wrong with it)."""
    try:
        with open(path) as f:
            doc = json.load(f)
        entries = doc["principals"]
        out = {}
        for e in entries:
            p = Principal(str(e["access_key_id"]), str(e["secret_access_key"]), str(e.get("role", "read-write")))
            if p.role not in ROLES or not p.access_key_id or not p.secret_access_key:
                raise ValueError(f"principal {p.access_key_id!r}: role must be one of {ROLES}, keys non-empty")
            out[p.access_key_id] = p
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InvalidArgumentError(f"credentials file {path}: {e}. Expected {{\"principals\": [{{\"access_key_id\": "
                                   "..., \"secret_access_key\": ..., \"role\": \"read-write\" | \"read-only\"}]}") \
            from None
    if not out:
        raise InvalidArgumentError(f"credentials file {path} names no principal")
    return out


def _sign(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _canonical_query(query: str) -> str:
    pairs = sorted((quote(k, safe="-_.~"), quote(v, safe="-_.~")) for k, v in parse_qsl(query, keep_blank_values=True))
    return "&".join(f"{k}={v}" for k, v in pairs)


class SignatureLog(Protocol):
    """Where the signatures of accepted writes are recorded, so that a replay of one is refused."""

    def first_time(self, signature: str, stamp: dt.datetime, now: dt.datetime) -> bool:
        """Record `signature` (signed at `stamp`); False when it was recorded before."""


class MemorySignatures:
    """Signatures seen by this process: enough for one process serving alone."""

    def __init__(self) -> None:
        """A log with no signature in it yet."""
        self._seen: dict[str, dt.datetime] = {}
        self._lock = threading.Lock()

    def first_time(self, signature: str, stamp: dt.datetime, now: dt.datetime) -> bool:
        """SignatureLog.first_time in memory; past 10,000 signatures, those outside the skew window are forgotten."""
        with self._lock:
            if signature in self._seen:
                return False
            self._seen[signature] = stamp
            if len(self._seen) > 10_000:  # forget signatures past the skew window
                self._seen = {s: t for s, t in self._seen.items() if abs(now - t) <= MAX_SKEW}
            return True


class DatabaseSignatures:
    """Signatures recorded in the catalog's database, so every worker process (and a restarted
    server) sees every other's. A row lives until its request's skew window has passed: after
    that the timestamp check refuses the request anyway."""

    PRUNE_EVERY = 1000

    def __init__(self, engine: Engine) -> None:
        """A log in the request_signatures table of `engine`'s database."""
        self.engine = engine
        self._count = 0
        self._lock = threading.Lock()

    def first_time(self, signature: str, stamp: dt.datetime, now: dt.datetime) -> bool:
        """SignatureLog.first_time as an INSERT, which the primary key refuses for a signature already
        there; every PRUNE_EVERY-th call in this process also deletes the expired rows."""
        expires = (max(stamp, now) + MAX_SKEW).timestamp()
        with self._lock:
            self._count += 1
            prune = self._count % self.PRUNE_EVERY == 0
        try:
            with self.engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    # Losing the last few rows in a crash only reopens a window of seconds.
                    conn.execute(text("SET LOCAL synchronous_commit = off"))
                conn.execute(insert(store.request_signatures).values(signature=signature, expires=expires))
                if prune:
                    conn.execute(delete(store.request_signatures)
                                 .where(store.request_signatures.c.expires < now.timestamp()))
        except IntegrityError:
            return False
        return True


class Verifier:
    """Checks the signature of each request against `principals`; refuses a signature seen before."""

    def __init__(self, principals: Mapping[str, Principal], seen: SignatureLog | None = None,
                 signed: tuple[str, ...] = ("host", "x-amz-target")) -> None:
        """`signed`: headers every signature must cover. X-Amz-Target names the operation, so
        an unsigned one would let a captured read be replayed as a write."""
        self.principals = dict(principals)
        self.seen: SignatureLog = seen or MemorySignatures()
        self.signed = signed

    def verify(self, method: str, path: str, headers: Mapping[str, str], body: bytes,
               now: dt.datetime | None = None, once: bool = True) -> Principal:
        """The principal who signed the request. `once` refuses a signature seen before: for
        writes. Reads are not tracked: a client repeating one within the second that the
        signature's timestamp resolves produces the same signature legitimately."""
        now = now or dt.datetime.now(dt.timezone.utc)
        lower = {k.lower(): v for k, v in headers.items()}
        auth = lower.get("authorization", "")
        if not auth:
            raise AuthError("MissingAuthenticationTokenException", "the request is not signed (no Authorization "
                            "header); sign it with AWS Signature Version 4 (boto3 does)")
        try:
            algorithm, rest = auth.split(" ", 1)
            fields = dict(part.strip().split("=", 1) for part in rest.split(","))
            key_id, date, region, service, terminal = fields["Credential"].split("/")
            signed_headers = fields["SignedHeaders"].split(";")
            signature = fields["Signature"]
            stamp = dt.datetime.strptime(lower["x-amz-date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
        except (ValueError, KeyError):
            raise AuthError("IncompleteSignatureException", "the Authorization header is not a SigV4 signature "
                            "(Credential, SignedHeaders, Signature and X-Amz-Date are needed)", 400) from None
        if algorithm != "AWS4-HMAC-SHA256" or terminal != "aws4_request" or date != stamp.strftime("%Y%m%d"):
            raise AuthError("IncompleteSignatureException", "the signature's algorithm or scope is not SigV4's", 400)
        principal = self.principals.get(key_id)
        if principal is None:
            raise AuthError("UnrecognizedClientException", "the security token included in the request is invalid "
                            f"(no principal has access key {key_id!r})")
        for needed in self.signed:
            if needed not in signed_headers:
                raise AuthError("IncompleteSignatureException", f"the {needed} header must be signed", 400)
        if abs(now - stamp) > MAX_SKEW:
            raise AuthError("InvalidSignatureException", f"Signature expired: {lower['x-amz-date']} is more than 5 "
                            f"minutes from the server's time {now.strftime('%Y%m%dT%H%M%SZ')}")
        base_path, _, query = path.partition("?")
        canonical_headers = "".join(f"{h}:{' '.join(lower.get(h, '').split())}\n" for h in signed_headers)
        canonical = "\n".join([method, quote(base_path or "/", safe="/-_.~%"), _canonical_query(query),
                               canonical_headers, ";".join(signed_headers), hashlib.sha256(body).hexdigest()])
        scope = f"{date}/{region}/{service}/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", lower["x-amz-date"], scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        key = _sign(_sign(_sign(_sign(("AWS4" + principal.secret_access_key).encode(), date), region), service),
                    "aws4_request")
        expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, signature):
            raise AuthError("InvalidSignatureException", "the request signature we calculated does not match the "
                            "signature you provided; check the secret access key and signing method")
        if once and not self.seen.first_time(signature, stamp, now):
            raise AuthError("InvalidSignatureException", "this signed request was already received (a replay); "
                            "sign every request anew")
        return principal
