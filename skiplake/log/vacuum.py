"""VACUUM: delete data files no longer referenced by the table and older than the retention.

A file is kept if the current version references it (a data file, or the deletion vector
file of one), or if it changed within the retention window (a running writer's uncommitted
file, or a file time travel may still need).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiplake.errors import RetentionTooShortError
from skiplake.log.checkpoint import DEFAULT_TOMBSTONE_RETENTION_MS, TOMBSTONE_RETENTION, parse_interval_ms
from skiplake.log.deletion_vectors import dv_files
from skiplake.log.location import is_remote, join, norm
from skiplake.log.paths import file_key
from skiplake.log.s3 import PROBE_PREFIX
from skiplake.log.snapshot import LOG_DIR, Snapshot, check_writable
from skiplake.log.storage import ObjectInfo
from skiplake.log.storage_for import storage_at

# A commit's temporary file lives for milliseconds; one this old belongs to a dead writer.
LOG_TEMP_MAX_AGE_S = 3600


@dataclass(frozen=True)
class VacuumResult:
    """What VACUUM deleted, or with dry_run would delete: the number of files, their bytes, their names."""
    dry_run: bool
    files_deleted: int
    bytes_deleted: int
    files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The result as a JSON-ready dict."""
        return {"dry_run": self.dry_run, "files_deleted": self.files_deleted, "bytes_deleted": self.bytes_deleted,
                "files": self.files}


def vacuum(table_path: str, retention_hours: float = 168, dry_run: bool = False, force: bool = False) -> VacuumResult:
    """Delete the files of the table that neither its current version nor a version within `retention_hours`
    needs, and the temporary files dead committers left in its log (see the module); `dry_run` only
    lists them.

    RetentionTooShortError, unless `force`, when `retention_hours` is shorter than the table's
    delta.deletedFileRetentionDuration; ProtocolNotSupportedError when skiplake cannot write the table."""
    snapshot = Snapshot.load(table_path)
    # The write protocol, for every table (as the vacuumProtocolCheck feature asks): a writer
    # feature skiplake does not know may keep files that the log alone does not name.
    check_writable(table_path, snapshot.protocol)
    minimum_ms = parse_interval_ms(snapshot.configuration.get(TOMBSTONE_RETENTION),
                                   DEFAULT_TOMBSTONE_RETENTION_MS)
    if retention_hours * 3_600_000 < minimum_ms and not force:
        raise RetentionTooShortError(table_path, retention_hours, minimum_ms / 3_600_000)
    cutoff = time.time() - retention_hours * 3600
    storage = storage_at(table_path)
    kept = KeptFiles(table_path, snapshot, cutoff)
    # A page of the listing at a time (a folder, or an object store's answer of 1,000 keys):
    # listed, compared and deleted, so that neither the listing nor the doomed are held whole.
    count, size, names = 0, 0, []
    for page in storage.walk_pages():
        doomed = _doomed(table_path, page, kept, cutoff)
        if not doomed:
            continue
        if not dry_run:
            storage.delete_many([name for name, _ in doomed])
        count += len(doomed)
        size += sum(s for _, s in doomed)
        names += [name for name, _ in doomed]
    if not dry_run and not is_remote(table_path):
        _remove_empty_dirs(table_path)
    return VacuumResult(dry_run, count, size, sorted(names))


