"""Transaction: one write pinned to a snapshot, recording what it reads for the conflict checks.

It reads planned files through Spark, writes new files through Spark, and commits add/remove
actions in one put-if-absent (skiplake.txn). Operations (skiplake.spark.dml, skiplake.spark.optimize) fill a
transaction and `stage` what its commitInfo will say; the caller commits it.
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from skiplake.errors import InvalidArgumentError, SchemaMismatchError
from skiplake.expr.tree import Node
from skiplake.layout.bucket_spec import bucket_spec_of
from skiplake.log.actions import Action, AddCDCFile, AddFile, Metadata, Protocol, RemoveFile, Txn, now_ms
from skiplake.log.changes import CHANGE_DIR, CHANGE_TYPE
from skiplake.log.column_mapping import extend, physical_names, physical_schema, without_mapping
from skiplake.log.location import join
from skiplake.log.schema import Field, Schema
from skiplake.log.snapshot import Snapshot, add_files_from_arrow, check_writable
from skiplake.log.stats import loose_bounds
from skiplake.skipping.plan import ScanPlan, plan_scan, stats_table
from skiplake.spark.reads.planned_reads import read_files, read_planned
from skiplake.spark.reads.row_ids import hidden_id_fields, read_keeping_ids
from skiplake.spark.session.spark_types import conform, from_spark, schema_differences, spark_type
from skiplake.spark.writes.data_files import WriteOptions, with_table_stats, write_files
from skiplake.spark.writes.enforcement import enforced, raise_violation, with_generated, with_identities
from skiplake.txn import ReadSet, commit
from skiplake.txn.constraints import generated_columns, table_rules
from skiplake.txn.file_commits import AppTransaction
from skiplake.txn.identity import identity_columns, with_high_water_marks
from skiplake.txn.row_tracking import materialized_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class Transaction:
    """A low-level transaction pinned to one snapshot. Reads are recorded for conflict checks.

    `on_commit` hears the version a commit made (or the snapshot's, for a transaction staged as
    having nothing to do), so the Table that began it moves to that version."""

    def __init__(self, spark: "SparkSession", snapshot: Snapshot,
                 on_commit: Callable[[int], None] | None = None) -> None:
        """A transaction on `snapshot` (`on_commit`: see the class); a protocol this release cannot
        write is a ProtocolNotSupportedError."""
        check_writable(snapshot.table_path, snapshot.protocol)
        self.spark = spark
        self.snapshot = snapshot
        self.read_set = ReadSet()
        self.actions: list[Action] = []
        self.new_metadata: Metadata | None = None
        self.new_protocol: Protocol | None = None
        self.committed_actions: tuple[Action, ...] = ()  # as committed (rebased past winners, where they were)
        self.removed_files: list[AddFile] = []
        self._on_commit = on_commit
        self._staged: tuple[str, dict[str, Any], dict[str, Any]] | None = None
        self._no_op = False
        self._ids_kept: set[str] = set()   # new files whose rows are new or kept their row ids

    @property
    def path(self) -> str:
        """The table's location."""
        return self.snapshot.table_path

    @property
    def schema(self) -> Schema:
        """The table's schema as this transaction leaves it (with any columns it adds)."""
        return (self.new_metadata or self.snapshot.metadata).schema

    @property
    def partition_columns(self) -> list[str]:
        """The table's partition columns."""
        return self.snapshot.partition_columns

    # ---- reads

    def scan(self, where: str | Node | None = None) -> ScanPlan:
        """The plan of the files that may hold rows matching `where` (SQL text or a bound predicate;
        None: every file), its predicate and files recorded as read for the conflict checks.

        SQL text that does not parse or names an unknown column is an InvalidPredicateError."""
        plan = plan_scan(self.snapshot, where)
        if plan.predicate is None:
            self.read_set.whole_table = True
        else:
            self.read_set.predicates.append(plan.predicate)
        self.read_set.files.update(f.path for f in plan.files)
        return plan

    def read(self, where: str | None = None, columns: Sequence[str] | None = None) -> "DataFrame":
        """The rows matching `where` (all when None), of `columns` (all when None), read from the
        files scan() plans for it (recorded as read); pruning skips files, Spark filters the rows."""
        return read_planned(self.spark, self.snapshot, self.scan(where).files, where, columns)

    def read_whole_table(self) -> "DataFrame":
        """Every row of the snapshot, recorded as a read of the whole table."""
        return self.read(None)

    @property
    def row_id_columns(self) -> tuple[str, ...]:
        """The materialized row id and row commit version columns that rows read with
        keep_row_ids carry, and that write() keeps in the new files (none: the table does not
        keep row ids through rewrites)."""
        s = self.snapshot
        return materialized_columns(s.protocol, s.configuration, s.column_mapping) or ()

    def read_files(self, files: Sequence[AddFile], with_file_info: bool = False,
                   deleted: Mapping[str, np.ndarray] | None = None, keep_row_ids: bool = False) -> "DataFrame":
        """The rows of `files` (recorded as read); with_file_info adds each row's file and index;
        `deleted` (row indexes by log path) leaves out those rows too, as a deletion vector would.
        keep_row_ids adds each row's id and commit version (row_id_columns), for a rewrite
        that copies the rows to keep them."""
        self.read_set.files.update(f.path for f in files)
        names = self.row_id_columns
        if keep_row_ids and len(names) == 2:
            return read_keeping_ids(self.spark, self.snapshot, files, (names[0], names[1]), with_file_info, deleted)
        return read_files(self.spark, self.path, self.snapshot.schema, self.partition_columns, files,
                          with_file_info=with_file_info, column_mapping=self.snapshot.column_mapping,
                          deleted=deleted)

    def read_app_version(self, app_id: str) -> int | None:
        """The last version application `app_id` recorded (its txn action), or None when it recorded
        none; recorded as read, so a commit by the same app since the snapshot is a conflict."""
        self.read_set.app_ids.add(app_id)
        return self.snapshot.txn_version(app_id)

    # ---- writes

    def prepare(self, df: "DataFrame", merge_schema: bool = False) -> "DataFrame":
        """Check `df` against the schema (adding new columns when merge_schema) and conform it."""
        incoming = from_spark(df.schema)
        generated, identities = generated_columns(self.schema), identity_columns(self.schema)
        problems, new_fields = schema_differences(self.schema, incoming, merge_schema, [*generated, *identities])
        given = {c.lower() for c in df.columns}
        problems += [f"column {n!r} is GENERATED ALWAYS AS IDENTITY: leave it out, its values are assigned"
                     for n, i in identities.items() if n.lower() in given and not i.allow_explicit_insert]
        dupes = {c.lower() for c in df.columns if [x.lower() for x in df.columns].count(c.lower()) > 1}
        problems += [f"column {c!r} appears more than once" for c in sorted(dupes)]
        if problems:
            raise SchemaMismatchError(self.path, problems)
        if new_fields:
            self.add_columns(new_fields)
        # Generated and identity columns the input leaves out are computed; generated ones it
        # gives are checked on write.
        absent = [n for n in generated if n.lower() not in given]
        out = with_generated(conform(df, self.schema), self.schema, absent)
        return with_identities(out, [i for n, i in identities.items() if n.lower() not in given])

    def add_columns(self, new_fields: Sequence[Field]) -> None:
        """Add nullable columns to the table's schema (a metaData action in the commit)."""
        base = self.new_metadata or self.snapshot.metadata
        schema, config = Schema(self.schema.fields + tuple(new_fields)), dict(base.configuration)
        if self.snapshot.column_mapping != "none":
            # The new columns' own ids and physical names (not another table's, if they came with one).
            new = without_mapping(Schema(tuple(new_fields))).fields
            schema, config = extend(Schema(self.schema.fields + new), config)
        self.new_metadata = Metadata(base.id, schema.json_string(), base.partitionColumns,
                                     config, base.name, base.description, base.format,
                                     base.createdTime)

    def write(self, df: "DataFrame", data_change: bool = True, options: WriteOptions | None = None,
              tags: dict[str, str] | None = None, provider: str | None = None,
              new_rows: bool = False) -> list[AddFile]:
        """Write an already conformed DataFrame as new files; they join the commit (`provider`:
        the clustering implementation that ordered their rows). Row id columns `df` carries
        (read with keep_row_ids) go into the files, hidden; `new_rows` says the rows are new,
        none copied (row tracking then has no ids to keep)."""
        spec = bucket_spec_of(self.snapshot.configuration)
        metadata = self.new_metadata or self.snapshot.metadata
        options = with_table_stats(options, metadata.configuration, self.snapshot.column_mapping)
        # Rows that change are checked against the table's rules (a rewrite that moves rows
        # unchanged, as OPTIMIZE does, writes nothing new to check).
        rules = table_rules(metadata) if data_change else []
        ids = self._row_id_fields(df)
        df, schema, parts = self._physical(enforced(df, rules), ids)
        try:
            # Only a bucketed write sizes its files by bytes per row (which parses every file's stats).
            # The hidden row id columns get no stats: they are no column of the table.
            adds = write_files(df, self.path, Schema(schema.fields[:len(schema.fields) - len(ids)]), parts,
                               options, data_change, tags, spec,
                               self._bytes_per_row() if spec is not None else None)
        except Exception as e:
            raise_violation(e, self.path, rules)
            raise
        if provider is not None:
            adds = [replace(a, clusteringProvider=provider) for a in adds]
        if ids or new_rows:
            self._ids_kept.update(a.path for a in adds)
        self.actions.extend(adds)
        return adds

    def _row_id_fields(self, df: "DataFrame") -> tuple[Field, ...]:
        """The row id columns `df` carries, as the files hold them (by their own name)."""
        names = self.row_id_columns
        if len(names) != 2 or not set(names) <= set(df.columns):
            return ()
        return hidden_id_fields(names, self.snapshot.column_mapping)

    def write_changes(self, df: "DataFrame") -> list[AddCDCFile]:
        """Write change data as `_change_data/` files of the commit: `df` holds the table's
        columns and CHANGE_TYPE; its partition values come from the table's columns."""
        change_type = Field(CHANGE_TYPE, "string")
        df = conform(df, Schema(self.schema.fields + (change_type,)))
        df, schema, parts = self._physical(df, (change_type,))
        files = write_files(df, join(self.path, CHANGE_DIR), schema, parts, WriteOptions(num_indexed_cols=0),
                            data_change=False)
        changes = [AddCDCFile(f"{CHANGE_DIR}/{a.path}", dict(a.partitionValues), a.size) for a in files]
        self.actions.extend(changes)
        return changes

    def _physical(self, df: "DataFrame", extra: Sequence[Field]) -> tuple["DataFrame", Schema, list[str]]:
        """`df` (the table's columns, then `extra` ones) as files spell it: with column mapping,
        the table's columns under physical names with their field ids; with the schema and
        partition columns the files are written by."""
        schema, parts = self.schema, self.partition_columns
        mode = self.snapshot.column_mapping
        if mode == "none":
            return df, Schema(schema.fields + tuple(extra)), parts
        physical, phys = physical_schema(schema, mode), physical_names(schema, mode)
        df = df.select(*[F.col(f"`{f.name}`").cast(spark_type(p.type)).alias(p.name, metadata=p.metadata)
                         for f, p in zip(schema.fields, physical.fields)], *[F.col(f"`{e.name}`") for e in extra])
        return df, Schema(physical.fields + tuple(extra)), [phys[c] for c in parts]

    def _bytes_per_row(self) -> float | None:
        """The snapshot's average stored bytes per row, which sizes bucket files (None when unknown)."""
        records = stats_table(self.snapshot).num_records
        if not len(records) or np.isnan(records).any() or records.sum() == 0:
            return None
        return float(self.snapshot.file_rows.column("size").to_numpy().sum() / records.sum())

    def append(self, df: "DataFrame", merge_schema: bool = False,
               options: WriteOptions | None = None) -> list[AddFile]:
        """Add the rows of `df` as new files of the commit (merge_schema adds its new columns to the
        table); the files written.

        A DataFrame that does not match the schema is a SchemaMismatchError; a row that breaks a
        rule of the table (NOT NULL, CHECK, a generated column) is a ConstraintViolationError."""
        return self.write(self.prepare(df, merge_schema), options=options, new_rows=True)

    def remove(self, paths: Sequence[str] | Sequence[AddFile], data_change: bool = True) -> None:
        """Remove live files (by path or AddFile) in this transaction."""
        keys = [p.path if isinstance(p, AddFile) else p for p in paths]
        if not keys:
            return
        by_path = _files_at(self.snapshot.file_rows, keys, self.snapshot.files_with_stats)
        missing = [k for k in keys if k not in by_path]
        if missing:
            raise InvalidArgumentError(
                f"{missing[0]} is not a live file of {self.path} at version {self.snapshot.version}")
        ts = now_ms()
        for key in keys:
            self.removed_files.append(by_path[key])
            self.actions.append(by_path[key].remove(ts, data_change))

    def set_metadata(self, metadata: Metadata, protocol: Protocol | None = None) -> None:
        """Commit new table metadata (and a new protocol, when it changes), checked writable first."""
        if protocol is not None:
            self.set_protocol(protocol)
        self.new_metadata = metadata

    def set_protocol(self, protocol: Protocol) -> None:
        """Commit a new protocol (when it changes), checked writable first."""
        if protocol != self.snapshot.protocol:
            check_writable(self.path, protocol)
            self.new_protocol = protocol

    def set_app_version(self, app_id: str, version: int) -> None:
        """Record `version` as application `app_id`'s in the commit (a txn action), for idempotent retries."""
        self.actions.append(Txn(app_id, version, now_ms()))

    # ---- commit

    def stage(self, operation: str, parameters: Mapping[str, Any] | None = None,
              metrics: Mapping[str, Any] | None = None) -> "Transaction":
        """Record what commit() will say about this transaction, without committing yet."""
        self._staged = (operation, dict(parameters or {}), dict(metrics or {}))
        return self

    def claim_app_version(self, app_id: str | None, app_version: int | None) -> bool:
        """For an idempotent write (Delta's txnAppId/txnVersion): record the application's version
        in this commit, or, when that version (or a later one) is already recorded, stage nothing
        and answer False. Neither given: True; one without the other: InvalidArgumentError."""
        app = AppTransaction.of(app_id, app_version)
        if app is None:
            return True
        done = self.read_app_version(app.app_id)
        if done is not None and done >= app.version:
            self.stage_no_op()
            return False
        self.set_app_version(app.app_id, app.version)
        return True

    @property
    def no_op(self) -> bool:
        """Whether the transaction was staged as having nothing to commit."""
        return self._no_op

    def stage_no_op(self) -> "Transaction":
        """Nothing to commit (an idempotent write already committed): commit() writes nothing and
        answers the snapshot's version."""
        self._no_op = True
        return self

    def commit(self, operation: str | None = None, parameters: Mapping[str, Any] | None = None,
               metrics: Mapping[str, Any] | None = None) -> int:
        """Commit at the next free version; raises a ConcurrentModificationError subclass on a
        logical conflict with a commit made since this transaction's snapshot."""
        if self._no_op:
            return self._committed(self.snapshot.version)
        if operation is None:
            operation, staged_params, staged_metrics = self._staged or ("WRITE", {}, {})
            parameters = parameters if parameters is not None else staged_params
            metrics = metrics if metrics is not None else staged_metrics
        self._move_high_water_marks()
        actions: list[Action] = _as_logged(self.snapshot, self.actions)
        if self.new_metadata is not None:
            actions.insert(0, self.new_metadata)
        if self.new_protocol is not None:
            actions.insert(0, self.new_protocol)
        computed = _metrics(actions)
        computed.update({k: str(v) for k, v in (metrics or {}).items()})
        result = commit(self.snapshot, actions, operation, dict(parameters or {}), self.read_set, computed,
                        ids_kept=self._ids_kept)
        self.committed_actions = result.actions
        return self._committed(result.version)

    def _move_high_water_marks(self) -> None:
        """Past the values this commit's new files hold, each identity column's high-water mark
        (a metaData action, so a concurrent writer that moved it too makes this a conflict)."""
        identities = identity_columns(self.schema)
        # New files only: a file logged again with a deletion vector holds values already counted.
        existing = {f.path for f in self.removed_files}
        adds = [a for a in self.actions if isinstance(a, AddFile) and a.dataChange and a.path not in existing]
        if not identities or not adds:
            return
        base = self.new_metadata or self.snapshot.metadata
        phys = physical_names(self.schema, self.snapshot.column_mapping)
        marks = {}
        for name, identity in identities.items():
            values = self._furthest_values(adds, name, phys[name], identity.step > 0)
            mark = identity.past_mark(values)
            if mark is not None:
                marks[name] = mark
        if marks:
            self.new_metadata = replace(base, schemaString=with_high_water_marks(self.schema, marks).json_string())

    def _furthest_values(self, adds: Sequence[AddFile], column: str, physical: str, largest: bool) -> list[int]:
        """The largest (or smallest) value of `column` in each of `adds`, from their stats; files
        whose stats lack it are read (one Spark job)."""
        key = "maxValues" if largest else "minValues"
        values, unknown = [], []
        for a in adds:
            value = (json.loads(a.stats or "{}").get(key) or {}).get(physical)
            if value is not None:
                values.append(int(value))
            elif not (a.stats and a.num_records == 0):   # a file of no rows holds no value
                unknown.append(a)
        if unknown:
            agg = F.max if largest else F.min
            found = self.read_files(unknown).agg(agg(F.col(f"`{column}`"))).collect()[0][0]
            if found is not None:
                values.append(int(found))
        return values

    def _committed(self, version: int) -> int:
        if self._on_commit is not None:
            self._on_commit(version)
        return version


