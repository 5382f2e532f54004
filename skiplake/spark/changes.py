"""Reading a table's change data feed: the rows each version inserted, deleted and updated.

The answer has the table's columns (as of the last version read), then `_change_type`,
`_commit_version` and `_commit_timestamp`, as delta-spark's `table_changes` gives them. Each
version's changes are read from where skiplake.log.changes says they are: its change files, or
its added and removed files, or the rows a new deletion vector marks in a file logged again.
"""
from __future__ import annotations

import datetime as dt
from typing import Sequence

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from skiplake.errors import FilesVacuumedError
from skiplake.log.actions import AddFile
from skiplake.log.changes import (
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
from skiplake.log.paths import absolute_path
from skiplake.log.schema import Field, Schema
from skiplake.log.stores import missing
from skiplake.spark.read import read_files
from skiplake.spark.types import to_spark


def read_changes(spark: SparkSession, table_path: str, starting_version: int | None = None,
                 ending_version: int | None = None, starting_timestamp: str | dt.datetime | None = None,
                 ending_timestamp: str | dt.datetime | None = None) -> DataFrame:
    plan = plan_changes(table_path, starting_version, ending_version, starting_timestamp, ending_timestamp)
    _check_present(table_path, plan)
    return _ChangeRead(spark, table_path, plan).frame()


def _check_present(table_path: str, plan: ChangePlan) -> None:
    """FilesVacuumedError, naming the first version concerned, when VACUUM deleted files the
    read needs (change files and removed data files go once they are past the retention)."""
    version_of: dict[str, int] = {}
    for vc in plan.versions:
        files = [*vc.change_files, *vc.inserted, *vc.deleted, *(f for f, _ in vc.rows_deleted),
                 *(f for f, _ in vc.rows_inserted)]
        for f in files:
            version_of.setdefault(absolute_path(table_path, f.path), vc.version)
    gone = missing(table_path, list(version_of))
    if gone:
        first = min(version_of[p] for p in gone)
        raise FilesVacuumedError(table_path, first, [p for p in gone if version_of[p] == first])


class _ChangeRead:
    def __init__(self, spark: SparkSession, table_path: str, plan: ChangePlan) -> None:
        self.spark, self.path, self.plan = spark, table_path, plan
        self.schema = plan.metadata.schema
        self.parts = list(plan.metadata.partitionColumns)
        self.mode = plan.column_mapping

    def frame(self) -> DataFrame:
        parts = [df for vc in self.plan.versions for df in self.version(vc)]
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

    def version(self, vc: VersionChanges) -> list[DataFrame]:
        version = F.lit(vc.version).cast("long")
        timestamp = F.timestamp_millis(F.lit(vc.timestamp_ms))
        out = []
        if vc.change_files:
            files = [AddFile(c.path, dict(c.partitionValues), c.size, 0, False) for c in vc.change_files]
            df = read_files(self.spark, self.path, self._with_change_type(), self.parts, files,
                            column_mapping=self.mode)
            out.append(df.select(*self.columns(F.col(CHANGE_TYPE), version, timestamp)))
        for files, kind in ((vc.inserted, INSERT), (vc.deleted, DELETE)):
            if files:
                out.append(self.read(files).select(*self.columns(F.lit(kind), version, timestamp)))
        for pairs, kind in ((vc.rows_deleted, DELETE), (vc.rows_inserted, INSERT)):
            if pairs:
                out.append(self.rows_only(pairs).select(*self.columns(F.lit(kind), version, timestamp)))
        return out

    def read(self, files: Sequence[AddFile], deleted: dict[str, np.ndarray] | None = None) -> DataFrame:
        return read_files(self.spark, self.path, self.schema, self.parts, files, column_mapping=self.mode,
                          deleted=deleted)

    def rows_only(self, pairs: Sequence[tuple[AddFile, np.ndarray]]) -> DataFrame:
        """Only the given rows of each file: every other row of it dropped as a deletion vector
        would drop it (the file's row count from its stats, or counted)."""
        files = [f for f, _ in pairs]
        unknown = [f for f in files if f.num_records is None]
        counts = {f.path: self.read([f]).count() for f in unknown}
        others = {}
        for f, rows in pairs:
            physical = f.num_records if f.num_records is not None else counts[f.path]
            others[f.path] = np.setdiff1d(np.arange(physical, dtype=np.uint64), rows).astype(np.uint64)
        return self.read(files, deleted=others)

    def _with_change_type(self) -> Schema:
        """The table's schema with CHANGE_TYPE, as change files hold it (unmapped under column mapping)."""
        meta = {} if self.mode == "none" else {PHYSICAL_NAME: CHANGE_TYPE, ID: 2**31 - 1}
        return Schema(self.schema.fields + (Field(CHANGE_TYPE, "string", True, meta),))
