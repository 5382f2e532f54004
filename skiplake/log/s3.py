"""Tables on S3 and S3-compatible stores: the Storage interface over boto3.

The commit is one conditional PUT: `If-None-Match: *` creates `_delta_log/<version>.json` only
if no object has that key, so of two writers of one version exactly one gets 200 and the other
412 (the conflict checker then runs as on a disk). A 409 ConditionalRequestConflict means two
conditional writes of the key overlapped and neither is known to have won: retried, after
which the key exists (412, a lost race) or the write succeeds. A store that ignores the header
would let both writers win, so the first put-if-absent of a process on a bucket checks that the
store refuses a second create of one probe key (3 requests), and refuses to commit if not.

Credentials, region and endpoint come from boto3's standard chain (environment variables such
as AWS_ENDPOINT_URL and AWS_ACCESS_KEY_ID, profiles, instance roles) unless options were given
for the bucket (`set_bucket_options`, what `Lake(..., storage_options=...)` calls).
"""
from __future__ import annotations

import builtins
import io
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from skiplake.errors import (
    BucketNotFoundError,
    ConditionalWritesUnsupportedError,
    InvalidArgumentError,
    StorageAccessError,
    StorageError,
)
from skiplake.extras import require
from skiplake.log.location import bucket_and_key
from skiplake.log.storage import FileInfo, ObjectInfo, Storage

# The keys `storage_options` takes, as delta-rs names them (case does not matter).
OPTION_KEYS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
               "AWS_REGION", "AWS_PROFILE")
_ACCESS_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
                 "TokenRefreshRequired", "AuthorizationHeaderMalformed", "InvalidClientTokenId", "403"}
_CONFLICT_RETRIES = 10
_DELETE_BATCH = 1000  # DeleteObjects takes at most 1,000 keys per request
_TAIL = 64 * 1024  # a Parquet footer read fetches this much of the file's end in one request
PROBE_PREFIX = ".skiplake-probe-"  # the conditional-write check's key in _delta_log/

log = logging.getLogger(__name__)
_lock = threading.Lock()
_bucket_options: dict[str, dict[str, str]] = {}
_clients: dict[tuple, Any] = {}
_checked_conditional: set[tuple] = set()


def normalize_options(options: Mapping[str, str] | None) -> dict[str, str]:
    """`options` with upper-case keys; InvalidArgumentError names an unknown key."""
    out = {}
    for k, v in (options or {}).items():
        key = k.upper()
        if key == "AWS_DEFAULT_REGION":
            key = "AWS_REGION"
        if key not in OPTION_KEYS:
            raise InvalidArgumentError(f"storage option {k!r} is not known: use {', '.join(OPTION_KEYS)}")
        out[key] = str(v)
    return out


def set_bucket_options(bucket: str, options: Mapping[str, str] | None) -> None:
    """Use `options` (endpoint, credentials, region) for every request to `bucket` in this process."""
    normalized = normalize_options(options)
    with _lock:
        if normalized:
            _bucket_options[bucket] = normalized
        else:
            _bucket_options.pop(bucket, None)


def bucket_options(bucket: str) -> dict[str, str]:
    """A copy of the options set for `bucket` (empty when none are)."""
    return dict(_bucket_options.get(bucket, {}))


def client_for(bucket: str) -> Any:
    """A boto3 S3 client for `bucket`, one per distinct set of options (clients are thread-safe)."""
    options = _bucket_options.get(bucket, {})
    key = tuple(sorted(options.items()))
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = _new_client(options)
        return client


def _new_client(options: Mapping[str, str]) -> Any:
    from botocore.config import Config
    session = _session(options)
    endpoint = _endpoint(options)
    # S3-compatible servers on an address (127.0.0.1:9000) have no per-bucket host names.
    config = Config(s3={"addressing_style": "path"} if endpoint else {},
                    retries={"mode": "standard", "max_attempts": 5})
    return session.client("s3", endpoint_url=endpoint, region_name=_region(options, session, endpoint),
                          aws_access_key_id=options.get("AWS_ACCESS_KEY_ID"),
                          aws_secret_access_key=options.get("AWS_SECRET_ACCESS_KEY"),
                          aws_session_token=options.get("AWS_SESSION_TOKEN"), config=config)


def _session(options: Mapping[str, str]) -> Any:
    import boto3
    return boto3.session.Session(profile_name=options.get("AWS_PROFILE"))


def _endpoint(options: Mapping[str, str]) -> str | None:
    return options.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3") \
        or os.environ.get("AWS_ENDPOINT_URL") or None


def _region(options: Mapping[str, str], session: Any, endpoint: str | None) -> str | None:
    return options.get("AWS_REGION") or session.region_name or ("us-east-1" if endpoint else None)


