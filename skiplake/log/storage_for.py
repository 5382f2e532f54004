"""The Storage for a location: a local folder or an S3 prefix (see skiplake.log.location)."""
from __future__ import annotations

import os

from skiplake.log.location import basename, dirname, is_remote, join, norm
from skiplake.log.s3 import RangeReader, S3Storage
from skiplake.log.storage import LocalStorage, Storage


def storage_at(root: str) -> Storage:
    """Storage rooted at `root`, a canonical location (skiplake.log.location.resolve)."""
    return S3Storage(root) if is_remote(root) else LocalStorage(root)


def parquet_source(path: str, size: int | None = None) -> str | RangeReader:
    """What pyarrow reads a file from: the path itself on disks, a ranged reader on object stores
    (`size`, when known, saves a request)."""
    if not is_remote(path):
        return path
    return S3Storage(dirname(path)).open_input(basename(path), size)


# Keys an S3 listing returns per request.
LIST_PAGE_KEYS = 1000


def missing(root: str, paths: list[str], table_files: int = 0) -> list[str]:
    """The full paths among `paths` (files of the table at `root`) that do not exist. On an object
    store, one request per path when that is fewer than the pages a listing of the table's
    `table_files` files would take (a pruned or time-travel read of a big table), and otherwise
    one listing of the table."""
    if not is_remote(root):
        return [p for p in paths if not os.path.exists(p)]
    if len(paths) <= table_files // LIST_PAGE_KEYS:
        return [p for p in paths if not S3Storage(dirname(p)).exists(basename(p))]
    present = {norm(join(root, o.name)) for o in storage_at(root).walk()}
    return [p for p in paths if norm(p) not in present]


def has_log(table_path: str) -> bool:
    """Whether `table_path` holds a Delta log folder: on disks the folder, on object stores a file directly in it."""
    if not is_remote(table_path):
        return os.path.isdir(join(table_path, "_delta_log"))
    return bool(storage_at(join(table_path, "_delta_log")).list())
