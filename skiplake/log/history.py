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
    version: int
    info: CommitInfo | None   # None for a commit another writer made without one
    file_time_ms: int         # the commit file's modification time (Delta's fallback timestamp)

    @property
    def timestamp_ms(self) -> int:
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


def version_at(path: str, timestamp: str | dt.datetime) -> int:
    """The last version committed at or before `timestamp` (naive timestamps are UTC)."""
    if isinstance(timestamp, str):
        when = parse_timestamp(timestamp)
    else:
        when = timestamp.astimezone(dt.timezone.utc).replace(tzinfo=None) if timestamp.tzinfo else timestamp
    ms = int(when.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)
    storage = log_storage(path)
    listing = list_log(storage)
    if listing.latest is None:
        raise NotATableError(path)
    stamps = commit_timestamps(storage, listing)
    earliest = listing.earliest_readable()
    candidates = [v for v, ts in stamps.items() if ts <= ms and earliest is not None and v >= earliest]
    if not candidates:
        first = min(stamps.values()) if stamps else None
        raise TimestampNotFoundError(path, str(timestamp), dt.datetime.fromtimestamp(
            first / 1000, dt.timezone.utc).isoformat() if first else None)
    return max(candidates)
