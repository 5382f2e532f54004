"""The change data feed (PROTOCOL.md, "Add CDC File" and "Change Data Feed"), as the log holds it.

With `delta.enableChangeDataFeed=true`, a commit that rewrites rows records what changed in
`_change_data/` files (`cdc` actions): the table's columns plus `_change_type`, one of `insert`,
`delete`, `update_preimage` and `update_postimage`. A commit without `cdc` actions records its
changes by its file actions alone: an added file's rows are inserted, a removed file's rows
deleted (both only with `dataChange: true`), and a file removed and added again with another
deletion vector had the rows the new vector marks (and the old one did not) deleted. A reader
takes a commit's `cdc` files exclusively when it has any, so a writer that writes one must
write every change of that commit into them.

This module plans a read of the feed: per version, which files hold its changes and which rows
of them. Reading them is Spark's (skiplake.spark.reads.change_feed).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from skiplake.errors import (
    ChangeDataNotRecordedError,
    InvalidArgumentError,
    NotATableError,
    TimestampNotFoundError,
    VersionNotFoundError,
)
from skiplake.log.actions import AddCDCFile, AddFile, Metadata, RemoveFile
from skiplake.log.column_mapping import logical_partition_values
from skiplake.log.deletion_vectors import marked_rows, unique_id
from skiplake.log.features import change_data_feed_enabled
from skiplake.log.history import utc_iso, utc_ms
from skiplake.log.schema import Schema
from skiplake.log.snapshot import LogListing, Snapshot, list_log, log_storage, read_commit
from skiplake.log.storage import Storage

CHANGE_DIR = "_change_data"
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
# Names a table with the feed on cannot give its columns (a change read adds them).
RESERVED = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)
INSERT, DELETE = "insert", "delete"
PREIMAGE, POSTIMAGE = "update_preimage", "update_postimage"


def reserved_columns(schema: Schema) -> list[str]:
    """The columns of `schema` a table with the change data feed on cannot have."""
    lowered = {r.lower() for r in RESERVED}
    return [n for n in schema.names if n.lower() in lowered]


@dataclass
class VersionChanges:
    """One version's changes and where they are. A change file's rows carry their change type;
    the other lists are the rows of files read with their deletion vectors applied, and files
    (without a deletion vector) of which only some rows changed."""
    version: int
    timestamp_ms: int
    change_files: list[AddCDCFile] = field(default_factory=list)
    inserted: list[AddFile] = field(default_factory=list)
    deleted: list[AddFile] = field(default_factory=list)
    rows_deleted: list[tuple[AddFile, np.ndarray]] = field(default_factory=list)
    rows_inserted: list[tuple[AddFile, np.ndarray]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Whether no file holds a change of this version."""
        return not self.files()

    def files(self) -> list[AddCDCFile | AddFile]:
        """Every file the version's changes are read from."""
        return [*self.change_files, *self.inserted, *self.deleted, *(f for f, _ in self.rows_deleted),
                *(f for f, _ in self.rows_inserted)]


@dataclass(frozen=True)
class ChangePlan:
    """The plan of a change feed read: for each version start..end (both included), where its changes are."""
    metadata: Metadata          # the table's at the last version read: its schema reads every file
    column_mapping: str
    start: int
    end: int
    versions: list[VersionChanges]
    table_files: int = 0        # the table's files at the last version read


def commit_times(listing: LogListing) -> dict[int, int]:
    """Each commit's time as delta-spark's change feed gives it: the commit file's modification
    time, moved forward where needed to be later than the version before it."""
    out: dict[int, int] = {}
    last = None
    for v in sorted(listing.commits):
        ts = listing.commits[v].mtime_ms
        if last is not None and ts <= last:
            ts = last + 1
        out[v] = last = ts
    return out


def versions_between(table_path: str, starting_timestamp: str | dt.datetime | None,
                     ending_timestamp: str | dt.datetime | None, listing: LogListing) -> tuple[int | None, int | None]:
    """(the first version committed at or after `starting_timestamp`, the last at or before
    `ending_timestamp`), by commit_times; None where no timestamp is given."""
    times = commit_times(listing)
    start = end = None
    if starting_timestamp is not None:
        ms = utc_ms(starting_timestamp)
        later = [v for v, ts in times.items() if ts >= ms]
        if not later:
            raise TimestampNotFoundError(table_path, str(starting_timestamp), utc_iso(min(times.values())) if times else None)
        start = min(later)
    if ending_timestamp is not None:
        ms = utc_ms(ending_timestamp)
        earlier = [v for v, ts in times.items() if ts <= ms]
        if not earlier:
            raise TimestampNotFoundError(table_path, str(ending_timestamp), utc_iso(min(times.values())) if times else None)
        end = max(earlier)
    return start, end


