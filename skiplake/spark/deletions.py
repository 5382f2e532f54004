"""Dropping the rows deletion vectors mark, inside Spark: no per-row Python, no JVM code of ours.

A file with a deletion vector is read by Spark's own Parquet reader like any other, with two
hidden columns from `_metadata`: the file's path and each row's index in it (its physical
position, which Spark computes correctly with file splits and filter pushdown). The deleted
(file, row index) pairs come from the DVs, read in the driver, and are sent to Spark as a
DataFrame of one 64-bit key per deleted row: the file's ordinal times 2^40 plus the row index.
Each scanned row gets its file's ordinal from a small broadcast table of (path, ordinal), and a
LEFT ANTI join on that key drops the deleted rows; with one long key Spark builds its fastest
hash relation. Exact: no hashing of paths, so no collisions.

Files without a DV never pass through this: the caller reads them apart (see skiplake.spark.read).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

# The row index takes the low 40 bits of a key (a trillion rows per file), the file's ordinal
# the 23 above them (8 million files with DVs per read).
ROW_BITS = 40
MAX_FILES = 1 << 23
PATH_COLUMN = "__skiplake_dv_path"
ROW_COLUMN = "__skiplake_dv_row"
_ORDINAL = "__skiplake_dv_file"
_KEY = "__skiplake_dv_key"
# Past this many deleted rows the keys are not broadcast (8 bytes each, plus Spark's hash table);
# Spark then joins them by a shuffle, slower but within memory.
BROADCAST_MAX_ROWS = 8_000_000


def without_deleted(spark: SparkSession, df: DataFrame, spark_paths: Sequence[str],
                    deleted: Sequence[np.ndarray]) -> DataFrame:
    """`df` (rows of files with deletion vectors, with PATH_COLUMN = `_metadata.file_path` and
    ROW_COLUMN = `_metadata.row_index`) without the rows `deleted[i]` (row indexes) marks in the
    file Spark names `spark_paths[i]`; the two columns are dropped."""
    if len(spark_paths) >= MAX_FILES:
        raise ValueError(f"{len(spark_paths)} files with deletion vectors in one read; at most {MAX_FILES - 1}")
    ordinals = spark.createDataFrame(pa.table({PATH_COLUMN: pa.array(list(spark_paths), pa.string()),
                                               _ORDINAL: pa.array(range(len(spark_paths)), pa.int64())}))
    keys = _keys(deleted)
    total = len(keys)
    deleted_df = spark.createDataFrame(pa.table({_KEY: pa.array(keys, pa.int64())}))
    if total <= BROADCAST_MAX_ROWS:
        deleted_df = F.broadcast(deleted_df)
    # A row of a file missing from `spark_paths` would lose its rows in an inner join: it fails
    # the query instead (the paths come from Spark itself, so it is a bug if it ever does).
    ordinal = F.when(F.col(_ORDINAL).isNull(), F.raise_error(F.concat(
        F.lit("skiplake: no deletion vector for a file read as one with it: "), F.col(PATH_COLUMN)))
    ).otherwise(F.col(_ORDINAL))
    rows = (df.join(F.broadcast(ordinals), PATH_COLUMN, "left")
              .withColumn(_KEY, F.shiftleft(ordinal, ROW_BITS) + F.col(ROW_COLUMN)))
    kept = rows.join(deleted_df, _KEY, "left_anti")
    return kept.select(*[F.col(f"`{c}`") for c in df.columns if c not in (PATH_COLUMN, ROW_COLUMN)])


def as_metadata_path(input_file: str) -> str:
    """A path as `DataFrame.inputFiles()` gives it, as `_metadata.file_path` gives it: the same
    encoded URI, but a local file's empty authority is `file:///` in one and `file:/` in the other."""
    return "file:/" + input_file[len("file:///"):] if input_file.startswith("file:///") else input_file


def _keys(deleted: Sequence[np.ndarray]) -> np.ndarray:
    if not deleted:
        return np.zeros(0, np.int64)
    parts = []
    for ordinal, rows in enumerate(deleted):
        rows = np.asarray(rows, dtype=np.uint64)
        if len(rows) and int(rows[-1]) >= 1 << ROW_BITS:
            raise ValueError(f"a deletion vector marks row {int(rows[-1])}, past the {1 << ROW_BITS} rows of a file")
        parts.append((np.uint64(ordinal) << np.uint64(ROW_BITS)) | rows)
    return np.concatenate(parts).astype(np.int64)
