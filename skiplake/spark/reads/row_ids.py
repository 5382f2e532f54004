"""Reading a table's rows with their row ids and row commit versions (row tracking).

Each row's id is the materialized row id its file holds for it, when the file has that column
and the value is not null (another writer kept the row's id through a rewrite), else its file's
`baseRowId` plus the row's index in the file; its commit version likewise the materialized one,
else the file's `defaultRowCommitVersion` (PROTOCOL.md, "Reader Requirements for Row
Tracking"). The files' values are joined to their rows by the path Spark reads each file at.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from skiplake.errors import InvalidArgumentError
from skiplake.log.actions import AddFile
from skiplake.log.column_mapping import PHYSICAL_NAME
from skiplake.log.schema import Field, Schema
from skiplake.log.snapshot import Snapshot
from skiplake.spark.reads.planned_reads import FILE_COLUMN, ROW_COLUMN, read_files, with_file_values
from skiplake.txn.row_tracking import MATERIALIZED_ROW_COMMIT_VERSION, MATERIALIZED_ROW_ID, enabled

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

ROW_ID = "_row_id"
ROW_COMMIT_VERSION = "_row_commit_version"
_BASE, _VERSION = "__skiplake_base_row_id", "__skiplake_row_version"


def read_with_row_ids(spark: "SparkSession", snapshot: Snapshot, files: Sequence[AddFile], where: str | None,
                      columns: Sequence[str] | None) -> "DataFrame":
    """The rows of `files` that satisfy `where`, with ROW_ID and ROW_COMMIT_VERSION."""
    config = snapshot.configuration
    path = snapshot.table_path
    if not enabled(config):
        raise InvalidArgumentError(f"{path} does not have row tracking enabled, so its rows have no row ids to "
                                   "read: set delta.enableRowTracking=true (set_properties) to give them some")
    if snapshot.column_mapping == "id":
        raise InvalidArgumentError(f"{path}: row ids of a table with column mapping mode 'id' are not read in "
                                   "this release (mode 'name' and tables without column mapping are)")
    if any(f.baseRowId is None or f.defaultRowCommitVersion is None for f in files):
        raise InvalidArgumentError(f"{path} has files without row ids although row tracking is enabled: "
                                   "another writer did not assign them")
    names = (config[MATERIALIZED_ROW_ID], config[MATERIALIZED_ROW_COMMIT_VERSION])
    df = read_keeping_ids(spark, snapshot, files, names).select(
        *[F.col(f"`{n}`") for n in snapshot.schema.names],
        F.col(f"`{names[0]}`").alias(ROW_ID), F.col(f"`{names[1]}`").alias(ROW_COMMIT_VERSION))
    if where:
        df = df.filter(where)
    return df.select(*[f"`{c}`" for c in columns]) if columns else df


def hidden_id_fields(names: Sequence[str], column_mapping: str) -> tuple[Field, ...]:
    """The materialized row id columns as the data files hold them: in no schema of the table,
    so read and written as physical columns of their own name."""
    return tuple(Field(n, "long", True, {PHYSICAL_NAME: n} if column_mapping != "none" else {}) for n in names)


def kept_ids(names: Sequence[str], updated: "Column", qualifier: str = "") -> list["Column"]:
    """A rewritten row's row id columns: its id kept, and its commit version kept unless the row
    is `updated` (null then, which reads as the version of the commit that writes it)."""
    version = F.when(updated, F.lit(None).cast("long")).otherwise(F.col(f"{qualifier}`{names[1]}`"))
    return [F.col(f"{qualifier}`{names[0]}`").alias(names[0]), version.alias(names[1])]


def read_keeping_ids(spark: "SparkSession", snapshot: Snapshot, files: Sequence[AddFile], names: tuple[str, str],
                     with_file_info: bool = False, deleted: Mapping[str, np.ndarray] | None = None) -> "DataFrame":
    """The table's columns of the rows of `files`, then each row's id and commit version under
    the materialized columns' `names`: what a rewrite writes to keep them (with_file_info and
    `deleted` as read_files takes them)."""
    path = snapshot.table_path
    # The materialized columns are in no schema: read as physical columns of their own name
    # (null in the files that lack them).
    df = read_files(spark, path, Schema(snapshot.schema.fields + hidden_id_fields(names, snapshot.column_mapping)), snapshot.partition_columns, files,
                    with_file_info=True, column_mapping=snapshot.column_mapping, deleted=deleted)
    bases = {f.path: (f.baseRowId, f.defaultRowCommitVersion) for f in files}
    df = with_file_values(df, path, bases, pa.schema([(_BASE, pa.int64()), (_VERSION, pa.int64())]))
    extra = [F.col(FILE_COLUMN), F.col(ROW_COLUMN)] if with_file_info else []
    return df.select(
        *[F.col(f"`{n}`") for n in snapshot.schema.names],
        F.coalesce(F.col(f"`{names[0]}`"), F.col(_BASE) + F.col(ROW_COLUMN)).alias(names[0]),
        F.coalesce(F.col(f"`{names[1]}`"), F.col(_VERSION)).alias(names[1]), *extra)