def plan_changes(table_path: str, starting_version: int | None = None, ending_version: int | None = None,
                 starting_timestamp: str | dt.datetime | None = None,
                 ending_timestamp: str | dt.datetime | None = None, storage: Storage | None = None) -> ChangePlan:
    """Where the changes of versions start..end (both included) are: by version or by
    timestamp; the start defaults to 0 (the oldest version in the log), the end to the latest."""
    storage = storage or log_storage(table_path)
    listing = list_log(storage)
    start, end = _version_range(table_path, listing, starting_version, ending_version, starting_timestamp,
                                ending_timestamp)
    snapshot = Snapshot.load(table_path, end, storage=storage)
    metadata = Snapshot.load(table_path, start, storage=storage).metadata if start != end else snapshot.metadata
    times = commit_times(listing)
    versions = []
    for v in range(start, end + 1):
        actions = read_commit(storage, v)
        metadata = next((a for a in reversed(actions) if isinstance(a, Metadata)), metadata)
        changes = _version_changes(table_path, v, times[v], actions)
        if not changes.empty and not change_data_feed_enabled(metadata.configuration):
            raise ChangeDataNotRecordedError(table_path, v, start, end)
        versions.append(changes)
    if snapshot.column_mapping != "none":
        # The log keys partition values by physical names; readers take them by logical ones.
        schema, parts, mode = snapshot.schema, snapshot.partition_columns, snapshot.column_mapping

        def logical(f: Any) -> Any:
            return replace(f, partitionValues=logical_partition_values(f.partitionValues, schema, parts, mode))

        for vc in versions:
            vc.change_files = [logical(c) for c in vc.change_files]
            vc.inserted, vc.deleted = [logical(f) for f in vc.inserted], [logical(f) for f in vc.deleted]
            vc.rows_deleted = [(logical(f), rows) for f, rows in vc.rows_deleted]
            vc.rows_inserted = [(logical(f), rows) for f, rows in vc.rows_inserted]
    return ChangePlan(snapshot.metadata, snapshot.column_mapping, start, end, versions, snapshot.num_files)


def _first_given(*versions: int | None) -> int:
    return next(v for v in versions if v is not None)


def _version_range(table_path: str, listing: LogListing, starting_version: int | None, ending_version: int | None,
                   starting_timestamp: str | dt.datetime | None,
                   ending_timestamp: str | dt.datetime | None) -> tuple[int, int]:
    """The first and last version of a change read, checked to be in the log."""
    for side, version, timestamp in (("starting", starting_version, starting_timestamp),
                                     ("ending", ending_version, ending_timestamp)):
        if version is not None and timestamp is not None:
            raise InvalidArgumentError(f"give {side}_version or {side}_timestamp, not both")
    latest = listing.latest
    if latest is None or not listing.commits:
        raise NotATableError(table_path)
    by_start, by_end = versions_between(table_path, starting_timestamp, ending_timestamp, listing)
    oldest = min(listing.commits)
    start = _first_given(starting_version, by_start, oldest)
    end = _first_given(ending_version, by_end, latest)
    for v in (start, end):
        if v < oldest or v > latest or v not in listing.commits:
            raise VersionNotFoundError(table_path, v, oldest, latest)
    if start > end:
        raise InvalidArgumentError(f"{table_path}: the change read starts at version {start}, after its end {end}; "
                                   "give a starting version (or timestamp) at or before the ending one")
    missing = [v for v in range(start, end + 1) if v not in listing.commits]
    if missing:
        raise VersionNotFoundError(table_path, missing[0], oldest, latest)
    return start, end


def _remarked(table_path: str, add: AddFile, remove: RemoveFile, out: VersionChanges) -> None:
    """The same file logged again with another deletion vector: rows it now marks were deleted,
    rows it no longer marks (a RESTORE) were inserted."""
    now, before = marked_rows(table_path, add.deletionVector), marked_rows(table_path, remove.deletionVector)
    plain = AddFile(add.path, dict(add.partitionValues), add.size, add.modificationTime, True, add.stats, add.tags)
    gone, back = np.setdiff1d(now, before), np.setdiff1d(before, now)
    if len(gone):
        out.rows_deleted.append((plain, gone.astype(np.uint64)))
    if len(back):
        out.rows_inserted.append((plain, back.astype(np.uint64)))


def _data_changes(actions: list) -> tuple[dict[str, AddFile], dict[str, RemoveFile]]:
    """The files a version adds and removes with a change of data, by path."""
    adds = {a.path: a for a in actions if isinstance(a, AddFile) and a.dataChange}
    removes = {r.path: r for r in actions if isinstance(r, RemoveFile) and r.dataChange}
    return adds, removes


def _version_changes(table_path: str, version: int, timestamp_ms: int, actions: list) -> VersionChanges:
    out = VersionChanges(version, timestamp_ms)
    out.change_files = [a for a in actions if isinstance(a, AddCDCFile)]
    if out.change_files:
        return out
    adds, removes = _data_changes(actions)
    for path, add in adds.items():
        remove = removes.pop(path, None)
        if remove is None:
            out.inserted.append(add)
        elif unique_id(add.deletionVector) != unique_id(remove.deletionVector):
            _remarked(table_path, add, remove, out)  # (the same vector again: the same rows, no change)
    for r in removes.values():
        out.deleted.append(AddFile(r.path, dict(r.partitionValues or {}), r.size or 0, 0, True, None, r.tags,
                                   r.deletionVector))
    return out
