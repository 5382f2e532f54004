"""OPTIMIZE ... ZORDER BY: rewrite files so each covers a small range of every Z-order column.

One Spark job, plus a sampling pass over the Z-order columns only:

1. Sample the Z-order and partition columns (about 100,000 rows, read column-wise), cut each
   Z-order column into equal-frequency ranges, and decide how many files each partition gets
   (its bytes over the target file size). Cut the sample's Z-values of each partition into that
   many equal runs.
2. A `mapInArrow` pass gives every row its Z-value and the number of the output file it falls in
   (partition's first file + its run), `repartitionById` sends each file's rows to one task, the
   task sorts them by Z-value, and Spark's writer writes one file per task.

Optionally the rows of each file are sorted by other columns (`sort_within`) instead of Z-value:
files still cover small ranges of every Z-order column, and the file's row groups and pages then
cover small ranges of the sort column, which Spark's reader skips by their min/max (row group
statistics, and the column index for pages). Smaller pages (`page_rows`) or row groups
(`row_group_size`) make that finer; pages cost full scans far less. TPC-DS's fact tables
(testing_support.tpcds_lake) are files by (date key, item key), rows within a file by item key, in
pages of 1,000 rows.

The files are tagged ZCUBE_ID / ZCUBE_ZORDER_BY / ZCUBE_ZORDER_CURVE; a later OPTIMIZE with the
same columns rewrites only files without that tag (new appends), as Databricks does.
"""
from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StructField, StructType

from skiplake.errors import InvalidArgumentError
from skiplake.layout.curves import ZCUBE_ID, ZCUBE_ZORDER_BY, ZCUBE_ZORDER_CURVE, Curve, cut_points, partition_keys
from skiplake.log.actions import AddFile
from skiplake.spark.optimize.optimize_result import Compaction, check_where
from skiplake.spark.session.artifacts import ship_skiplake
from skiplake.spark.session.gateway import is_connect
from skiplake.spark.writes.data_files import WriteOptions
from skiplake.txn.clustering import check_curve_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from skiplake.spark.writes.transaction import Transaction

SAMPLE_ROWS = 100_000
Z_COLUMN = "__skiplake_z"
FILE_COLUMN = "__skiplake_zfile"


def check_columns(txn: "Transaction", columns: Sequence[str], what: str = "zorder_by") -> list[str]:
    """The Z-order (or `what`) columns in the schema's spelling; errors say what is wrong and what to do."""
    return check_curve_columns(txn.path, txn.snapshot.schema, txn.snapshot.configuration, txn.partition_columns,
                               columns, what)


@dataclass(frozen=True)
class _Layout:
    """Where Z-ordered rows go: per partition key, its first output file and the Z-value cut
    points between its files; partitions the sample missed share one more file."""
    curve: Curve
    partitions: list[str]     # the partition keys the sample saw
    starts: np.ndarray        # first output file of each known partition key
    cuts: list[np.ndarray]    # Z-value cut points within each known partition key
    files: int                # output files of the known partitions
    sampled: int              # rows sampled

    @property
    def overflow(self) -> int:
        return self.files

    @property
    def tasks(self) -> int:
        return self.files + 1


def zorder(txn: "Transaction", where: str | None, columns: Sequence[str], target_file_size: int,
           progress: Callable[[str], None] | None = None, sort_within: Sequence[str] = (),
           row_group_size: int | None = None, page_rows: int | None = None, full: bool = False) -> Compaction:
    """Stage OPTIMIZE ... ZORDER BY `columns` of the files `where` selects (see the module doc):
    those not Z-ordered by these columns yet, or with `full` all of them (as Delta's ZORDER BY).

    Rows within each file are in Z-order, or sorted by `sort_within` when given (see the module
    doc); `row_group_size` sets the files' Parquet row group size in bytes, `page_rows` the most
    rows per Parquet page."""
    say = progress or (lambda _line: None)
    plan = txn.scan(where)
    check_where(txn, plan, where)
    cols = check_columns(txn, columns)
    within = check_columns(txn, sort_within, "sort_within") if sort_within else []
    for name, value, unit in (("row_group_size", row_group_size, "bytes"), ("page_rows", page_rows, "rows")):
        if value is not None and value <= 0:
            raise InvalidArgumentError(f"{txn.path}: {name} must be a positive number of {unit}, not {value}")
    tag = json.dumps(cols)
    files = list(plan.files) if full else [f for f in plan.files if (f.tags or {}).get(ZCUBE_ZORDER_BY) != tag]
    if not files:
        say(f"ZORDER BY {', '.join(cols)}: every selected file is already clustered by these columns")
        return Compaction(None)
    tags = {ZCUBE_ID: str(uuid.uuid4()), ZCUBE_ZORDER_BY: tag, ZCUBE_ZORDER_CURVE: "zorder"}
    adds = rewrite_along_curve(txn, files, cols, "zorder", target_file_size, tags, say, within=within,
                               options=WriteOptions(row_group_size=row_group_size, page_rows=page_rows))
    txn.stage("OPTIMIZE", {"predicate": [where] if where else [], "zOrderBy": cols,
                           "targetFileSize": target_file_size,
                           **({"sortWithin": within} if within else {})})
    return Compaction(txn, files, adds)


