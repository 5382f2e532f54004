"""Optimistic commits: put-if-absent of the next version, conflict checks against each winner, retry.

A transaction records what it read (predicates, files, the whole table, app ids). When its
version was taken, each winning commit is checked in order, as Delta does: protocol, metadata,
app-transaction ids, files added that this transaction should have seen, files deleted that it
read, files both deleted. With no logical conflict the commit moves to the next free version.
"""
from __future__ import annotations

import dataclasses
import logging
import uuid
from dataclasses import dataclass, field

from skiplake.errors import (CommitFailedError, TableAlreadyExistsError, ConcurrentAppendException, ConcurrentDeleteDeleteException,
                             ConcurrentDeleteReadException, ConcurrentTransactionException,
                             MetadataChangedException, ProtocolChangedException)
from skiplake.skipping.metrics import file_lookup, may_match
from skiplake.expr.tree import Node
from skiplake.layout.partitioning import partition_dir
from skiplake.log.actions import (Action, AddFile, CommitInfo, Metadata, Protocol, RemoveFile, Txn,
                                  encode_commit, now_ms)
from skiplake.log.checkpoint import checkpoint_interval, write_checkpoint
from skiplake.log.schema import Schema
from skiplake.log.snapshot import Snapshot, check_writable, commit_name, log_storage, read_commit

log = logging.getLogger("skiplake.commit")

ISOLATION_PROPERTY = "delta.isolationLevel"
SERIALIZABLE = "Serializable"
WRITE_SERIALIZABLE = "WriteSerializable"
SNAPSHOT_ISOLATION = "SnapshotIsolation"
ENGINE_INFO = "skiplake/0.1.0"


def isolation_level(configuration: dict[str, str]) -> str:
    value = configuration.get(ISOLATION_PROPERTY, WRITE_SERIALIZABLE)
    return SERIALIZABLE if value.lower() == "serializable" else WRITE_SERIALIZABLE


@dataclass
class ReadSet:
    """What a transaction read, which decides what concurrent commits it conflicts with."""
    predicates: list[Node] = field(default_factory=list)
    files: set[str] = field(default_factory=set)
    whole_table: bool = False
    app_ids: set[str] = field(default_factory=set)

    @property
    def empty(self) -> bool:
        return not (self.predicates or self.files or self.whole_table)


@dataclass(frozen=True)
class CommitResult:
    version: int
    attempts: int
    checkpointed: bool


def _where(table: str, partition_columns: list[str], add: AddFile | RemoveFile) -> str:
    pv = add.partitionValues or {}
    if partition_columns and pv:
        return f"partition {partition_dir(partition_columns, pv)!r} of {table}"
    return table


def is_rearrangement(actions: list[Action]) -> bool:
    """True for a commit that only moves rows between files (OPTIMIZE: every add and remove has
    dataChange=false). Such a commit is checked at snapshot isolation, as in Delta. A transaction
    that read data but changed nothing is not one: its (empty) result is still a claim about the
    rows it read, checked at the table's isolation level (stricter than Delta, which lets an
    empty DELETE slip past a concurrent append under Serializable)."""
    files = [a for a in actions if isinstance(a, (AddFile, RemoveFile))]
    return bool(files) and not any(a.dataChange for a in files)


def check_writable_snapshot(snapshot: Snapshot) -> None:
    check_writable(snapshot.table_path, snapshot.protocol)


