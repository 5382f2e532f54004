"""Committing a transaction: its commitInfo (isolation level, blind append) and the conflict
check applied to every commit that won a version it wanted."""
from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any, Collection, Sequence

from skiplake.errors import AppendOnlyTableError, ConcurrentWriteException, SchemaMismatchError
from skiplake.log.actions import Action, CommitInfo, DomainMetadata, Metadata, Protocol, RemoveFile, now_ms
from skiplake.log.changes import reserved_columns
from skiplake.log.commit_files import ENGINE_INFO, CommitResult, put_commit, put_first_commit
from skiplake.log.features import change_data_feed_enabled, flag
from skiplake.log.snapshot import Snapshot
from skiplake.txn.conflicts import check_winner
from skiplake.txn.isolation import SERIALIZABLE, SNAPSHOT_ISOLATION, is_rearrangement, isolation_level
from skiplake.txn.read_set import ReadSet
from skiplake.txn.row_tracking import DOMAIN as ROW_DOMAIN
from skiplake.txn.row_tracking import PRESERVED_TAG, RowIds, assigns_ids, high_water_mark, preserved

APPEND_ONLY = "delta.appendOnly"


def commit(snapshot: Snapshot, actions: list[Action], operation: str,
           operation_parameters: dict[str, Any] | None = None, read_set: ReadSet | None = None,
           operation_metrics: dict[str, str] | None = None, isolation: str | None = None,
           max_attempts: int = 10_000, exclusive: bool = False, ids_kept: Collection[str] = ()) -> CommitResult:
    """Commit `actions` on top of `snapshot`, retrying past winners that do not conflict with
    what `read_set` says this transaction read (at the table's isolation level). An `exclusive`
    commit (RESTORE, as Delta's large commits) must directly follow `snapshot`: any commit made
    since is a ConcurrentWriteException, and it commits as Serializable. `ids_kept` names the
    new files whose rows are new or kept their row ids (row tracking's preserved tag)."""
    _check_writable_by(snapshot, actions, operation)
    read_set = read_set or ReadSet()
    config = next((a.configuration for a in actions if isinstance(a, Metadata)), snapshot.configuration)
    level = SERIALIZABLE if exclusive else isolation or (
        SNAPSHOT_ISOLATION if is_rearrangement(actions) else isolation_level(config))
    info = CommitInfo(
        timestamp=0, operation=operation, operationParameters=dict(operation_parameters or {}),
        readVersion=snapshot.version, isolationLevel=level, isBlindAppend=not exclusive and _blind(actions, read_set),
        operationMetrics=operation_metrics, engineInfo=ENGINE_INFO, txnId=str(uuid.uuid4()),
    )

    current = list(actions)
    protocol = next((a for a in actions if isinstance(a, Protocol)), snapshot.protocol)
    rows = RowIds(snapshot.table_path, high_water_mark(snapshot.table_path, snapshot.domain(ROW_DOMAIN))) \
        if assigns_ids(protocol, config) else None
    if rows is not None:
        # Delta's commitInfo tags: whether the commit kept the stable row ids of the rows it copied.
        info = replace(info, extra={"tags": {PRESERVED_TAG: str(preserved(actions, ids_kept)).lower()}})

    def check(version: int, winner: list[Action]) -> list[Action]:
        if exclusive:
            raise ConcurrentWriteException(
                f"a concurrent {_operation(winner)} committed version {version} of {snapshot.table_path} after "
                f"version {snapshot.version}, which this {operation} read. Nothing was written: run it again.",
                winning_version=version, winning_operation=_operation(winner))
        # Each winner is checked against the actions as rebased on the winners before it.
        current[:] = check_winner(snapshot, version, winner, current, read_set, level)
        if rows is not None:
            rows.follow(winner)
        return current

    return put_commit(snapshot, info, actions, check, max_attempts, rows.assign if rows is not None else None)


def _blind(actions: list[Action], read_set: ReadSet) -> bool:
    """A blind append read nothing and only adds files."""
    return read_set.empty and not any(isinstance(a, (RemoveFile, Metadata, Protocol, DomainMetadata)) for a in actions)


def _check_writable_by(snapshot: Snapshot, actions: list[Action], operation: str) -> None:
    """The table's rules on what a commit may do: no change feed column names, nothing removed
    from an append-only table."""
    new_metadata = next((a for a in actions if isinstance(a, Metadata)), None)
    if new_metadata is not None:
        check_change_columns(snapshot.table_path, new_metadata)
    if _removes_data(actions) and flag(snapshot.configuration, APPEND_ONLY):
        raise AppendOnlyTableError(snapshot.table_path, operation)


def check_change_columns(table_path: str, metadata: Metadata) -> None:
    """A table with the change data feed on cannot have the columns a change read adds."""
    if change_data_feed_enabled(metadata.configuration):
        clash = reserved_columns(metadata.schema)
        if clash:
            raise SchemaMismatchError(table_path, [f"column {c!r} is a name the change data feed adds to its rows"
                                                   for c in clash],
                                      "Rename the column, or leave delta.enableChangeDataFeed off.")


def _removes_data(actions: list[Action]) -> bool:
    """Whether a commit logically deletes rows: a data-changing remove (a file marked by a
    deletion vector is removed and added again, so it counts too)."""
    return any(isinstance(a, RemoveFile) and a.dataChange for a in actions)


def _operation(actions: list[Action]) -> str:
    info = next((a for a in actions if isinstance(a, CommitInfo)), None)
    return info.operation if info else "commit"


def create(table_path: str, metadata: Metadata, protocol: Protocol | None = None,
           actions: Sequence[Action] | None = None, operation: str = "CREATE TABLE",
           operation_parameters: dict[str, Any] | None = None,
           operation_metrics: dict[str, str] | None = None) -> Snapshot:
    """Write version 0 of a new table (TableAlreadyExistsError if another creator won)."""
    check_change_columns(table_path, metadata)
    if actions and assigns_ids(protocol or Protocol(1, 2), metadata.configuration):
        actions = RowIds(table_path, -1).assign(0, actions)
    info = CommitInfo(timestamp=now_ms(), operation=operation,
                      operationParameters=dict(operation_parameters or {}),
                      isolationLevel=isolation_level(metadata.configuration), isBlindAppend=not actions,
                      operationMetrics=operation_metrics, engineInfo=ENGINE_INFO, txnId=str(uuid.uuid4()))
    return put_first_commit(table_path, info, protocol or Protocol(1, 2), metadata, actions)