def rewrite_along_curve(txn: "Transaction", files: Sequence[AddFile], cols: list[str], curve: str,
                        target_file_size: int, tags: dict[str, str], say: Callable[[str], None],
                        within: Sequence[str] = (), options: WriteOptions | None = None,
                        provider: str | None = None) -> list[AddFile]:
    """Rewrite `files` (removed in the transaction) as files of about `target_file_size` that each
    hold a run of the rows ordered along `curve` over `cols`, within each partition; the new files
    carry `tags` (and `provider` as their clusteringProvider)."""
    df = txn.read_files(files, keep_row_ids=True)
    layout = _sample_layout(df, files, cols, list(txn.partition_columns), target_file_size, say, curve)
    placed = _placed(df, layout, list(txn.partition_columns), list(within))
    say(f"sampled {layout.sampled:,} rows: {layout.curve.bits} bits per column; writing {layout.files:,} files "
        f"over {len(layout.partitions):,} partitions in {layout.tasks:,} tasks")
    adds: list[AddFile] = txn.write(placed, data_change=False, tags=tags, options=options, provider=provider)
    say(f"wrote {len(adds):,} files ({sum(a.size for a in adds):,} bytes); committing")
    txn.remove(files, data_change=False)
    return adds


def _sample_layout(df: "DataFrame", files: Sequence[AddFile], cols: list[str], parts: list[str],
                   target_file_size: int, say: Callable[[str], None], kind: str) -> _Layout:
    """Sample the Z-order and partition columns, fit the curve, cut each partition's Z-values
    into as many equal runs as it needs files."""
    counts = [f.num_records for f in files]
    # Files written without stats: count their rows (Parquet footers answer it without a scan).
    total_rows = sum(c for c in counts if c is not None) if None not in counts else df.count()
    total_bytes = sum(f.size for f in files)
    bytes_per_row = total_bytes / max(1, total_rows)
    fraction = min(1.0, SAMPLE_ROWS / max(1, total_rows))
    say(f"{'CLUSTER' if kind == 'hilbert' else 'ZORDER'} BY {', '.join(cols)}: {len(files):,} files, {total_rows:,} rows, {total_bytes:,} bytes; "
        f"sampling {min(1.0, fraction):.2%} of the rows")
    picked = df.select(*[F.col(f"`{c}`") for c in cols + parts])
    sample = (picked if fraction >= 1.0 else picked.sample(fraction=fraction, seed=17)).toArrow()
    curve = Curve.from_sample(sample, cols, kind)
    z = curve.zvalues(sample)
    keys = partition_keys(sample, parts).to_numpy(zero_copy_only=False)
    known: list[str] = []
    starts: list[int] = []
    cuts: list[np.ndarray] = []
    next_file = 0
    for key in sorted(set(keys.tolist())):
        in_part = z[keys == key]
        n = max(1, math.ceil(len(in_part) / fraction * bytes_per_row / target_file_size))
        known.append(key)
        starts.append(next_file)
        cuts.append(cut_points(in_part, n))
        next_file += n
    return _Layout(curve, known, np.array(starts, dtype=np.int64), cuts, next_file, sample.num_rows)


def _placed(df: "DataFrame", layout: _Layout, parts: list[str], within: list[str]) -> "DataFrame":
    """`df` with each row sent to its output file's task, sorted there by partition and Z-value
    (or by `within`, then Z-value).

    A `mapInArrow` pass gives every row its Z-value and output file, `repartitionById` sends each
    file's rows to one task, and Spark's writer writes one file per task."""
    out_schema = StructType(df.schema.fields + [StructField(Z_COLUMN, LongType(), False),
                                                StructField(FILE_COLUMN, IntegerType(), False)])
    known = pa.array(layout.partitions, pa.string())
    curve, starts, cuts, overflow = layout.curve, layout.starts, layout.cuts, layout.overflow

    def place(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            zv = curve.zvalues(batch)
            found = pc.index_in(partition_keys(batch, parts), value_set=known)
            idx = pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)
            fid = np.full(len(zv), overflow, dtype=np.int32)
            for i in np.unique(idx):
                if i < 0:
                    continue
                rows = idx == i
                fid[rows] = starts[i] + np.searchsorted(cuts[i], zv[rows], side="right")
            yield pa.RecordBatch.from_arrays(
                list(batch.columns) + [pa.array(zv, pa.int64()), pa.array(fid, pa.int32())],
                names=list(batch.schema.names) + [Z_COLUMN, FILE_COLUMN])

    if is_connect(df.sparkSession):
        ship_skiplake(df.sparkSession)  # `place` runs skiplake's code in the server's workers
    return (df.mapInArrow(place, out_schema)
            .repartitionById(layout.tasks, F.col(FILE_COLUMN))
            .sortWithinPartitions(*[F.col(f"`{c}`") for c in parts + within], F.col(Z_COLUMN))
            .drop(Z_COLUMN, FILE_COLUMN))
