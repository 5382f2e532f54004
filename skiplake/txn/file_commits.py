"""Committing files that a write without Spark made (skiplake.txn.arrow_writes): the `skiplake`
data source's batch writes and its streaming sink's micro-batches. Runs in a Python worker on the
driver, so it reads and writes the log only."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from skiplake.errors import InvalidArgumentError, TableAlreadyExistsError
from skiplake.log.actions import Action, AddFile, Metadata, RemoveFile, Txn, now_ms
from skiplake.log.schema import Schema
from skiplake.log.snapshot import Snapshot, log_storage
from skiplake.log.storage_for import has_log
from skiplake.txn.arrow_writes import discard
from skiplake.txn.commit import commit, create
from skiplake.txn.file_compaction import MIN_FILES, compact_after
from skiplake.txn.identity import identity_columns, with_high_water_marks
from skiplake.txn.read_set import ReadSet


@dataclass(frozen=True)
class AppTransaction:
    """An idempotent write's application id and version (Delta's txnAppId and txnVersion)."""
    app_id: str
    version: int

    @staticmethod
    def of(app_id: str | None, app_version: int | str | None) -> "AppTransaction | None":
        """The pair, or None when neither is given; one without the other is an InvalidArgumentError."""
        if app_id is None and app_version is None:
            return None
        if app_id is None or app_version is None or not str(app_id):
            raise InvalidArgumentError("give app_id and app_version together (txnAppId and txnVersion): an "
                                       "idempotent write needs both")
        try:
            version = int(app_version)
        except ValueError:
            raise InvalidArgumentError(f"app_version (txnVersion) must be a whole number, not {app_version!r}") from None
        return AppTransaction(str(app_id), version)

    def done_in(self, snapshot: Snapshot) -> bool:
        """Whether `snapshot` records this version (or a later one) for the application."""
        done = snapshot.txn_version(self.app_id)
        return done is not None and done >= self.version

    def action(self) -> Txn:
        """The txn action that records the write."""
        return Txn(self.app_id, self.version, now_ms())


class CommittedVersion(int):
    """The version a write committed, as an int; `skipped` is True when the write was an idempotent
    one whose application version was already committed, so it wrote nothing (the version is then
    the table's latest)."""

    skipped: bool

    def __new__(cls, version: int, skipped: bool = False) -> "CommittedVersion":
        """The version `version`, skipped or not."""
        out = super().__new__(cls, version)
        out.skipped = skipped
        return out


@dataclass(frozen=True)
class FileCommit:
    """What a write without Spark commits."""
    table_path: str
    adds: tuple[AddFile, ...]
    overwrite: bool = False
    app: AppTransaction | None = None
    read_version: int | None = None          # the snapshot the write planned on (None: a new table)
    new_schema: Schema | None = None         # a new table's schema
    partition_by: tuple[str, ...] = ()
    operation: str = "WRITE"
    extra_parameters: tuple[tuple[str, str], ...] = ()
    compact_min_files: int = MIN_FILES       # auto compaction's minNumFiles
    # Per identity column, the furthest value each task wrote: the commit moves the high-water mark.
    identity_values: tuple[tuple[str, tuple[int, ...]], ...] = ()


def commit_files(c: FileCommit) -> int | None:
    """Commit the write; the version it made, or None when the application's version was already
    committed (the files are then deleted: they were never part of the table)."""
    if c.read_version is None and not has_log(c.table_path):
        return _create(c)
    latest = Snapshot.load(c.table_path, storage=log_storage(c.table_path))
    if c.app is not None and c.app.done_in(latest):
        discard(c.table_path, c.adds)
        return None
    snapshot = latest if c.read_version is None else Snapshot.load(c.table_path, c.read_version)
    read_set = ReadSet()
    actions: list[Action] = list(c.adds)
    moved = _high_water_marks(snapshot, c.identity_values)
    if moved is not None:
        actions.insert(0, moved)
    if c.overwrite:
        read_set.whole_table = True
        ts = now_ms()
        actions += [f.remove(ts) for f in snapshot.add_files]
    if c.app is not None:
        read_set.app_ids.add(c.app.app_id)
        actions.append(c.app.action())
    mode = "Overwrite" if c.overwrite else "Append"
    params = {"mode": mode, "partitionBy": "[]", **dict(c.extra_parameters)}
    done = commit(snapshot, actions, c.operation, params, read_set, _metrics(c.adds, sum(isinstance(a, RemoveFile) for a in actions)))
    compact_after(c.table_path, list(done.actions), c.compact_min_files)
    return done.version


def _high_water_marks(snapshot: Snapshot, values: tuple[tuple[str, tuple[int, ...]], ...]) -> Metadata | None:
    """The table's metadata with its identity columns' marks past `values`; None when none moves.
    A metaData action: a concurrent writer that moved a mark too makes the commit a conflict."""
    identities = identity_columns(snapshot.schema)
    marks = {}
    for name, written in values:
        identity = identities.get(name)
        mark = identity.past_mark(list(written)) if identity is not None else None
        if mark is not None:
            marks[name] = mark
    if not marks:
        return None
    return replace(snapshot.metadata, schemaString=with_high_water_marks(snapshot.schema, marks).json_string())


def _metrics(adds: Sequence[AddFile], removed: int) -> dict[str, str]:
    """Delta's write metrics of the commit."""
    return {"numFiles": str(len(adds)), "numAddedFiles": str(len(adds)), "numRemovedFiles": str(removed),
            "numOutputRows": str(sum(a.num_records or 0 for a in adds)),
            "numOutputBytes": str(sum(a.size for a in adds))}


def _create(c: FileCommit) -> int:
    assert c.new_schema is not None
    metadata = Metadata.new(c.new_schema, list(c.partition_by), {})
    actions: list[Action] = list(c.adds)
    if c.app is not None:
        actions.append(c.app.action())
    try:
        return create(c.table_path, metadata, actions=actions, operation=c.operation,
                      operation_parameters={"mode": "ErrorIfExists", "partitionBy": list(c.partition_by)},
                      operation_metrics=_metrics(c.adds, 0)).version
    except TableAlreadyExistsError:
        # Another writer created it first: commit on top of what it made.
        return commit_files(FileCommit(c.table_path, c.adds, c.overwrite, c.app, None, None, c.partition_by,
                                       c.operation, c.extra_parameters)) or 0
