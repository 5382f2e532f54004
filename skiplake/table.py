"""Table and Transaction: the user-facing API over the log, the layout and Spark.

Every operation runs as a Transaction: it pins the latest snapshot, records what it reads,
writes new files through Spark, and commits add/remove actions in one put-if-absent.
A Table object is pinned to one snapshot for reads; writes start from the latest version and
move the Table to the version they committed.
"""
from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from skiplake.errors import (FilesVacuumedError, InvalidArgumentError, NotATableError, SchemaMismatchError,
                             TimestampNotFoundError, VersionNotFoundError)
from skiplake.expr.parse import bind
from skiplake.expr.tree import Node
from skiplake.log.actions import Action, AddFile, CommitInfo, Metadata, RemoveFile, Txn, now_ms
from skiplake.log.commit import ReadSet, check_writable_snapshot, commit, create, isolation_level
from skiplake.log.schema import Field, Schema
from skiplake.log.snapshot import (Snapshot, add_files_from_arrow, commit_timestamps, list_log, log_storage,
                                   read_commit)
from skiplake.layout.bucket_spec import BucketSpec, bucket_spec_of, files_without_bucket_ids
from skiplake.log.paths import absolute_path
from skiplake.skipping.plan import ScanPlan, plan_scan, stats_table
from skiplake.spark.read import read_files
from skiplake.spark.session import ensure_conf
from skiplake.spark.types import conform, from_spark, schema_differences, to_spark
from skiplake.spark.write import WriteOptions, write_files
from skiplake.layout.partitioning import check_partition_types


@dataclass(frozen=True)
class CommitOutcome:
    version: int
    operation: str
    metrics: dict[str, str]


def _as_schema(schema: StructType | Schema | str, spark: SparkSession | None = None) -> Schema:
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, StructType):
        return from_spark(schema)
    if isinstance(schema, str):
        return from_spark(StructType.fromDDL(schema)) if spark is None else from_spark(
            spark.createDataFrame([], schema).schema)
    raise InvalidArgumentError(f"a schema must be a StructType, a DDL string or a skiplake Schema, not {type(schema)}")


