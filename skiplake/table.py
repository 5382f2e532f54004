"""Table: the user-facing facade over one Delta table (the log, the planner, Spark's jobs).

A Table is pinned to one snapshot for reads. Every write runs as a Transaction that pins the
latest snapshot, records what it reads, writes new files through Spark and commits add/remove
actions in one put-if-absent; the Table then moves to the version it committed. The work is
done below: skiplake.skipping plans scans, skiplake.spark runs reads, writes, DML and OPTIMIZE,
skiplake.txn and skiplake.log commit.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from skiplake.errors import ConstraintViolationError, FilesVacuumedError, InvalidArgumentError
from skiplake.expr.parse import bind
from skiplake.layout.bucket_spec import BucketSpec, bucket_spec_of
from skiplake.layout.schema_changes import SchemaChangeError, dropped, renamed
from skiplake.log.actions import Metadata, Protocol
from skiplake.log.features import CONSTRAINT_PREFIX, required_protocol
from skiplake.log.history import commits, version_at
from skiplake.log.paths import absolute_path
from skiplake.log.schema import Schema
from skiplake.log.snapshot import Snapshot
from skiplake.log.storage_for import missing
from skiplake.log.vacuum import VacuumResult, vacuum
from skiplake.skipping.log_aggregates import COUNT_ALL, Aggregate, aggregate_from_log
from skiplake.skipping.plan import ScanPlan
from skiplake.spark import merge
from skiplake.spark.convert.in_place import convert
from skiplake.spark.dml import dml_jobs
from skiplake.spark.optimize.auto_compaction import auto_compact
from skiplake.spark.optimize.compaction import DEFAULT_TARGET_FILE_SIZE, optimize
from skiplake.spark.optimize.optimize_result import OptimizeResult
from skiplake.spark.reads.change_feed import read_changes
from skiplake.spark.reads.log_job import aggregate_files, load_snapshot, plan_files
from skiplake.spark.reads.planned_reads import read_planned
from skiplake.spark.reads.row_ids import read_with_row_ids
from skiplake.spark.session.object_stores import use_location
from skiplake.spark.session.session_setup import ensure_conf
from skiplake.spark.session.spark_types import as_schema, to_spark
from skiplake.spark.writes.data_files import WriteOptions
from skiplake.spark.writes.enforcement import first_breaking_row
from skiplake.spark.writes.transaction import Transaction
from skiplake.table_info import TableDetail, table_detail
from skiplake.txn import create
from skiplake.txn.clustering import (
    CLUSTERING_FEATURES,
    check_cluster_by,
    clustering_columns,
    clustering_domain,
    new_table_clustering,
)
from skiplake.txn.constraints import (
    check_constraints,
    constraint_rule,
    refuse_constraint_properties,
    with_constraint,
    with_generated_columns,
    without_constraint,
)
from skiplake.txn.file_commits import CommittedVersion
from skiplake.txn.identity import IdentityColumn, with_identity_columns
from skiplake.txn.isolation import isolation_level
from skiplake.txn.new_table import (
    check_properties,
    partition_columns,
    refuse_bucketing_properties,
    table_properties,
    with_column_mapping,
)
from skiplake.txn.restore import RestoreResult, restore
from skiplake.txn.row_tracking import enabled as row_tracking_enabled
from skiplake.txn.row_tracking import with_column_names

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from skiplake.spark.merge import MergeBuilder

__all__ = ["BucketSpec", "IdentityColumn", "RestoreResult", "Table", "TableDetail", "Transaction"]


class Table:
    """One Delta table: reads see one pinned snapshot, and each write commits a new version and moves
    the Table to it.

    Open one with Table.open, Table.create, Table.convert or Lake.table. A Table opened at a past
    version or timestamp is read-only: a write or RESTORE through it raises InvalidArgumentError. A
    write that conflicts with a concurrent commit raises a ConcurrentModificationError subclass
    (skiplake.errors), and nothing of it is committed."""

    def __init__(self, spark: "SparkSession", path: str, snapshot: Snapshot, pinned: bool = False) -> None:
        """The table at `path` as of `snapshot`, read-only when `pinned`; the session gets the Spark conf
        skiplake needs. Table.open, create and convert make Tables: call those instead."""
        self.spark = spark
        self.path = path
        self._snapshot: Snapshot | None = snapshot
        self._version = snapshot.version
        self._pinned = pinned  # opened at a past version or timestamp: read-only
        ensure_conf(spark)

    # ------------------------------------------------------------------ opening

    @staticmethod
    def open(spark: "SparkSession", path: str, version: int | None = None,
             timestamp: str | dt.datetime | None = None, storage_options: Mapping[str, str] | None = None) -> "Table":
        """The table at `path` (a folder, or s3://bucket/key; storage_options as for Lake)."""
        path = use_location(spark, path, storage_options)
        if version is not None and timestamp is not None:
            raise InvalidArgumentError("give either version= or timestamp=, not both")
        if timestamp is not None:
            version = version_at(path, timestamp)
        snapshot = load_snapshot(spark, path, version)
        return Table(spark, path, snapshot, pinned=version is not None)

    @staticmethod
    def create(spark: "SparkSession", path: str, schema: "StructType | Schema | str",
               partition_by: Sequence[str] | None = None, bucket_by: BucketSpec | None = None,
               properties: Mapping[str, str] | None = None, name: str | None = None,
               description: str | None = None, storage_options: Mapping[str, str] | None = None,
               generated_columns: Mapping[str, str] | None = None,
               identity_columns: Mapping[str, IdentityColumn] | None = None,
               cluster_by: Sequence[str] | None = None) -> "Table":
        """A new table. generated_columns gives columns computed from others (column -> Spark SQL,
        Delta's GENERATED ALWAYS AS): a write that leaves one out gets it computed, one that
        gives it has it checked. identity_columns gives BIGINT columns whose values writes
        assign (column -> IdentityColumn(start, step, always), Delta's GENERATED ... AS IDENTITY).
        cluster_by makes it a clustered table (Delta's liquid clustering, CLUSTER BY): OPTIMIZE
        clusters its new rows by those columns (see docs/clustering.md); not with partition_by."""
        path = use_location(spark, path, storage_options)
        metadata, protocol, clustering = _new_metadata(spark, path, schema, partition_by, bucket_by, properties, name,
                                                       description, generated_columns, identity_columns,
                                                       cluster_by, Protocol(1, 2))
        snapshot = create(path, metadata, protocol, actions=clustering.domains, operation_parameters={
            "partitionBy": list(metadata.partitionColumns), **clustering.operation_parameters,
            "properties": dict(metadata.configuration), "isManaged": "false"})
        return Table(spark, path, snapshot)

    @staticmethod
    def convert(spark: "SparkSession", path: str | None = None,
                partition_by: "Sequence[str] | str | StructType | None" = None,
                bucket_by: BucketSpec | None = None, *, catalog_table: str | None = None,
                properties: Mapping[str, str] | None = None, name: str | None = None,
                description: str | None = None, merge_schema: bool = False, verify_buckets: bool = True,
                footer_job_threshold: int | None = None, storage_options: Mapping[str, str] | None = None,
                progress: Callable[[str], None] | None = None) -> "Table":
        """The Parquet directory at `path` as a table, in place: only `_delta_log/` is written
        (Delta's CONVERT TO DELTA). partition_by names the partition folders' columns (types
        inferred as Spark infers them) or types them as DDL ("d DATE, region STRING");
        bucket_by declares the buckets of a Spark bucketBy table, whose files keep their
        names. catalog_table takes the directory, partition columns and bucket spec of a table
        of the session's catalog instead. A directory that is already a Delta table is opened
        as it is. Refusals (skiplake.errors.ConversionError) write nothing; see docs/convert.md."""
        ensure_conf(spark)
        done = convert(spark, path, partition_by=partition_by, bucket_by=bucket_by, catalog_table=catalog_table,
                       properties=properties, name=name, description=description, merge_schema=merge_schema,
                       verify_buckets=verify_buckets, footer_job_threshold=footer_job_threshold,
                       storage_options=storage_options, progress=progress)
        return Table(spark, done.snapshot.table_path, done.snapshot)

    # ------------------------------------------------------------------ properties

    @property
    def snapshot(self) -> Snapshot:
        """The log's state at `version`, which reads and scans see (loaded again on first use after a commit)."""
        # Loaded on first use after a commit, so a chain of writes does not pay a load per commit.
        if self._snapshot is None:
            self._snapshot = load_snapshot(self.spark, self.path, self._version)
        return self._snapshot

    @property
    def version(self) -> int:
        """The table version this Table reads: the one it was opened at, or the one its last write committed."""
        return self._version

    @property
    def schema(self) -> "StructType":
        """The table's schema as a Spark StructType."""
        return to_spark(self.snapshot.schema)

    @property
    def log_schema(self) -> Schema:
        """The table's schema as the Delta log holds it (a skiplake Schema, with each field's metadata)."""
        return self.snapshot.schema

    @property
    def partition_by(self) -> list[str]:
        """The partition columns, in order ([] for an unpartitioned table)."""
        return self.snapshot.partition_columns

    @property
    def bucket_spec(self) -> BucketSpec | None:
        """The bucket columns, number of buckets and sort columns; None when the table is not bucketed."""
        return bucket_spec_of(self.snapshot.configuration)

    @property
    def properties(self) -> dict[str, str]:
        """The table's properties (Delta's metaData.configuration), e.g. `delta.appendOnly`."""
        return self.snapshot.configuration

    @property
    def clustering_columns(self) -> list[str] | None:
        """The clustering columns of a clustered table ([] when its clustering is off); None
        when the table is not clustered."""
        return clustering_columns(self.snapshot)

    @property
    def isolation_level(self) -> str:
        """`Serializable` or `WriteSerializable` (the default): the level, from `delta.isolationLevel`, at which
        writes are checked against concurrent commits."""
        return isolation_level(self.properties)

    def refresh(self) -> "Table":
        """This Table moved to the table's latest version (one opened at a past version or timestamp stays)."""
        if not self._pinned:
            self._snapshot = load_snapshot(self.spark, self.path)
            self._version = self._snapshot.version
        return self

    def __repr__(self) -> str:
        """`Table('<path>', version=<n>)`."""
        return f"Table({self.path!r}, version={self.version})"

    # ------------------------------------------------------------------ reads

    def scan(self, where: str | None = None) -> ScanPlan:
        """The files a read with `where` must scan, planned from the log: a ScanPlan of the files and a
        report of what partitions, min/max stats and buckets pruned. Planned in the driver, without
        Spark; a table whose checkpoint holds at least spark.skiplake.log.replayJobMinFiles files
        is planned by a Spark job over the checkpoint (the report's `replay` says so).

        A `where` that is not valid Spark SQL or names an unknown column raises InvalidPredicateError."""
        return plan_files(self.spark, self.snapshot, where)

    def read(self, where: str | None = None, columns: Sequence[str] | None = None,
             version: int | None = None, timestamp: str | dt.datetime | None = None,
             with_row_ids: bool = False) -> "DataFrame":
        """The rows of the pinned snapshot (or of version/timestamp), pruned by `where`;
        with_row_ids adds each row's `_row_id` and `_row_commit_version` (a table with row
        tracking enabled: Delta's `_metadata.row_id` and `_metadata.row_commit_version`)."""
        table = self if version is None and timestamp is None else Table.open(
            self.spark, self.path, version, timestamp)
        plan = table.scan(where)
        if table._pinned:
            full = {absolute_path(self.path, f.path): f.path for f in plan.files}
            gone = [full[p] for p in missing(self.path, list(full), plan.report.files_total)]
            if gone:
                raise FilesVacuumedError(self.path, table.version, gone)
        if with_row_ids:
            return read_with_row_ids(self.spark, table.snapshot, plan.files, where, columns)
        return read_planned(self.spark, table.snapshot, plan.files, where, columns)

    def count(self, where: str | None = None) -> int:
        """The number of rows (matching `where`): from the log's row counts where they answer
        exactly (files whose every row `where` keeps, less their deletion vectors' rows), with a
        Spark count of the files they cannot answer (a table past the replay bound: counted by a
        Spark job over its checkpoint, see Table.scan)."""
        snapshot = self.snapshot
        node = bind(where, snapshot.schema) if where is not None else None
        if snapshot.files_pending:
            by_job = aggregate_files(self.spark, snapshot, [Aggregate(COUNT_ALL)], [], node)
            snapshot, aggregation = by_job.unread, by_job.aggregation
        else:
            aggregation = aggregate_from_log(snapshot, [Aggregate(COUNT_ALL)], [], node)
        counted = int(aggregation.groups.get((), [0])[0] or 0)
        if not aggregation.scan.any():
            return counted
        return counted + read_planned(self.spark, snapshot, aggregation.files_to_read(snapshot), where, None).count()

    def changes(self, starting_version: int | None = None, ending_version: int | None = None,
                starting_timestamp: str | dt.datetime | None = None,
                ending_timestamp: str | dt.datetime | None = None) -> "DataFrame":
        """The change data feed of versions starting..ending, both included (delta-spark's
        `table_changes`): the table's columns, then `_change_type` (`insert`, `delete`,
        `update_preimage`, `update_postimage`), `_commit_version` and `_commit_timestamp`. By
        version or by timestamp (UTC when naive): the first version committed at or after the
        starting one, the last at or before the ending one. The start defaults to the oldest
        version in the log, the end to the latest. Every version read must have been written
        with `delta.enableChangeDataFeed=true` (else ChangeDataNotRecordedError)."""
        return read_changes(self.spark, self.path, starting_version, ending_version, starting_timestamp,
                            ending_timestamp)

    def to_df(self) -> "DataFrame":
        """Every row of the pinned snapshot as a DataFrame: `read()` without arguments."""
        return self.read()

    def detail(self) -> TableDetail:
        """DESCRIBE DETAIL: format, id, name, location, partitioning, files, size, properties,
        protocol and table features, deletion vector statistics (`.to_dict()`: Delta's names)."""
        return table_detail(self.snapshot)

    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """commitInfo of each version, newest first."""
        out = []
        for c in commits(self.path, limit):
            info: dict[str, Any] = {"version": c.version}
            if c.info is not None:
                info.update(c.info.to_json())
            info.setdefault("timestamp", c.file_time_ms)
            out.append(info)
        return out

    # ------------------------------------------------------------------ writes

    def _check_writable(self) -> None:
        if self._pinned:
            raise InvalidArgumentError(
                f"{self.path} was opened at version {self.version} for time travel and is read-only; "
                "open it without version=/timestamp= to write.")

    def begin(self) -> Transaction:
        """A Transaction on the latest snapshot, for a write of several steps; its commit moves this Table
        to the version it made. Raises InvalidArgumentError on a Table opened for time travel."""
        self._check_writable()
        return Transaction(self.spark, load_snapshot(self.spark, self.path), on_commit=self._moved_to)

    def _moved_to(self, version: int) -> None:
        self._version = version
        self._snapshot = None

    def append(self, df: "DataFrame", merge_schema: bool = False, app_id: str | None = None,
               app_version: int | None = None, options: WriteOptions | None = None) -> int:
        """Add the rows of `df`. Returns the committed version.

        Every write takes app_id/app_version (Delta's txnAppId/txnVersion), both or neither: a
        version at or below the one the table records for the application writes nothing, and
        the returned version's `skipped` is True (a CommittedVersion), so retries of a job, and
        foreachBatch writes replayed after a failure, commit once."""
        txn = self.begin()
        return _committed(self, dml_jobs.append(txn, df, merge_schema, app_id, app_version, options))

    def transaction_version(self, app_id: str) -> int | None:
        """The latest version application `app_id` committed to the table (its txn action), or None."""
        return load_snapshot(self.spark, self.path).txn_version(app_id)

    def overwrite(self, df: "DataFrame", where: str | None = None, merge_schema: bool = False,
                  options: WriteOptions | None = None, app_id: str | None = None,
                  app_version: int | None = None) -> int:
        """Replace the whole table, or only the rows matching `where` (replaceWhere); app_id and
        app_version as for append."""
        txn = self.begin()
        if not txn.claim_app_version(app_id, app_version):
            return _committed(self, txn)
        return _committed(self, dml_jobs.overwrite(txn, df, where, merge_schema, options))

    def delete(self, where: str | None = None, app_id: str | None = None, app_version: int | None = None) -> int:
        """DELETE the rows matching `where` (every row when None); returns the version committed.

        Files whose stats show that every row matches are removed whole; of the others, with deletion
        vectors enabled the matching rows are marked deleted (a file mostly deleted is rewritten),
        otherwise each file holding one is rewritten without them. A bad `where` raises
        InvalidPredicateError; an append-only table, AppendOnlyTableError. app_id and app_version
        as for append."""
        txn = self.begin()
        if not txn.claim_app_version(app_id, app_version):
            return _committed(self, txn)
        return _committed(self, dml_jobs.delete(txn, where))

    def update(self, where: str | None, set: Mapping[str, str], app_id: str | None = None,
               app_version: int | None = None) -> int:
        """UPDATE the rows matching `where` (every row when None): `set` maps columns to Spark SQL
        expressions over the row, cast to the column's type. Returns the version committed.

        An empty `set` or one naming an identity column raises InvalidArgumentError, an unknown
        column SchemaMismatchError, a bad `where` InvalidPredicateError, an append-only table
        AppendOnlyTableError. app_id and app_version as for append."""
        txn = self.begin()
        if not txn.claim_app_version(app_id, app_version):
            return _committed(self, txn)
        return _committed(self, dml_jobs.update(txn, where, set))

    def merge(self, source: "DataFrame", on: str, *, source_alias: str = "source", target_alias: str = "target",
              when_matched_update: Mapping[str, str] | str | None = None,
              when_matched_update_condition: str | None = None,
              when_matched_delete: bool | str = False,
              when_not_matched_insert: Mapping[str, str] | str | None = None,
              when_not_matched_insert_condition: str | None = None, app_id: str | None = None,
              app_version: int | None = None) -> "int | MergeBuilder":
        """MERGE INTO this table USING `source` ON `on`.

        Without clause keywords, a builder of ordered clauses (see docs/merge.md):
        `t.merge(src, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all()
        .execute()` returns a MergeResult. With the keywords (at most one clause of each kind:
        delete, else update, for matched rows; insert for unmatched source rows) it runs at once
        and returns the version committed; app_id and app_version as for append (the builder's
        execute() takes them too)."""
        keywords = (when_matched_update, when_matched_delete, when_not_matched_insert)
        if not any(keywords) and when_matched_update_condition is None and when_not_matched_insert_condition is None:
            return merge.MergeBuilder(self.begin, source, merge.MergeSpec(on, source_alias=source_alias,
                                                                          target_alias=target_alias),
                                      after_commit=lambda txn: auto_compact(txn, self.begin))
        clauses = merge.MergeClauses(on, source_alias, target_alias, when_matched_update,
                                     when_matched_update_condition, when_matched_delete, when_not_matched_insert,
                                     when_not_matched_insert_condition)
        txn = self.begin()
        if not txn.claim_app_version(app_id, app_version):
            return _committed(self, txn)
        return _committed(self, merge.merge(txn, source, clauses))

    def optimize(self, where: str | None = None, zorder_by: Sequence[str] | None = None,
                 target_file_size: int = DEFAULT_TARGET_FILE_SIZE, min_files: int = 2,
                 progress: Callable[[str], None] | None = None, sort_within: Sequence[str] | None = None,
                 row_group_size: int | None = None, page_rows: int | None = None, full: bool = False,
                 min_cube_size: int | None = None) -> OptimizeResult:
        """Bin-pack small files, or with zorder_by cluster the files by those columns (then
        sort_within orders each file's rows by other columns, row_group_size sets the files'
        Parquet row group size in bytes and page_rows the most rows per page). On a clustered
        table, cluster incrementally by its clustering columns: only files not clustered yet
        and cubes smaller than min_cube_size bytes (8 target-sized files by default) are
        rewritten, everything with full=True (OPTIMIZE FULL; with zorder_by, every file as
        Delta's ZORDER BY does, not only those not Z-ordered by these columns yet). `progress`
        receives one line per stage of a long rewrite."""
        return optimize(self.begin(), where, zorder_by, target_file_size, min_files, progress,
                        sort_within, row_group_size, page_rows, full, min_cube_size).commit()

    def cluster_by(self, columns: Sequence[str] | None) -> int:
        """ALTER TABLE ... CLUSTER BY (columns), or CLUSTER BY NONE with None or []: set the
        clustering columns without rewriting any file (the next OPTIMIZE clusters by the new
        ones). An unclustered table becomes clustered, unless it is partitioned or bucketed."""
        txn = self.begin()
        snapshot = txn.snapshot
        keys = [] if not columns else ([columns] if isinstance(columns, str) else list(columns))
        if keys:
            keys = check_cluster_by(self.path, snapshot.schema, snapshot.configuration, snapshot.partition_columns,
                                    keys)
        elif clustering_columns(snapshot) is None:
            raise InvalidArgumentError(f"{self.path} is not clustered: there is no clustering to turn off")
        txn.set_protocol(required_protocol(snapshot.protocol, snapshot.configuration, snapshot.schema,
                                           CLUSTERING_FEATURES))
        txn.actions.append(clustering_domain(snapshot.schema, keys, snapshot.column_mapping))
        return txn.stage("CLUSTER BY", {"clusteringColumns": keys}).commit()

    def restore(self, version: int | None = None, timestamp: str | dt.datetime | None = None) -> RestoreResult:
        """RESTORE the table to an earlier `version` (or the version current at `timestamp`, UTC
        when naive), as one new commit with its own history entry: that version's files come back,
        the others are removed (the data files stay until VACUUM), and its schema and properties
        return. Refused, with nothing written, when VACUUM already deleted files it needs."""
        self._check_writable()
        result = restore(self.path, version, timestamp)
        self._moved_to(result.version)
        return result

    def vacuum(self, retention_hours: float = 168, dry_run: bool = False, force: bool = False) -> VacuumResult:
        """VACUUM: delete the files the latest version does not reference that are older than
        `retention_hours` (files removed within it stay for time travel); dry_run only lists them.
        The VacuumResult counts and lists the files.

        A retention shorter than the table's `delta.deletedFileRetentionDuration` (7 days by default)
        raises RetentionTooShortError unless force=True, safe only when no reader or writer runs.
        A Table opened for time travel lists them (dry_run) but raises InvalidArgumentError on
        deleting them: they may be the very files its version reads."""
        if not dry_run:
            self._check_writable()
        return vacuum(self.path, retention_hours, dry_run, force)

    def set_properties(self, properties: Mapping[str, str]) -> int:
        """ALTER TABLE ... SET TBLPROPERTIES: merge `properties` into the table's configuration.
        `delta.enableDeletionVectors=true` and `delta.columnMapping.mode=name` upgrade the
        protocol in the same commit, as Delta does (the mapping gives each column its own name
        as physical name: the files already use it)."""
        txn = self.begin()
        base = txn.snapshot.metadata
        config = {**base.configuration, **{k: str(v) for k, v in properties.items()}}
        refuse_bucketing_properties(self.path, properties, "the bucket spec is set at create")
        refuse_constraint_properties(self.path, properties)
        check_properties(self.path, config)
        schema, config = with_column_mapping(self.path, base.schema, config, txn.snapshot.column_mapping,
                                             new_table=False, bucketed=bucket_spec_of(config) is not None)
        config = with_column_names(config)
        txn.set_metadata(replace(base, schemaString=schema.json_string(), configuration=config),
                         required_protocol(txn.snapshot.protocol, config, schema))
        if row_tracking_enabled(config):
            # Every file of the version that turns row tracking on has its row ids: the files
            # from before are logged again (dataChange=false) and given theirs in this commit.
            txn.actions.extend(replace(f, dataChange=False) for f in txn.snapshot.add_files if f.baseRowId is None)
        return txn.stage("SET TBLPROPERTIES", {"properties": dict(properties)}).commit()

    def add_constraint(self, name: str, expression: str) -> int:
        """ALTER TABLE ... ADD CONSTRAINT name CHECK (expression): every row already in the table
        must satisfy it (else ConstraintViolationError naming one that does not, and nothing is
        written), and every later write is checked against it. The protocol gains the writer
        feature `checkConstraints` in the same commit."""
        txn = self.begin()
        metadata = with_constraint(self.path, txn.snapshot.metadata, name, expression)
        rule = constraint_rule(name, expression, metadata.schema)
        row = first_breaking_row(txn.read(), self.path, rule)
        if row is not None:
            raise ConstraintViolationError(self.path, rule.label, rule.expression, row, existing=True)
        txn.set_metadata(metadata, required_protocol(txn.snapshot.protocol, metadata.configuration, metadata.schema))
        return txn.stage("ADD CONSTRAINT", {"name": name.lower(), "expr": expression.strip()}).commit()

    def drop_constraint(self, name: str, if_exists: bool = False) -> int:
        """ALTER TABLE ... DROP CONSTRAINT [IF EXISTS] name (the protocol keeps its features)."""
        txn = self.begin()
        metadata = without_constraint(self.path, txn.snapshot.metadata, name, if_exists)
        if metadata is txn.snapshot.metadata:
            return txn.stage_no_op().commit()
        expression = txn.snapshot.configuration.get(CONSTRAINT_PREFIX + name.lower())
        txn.set_metadata(metadata)
        return txn.stage("DROP CONSTRAINT", {"constraint": name.lower(), "expr": expression}).commit()

    @property
    def constraints(self) -> dict[str, str]:
        """The table's CHECK constraints: name -> expression."""
        return check_constraints(self.snapshot.configuration)

    def rename_column(self, old: str, new: str) -> int:
        """ALTER TABLE ... RENAME COLUMN: a metadata-only change on a table with column mapping
        (the files keep the physical name). Top-level columns, partition columns included."""
        txn = self.begin()
        try:
            metadata = renamed(txn.snapshot.metadata, old, new)
        except SchemaChangeError as e:
            raise InvalidArgumentError(f"{self.path}: cannot rename column {old!r} to {new!r}: {e}") from None
        txn.set_metadata(metadata)
        return txn.stage("RENAME COLUMN", {"oldColumnPath": old, "newColumnPath": new}).commit()

    def drop_columns(self, *names: str) -> int:
        """ALTER TABLE ... DROP COLUMNS: a metadata-only change on a table with column mapping
        (the data stays in the files, unread, until they are rewritten)."""
        txn = self.begin()
        try:
            metadata = dropped(txn.snapshot.metadata, list(names))
        except SchemaChangeError as e:
            raise InvalidArgumentError(f"{self.path}: cannot drop columns {list(names)}: {e}") from None
        txn.set_metadata(metadata)
        return txn.stage("DROP COLUMNS", {"columns": list(names)}).commit()

    def add_columns(self, columns: "StructType | str") -> int:
        """ALTER TABLE ... ADD COLUMNS: nullable columns after the others (rows already written
        read NULL in them). `columns` is a StructType or DDL ("x INT COMMENT 'c', y STRING")."""
        txn = self.begin()
        new = as_schema(columns, self.spark)
        taken = {f.name.lower() for f in txn.snapshot.schema.fields}
        clash = [f.name for f in new.fields if f.name.lower() in taken]
        if clash:
            raise InvalidArgumentError(f"{self.path}: cannot add columns {clash}: the table has columns of those names")
        refused = [f.name for f in new.fields if not f.nullable]
        if refused:
            raise InvalidArgumentError(f"{self.path}: cannot add NOT NULL columns {refused}: the rows already "
                                       "written have no value for them; add them nullable")
        txn.add_columns(new.fields)
        return txn.stage("ADD COLUMNS", {"columns": [{"column": f.to_json()} for f in new.fields]}).commit()

    def unset_properties(self, keys: Sequence[str], if_exists: bool = False) -> int:
        """ALTER TABLE ... UNSET TBLPROPERTIES [IF EXISTS]: remove properties from the table's
        configuration. A key the table does not have raises InvalidArgumentError unless if_exists."""
        txn = self.begin()
        base = txn.snapshot.metadata
        missing_keys = [k for k in keys if k not in base.configuration]
        if missing_keys and not if_exists:
            raise InvalidArgumentError(f"{self.path} has no properties {missing_keys}; UNSET TBLPROPERTIES IF EXISTS "
                                       "ignores keys it does not have")
        refuse_bucketing_properties(self.path, dict.fromkeys(keys, ""), "the bucket spec is set at create")
        refuse_constraint_properties(self.path, dict.fromkeys(keys, ""))
        config = {k: v for k, v in base.configuration.items() if k not in keys}
        txn.set_metadata(replace(base, configuration=config))
        return txn.stage("UNSET TBLPROPERTIES", {"properties": list(keys), "ifExists": if_exists}).commit()

    def replace(self, schema: "StructType | Schema | str", partition_by: Sequence[str] | None = None,
                bucket_by: BucketSpec | None = None, properties: Mapping[str, str] | None = None,
                description: str | None = None, generated_columns: Mapping[str, str] | None = None,
                identity_columns: Mapping[str, IdentityColumn] | None = None,
                cluster_by: Sequence[str] | None = None, source: "DataFrame | None" = None,
                operation: str = "CREATE OR REPLACE TABLE") -> int:
        """CREATE OR REPLACE TABLE [AS SELECT]: one commit gives the table a new schema, layout and
        properties, removes every file, and adds the rows of `source` when given. Its history,
        and time travel to its earlier versions, stay (its id and name too)."""
        txn = self.begin()
        old = txn.snapshot
        metadata, protocol, clustering = _new_metadata(
            self.spark, self.path, schema, partition_by, bucket_by, properties, old.metadata.name,
            description, generated_columns, identity_columns, cluster_by, old.protocol)
        metadata = replace(metadata, id=old.metadata.id, createdTime=old.metadata.createdTime)
        txn.set_metadata(metadata, protocol)
        txn.actions.extend(clustering.domains)
        txn.remove([f.path for f in old.add_files])
        if source is not None:
            txn.append(source)
        return txn.stage(operation, {"partitionBy": list(metadata.partitionColumns),
                                     **clustering.operation_parameters, "isManaged": "false"}).commit()




def _new_metadata(spark: "SparkSession", path: str, schema: "StructType | Schema | str",
                  partition_by: Sequence[str] | None, bucket_by: BucketSpec | None,
                  properties: Mapping[str, str] | None, name: str | None, description: str | None,
                  generated_columns: Mapping[str, str] | None, identity_columns: Mapping[str, IdentityColumn] | None,
                  cluster_by: Sequence[str] | None, protocol: Protocol) -> tuple[Metadata, Protocol, Any]:
    """A new table's metadata and protocol (at least `protocol`), and its clustering."""
    sch = with_generated_columns(path, as_schema(schema, spark), generated_columns or {})
    sch = with_identity_columns(path, sch, identity_columns or {})
    parts = partition_columns(path, sch, partition_by)
    config = table_properties(path, properties, bucket_by)
    if bucket_by is not None:
        config.update(bucket_by.resolved(path, sch, parts).to_configuration())
    sch, config = with_column_mapping(path, sch, config, "none", new_table=True, bucketed=bucket_by is not None)
    clustering = new_table_clustering(path, sch, config, parts, cluster_by)
    metadata = Metadata.new(sch, parts, config, name=name, description=description)
    return metadata, required_protocol(protocol, config, sch, clustering.features), clustering


def _committed(table: "Table", staged: Transaction) -> CommittedVersion:
    """Commit `staged`; the version, marked skipped when the transaction was an idempotent write
    already committed. Auto compaction, when the table or session has it on, follows."""
    version = CommittedVersion(staged.commit(), skipped=staged.no_op)
    auto_compact(staged, table.begin)
    return version
