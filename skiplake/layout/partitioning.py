"""Hive-style partition folders, exactly as Spark names them, and the add path encoding of the log.

Spark escapes a partition value in a folder name with `%XX` for a fixed set of characters
(ExternalCatalogUtils.escapePathName) and writes NULL (and '') as __HIVE_DEFAULT_PARTITION__.
The log stores paths as URIs relative to the table root, so those folder names are
percent-encoded once more in `add.path`.
"""
from __future__ import annotations

import os
from urllib.parse import quote, unquote, urlparse

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0x01, 0x20)}
# Characters left alone when a relative file path becomes a URI (as java.net.URI does).
_URI_SAFE = "/=:@!$&'()*+,;-._~"


def escape_path_name(value: str) -> str:
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in value)


def unescape_path_name(name: str) -> str:
    out = []
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "%" and _is_hex(name[i + 1:i + 3]):
            out.append(chr(int(name[i + 1:i + 3], 16)))
            i += 3
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _is_hex(s: str) -> bool:
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)


def partition_dir(partition_columns: list[str], values: dict[str, str | None]) -> str:
    """The relative folder of a partition: col1=v1/col2=v2 (empty for an unpartitioned table)."""
    parts = []
    for col in partition_columns:
        v = values.get(col)
        text = HIVE_DEFAULT_PARTITION if v is None or v == "" else escape_path_name(v)
        parts.append(f"{escape_path_name(col)}={text}")
    return "/".join(parts)


def parse_partition_dir(relative_dir: str) -> dict[str, str | None]:
    """col1=v1/col2=v2 to {col1: v1, col2: v2}; __HIVE_DEFAULT_PARTITION__ becomes None."""
    out: dict[str, str | None] = {}
    if not relative_dir:
        return out
    for segment in relative_dir.strip("/").split("/"):
        if "=" not in segment:
            continue
        key, _, value = segment.partition("=")
        out[unescape_path_name(key)] = None if value == HIVE_DEFAULT_PARTITION else unescape_path_name(value)
    return out


def to_log_path(relative_path: str) -> str:
    return quote(relative_path, safe=_URI_SAFE)


def from_log_path(log_path: str) -> str:
    return unquote(log_path)


def absolute_path(table_path: str, log_path: str) -> str:
    """The local path of a file named in the log (relative URI, absolute path or file: URI)."""
    if "://" in log_path or log_path.startswith("file:"):
        return os.path.normpath(from_log_path(urlparse(log_path).path))
    path = from_log_path(log_path)
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(table_path, path))