class Table:
    def __init__(self, spark: SparkSession, path: str, snapshot: Snapshot, pinned: bool = False) -> None:
        self.spark = spark
        self.path = path
        self._snapshot: Snapshot | None = snapshot
        self._version = snapshot.version
        self._pinned = pinned  # opened at a past version or timestamp: read-only
        ensure_conf(spark)

    # ------------------------------------------------------------------ opening

    @staticmethod
    def open(spark: SparkSession, path: str, version: int | None = None,
             timestamp: str | dt.datetime | None = None) -> "Table":
        path = os.path.abspath(path)
        if version is not None and timestamp is not None:
            raise InvalidArgumentError("give either version= or timestamp=, not both")
        if timestamp is not None:
            version = version_at(path, timestamp)
        snapshot = Snapshot.load(path, version)
        return Table(spark, path, snapshot, pinned=version is not None)

    @staticmethod
    def create(spark: SparkSession, path: str, schema: StructType | Schema | str,
               partition_by: Sequence[str] | None = None, bucket_by: BucketSpec | None = None,
               properties: Mapping[str, str] | None = None, name: str | None = None,
               description: str | None = None) -> "Table":
        path = os.path.abspath(path)
        sch = _as_schema(schema, spark)
        parts = [sch.field(c).name if sch.find(c) else c for c in (partition_by or [])]
        missing = [c for c in parts if sch.find(c) is None]
        if missing:
            raise SchemaMismatchError(path, [f"partition column {c!r} is not in the schema" for c in missing],
                                      "Partition by columns of the schema.")
        check_partition_types(path, sch, parts)
        if len(parts) == len(sch.fields) and parts:
            raise InvalidArgumentError(f"{path}: a table needs at least one column that is not a partition column")
        config = {k: str(v) for k, v in (properties or {}).items()}
        reserved = sorted(k for k in config if k.startswith("skiplake.bucketing."))
        if reserved:
            raise InvalidArgumentError(f"{path}: give the bucketing as bucket_by=BucketSpec(...), "
                                       f"not as properties {reserved}")
        if bucket_by is not None:
            if not isinstance(bucket_by, BucketSpec):
                raise InvalidArgumentError(f"{path}: bucket_by must be a skiplake.BucketSpec, not {type(bucket_by)}")
            bucket_by = bucket_by.resolved(path, sch, parts)
            config.update(bucket_by.to_configuration())
        level = config.get("delta.isolationLevel")
        if level is not None and level not in ("Serializable", "WriteSerializable"):
            raise InvalidArgumentError(
                f"delta.isolationLevel must be Serializable or WriteSerializable, not {level!r}")
        metadata = Metadata.new(sch, parts, config, name=name, description=description)
        snapshot = create(path, metadata, operation_parameters={
            "partitionBy": parts, "properties": config, "isManaged": "false"})
        return Table(spark, path, snapshot)

    # ------------------------------------------------------------------ properties

    @property
    def snapshot(self) -> Snapshot:
        # Loaded on first use after a commit, so a chain of writes does not pay a load per commit.
        if self._snapshot is None:
            self._snapshot = Snapshot.load(self.path, self._version)
        return self._snapshot

    @property
    def version(self) -> int:
        return self._version

    @property
    def schema(self) -> StructType:
        return to_spark(self.snapshot.schema)

    @property
    def log_schema(self) -> Schema:
        return self.snapshot.schema

    @property
    def partition_by(self) -> list[str]:
        return self.snapshot.partition_columns

    @property
    def bucket_spec(self) -> BucketSpec | None:
        return bucket_spec_of(self.snapshot.configuration)

    @property
    def properties(self) -> dict[str, str]:
        return self.snapshot.configuration

    @property
    def isolation_level(self) -> str:
        return isolation_level(self.properties)

    def refresh(self) -> "Table":
        if not self._pinned:
            self._snapshot = Snapshot.load(self.path)
            self._version = self._snapshot.version
        return self

    def __repr__(self) -> str:
        return f"Table({self.path!r}, version={self.version})"

    # ------------------------------------------------------------------ reads

    def scan(self, where: str | None = None) -> ScanPlan:
        return plan_scan(self.snapshot, where)

    def read(self, where: str | None = None, columns: Sequence[str] | None = None,
             version: int | None = None, timestamp: str | dt.datetime | None = None) -> DataFrame:
        """The rows of the pinned snapshot (or of version/timestamp), pruned by `where`."""
        table = self if version is None and timestamp is None else Table.open(
            self.spark, self.path, version, timestamp)
        plan = table.scan(where)
        if table._pinned:
            missing = [f.path for f in plan.files if not os.path.exists(absolute_path(self.path, f.path))]
            if missing:
                raise FilesVacuumedError(self.path, table.version, missing)
        return _rows_of(self.spark, table.snapshot, plan.files, where, columns)

    def to_df(self) -> DataFrame:
        return self.read()

    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """commitInfo of each version, newest first."""
        storage = log_storage(self.path)
        listing = list_log(storage)
        out = []
        for v in sorted(listing.commits, reverse=True)[:limit]:
            info: dict[str, Any] = {"version": v}
            for a in read_commit(storage, v):
                if isinstance(a, CommitInfo):
                    info.update(a.to_json())
            info.setdefault("timestamp", listing.commits[v].mtime_ms)
            out.append(info)
        return out

    # ------------------------------------------------------------------ writes

    def begin(self) -> "Transaction":
        if self._pinned:
            raise InvalidArgumentError(
                f"{self.path} was opened at version {self.version} for time travel and is read-only; "
                "open it without version=/timestamp= to write.")
        return Transaction(self, Snapshot.load(self.path))

    def _finish(self, version: int) -> None:
        self._version = version
        self._snapshot = None

    def append(self, df: DataFrame, merge_schema: bool = False, app_id: str | None = None,
               app_version: int | None = None, options: WriteOptions | None = None) -> int:
        """Add the rows of `df`. With app_id/app_version, a version already committed is skipped
        (idempotent retries of a job). Returns the committed version."""
        from skiplake.spark import dml
        return dml.append(self, df, merge_schema, app_id, app_version, options)

    def overwrite(self, df: DataFrame, where: str | None = None, merge_schema: bool = False,
                  options: WriteOptions | None = None) -> int:
        """Replace the whole table, or only the rows matching `where` (replaceWhere)."""
        from skiplake.spark import dml
        return dml.overwrite(self, df, where, merge_schema, options)

    def delete(self, where: str | None = None) -> int:
        from skiplake.spark import dml
        return dml.delete(self, where)

    def update(self, where: str | None, set: Mapping[str, str]) -> int:
        from skiplake.spark import dml
        return dml.update(self, where, set)

    def merge(self, source: DataFrame, on: str, *, source_alias: str = "source", target_alias: str = "target",
              when_matched_update: Mapping[str, str] | str | None = None,
              when_matched_update_condition: str | None = None,
              when_matched_delete: bool | str = False,
              when_not_matched_insert: Mapping[str, str] | str | None = None,
              when_not_matched_insert_condition: str | None = None) -> int:
        """MERGE INTO this table USING `source` ON `on`.

        Matched rows are deleted (when_matched_delete: True, or a condition) else updated
        (when_matched_update: {column: expression} or "*"); unmatched source rows are inserted
        (when_not_matched_insert: {column: expression} or "*"). Expressions name columns as
        `target.col` / `source.col` (or the aliases given).
        """
        from skiplake.spark import dml
        return dml.merge(self, source, on, source_alias, target_alias, when_matched_update,
                         when_matched_update_condition, when_matched_delete, when_not_matched_insert,
                         when_not_matched_insert_condition)

    def optimize(self, where: str | None = None, zorder_by: Sequence[str] | None = None,
                 target_file_size: int = 128 * 1024 * 1024, min_files: int = 2,
                 progress: Callable[[str], None] | None = None) -> "OptimizeResult":
        """Bin-pack small files, or with zorder_by cluster the files by those columns.
        `progress` receives one line per stage of a long rewrite."""
        from skiplake.spark.optimize import optimize
        return optimize(self, where, zorder_by, target_file_size, min_files, progress=progress)

    def vacuum(self, retention_hours: float = 168, dry_run: bool = False, force: bool = False) -> "VacuumResult":
        from skiplake.vacuum import vacuum
        return vacuum(self.path, retention_hours, dry_run, force)


