"""Where a table lives: a local path or an object-store URI, in one canonical spelling.

A table root is either an absolute local path (`/data/lake/sales`) or `s3://bucket/key`
(`s3a://` too, kept as written: Spark maps both to S3A). Every other scheme is refused with
UnsupportedLocationError: taking `gs://b/t` for a relative folder named `gs:` would create the
table on the local disk without a word. Paths below a root are joined with `/` on object stores
and with the OS separator on disks. `norm` gives the spelling to compare files by: it never
runs normpath over a URI (that would fold `s3://` into `s3:/`), and it compares `s3a://` and
`s3://` as one.
"""
from __future__ import annotations

import os
import posixpath
import re
from urllib.parse import unquote, urlparse

from skiplake.errors import InvalidArgumentError, UnsupportedLocationError

OBJECT_STORE_SCHEMES = ("s3", "s3a")
# Schemes users write for stores skiplake does not reach; refused even when written `gs:/x` (one slash).
_KNOWN_FOREIGN = {"s3n", "gs", "gcs", "abfs", "abfss", "wasb", "wasbs", "adl", "hdfs", "viewfs", "oss", "cos",
                  "http", "https", "ftp", "sftp", "dbfs", "r2", "az", "azure"}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(//)?")


def scheme_of(location: str) -> str | None:
    """The URI scheme of `location` (lower case), or None for a plain path."""
    m = _SCHEME.match(location)
    if not m:
        return None
    scheme = m.group(1).lower()
    if m.group(2) or scheme in _KNOWN_FOREIGN or scheme in OBJECT_STORE_SCHEMES or scheme == "file":
        return scheme
    return None  # `a:b` is a relative file name, not a URI


def resolve(location: str) -> str:
    """The canonical root for `location`: an absolute local path, or `s3://bucket/key` without a
    trailing slash. Raises UnsupportedLocationError for any other scheme."""
    scheme = scheme_of(location)
    if scheme is None:
        return os.path.abspath(os.path.expanduser(location))
    if scheme == "file":
        return os.path.normpath(unquote(urlparse(location).path) or "/")
    if scheme not in OBJECT_STORE_SCHEMES:
        raise UnsupportedLocationError(location, scheme)
    parsed = urlparse(location)
    if not location.lower().startswith(f"{scheme}://") or not parsed.netloc:
        raise InvalidArgumentError(f"{location!r} is not a usable table location: it names no bucket "
                                   f"(write {scheme}://bucket/path)")
    key = posixpath.normpath("/" + parsed.path).strip("/") if parsed.path.strip("/") else ""
    return f"{scheme}://{parsed.netloc}" + (f"/{key}" if key else "")


def is_remote(path: str) -> bool:
    """Whether `path` (canonical) is on an object store."""
    return scheme_of(path) in OBJECT_STORE_SCHEMES


def join(root: str, *parts: str) -> str:
    """`parts` joined below `root`: with `/` on object stores (empty parts skipped), with os.path.join on disks."""
    if not is_remote(root):
        return os.path.join(root, *parts)
    out = root.rstrip("/")
    for p in parts:
        if p:
            out = f"{out}/{p.strip('/')}"
    return out


def norm(path: str) -> str:
    """A path's one spelling for comparisons: normpath on disks; on object stores the URI with
    `s3a://` spelled `s3://`. Spark reaches both schemes through S3A, so they name the same
    object, and a log may name its files with either whatever the table was opened as (VACUUM
    would otherwise take such a table's live files for strays)."""
    if not is_remote(path):
        return os.path.normpath(path)
    scheme, rest = path.split(":", 1)
    return "s3:" + rest if scheme.lower() == "s3a" else path


def relative(root: str, path: str) -> str:
    """`path` relative to `root` (both canonical, `path` below `root`)."""
    if not is_remote(root):
        return os.path.relpath(path, root)
    prefix = root.rstrip("/") + "/"
    if not path.startswith(prefix):
        raise ValueError(f"{path} is not under {root}")
    return path[len(prefix):]


def is_under(root: str, path: str) -> bool:
    """Whether `path` is below `root` (both canonical), not `root` itself."""
    sep = "/" if is_remote(root) else os.sep
    return path.startswith(root.rstrip(sep) + sep)


def dirname(path: str) -> str:
    """The folder `path` is in (the URI up to its last `/` on object stores)."""
    return posixpath.dirname(path) if is_remote(path) else os.path.dirname(path)


def basename(path: str) -> str:
    """The last component of `path`, a trailing separator ignored."""
    return posixpath.basename(path.rstrip("/")) if is_remote(path) else os.path.basename(path.rstrip(os.sep))


def bucket_and_key(uri: str) -> tuple[str, str]:
    """(bucket, key) of an object-store URI; the key without a leading slash."""
    parsed = urlparse(uri)
    return parsed.netloc, parsed.path.lstrip("/")


def from_spark_uri(file_uri: str) -> str:
    """The canonical path of a file URI Spark reports (`file:/a%20b/x` or `s3a://b/k%3D1/x`): its
    path part decoded once, as Hadoop's Path.toUri encoded it."""
    if file_uri.startswith("file:"):
        return unquote(urlparse(file_uri).path)
    scheme = scheme_of(file_uri)
    if scheme in OBJECT_STORE_SCHEMES:
        parsed = urlparse(file_uri)
        return f"{scheme}://{parsed.netloc}{unquote(parsed.path)}"
    return file_uri