def check_winner(snapshot: Snapshot, winner_version: int, winner: list[Action], actions: list[Action],
                 read_set: ReadSet, isolation: str) -> None:
    """Raise the exception Delta's conflict checker raises for this winner, or return if compatible."""
    info = next((a for a in winner if isinstance(a, CommitInfo)), None)
    op = info.operation if info else "an unknown operation"
    won = f"a concurrent {op} committed version {winner_version} of {snapshot.table_path}"
    kw = {"winning_version": winner_version, "winning_operation": op}
    parts = snapshot.partition_columns
    if any(isinstance(a, Protocol) for a in winner):
        raise ProtocolChangedException(
            f"{won} and changed the protocol version; this transaction read the old protocol. "
            "Retry the operation on the new version.", **kw)
    if any(isinstance(a, Metadata) for a in winner):
        raise MetadataChangedException(
            f"{won} and changed the table metadata (schema, partitioning or properties). "
            "Retry the operation against the new metadata.", **kw)
    ours_txn = {a.appId for a in actions if isinstance(a, Txn)} | read_set.app_ids
    for a in winner:
        if isinstance(a, Txn) and a.appId in ours_txn:
            raise ConcurrentTransactionException(
                f"{won} and wrote application transaction {a.appId!r} (version {a.version}), which this "
                "transaction also writes. Two jobs with the same app id ran at once: give each its own.", **kw)

    our_removes = {a.path for a in actions if isinstance(a, RemoveFile)}
    rearranges_only = is_rearrangement(actions)
    blind_append = read_set.empty and not our_removes
    if blind_append:
        return

    schema: Schema = snapshot.schema
    winner_blind = bool(info and info.isBlindAppend)
    if not rearranges_only and not (isolation == WRITE_SERIALIZABLE and winner_blind):
        for a in winner:
            if not (isinstance(a, AddFile) and a.dataChange):
                continue
            lookup = file_lookup(schema, a.partitionValues, a.stats)
            if read_set.whole_table or any(may_match(p, lookup) for p in read_set.predicates):
                hint = (" Under WriteSerializable (the default) a blind append like this one would not "
                        "conflict." if winner_blind and isolation == SERIALIZABLE else "")
                raise ConcurrentAppendException(
                    f"{won} and added files to {_where(snapshot.table_path, parts, a)} that this "
                    f"transaction's read (isolation level {isolation}) would have seen. Make the two "
                    "operations touch disjoint partitions, or state the partition explicitly in the "
                    f"operation's condition (in MERGE, in the ON clause).{hint}", **kw)
    for a in winner:
        if not isinstance(a, RemoveFile):
            continue
        if a.path in read_set.files or read_set.whole_table:
            raise ConcurrentDeleteReadException(
                f"{won} and removed a file that this transaction read ({a.path} in "
                f"{_where(snapshot.table_path, parts, a)}). Retry the operation; to avoid this, let "
                "concurrent operations touch disjoint partitions.", **kw)
        if a.path in our_removes:
            raise ConcurrentDeleteDeleteException(
                f"{won} and removed a file that this transaction also removes ({a.path} in "
                f"{_where(snapshot.table_path, parts, a)}). Retry the operation on the new version.", **kw)


def commit(snapshot: Snapshot, actions: list[Action], operation: str,
           operation_parameters: dict | None = None, read_set: ReadSet | None = None,
           operation_metrics: dict[str, str] | None = None, isolation: str | None = None,
           max_attempts: int = 10_000) -> CommitResult:
    """Commit `actions` on top of `snapshot`, retrying past non-conflicting winners."""
    read_set = read_set or ReadSet()
    storage = snapshot.storage
    config = next((a.configuration for a in actions if isinstance(a, Metadata)), snapshot.configuration)
    level = isolation or (SNAPSHOT_ISOLATION if is_rearrangement(actions) else isolation_level(config))
    blind = read_set.empty and not any(isinstance(a, (RemoveFile, Metadata, Protocol)) for a in actions)
    info = CommitInfo(
        timestamp=0, operation=operation, operationParameters=dict(operation_parameters or {}),
        readVersion=snapshot.version, isolationLevel=level, isBlindAppend=blind,
        operationMetrics=operation_metrics, engineInfo=ENGINE_INFO, txnId=str(uuid.uuid4()),
    )
    attempt = snapshot.version + 1
    for attempts in range(1, max_attempts + 1):
        stamped = dataclasses.replace(info, timestamp=now_ms())
        if storage.put_if_absent(commit_name(attempt), encode_commit([stamped, *actions])):
            return CommitResult(attempt, attempts, _maybe_checkpoint(snapshot, attempt))
        v = attempt
        while storage.exists(commit_name(v)):
            check_winner(snapshot, v, read_commit(storage, v), actions, read_set, level)
            v += 1
        log.info("version %d was taken; no conflict with versions %d..%d, retrying at %d",
                 attempt, attempt, v - 1, v)
        attempt = v
    raise CommitFailedError(f"gave up committing to {snapshot.table_path} after {max_attempts} attempts")


def _maybe_checkpoint(snapshot: Snapshot, version: int) -> bool:
    if version == 0 or version % checkpoint_interval(snapshot) != 0:
        return False
    try:
        fresh = Snapshot.load(snapshot.table_path, version, snapshot.storage)
        return write_checkpoint(snapshot.storage, fresh)
    except Exception as e:  # the commit stands; a missing checkpoint only slows later loads
        log.warning("checkpoint at version %d of %s failed: %s", version, snapshot.table_path, e)
        return False


def create(table_path: str, metadata: Metadata, protocol: Protocol | None = None,
           actions: list[Action] | None = None, operation: str = "CREATE TABLE",
           operation_parameters: dict | None = None) -> Snapshot:
    """Write version 0. Exactly one of several concurrent creators wins; the others get
    TableAlreadyExistsError and nothing of theirs is written."""
    storage = log_storage(table_path)
    protocol = protocol or Protocol(1, 2)
    info = CommitInfo(timestamp=now_ms(), operation=operation,
                      operationParameters=dict(operation_parameters or {}),
                      isolationLevel=isolation_level(metadata.configuration), isBlindAppend=not actions,
                      engineInfo=ENGINE_INFO,
                      txnId=str(uuid.uuid4()))
    if not storage.put_if_absent(commit_name(0), encode_commit([info, protocol, metadata, *(actions or [])])):
        raise TableAlreadyExistsError(table_path)
    return Snapshot.load(table_path, 0, storage)