@dataclass(frozen=True)
class Connection:
    """Where and as whom this process's client for a bucket connects, for a process that cannot
    share the client (a Spark job's executors): the endpoint, the region and one set of credentials
    (None: the other process's own chain finds them)."""
    endpoint: str | None
    region: str | None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None


def connection_for(bucket: str) -> Connection:
    """The connection of client_for(bucket): the bucket's options, else the profile, environment and
    chain boto3 resolves, the credentials taken together from the one source that has them."""
    options = _bucket_options.get(bucket, {})
    session = _session(options)
    endpoint = _endpoint(options)
    region = _region(options, session, endpoint)
    if options.get("AWS_ACCESS_KEY_ID"):
        return Connection(endpoint, region, options["AWS_ACCESS_KEY_ID"], options.get("AWS_SECRET_ACCESS_KEY"),
                          options.get("AWS_SESSION_TOKEN"))
    found = session.get_credentials()
    if found is None:
        return Connection(endpoint, region)
    frozen = found.get_frozen_credentials()
    return Connection(endpoint, region, frozen.access_key, frozen.secret_key, frozen.token)


def _code(error: BaseException | None) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _status(error: BaseException | None) -> int:
    response = getattr(error, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def translate(error: Exception, location: str, doing: str) -> Exception:
    """A boto3/botocore failure as a skiplake error naming the location and what to do."""
    from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, NoCredentialsError
    if isinstance(error, NoCredentialsError):
        return StorageAccessError(location, f"no AWS credentials were found while {doing}",
                                  "Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile or role), or pass "
                                  "storage_options={'AWS_ACCESS_KEY_ID': ..., 'AWS_SECRET_ACCESS_KEY': ...}")
    if isinstance(error, EndpointConnectionError):
        return StorageError(location, f"cannot reach the S3 endpoint while {doing} ({error})",
                            "Check AWS_ENDPOINT_URL and that the store is running")
    if isinstance(error, ClientError):
        code = _code(error)
        bucket = bucket_and_key(location)[0]
        if code == "NoSuchBucket":
            return BucketNotFoundError(location, f"bucket {bucket!r} does not exist",
                                       "Create the bucket first, or check its name and the endpoint")
        if code in _ACCESS_CODES or _status(error) == 403:
            return StorageAccessError(location, f"the store refused the credentials while {doing} ({code})",
                                      "Check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and the key's permissions "
                                      "(s3:GetObject, s3:PutObject, s3:ListBucket, s3:DeleteObject)")
        return StorageError(location, f"S3 error while {doing}: {code or _status(error)} {error}")
    if isinstance(error, BotoCoreError):
        return StorageError(location, f"S3 client error while {doing}: {error}")
    return error


class S3Storage(Storage):
    """Storage under `s3://bucket/prefix`: the log's folder or a table's root."""

    def __init__(self, root: str) -> None:
        """Storage at `root`, an `s3://bucket/prefix` URI; MissingExtraError without boto3 (the s3 extra)."""
        require("s3", f"the location {root}")
        self.root = root.rstrip("/")
        self.bucket, prefix = bucket_and_key(self.root)
        self.prefix = f"{prefix}/" if prefix else ""
        self.requests = 0  # issued by this object, and the time spent waiting on them: benchmarks report both
        self.request_seconds = 0.0

    @property
    def client(self) -> Any:
        """The process's boto3 client for the bucket's options."""
        return client_for(self.bucket)

    def _key(self, name: str) -> str:
        return self.prefix + name

    def _call(self, doing: str, name: str, fn: Callable[[], Any], missing_may_be_bucket: bool = True) -> Any:
        self.requests += 1
        started = time.perf_counter()
        try:
            return fn()
        except Exception as e:
            if _code(e) in ("NoSuchKey", "404") or (_status(e) == 404 and _code(e) != "NoSuchBucket"):
                # A HEAD answer names neither the key nor the bucket as missing.
                if _code(e) == "404" and missing_may_be_bucket and not self._bucket_exists():
                    raise BucketNotFoundError(self.root, f"bucket {self.bucket!r} does not exist",
                                              "Create the bucket first, or check its name and the endpoint") from None
                raise FileNotFoundError(self.where(name)) from None
            raised = translate(e, self.where(name), doing)
            if raised is e:
                raise
            raise raised from e
        finally:
            self.request_seconds += time.perf_counter() - started

    def _bucket_exists(self) -> bool:
        try:
            self.client.head_bucket(Bucket=self.bucket)
            return True
        except Exception as e:
            return _status(e) != 404

    def read(self, name: str) -> bytes:
        """The whole object; FileNotFoundError if there is none."""
        return self._call("reading", name,
                          lambda: self.client.get_object(Bucket=self.bucket, Key=self._key(name))["Body"].read())

    def read_range(self, name: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of the file (end past the file's size reads to its end)."""
        return self._call("reading", name, lambda: self.client.get_object(
            Bucket=self.bucket, Key=self._key(name), Range=f"bytes={start}-{end - 1}")["Body"].read())

    def _head(self, name: str, missing_may_be_bucket: bool = True) -> dict[str, Any]:
        return self._call("reading", name, lambda: self.client.head_object(Bucket=self.bucket, Key=self._key(name)),
                          missing_may_be_bucket)

    def size(self, name: str) -> int:
        """The object's size in bytes (one HEAD request)."""
        return int(self._head(name)["ContentLength"])

    def exists(self, name: str) -> bool:
        # Asked after every lost commit race: a missing key is the common answer, not worth a
        # second request to tell a missing bucket apart (the PUT before it would have said so).
        """Whether the object exists (one HEAD request)."""
        try:
            self._head(name, missing_may_be_bucket=False)
            return True
        except FileNotFoundError:
            return False

    def put(self, name: str, data: bytes) -> None:
        """Write `data` at `name` in one PUT, replacing what is there."""
        self._call("writing", name, lambda: self.client.put_object(Bucket=self.bucket, Key=self._key(name), Body=data))

    def put_if_absent(self, name: str, data: bytes) -> bool:
        """Write `data` at `name` with a conditional PUT unless it exists. True if written, False if
        taken; the first call per process and store checks that the store honours the condition."""
        self._check_conditional_writes()
        return self._put_if_absent(name, data)

    def _put_if_absent(self, name: str, data: bytes) -> bool:
        for attempt in range(_CONFLICT_RETRIES):
            try:
                self._call("committing", name, lambda: self.client.put_object(
                    Bucket=self.bucket, Key=self._key(name), Body=data, IfNoneMatch="*"))
                return True
            except StorageError as e:
                cause = e.__cause__
                code, status = _code(cause), _status(cause)
                if code == "PreconditionFailed" or status == 412:
                    return self._ours_after_retry(cause, name, data)
                if code == "ConditionalRequestConflict" or status == 409:
                    time.sleep(min(0.05 * 2 ** attempt, 1.0))
                    continue
                if code == "NotImplemented" or status == 501:
                    raise ConditionalWritesUnsupportedError(
                        self.where(name), "the store does not support conditional writes (If-None-Match: *), so "
                        "two writers could both take one version; nothing was written",
                        "Use a store with conditional writes: AWS S3, MinIO, s3proxy 4 or later") from e
                raise
        raise StorageError(self.where(name), f"{_CONFLICT_RETRIES} conditional writes in a row met a concurrent "
                           "write of the same key (409 ConditionalRequestConflict)", "Retry the operation")

    def _ours_after_retry(self, error: BaseException | None, name: str, data: bytes) -> bool:
        """Whether a 412 hides our own write: when the SDK retried the PUT (its first answer lost
        on the way back), the object that refused the retry may be the one we wrote. Commit
        files carry a fresh txnId, so equal bytes mean ours."""
        response = getattr(error, "response", None) or {}
        if not response.get("ResponseMetadata", {}).get("RetryAttempts"):
            return False
        try:
            return self.read(name) == data
        except FileNotFoundError:
            return False

    def _check_conditional_writes(self) -> None:
        """Once per process and store: a second create of one key must be refused, or no commit is safe."""
        options = _bucket_options.get(self.bucket, {})
        key = (self.bucket, options.get("AWS_ENDPOINT_URL"))
        if key in _checked_conditional:
            return
        probe = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
        try:
            # Different bytes each time, so a retried PUT is never taken for the first one.
            first = self._put_if_absent(probe, uuid.uuid4().bytes)
            second = self._put_if_absent(probe, uuid.uuid4().bytes)
        finally:
            try:
                self.delete(probe)
            except StorageError as e:  # e.g. no s3:DeleteObject; VACUUM removes stale probes
                log.warning("could not delete the conditional-write probe %s: %s", self.where(probe), e)
        if not first or second:
            raise ConditionalWritesUnsupportedError(
                self.root, "the store accepted a second create of one key with If-None-Match: *, so two writers "
                "could both take one version; nothing was committed",
                "Use a store with conditional writes: AWS S3, MinIO, s3proxy 4 or later")
        _checked_conditional.add(key)

    def delete(self, name: str) -> None:
        """Delete the object `name` (one DeleteObject request)."""
        self._call("deleting", name, lambda: self.client.delete_object(Bucket=self.bucket, Key=self._key(name)))

    def delete_many(self, names: list[str]) -> None:
        """Delete the objects, 1,000 per DeleteObjects request; StorageError names one the store did
        not delete (missing ones aside)."""
        for i in range(0, len(names), _DELETE_BATCH):
            batch = [{"Key": self._key(n)} for n in names[i:i + _DELETE_BATCH]]
            answer = self._call("deleting", names[i], lambda: self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}))
            errors = [e for e in answer.get("Errors", []) if e.get("Code") != "NoSuchKey"]
            if errors:
                raise StorageError(self.root, f"{len(errors)} files could not be deleted, e.g. "
                                   f"{errors[0].get('Key')}: {errors[0].get('Code')}")

    def _pages(self, delimiter: bool, start_after: str | None) -> Iterator[dict]:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self.prefix}
        if delimiter:
            kwargs["Delimiter"] = "/"
        if start_after:
            kwargs["StartAfter"] = self._key(start_after)
        while True:
            page = self._call("listing", "", lambda: self.client.list_objects_v2(**kwargs))
            yield page
            if not page.get("IsTruncated"):
                return
            kwargs["ContinuationToken"] = page["NextContinuationToken"]

    def list(self, start_after: str | None = None) -> list[FileInfo]:
        """The objects directly under the prefix (not below), size and mtime from the listing, names after
        `start_after` only if given; dot-files (the conditional-write probes) left out."""
        out = []
        for page in self._pages(True, start_after):
            for obj in page.get("Contents", []):
                name = obj["Key"][len(self.prefix):]
                if name and not name.startswith("."):
                    meta = (int(obj["Size"]), int(obj["LastModified"].timestamp() * 1000))
                    out.append(FileInfo(name, _known(meta)))
        return out

    # builtins.list: in this class, after `def list`, a bare `list` names that method
    def dirs(self) -> builtins.list[str]:
        """The names of the common prefixes (folders) directly under the prefix."""
        return [p["Prefix"][len(self.prefix):].rstrip("/") for page in self._pages(True, None)
                for p in page.get("CommonPrefixes", [])]

    def walk(self) -> builtins.list[ObjectInfo]:
        """Every object below the prefix, at any depth (folder marker keys left out)."""
        return [obj for page in self.walk_pages() for obj in page]

    def walk_pages(self) -> Iterator[builtins.list[ObjectInfo]]:
        """walk()'s objects a listing request's answer (up to 1,000) at a time."""
        for page in self._pages(False, None):
            out = []
            for obj in page.get("Contents", []):
                name = obj["Key"][len(self.prefix):]
                if name and not name.endswith("/"):
                    out.append(ObjectInfo(name, int(obj["Size"]), int(obj["LastModified"].timestamp() * 1000)))
            if out:
                yield out

    def open_input(self, name: str, size: int | None = None) -> RangeReader:
        """A RangeReader of the object; `size`, when known, saves a HEAD request."""
        return RangeReader(self, name, self.size(name) if size is None else size)


