"""Reading a table's change data feed: the rows each version inserted, deleted and updated.

The answer has the table's columns (as of the last version read), then `_change_type`,
`_commit_version` and `_commit_timestamp`, as delta-spark's `table_changes` gives them. Each
version's changes are read from where skiplake.log.changes says they are: its change files, or
its added and removed files, or the rows a new deletion vector marks in a file logged again.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from skiplake.errors import FilesVacuumedError
from skiplake.log.actions import AddFile
from skiplake.log.changes import (
    CHANGE_DIR,
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    DELETE,
    INSERT,
    ChangePlan,
    VersionChanges,
    plan_changes,
)
from skiplake.log.column_mapping import ID, PHYSICAL_NAME
from skiplake.log.location import join
from skiplake.log.paths import absolute_path
from skiplake.log.schema import Field, Schema
from skiplake.log.storage_for import missing
from skiplake.spark.reads.planned_reads import read_files, with_file_values
from skiplake.spark.session.spark_types import to_spark

# Columns of the read's join of each file to its version.
_VERSION, _TIME = "__skiplake_cdf_version", "__skiplake_cdf_time"


def read_changes(spark: SparkSession, table_path: str, starting_version: int | None = None,
                 ending_version: int | None = None, starting_timestamp: str | dt.datetime | None = None,
                 ending_timestamp: str | dt.datetime | None = None) -> DataFrame:
    """The changes of versions start..end, both included (by version or by timestamp; from the oldest
    version to the latest by default), as delta-spark's table_changes gives them.

    A version outside the log is a VersionNotFoundError, one whose changes the table did not record a
    ChangeDataNotRecordedError, and one whose files VACUUM deleted a FilesVacuumedError."""
    plan = plan_changes(table_path, starting_version, ending_version, starting_timestamp, ending_timestamp)
    _check_present(table_path, plan)
    return _ChangeRead(spark, table_path, plan).frame()


def _check_present(table_path: str, plan: ChangePlan) -> None:
    """FilesVacuumedError, naming the first version concerned, when VACUUM deleted files the
    read needs (change files and removed data files go once they are past the retention)."""
    version_of: dict[str, int] = {}
    for vc in plan.versions:
        for f in vc.files():
            version_of.setdefault(absolute_path(table_path, f.path), vc.version)
    gone = missing(table_path, list(version_of), plan.table_files)
    if gone:
        first = min(version_of[p] for p in gone)
        raise FilesVacuumedError(table_path, first, [p for p in gone if version_of[p] == first])


@dataclass(frozen=True)
class _Entry:
    """A file whose rows (all, or only `rows`) changed in `version`."""
    file: AddFile
    version: VersionChanges
    rows: np.ndarray | None = None


class _ChangeRead:
    """The feed as one relation per kind of change (change files, inserted files, deleted
    files, rows of files logged again), each file's version joined in by its path: a read of
    many versions costs a few relations, not a few per version."""

    def __init__(self, spark: SparkSession, table_path: str, plan: ChangePlan) -> None:
        self.spark, self.path, self.plan = spark, table_path, plan
        self.schema = plan.metadata.schema
        self.parts = list(plan.metadata.partitionColumns)
        self.mode = plan.column_mapping

    def frame(self) -> DataFrame:
        vs = self.plan.versions
        kinds: list[tuple[list[_Entry], str | None]] = [
            ([_Entry(AddFile(c.path, dict(c.partitionValues), c.size, 0, False), v) for v in vs for c in v.change_files],
             None),
            ([_Entry(f, v) for v in vs for f in v.inserted], INSERT),
            ([_Entry(f, v) for v in vs for f in v.deleted], DELETE),
            ([_Entry(f, v, rows) for v in vs for f, rows in v.rows_deleted], DELETE),
            ([_Entry(f, v, rows) for v in vs for f, rows in v.rows_inserted], INSERT),
        ]
        parts = [self.read(batch, kind) for entries, kind in kinds for batch in _distinct_files(entries)]
        if not parts:
            empty = self.spark.createDataFrame([], to_spark(self.schema))
            return empty.select(*self.columns(F.lit(None).cast("string"), F.lit(None).cast("long"),
                                              F.lit(None).cast("timestamp")))
        out = parts[0]
        for p in parts[1:]:
            out = out.unionByName(p)
        return out

    def columns(self, change_type: Column, version: Column, timestamp: Column) -> list[Column]:
        return ([F.col(f"`{f.name}`") for f in self.schema.fields]
                + [change_type.alias(CHANGE_TYPE), version.alias(COMMIT_VERSION), timestamp.alias(COMMIT_TIMESTAMP)])

    def read(self, entries: Sequence[_Entry], kind: str | None) -> DataFrame:
        """The changed rows of `entries` (distinct files), with their version: change
        files carry their change type, other files are all `kind`."""
        files, root = [e.file for e in entries], self.path
        schema = self.schema if kind is not None else self._with_change_type()
        prefix = CHANGE_DIR + "/"
        if kind is None and all(f.path.startswith(prefix) for f in files):
            # Read from `_change_data/`, under which the files sit in Hive-style partition folders
            # (one relation; from the table's root the folders would not spell the partitions).
            root, files = join(self.path, CHANGE_DIR), [replace(f, path=f.path[len(prefix):]) for f in files]
        deleted = self._other_rows(entries) if entries[0].rows is not None else None
        df = read_files(self.spark, root, schema, self.parts, files, with_file_info=True,
                        column_mapping=self.mode, deleted=deleted)
        versions = {f.path: (e.version.version, e.version.timestamp_ms) for f, e in zip(files, entries)}
        if len(versions) != len(entries):
            raise RuntimeError(f"{len(entries)} change entries name only {len(versions)} files under {root}")
        joined = with_file_values(df, root, versions, pa.schema([(_VERSION, pa.int64()), (_TIME, pa.int64())]))
        change = F.col(CHANGE_TYPE) if kind is None else F.lit(kind)
        return joined.select(*self.columns(change, F.col(_VERSION), F.timestamp_millis(F.col(_TIME))))

    def _other_rows(self, entries: Sequence[_Entry]) -> dict[str, np.ndarray]:
        """For files of which only some rows changed: every other row (dropped as a deletion
        vector would drop it), by the file's row count from its stats, or counted."""
        unknown = [e.file for e in entries if e.file.num_records is None]
        counts = {f.path: read_files(self.spark, self.path, self.schema, self.parts, [f],
                                     column_mapping=self.mode).count() for f in unknown}
        out = {}
        for e in entries:
            # Only a batch of files logged again comes here, and each of its entries names its rows (frame).
            assert e.rows is not None
            physical = e.file.num_records if e.file.num_records is not None else counts[e.file.path]
            out[e.file.path] = np.setdiff1d(np.arange(physical, dtype=np.uint64), e.rows).astype(np.uint64)
        return out

    def _with_change_type(self) -> Schema:
        """The table's schema with CHANGE_TYPE, as change files hold it (unmapped under column mapping)."""
        meta = {} if self.mode == "none" else {PHYSICAL_NAME: CHANGE_TYPE, ID: 2**31 - 1}
        return Schema(self.schema.fields + (Field(CHANGE_TYPE, "string", True, meta),))


def _distinct_files(entries: Sequence[_Entry]) -> list[list[_Entry]]:
    """`entries` in batches of distinct files (a file added in one version and removed in
    another goes to two batches)."""
    batches: list[tuple[set[str], list[_Entry]]] = []
    for e in entries:
        for paths, batch in batches:
            if e.file.path not in paths:
                paths.add(e.file.path)
                batch.append(e)
                break
        else:
            batches.append(({e.file.path}, [e]))
    return [batch for _, batch in batches]