def _as_logged(snapshot: Snapshot, actions: list[Action]) -> list[Action]:
    """The actions as the log must hold them. With column mapping, the snapshot's files (and so
    the removes and re-adds made from them) key partition values and stats by logical names;
    the log keys them by physical names, as its own rows for those files do: each action on a
    file already in the snapshot takes them from there (a re-add with a deletion vector keeps
    its loose bounds). New files were written under physical names already."""
    paths = {a.path for a in actions if isinstance(a, (AddFile, RemoveFile))}
    if snapshot.log_files is None or not paths:
        return list(actions)
    logged = _files_at(snapshot.log_files, paths)
    out: list[Action] = []
    for a in actions:
        own = logged.get(a.path) if isinstance(a, (AddFile, RemoveFile)) else None
        if isinstance(a, RemoveFile) and own is not None:
            a = replace(a, partitionValues=dict(own.partitionValues))
        elif isinstance(a, AddFile) and own is not None:
            a = replace(a, partitionValues=dict(own.partitionValues),
                        stats=loose_bounds(own.stats) if a.deletionVector else own.stats)
        out.append(a)
    return out


def _files_at(files: pa.Table, paths: Sequence[str] | set[str],
              with_stats: Callable[[np.ndarray], pa.Table] | None = None) -> dict[str, AddFile]:
    """The files (a snapshot's Arrow table of adds) at `paths`, by path: only those rows become
    AddFiles, not every live file. `with_stats` gives the rows a mask selects with their stats
    (Snapshot.files_with_stats: `files` is then its file_rows)."""
    value_set = pa.array(list(paths), pa.string())
    at = pc.is_in(files.column("path"), value_set=value_set)
    rows = files.filter(at) if with_stats is None else with_stats(at.to_numpy(zero_copy_only=False))
    return {f.path: f for f in add_files_from_arrow(rows)}


def _metrics(actions: list[Action]) -> dict[str, str]:
    adds = [a for a in actions if isinstance(a, AddFile)]
    removes = [a for a in actions if isinstance(a, RemoveFile)]
    rows = sum(a.num_records or 0 for a in adds)
    return {"numAddedFiles": str(len(adds)), "numRemovedFiles": str(len(removes)),
            "numOutputRows": str(rows), "numAddedBytes": str(sum(a.size for a in adds)),
            "numRemovedBytes": str(sum(r.size or 0 for r in removes))}