class KeptFiles:
    """The files VACUUM keeps whatever their age (by file_key): every file of the current version,
    every file removed within the retention (time travel and running readers may still need it),
    and the deletion vector files either names.

    The current version's files are looked up folder by folder: their log paths stay in the
    snapshot's Arrow column, grouped by folder, and only the folders of the page being compared
    are made into sets, so a table of millions of files is never one set of millions of strings."""

    _CACHED_FOLDERS = 8

    def __init__(self, table_path: str, snapshot: Snapshot, cutoff: float) -> None:
        """The files to keep of `snapshot` (its table at `table_path`), tombstones since `cutoff` (seconds)."""
        self.table_path = table_path
        paths = snapshot.file_rows.column("path")
        kept_tombstones = [r for r in snapshot.tombstone_list
                           if r.deletionTimestamp is None or r.deletionTimestamp >= cutoff * 1000]
        # Few beside the live files: one set. Deletion vector files (at the table root, or under
        # a prefix folder) live as long as a live file or a kept tombstone names them.
        self.others = {file_key(table_path, r.path) for r in kept_tombstones}
        dvs = snapshot.file_rows.column("deletionVector")
        self.others |= dv_files(table_path, dvs.filter(dvs.is_valid()).to_pylist())
        self.others |= dv_files(table_path, (r.deletionVector for r in kept_tombstones))
        # Each live path's folder as the log spells it (with a trailing slash; "" at the root).
        folders = pc.replace_substring_regex(paths, r"[^/]*$", "")
        encoded = (folders.combine_chunks() if isinstance(folders, pa.ChunkedArray) else folders).dictionary_encode()
        ids = encoded.indices.to_numpy(zero_copy_only=False)
        self._order = np.argsort(ids, kind="stable")
        self._starts = np.searchsorted(ids[self._order], np.arange(len(encoded.dictionary) + 1))
        self._paths = paths
        # The folder as listed (file_key's spelling) -> the log's spellings of it.
        self._spellings: dict[str, list[int]] = {}
        for i, folder in enumerate(encoded.dictionary.to_pylist()):
            self._spellings.setdefault(_folder_of(file_key(table_path, folder + "_")), []).append(i)
        self._sets: dict[str, set[str]] = {}

    def __contains__(self, key: object) -> bool:
        """Whether the file of `key` (a file_key) is kept."""
        if not isinstance(key, str):
            return False
        return key in self.others or key in self._folder_set(_folder_of(key))

    def _folder_set(self, folder: str) -> set[str]:
        found = self._sets.get(folder)
        if found is None:
            parts = [self._order[self._starts[i]:self._starts[i + 1]] for i in self._spellings.get(folder, [])]
            rows = np.concatenate(parts) if parts else np.zeros(0, np.int64)
            found = {file_key(self.table_path, p) for p in self._paths.take(pa.array(rows)).to_pylist()}
            if len(self._sets) >= self._CACHED_FOLDERS:
                self._sets.pop(next(iter(self._sets)))
            self._sets[folder] = found
        return found


def _folder_of(key: str) -> str:
    return key.rsplit("/", 1)[0] if "/" in key else ""


def _doomed(table_path: str, objects: Iterable[ObjectInfo], kept: "KeptFiles", cutoff: float) -> list[tuple[str, int]]:
    """(name, size) of the table's objects VACUUM deletes: data files neither kept nor changed
    within the retention, and temporary files a dead writer left in the log."""
    doomed: list[tuple[str, int]] = []
    stale_temp_cutoff = min(cutoff, time.time() - LOG_TEMP_MAX_AGE_S)
    for obj in objects:
        parts = obj.name.split("/")
        if parts[0] == LOG_DIR:
            if _stale_log_temp(parts, obj, stale_temp_cutoff):
                doomed.append((obj.name, obj.size))
        elif (len(parts) == 1 or not parts[0].startswith(".")) and norm(join(table_path, obj.name)) not in kept \
                and obj.mtime_ms < cutoff * 1000:
            doomed.append((obj.name, obj.size))
    return doomed


def _stale_log_temp(parts: list[str], obj: ObjectInfo, cutoff: float) -> bool:
    """A temporary file a killed committer left in _delta_log (never a commit: those are
    linked), or an object store's conditional-write probe a killed process left."""
    return len(parts) == 2 and parts[1].startswith((".tmp-", PROBE_PREFIX)) and obj.mtime_ms < cutoff * 1000


def _remove_empty_dirs(table_path: str) -> None:
    for root, dirs, files in os.walk(table_path, topdown=False):
        if root == table_path or os.path.relpath(root, table_path).split(os.sep)[0] == LOG_DIR:
            continue
        if not os.listdir(root):
            try:
                os.rmdir(root)
            except OSError:
                pass
