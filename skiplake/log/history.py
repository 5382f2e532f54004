"""A table's history from its log: each version's commitInfo, and the version current at a time."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from skiplake.errors import NotATableError, TimestampNotFoundError
from skiplake.log.actions import CommitInfo
from skiplake.log.snapshot import commit_timestamps, list_log, log_storage, read_commit
from skiplake.log.values import parse_timestamp


@dataclass(frozen=True)
class Commit:
    """A version in the table's history: its commitInfo and its commit file's modification time."""
    version: int
    info: CommitInfo | None   # None for a commit another writer made without one
    file_time_ms: int         # the commit file's modification time (Delta's fallback timestamp)

    @property
    def timestamp_ms(self) -> int:
        """When the version was committed, ms since the epoch: commitInfo.timestamp, else the commit
        file's modification time."""
        return (self.info.timestamp if self.info and self.info.timestamp else None) or self.file_time_ms


def commits(path: str, limit: int | None = None) -> list[Commit]:
    """The versions still in the log, newest first, with their commitInfo."""
    storage = log_storage(path)
    listing = list_log(storage)
    if listing.latest is None:
        raise NotATableError(path)
    out = []
    for v in sorted(listing.commits, reverse=True)[:limit]:
        info = None
        for action in read_commit(storage, v):
            if isinstance(action, CommitInfo):
                info = action
        out.append(Commit(v, info, listing.commits[v].mtime_ms))
    return out


def utc_ms(when: str | dt.datetime) -> int:
    """Milliseconds since the epoch of a timestamp given by a user (naive ones are UTC)."""
    if isinstance(when, str):
        when = parse_timestamp(when)
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)


def utc_iso(ms: int) -> str:
    """`ms` (since the epoch) as an ISO-8601 UTC timestamp, for messages."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat()


def version_at(path: str, timestamp: str | dt.datetime) -> int:
    """The last version committed at or before `timestamp` (naive timestamps are UTC)."""
    ms = utc_ms(timestamp)
    storage = log_storage(path)
    listing = list_log(storage)
    if listing.latest is None:
        raise NotATableError(path)
    stamps = commit_timestamps(storage, listing)
    earliest = listing.earliest_readable()
    candidates = [v for v, ts in stamps.items() if ts <= ms and earliest is not None and v >= earliest]
    if not candidates:
        first = min(stamps.values()) if stamps else None
        raise TimestampNotFoundError(path, str(timestamp), utc_iso(first) if first else None)
    return max(candidates)
