"""DELETE and UPDATE by deletion vectors: mark rows deleted instead of rewriting their files.

For a table with `delta.enableDeletionVectors=true`, the rows a DELETE matches (or an UPDATE
replaces) are found by one Spark pass that reports, per file, the indexes of the matching rows
(`_metadata.row_index`: physical positions, the DV's own unit). Each touched file is then logged
again under the same path with a new deletion vector, the union of its old DV and these rows,
and the old (path, DV) is removed; all the commit's new DVs go into one new DV file. The data
files are not touched: a DELETE of a few rows scattered over every file writes a few KB.

A file whose rows would all be deleted is removed outright (no add with a full DV, as delta-spark
does). A file with more than REWRITE_RATIO of its rows deleted is rewritten instead, so reads do
not keep skipping most of a file; so is a file whose stats lack numRecords (a DV needs it).
The new add keeps the file's stats, marked `tightBounds: false`: its min/max still bound the
rows left, which is all skipping needs.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Sequence

import numpy as np
from pyspark.sql import functions as F

from skiplake.log.actions import AddFile
from skiplake.log.deletion_vectors import marked_rows, write_dv_file
from skiplake.log.paths import file_key
from skiplake.log.stats import loose_bounds
from skiplake.spark.reads.planned_reads import FILE_COLUMN, ROW_COLUMN, spark_file_key

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from skiplake.spark.writes.transaction import Transaction

# Past this share of a file's physical rows deleted, the file is rewritten rather than marked.
REWRITE_RATIO = 0.5


@dataclass
class Marks:
    """What marking did: files whose rows it marked, files it removed whole, files the caller
    must rewrite (with the rows that stay), and how many rows were newly marked or removed."""
    marked: list[AddFile] = field(default_factory=list)
    removed: list[AddFile] = field(default_factory=list)
    rewrite: list[AddFile] = field(default_factory=list)
    rows: int = 0


def logical_rows(f: AddFile) -> int:
    """The rows a file holds for readers: its physical rows less its DV's."""
    return (f.num_records or 0) - int((f.deletionVector or {}).get("cardinality") or 0)


def counted_rows(txn: "Transaction", files: Sequence[AddFile]) -> int:
    """The rows `files` hold for readers: from their stats, and for files whose stats lack
    numRecords (optional in Delta: other writers may leave it out) counted by a Spark job, so
    that metrics derived from it are never wrong."""
    unknown = [f for f in files if f.num_records is None]
    known = sum(logical_rows(f) for f in files if f.num_records is not None)
    return known + (txn.read_files(unknown).count() if unknown else 0)


def matching_rows(txn: "Transaction", files: Sequence[AddFile], condition: "Column") -> dict[str, np.ndarray]:
    """The row indexes (uint64, sorted) of the rows of `files` where `condition` is TRUE, per
    log path of the files that have any; deleted rows are not among them."""
    if not files:
        return {}
    df = txn.read_files(files, with_file_info=True).filter(condition)
    hits, _ = rows_by_file(txn.path, files, df, F.col(FILE_COLUMN), F.col(ROW_COLUMN))
    return hits


def rows_by_file(table_path: str, files: Sequence[AddFile], df: "DataFrame", file_column: "Column",
                 row_column: "Column") -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The row indexes of `df`'s rows (sorted, unique) per log path of `files`, and each such
    file's path as Spark names it in `file_column`; one Spark job."""
    found = df.groupBy(file_column.alias("f")).agg(F.collect_list(row_column).alias("rows")).toArrow()
    by_path = {file_key(table_path, f.path): f.path for f in files}
    hits: dict[str, np.ndarray] = {}
    spark_paths: dict[str, str] = {}
    for spark_path, rows in zip(found.column(0).to_pylist(), found.column(1).to_pylist()):
        path = by_path[spark_file_key(spark_path)]
        hits[path] = np.unique(np.asarray(rows, dtype=np.uint64))
        spark_paths[path] = spark_path
    return hits, spark_paths


def mark_rows(txn: "Transaction", files: Sequence[AddFile], hits: dict[str, np.ndarray]) -> Marks:
    """Mark `hits` (row indexes per log path) deleted in their files, within the transaction."""
    marks = Marks()
    bitmaps: list[np.ndarray] = []
    for f in files:
        rows = hits.get(f.path)
        if rows is None or not len(rows):
            continue
        old = marked_rows(txn.path, f.deletionVector)
        union = np.union1d(old, rows).astype(np.uint64)
        physical = f.num_records
        marks.rows += len(union) - len(old)
        if physical is not None and len(union) >= physical:
            marks.removed.append(f)
        elif physical is None or len(union) > REWRITE_RATIO * physical:
            marks.rewrite.append(f)
            marks.rows -= len(union) - len(old)  # counted by the caller, from the rewrite
        else:
            marks.marked.append(f)
            bitmaps.append(union)
    txn.remove(marks.removed + marks.marked)
    if marks.marked:
        for f, dv in zip(marks.marked, write_dv_file(txn.path, bitmaps)):
            # (replace: the file keeps the rest of its add, its row ids and clustering included)
            txn.actions.append(replace(f, dataChange=True, stats=loose_bounds(f.stats), deletionVector=dv.to_json()))
    return marks