def _known(size_mtime: tuple[int, int]) -> Callable[[], tuple[int, int]]:
    """A FileInfo's stat when the listing already gave it."""
    return lambda: size_mtime


class RangeReader(io.RawIOBase):
    """A seekable reader of one object by ranged GETs; the first read near the end fetches the
    last 64 KiB at once, so a Parquet footer costs one request (two for large footers)."""

    def __init__(self, storage: S3Storage, name: str, size: int) -> None:
        """A reader of object `name` of `storage`, `size` bytes long, at position 0 with nothing fetched."""
        self.storage, self.name, self._size, self._pos = storage, name, size, 0
        self._buf_start, self._buf = size, b""

    def readable(self) -> bool:
        """True: the object can be read."""
        return True

    def seekable(self) -> bool:
        """True: a read can start anywhere (a ranged GET)."""
        return True

    def tell(self) -> int:
        """The current position, in bytes from the object's start."""
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move to `offset` from the start, the current position or the end (`whence`), never before 0;
        the new position."""
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, b: Any) -> int:
        """Fill `b` from the current position, fetching a range (the object's last 64 KiB near its end,
        else at least 64 KiB) when the buffer lacks it; the bytes read, 0 at the end."""
        n = min(len(b), self._size - self._pos)
        if n <= 0:
            return 0
        start, end = self._pos, self._pos + n
        if not (self._buf_start <= start and end <= self._buf_start + len(self._buf)):
            fetch_start = max(0, self._size - _TAIL) if end > self._size - _TAIL else start
            fetch_start = min(fetch_start, start)
            self._buf = self.storage.read_range(self.name, fetch_start, max(end, min(self._size, fetch_start + _TAIL)))
            self._buf_start = fetch_start
        chunk = self._buf[start - self._buf_start:end - self._buf_start]
        b[:len(chunk)] = chunk
        self._pos += len(chunk)
        return len(chunk)
