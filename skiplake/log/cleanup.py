"""Deleting expired log files after a checkpoint, as PROTOCOL.md's Metadata Cleanup describes.

A table appended every minute writes about 525,000 commit files a year; without cleanup each
load lists them all (on object stores, hundreds of list requests). After each checkpoint,
files older than `delta.logRetentionDuration` (default 30 days) go, but only those no load
needs: everything before the newest checkpoint that is itself older than the cutoff (the
*cut-off checkpoint*) is covered by that checkpoint, so commits, checkpoints and checksum files
of earlier versions are deleted. The cut-off checkpoint, its commit file and everything after
stay, so time travel works to any version inside the retention window, and to the cut-off
checkpoint's version, the oldest kept.

- The cutoff is midnight UTC of the day `logRetentionDuration` ago, as delta-spark does.
- A file's age is its modification time, made monotone in version order (a commit is never
  taken as older than the one before it), as delta-spark does.
- Checkpoint files are also kept for `delta.checkpointRetentionDuration` (default 2 days).
- `delta.enableExpiredLogCleanup=false` turns it off.
- Sidecar files that no kept checkpoint names and that are older than a day are deleted too.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from skiplake.errors import CorruptLogError
from skiplake.log.actions import now_ms
from skiplake.log.checkpoint import parse_interval_ms
from skiplake.log.checkpoint_read import SIDECAR_DIR, sidecars_of
from skiplake.log.location import join
from skiplake.log.snapshot import CHECKPOINT_RE, COMMIT_RE, LOG_DIR, UUID_CHECKPOINT_RE, is_checkpoint_file, listing_of
from skiplake.log.storage import Storage
from skiplake.log.storage_for import storage_at

log = logging.getLogger("skiplake.cleanup")

LOG_RETENTION = "delta.logRetentionDuration"
CHECKPOINT_RETENTION = "delta.checkpointRetentionDuration"
ENABLE_CLEANUP = "delta.enableExpiredLogCleanup"
DEFAULT_LOG_RETENTION_MS = 30 * 86_400_000
DEFAULT_CHECKPOINT_RETENTION_MS = 2 * 86_400_000
_DAY_MS = 86_400_000
_CHECKSUM_RE = re.compile(r"^(\d{20})\.crc$")
_COMPACTED_RE = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")


@dataclass(frozen=True)
class CleanupResult:
    """What a log cleanup did: the cut-off checkpoint's version, and the files it deleted."""
    cutoff_version: int | None   # the cut-off checkpoint's version (None: nothing expired)
    deleted: tuple[str, ...]     # names under the log folder


def cleanup_enabled(configuration: dict[str, str]) -> bool:
    """Whether expired log cleanup is on: delta.enableExpiredLogCleanup is anything but `false`."""
    return str(configuration.get(ENABLE_CLEANUP, "true")).strip().lower() != "false"


def clean_expired_log(table_path: str, configuration: dict[str, str], storage: Storage | None = None,
                      now: int | None = None) -> CleanupResult:
    """Delete the log files that expired under the table's retention settings (see the module)."""
    if not cleanup_enabled(configuration):
        return CleanupResult(None, ())
    storage = storage or storage_at(join(table_path, LOG_DIR))
    now = now_ms() if now is None else now
    retention = parse_interval_ms(configuration.get(LOG_RETENTION), DEFAULT_LOG_RETENTION_MS)
    checkpoint_retention = parse_interval_ms(configuration.get(CHECKPOINT_RETENTION),
                                             DEFAULT_CHECKPOINT_RETENTION_MS)
    cutoff = _midnight(now - retention)
    infos = storage.list()  # one listing: the whole log folder, read once
    listing = listing_of(infos)
    cutoff_checkpoint = _cutoff_checkpoint(listing.commits, listing.checkpoints, cutoff)
    if cutoff_checkpoint is None:
        return CleanupResult(None, ())
    doomed = []
    checkpoint_cutoff = min(cutoff, now - checkpoint_retention)
    for info in infos:
        version = _expired_version(info.name)
        if version is None or version >= cutoff_checkpoint:
            continue
        if is_checkpoint_file(info.name) and info.mtime_ms > checkpoint_cutoff:
            continue
        doomed.append(info.name)
    # Oldest first: a reader that races with this sees a prefix of the log gone, never a hole.
    doomed.sort()
    storage.delete_many(doomed)
    gone = set(doomed)
    kept = [i.name for i in infos if is_checkpoint_file(i.name) and i.name not in gone]
    doomed += _unreferenced_sidecars(table_path, storage, kept, now)
    if doomed:
        log.info("deleted %d expired log files of %s before version %d", len(doomed), table_path,
                 cutoff_checkpoint)
    return CleanupResult(cutoff_checkpoint, tuple(doomed))


def _midnight(ms: int) -> int:
    """Midnight UTC at or before `ms` (ms since the epoch)."""
    return ms // _DAY_MS * _DAY_MS


def _cutoff_checkpoint(commits: dict, checkpoints: dict[int, list[str]], cutoff: int) -> int | None:
    """The newest checkpoint not newer than the newest commit older than `cutoff`."""
    newest_expired = None
    previous = -1
    for version in sorted(commits):
        # Modification times made monotone in version order.
        effective = max(commits[version].mtime_ms, previous + 1)
        previous = effective
        if effective > cutoff:
            break
        newest_expired = version
    if newest_expired is None:
        return None
    candidates = [v for v in checkpoints if v <= newest_expired]
    return max(candidates) if candidates else None


def _expired_version(name: str) -> int | None:
    """The version a commit, checkpoint, checksum or log compaction file belongs to (a log
    compaction by its start version); None for any other file."""
    for pattern in (COMMIT_RE, CHECKPOINT_RE, UUID_CHECKPOINT_RE, _CHECKSUM_RE):
        m = pattern.match(name)
        if m:
            return int(m.group(1))
    m = _COMPACTED_RE.match(name)
    return int(m.group(1)) if m else None  # a log compaction, by its first version


def _unreferenced_sidecars(table_path: str, storage: Storage, checkpoints: list[str], now: int) -> list[str]:
    """Delete the sidecar files none of `checkpoints` (every kept checkpoint file, not only the
    one a load picks per version) names, older than a day (a checkpoint being written names its
    sidecars only once it is complete)."""
    sidecar_storage = storage_at(join(table_path, LOG_DIR, SIDECAR_DIR))
    old = [i.name for i in sidecar_storage.list() if i.mtime_ms < _midnight(now - _DAY_MS)]
    if not old:
        return []
    referenced: set[str] = set()
    for name in checkpoints:
        try:
            referenced.update(sidecars_of(storage, [name]))
        except CorruptLogError:
            return []  # an unreadable checkpoint may name any of them: keep all
    doomed = [n for n in old if f"{SIDECAR_DIR}/{n}" not in referenced]
    sidecar_storage.delete_many(doomed)
    return [f"{SIDECAR_DIR}/{n}" for n in doomed]
