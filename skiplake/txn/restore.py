"""RESTORE: bring a table back to the state of an earlier version, as one new commit.

As Delta does it: the files of the earlier version that are not live now come back (added with
dataChange), the live files that version did not have are removed, a file is the same file only
with the same deletion vector, and the earlier version's metadata (and clustering columns)
returns with a protocol that is never downgraded. Before anything is written, every file to bring back (and its deletion vector)
must still exist: VACUUM may have deleted them. The commit must directly follow the snapshot it
was computed from (Delta's large commit): a concurrent commit makes it fail, never rebase.

No Spark: the work is a difference of two snapshots' file lists and one commit.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

import pyarrow as pa

from skiplake.errors import InvalidArgumentError, RestoreFilesMissingError
from skiplake.log.actions import Action, AddFile, DomainMetadata, now_ms
from skiplake.log.deletion_vectors import dv_files
from skiplake.log.features import merged_protocol
from skiplake.log.history import version_at
from skiplake.log.paths import absolute_path
from skiplake.log.snapshot import Snapshot, add_files_from_arrow, check_writable, file_keys
from skiplake.log.storage_for import missing
from skiplake.txn.commit import commit
from skiplake.txn.read_set import ReadSet

RESTORED_DOMAINS = {"delta.clustering"}


@dataclass(frozen=True)
class RestoreResult:
    """What a RESTORE did: the version it committed, the version whose state it brought back, and
    Delta's RESTORE metrics (the same names, in snake case)."""
    version: int
    restored_version: int
    table_size_after_restore: int
    num_of_files_after_restore: int
    num_removed_files: int
    num_restored_files: int
    removed_files_size: int
    restored_files_size: int

    def operation_metrics(self) -> dict[str, str]:
        """The commit's operationMetrics, named as Delta names them."""
        return {"tableSizeAfterRestore": str(self.table_size_after_restore),
                "numOfFilesAfterRestore": str(self.num_of_files_after_restore),
                "numRemovedFiles": str(self.num_removed_files), "numRestoredFiles": str(self.num_restored_files),
                "removedFilesSize": str(self.removed_files_size),
                "restoredFilesSize": str(self.restored_files_size)}


@dataclass(frozen=True)
class RestorePlan:
    """The actions that turn `latest` back into `target`, and the RESTORE metrics they give."""
    latest: Snapshot
    target: Snapshot
    restored: list[AddFile]
    removed: list[AddFile]

    def result(self, version: int) -> RestoreResult:
        """The RestoreResult of this plan, committed as `version`."""
        return RestoreResult(
            version=version, restored_version=self.target.version,
            table_size_after_restore=self.target.size_bytes, num_of_files_after_restore=self.target.num_files,
            num_removed_files=len(self.removed), num_restored_files=len(self.restored),
            removed_files_size=sum(f.size for f in self.removed),
            restored_files_size=sum(f.size for f in self.restored))

    def actions(self) -> list[Action]:
        """The commit's actions: the protocol when it must grow (ProtocolNotSupportedError when skiplake
        cannot write the result), the earlier metadata and domains, then removes of the files that go
        and adds (dataChange=true) of those that come back."""
        protocol = merged_protocol(self.target.protocol, self.latest.protocol)
        check_writable(self.latest.table_path, protocol)
        ts = now_ms()
        head: list[Action] = [protocol] if protocol != self.latest.protocol else []
        return [*head, self.target.metadata, *self.domains(),
                *[f.remove(ts, data_change=True) for f in self.removed],
                *[replace(f, dataChange=True) for f in self.restored]]

    def domains(self) -> list[DomainMetadata]:
        """The metadata domains as the earlier version had them: the clustering columns, and
        the domains of applications. Other `delta.*` domains belong to features that keep their
        own state going forward (a row id high-water mark never goes back)."""
        now, then = self.latest.domains, self.target.domains
        out: list[DomainMetadata] = []
        for name in sorted(set(now) | set(then)):
            if name.startswith("delta.") and name not in RESTORED_DOMAINS:
                continue
            if name in then and (name not in now or now[name].configuration != then[name].configuration):
                out.append(then[name])
            elif name not in then:
                out.append(replace(now[name], removed=True))   # the tombstone keeps the pre-image
        return out


def target_version(table_path: str, latest: int, version: int | None,
                   timestamp: str | dt.datetime | None) -> int:
    """The version a RESTORE goes back to: `version`, or the one current at `timestamp`; it must be
    older than the latest."""
    if (version is None) == (timestamp is None):
        raise InvalidArgumentError(f"{table_path}: restore needs exactly one of version= or timestamp=")
    if version is not None:
        chosen = version
    else:
        assert timestamp is not None   # exactly one of the two is given: checked above
        chosen = version_at(table_path, timestamp)
    if chosen < 0 or chosen >= latest:
        at = f"version {version}" if version is not None else f"timestamp {timestamp} (version {chosen})"
        raise InvalidArgumentError(
            f"{table_path}: cannot restore to {at}: RESTORE goes back to a version older than the latest "
            f"({latest}); the table's history lists them.")
    return chosen


def plan_restore(latest: Snapshot, target: Snapshot) -> RestorePlan:
    """Which files come back and which go. The log's own rows are compared and committed (with
    column mapping they key stats and partition values by physical names)."""
    now_rows = latest.log_files if latest.log_files is not None else latest.files
    then_rows = target.log_files if target.log_files is not None else target.files
    now_keys, then_keys = file_keys(now_rows), file_keys(then_rows)
    live, wanted = set(now_keys), set(then_keys)
    restored = _rows(then_rows, [k not in live for k in then_keys])
    removed = _rows(now_rows, [k not in wanted for k in now_keys])
    return RestorePlan(latest, target, restored, removed)


def _rows(files: pa.Table, keep: list[bool]) -> list[AddFile]:
    return add_files_from_arrow(files.filter(pa.array(keep, pa.bool_()))) if any(keep) else []


def check_files_exist(plan: RestorePlan) -> None:
    """Every file to bring back, and every deletion vector it needs, must still exist."""
    path = plan.latest.table_path
    data = {absolute_path(path, f.path): f.path for f in plan.restored}
    vectors = dv_files(path, [f.deletionVector for f in plan.restored])
    gone = missing(path, [*data, *sorted(vectors)])
    if gone:
        raise RestoreFilesMissingError(path, plan.target.version, [data.get(p, p) for p in gone])


def restore(table_path: str, version: int | None = None, timestamp: str | dt.datetime | None = None,
            latest: Snapshot | None = None) -> RestoreResult:
    """RESTORE the table at `table_path` to `version` (or the version current at `timestamp`)."""
    latest = latest or Snapshot.load(table_path)
    chosen = target_version(table_path, latest.version, version, timestamp)
    plan = plan_restore(latest, Snapshot.load(table_path, chosen, latest.storage))
    check_files_exist(plan)
    params = {"version": version, "timestamp": None if timestamp is None else str(timestamp)}
    metrics = plan.result(-1).operation_metrics()
    done = commit(latest, plan.actions(), "RESTORE", params, ReadSet(whole_table=True), metrics, exclusive=True)
    return plan.result(done.version)
