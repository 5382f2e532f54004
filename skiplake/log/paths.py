"""How the log names data files: `add.path` is a URI relative to the table root.

Hive-style folder names are percent-encoded once more when they become a log path, as
java.net.URI does; other writers may log absolute paths or `file:` URIs instead.
"""
from __future__ import annotations

import os
from urllib.parse import quote, unquote, urlparse

from skiplake.log.location import from_spark_uri, is_remote, join, norm

# Characters left alone when a relative file path becomes a URI (as java.net.URI does).
_URI_SAFE = "/=:@!$&'()*+,;-._~"


def to_log_path(relative_path: str) -> str:
    """A file's path relative to the table root as `add.path` holds it: percent-encoded as java.net.URI
    encodes it."""
    return quote(relative_path, safe=_URI_SAFE)


def from_log_path(log_path: str) -> str:
    """An `add.path` back to the path it encodes (percent-escapes decoded once)."""
    return unquote(log_path)


def absolute_path(table_path: str, log_path: str) -> str:
    """The full path of a file named in the log (relative URI, absolute path, file: or s3: URI):
    a local path, or an object-store URI for tables on object stores."""
    if is_remote(log_path):
        return from_spark_uri(log_path)
    if "://" in log_path or log_path.startswith("file:"):
        return os.path.normpath(from_log_path(urlparse(log_path).path))
    path = from_log_path(log_path)
    if is_remote(table_path):
        return join(table_path, path)
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(table_path, path))


def file_key(table_path: str, log_path: str) -> str:
    """What a file the log names is compared by, with listed files or the ones Spark reports
    (their path through location.norm as well): its full path in norm's spelling."""
    return norm(absolute_path(table_path, log_path))