def version_at(path: str, timestamp: str | dt.datetime) -> int:
    """The last version committed at or before `timestamp` (naive timestamps are UTC)."""
    if isinstance(timestamp, str):
        from skiplake.expr.values import parse_timestamp
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


class Transaction:
    """A low-level transaction pinned to one snapshot. Reads are recorded for conflict checks."""

    def __init__(self, table: Table, snapshot: Snapshot) -> None:
        check_writable_snapshot(snapshot)
        self.table = table
        self.snapshot = snapshot
        self.read_set = ReadSet()
        self.actions: list[Action] = []
        self.new_metadata: Metadata | None = None
        self.committed_version: int | None = None
        self._staged: tuple[str, dict[str, Any], dict[str, Any]] | None = None
        self.removed_files: list[AddFile] = []

    @property
    def spark(self) -> SparkSession:
        return self.table.spark

    @property
    def path(self) -> str:
        return self.table.path

    @property
    def schema(self) -> Schema:
        return (self.new_metadata or self.snapshot.metadata).schema

    @property
    def partition_columns(self) -> list[str]:
        return self.snapshot.partition_columns

    # ---- reads

    def scan(self, where: str | Node | None = None) -> ScanPlan:
        plan = plan_scan(self.snapshot, where)
        if plan.predicate is None:
            self.read_set.whole_table = True
        else:
            self.read_set.predicates.append(plan.predicate)
        self.read_set.files.update(f.path for f in plan.files)
        return plan

    def read(self, where: str | None = None, columns: Sequence[str] | None = None) -> DataFrame:
        return _rows_of(self.spark, self.snapshot, self.scan(where).files, where, columns)

    def read_whole_table(self) -> DataFrame:
        return self.read(None)

    def read_files(self, files: Sequence[AddFile]) -> DataFrame:
        self.read_set.files.update(f.path for f in files)
        return read_files(self.spark, self.path, self.snapshot.schema, self.partition_columns, files)

    def read_app_version(self, app_id: str) -> int | None:
        self.read_set.app_ids.add(app_id)
        return self.snapshot.txn_version(app_id)

    # ---- writes

    def prepare(self, df: DataFrame, merge_schema: bool = False) -> DataFrame:
        """Check `df` against the schema (adding new columns when merge_schema) and conform it."""
        incoming = from_spark(df.schema)
        problems, new_fields = schema_differences(self.schema, incoming, merge_schema)
        dupes = {c.lower() for c in df.columns if [x.lower() for x in df.columns].count(c.lower()) > 1}
        problems += [f"column {c!r} appears more than once" for c in sorted(dupes)]
        if problems:
            raise SchemaMismatchError(self.path, problems)
        if new_fields:
            base = self.new_metadata or self.snapshot.metadata
            schema = Schema(self.schema.fields + tuple(new_fields))
            self.new_metadata = Metadata(base.id, schema.json_string(), base.partitionColumns,
                                         base.configuration, base.name, base.description, base.format,
                                         base.createdTime)
        return conform(df, self.schema)

    def write(self, df: DataFrame, data_change: bool = True, options: WriteOptions | None = None,
              tags: dict[str, str] | None = None) -> list[AddFile]:
        """Write an already conformed DataFrame as new files; they join the commit."""
        spec = bucket_spec_of(self.snapshot.configuration)
        # Only a bucketed write sizes its files by bytes per row (which parses every file's stats).
        adds = write_files(df, self.path, self.schema, self.partition_columns, options, data_change, tags,
                           spec, self._bytes_per_row() if spec is not None else None)
        self.actions.extend(adds)
        return adds

    def _bytes_per_row(self) -> float | None:
        """The snapshot's average stored bytes per row, which sizes bucket files (None when unknown)."""
        records = stats_table(self.snapshot).num_records
        if not len(records) or np.isnan(records).any() or records.sum() == 0:
            return None
        return float(self.snapshot.files.column("size").to_numpy().sum() / records.sum())

    def append(self, df: DataFrame, merge_schema: bool = False, options: WriteOptions | None = None) -> list[AddFile]:
        return self.write(self.prepare(df, merge_schema), options=options)

    def remove(self, paths: Sequence[str] | Sequence[AddFile], data_change: bool = True) -> None:
        """Remove live files (by path or AddFile) in this transaction."""
        keys = [p.path if isinstance(p, AddFile) else p for p in paths]
        if not keys:
            return
        # Look up only the named paths in the snapshot's Arrow table, not every live file.
        files = self.snapshot.files
        found = add_files_from_arrow(files.filter(pc.is_in(files.column("path"), value_set=pa.array(keys))))
        by_path = {f.path: f for f in found}
        missing = [k for k in keys if k not in by_path]
        if missing:
            raise InvalidArgumentError(
                f"{missing[0]} is not a live file of {self.path} at version {self.snapshot.version}")
        ts = now_ms()
        for key in keys:
            self.removed_files.append(by_path[key])
            self.actions.append(by_path[key].remove(ts, data_change))

    def set_app_version(self, app_id: str, version: int) -> None:
        self.actions.append(Txn(app_id, version, now_ms()))

    def stage(self, operation: str, parameters: Mapping[str, Any] | None = None,
              metrics: Mapping[str, Any] | None = None) -> "Transaction":
        """Record what commit() will say about this transaction, without committing yet."""
        self._staged = (operation, dict(parameters or {}), dict(metrics or {}))
        return self

    def commit(self, operation: str | None = None, parameters: Mapping[str, Any] | None = None,
               metrics: Mapping[str, Any] | None = None) -> int:
        """Commit at the next free version; raises a ConcurrentModificationError subclass on a
        logical conflict with a commit made since this transaction's snapshot."""
        if operation is None:
            operation, staged_params, staged_metrics = self._staged or ("WRITE", {}, {})
            parameters = parameters if parameters is not None else staged_params
            metrics = metrics if metrics is not None else staged_metrics
        actions: list[Action] = list(self.actions)
        if self.new_metadata is not None:
            actions.insert(0, self.new_metadata)
        computed = _metrics(actions)
        computed.update({k: str(v) for k, v in (metrics or {}).items()})
        result = commit(self.snapshot, actions, operation, dict(parameters or {}), self.read_set, computed)
        self.committed_version = result.version
        self.table._finish(result.version)
        return result.version


