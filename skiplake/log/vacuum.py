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
    doomed = _doomed(table_path, storage.walk(), _kept(table_path, snapshot, cutoff), cutoff)
    if not dry_run:
        storage.delete_many([name for name, _ in doomed])
        if not is_remote(table_path):
            _remove_empty_dirs(table_path)
    return VacuumResult(dry_run, len(doomed), sum(s for _, s in doomed), sorted(name for name, _ in doomed))


def _kept(table_path: str, snapshot: Snapshot, cutoff: float) -> set[str]:
    """The files VACUUM keeps whatever their age (by file_key): every file of the current
    version, every file removed within the retention (time travel and running readers may
    still need it), and the deletion vector files either names."""
    live = {file_key(table_path, p) for p in snapshot.files.column("path").to_pylist()}
    kept_tombstones = [r for r in snapshot.tombstone_list
                       if r.deletionTimestamp is None or r.deletionTimestamp >= cutoff * 1000]
    live |= {file_key(table_path, r.path) for r in kept_tombstones}
    # Deletion vector files (at the table root, or under a prefix folder) live as long as a
    # live file or a kept tombstone names them.
    live |= dv_files(table_path, snapshot.files.column("deletionVector").to_pylist())
    live |= dv_files(table_path, (r.deletionVector for r in kept_tombstones))
    return live


def _doomed(table_path: str, objects: Iterable[ObjectInfo], kept: set[str], cutoff: float) -> list[tuple[str, int]]:
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