def _rows_of(spark: SparkSession, snapshot: Snapshot, files: Sequence[AddFile], where: str | None,
             columns: Sequence[str] | None) -> DataFrame:
    """The rows of planned files that satisfy `where` (pruning only skips files; Spark filters rows).

    A bucketed table's files are declared to Spark as buckets when they all carry bucket ids, so
    joins and aggregations of such reads on the bucket columns need no shuffle either (Spark
    drops the bucketed scan where it does not help)."""
    # read_files declares the buckets only where it reads the files as one Hive-style relation.
    spec = bucket_spec_of(snapshot.configuration)
    if spec is not None and files_without_bucket_ids(files, spec):
        spec = None
    df = read_files(spark, snapshot.table_path, snapshot.schema, snapshot.partition_columns, files,
                    bucket_spec=spec)
    if where:
        df = df.filter(where)
    return df.select(*[f"`{c}`" for c in columns]) if columns else df


def _metrics(actions: list[Action]) -> dict[str, str]:
    adds = [a for a in actions if isinstance(a, AddFile)]
    removes = [a for a in actions if isinstance(a, RemoveFile)]
    rows = 0
    for a in adds:
        rows += a.num_records or 0
    return {"numAddedFiles": str(len(adds)), "numRemovedFiles": str(len(removes)),
            "numOutputRows": str(rows), "numAddedBytes": str(sum(a.size for a in adds)),
            "numRemovedBytes": str(sum(r.size or 0 for r in removes))}


from skiplake.spark.optimize import OptimizeResult  # noqa: E402  (type of Table.optimize)
from skiplake.vacuum import VacuumResult  # noqa: E402
