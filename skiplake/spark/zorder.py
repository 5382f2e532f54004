"""OPTIMIZE ... ZORDER BY: rewrite files so each covers a small range of every Z-order column.

One Spark job, plus a sampling pass over the Z-order columns only:

1. Sample the Z-order and partition columns (about 100,000 rows, read column-wise), cut each
   Z-order column into equal-frequency ranges, and decide how many files each partition gets
   (its bytes over the target file size). Cut the sample's Z-values of each partition into that
   many equal runs.
2. A `mapInArrow` pass gives every row its Z-value and the number of the output file it falls in
   (partition's first file + its run), `repartitionById` sends each file's rows to one task, the
   task sorts them by Z-value, and Spark's writer writes one file per task.

The files are tagged ZCUBE_ID / ZCUBE_ZORDER_BY / ZCUBE_ZORDER_CURVE; a later OPTIMIZE with the
same columns rewrites only files without that tag (new appends), as Databricks does.
"""
from __future__ import annotations

import json
import math
import uuid
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StructField, StructType

from skiplake.errors import InvalidArgumentError
from skiplake.layout.zorder import (ZCUBE_ID, ZCUBE_ZORDER_BY, ZCUBE_ZORDER_CURVE, Curve, cut_points,
                                    partition_keys)
from skiplake.log.schema import is_primitive
from skiplake.log.stats import DEFAULT_NUM_INDEXED_COLS, _leaf_columns

if TYPE_CHECKING:
    from skiplake.log.actions import AddFile
    from skiplake.spark.optimize import OptimizeResult
    from skiplake.table import Table, Transaction

SAMPLE_ROWS = 100_000
Z_COLUMN = "__skiplake_z"
FILE_COLUMN = "__skiplake_zfile"


def check_columns(txn: "Transaction", columns: Sequence[str]) -> list[str]:
    """The Z-order columns in the schema's spelling; errors say what is wrong and what to do."""
    schema = txn.snapshot.schema
    parts = {p.lower() for p in txn.partition_columns}
    with_stats = {path[0].lower() for path, _ in _leaf_columns(schema, parts, DEFAULT_NUM_INDEXED_COLS)
                  if len(path) == 1}
    out: list[str] = []
    for c in columns:
        f = schema.find(c)
        if f is None:
            raise InvalidArgumentError(f"zorder_by: unknown column {c!r}; the table's columns are {', '.join(schema.names)}")
        if f.name.lower() in parts:
            raise InvalidArgumentError(
                f"zorder_by: {f.name!r} is a partition column; every file already holds one value of it. "
                "Z-order by data columns.")
        if not is_primitive(f.type) or f.type == "binary":
            raise InvalidArgumentError(f"zorder_by: column {f.name!r} of type {f.type} has no min/max stats to skip by")
        if f.name.lower() not in with_stats:
            raise InvalidArgumentError(
                f"zorder_by: column {f.name!r} is not among the first {DEFAULT_NUM_INDEXED_COLS} columns that get "
                "stats, so clustering by it would not let any file be skipped")
        if f.name in out:
            raise InvalidArgumentError(f"zorder_by: column {f.name!r} is named twice")
        out.append(f.name)
    if not out:
        raise InvalidArgumentError("zorder_by: name at least one column")
    return out


def zorder(table: "Table", where: str | None, columns: Sequence[str], target_file_size: int,
           stage_only: bool = False, progress: Callable[[str], None] | None = None) -> "OptimizeResult | Transaction":
    from skiplake.spark.optimize import OptimizeResult, check_where
    say = progress or (lambda _line: None)
    txn = table.begin()
    plan = txn.scan(where)
    check_where(txn, plan, where)
    cols = check_columns(txn, columns)
    tag = json.dumps(cols)
    files = [f for f in plan.files if (f.tags or {}).get(ZCUBE_ZORDER_BY) != tag]
    if not files:
        say(f"ZORDER BY {', '.join(cols)}: every selected file is already clustered by these columns")
        return OptimizeResult(None, 0, 0, 0, 0, 0)
    parts = list(txn.partition_columns)
    df = txn.read_files(files)
    counts = [f.num_records for f in files]
    # Files written without stats: count their rows (Parquet footers answer it without a scan).
    total_rows = sum(c for c in counts if c is not None) if None not in counts else df.count()
    total_bytes = sum(f.size for f in files)
    bytes_per_row = total_bytes / max(1, total_rows)
    fraction = min(1.0, SAMPLE_ROWS / max(1, total_rows))
    say(f"ZORDER BY {', '.join(cols)}: {len(files):,} files, {total_rows:,} rows, {total_bytes:,} bytes; "
        f"sampling {min(1.0, fraction):.2%} of the rows")
    picked = df.select(*[F.col(f"`{c}`") for c in cols + parts])
    sample = (picked if fraction >= 1.0 else picked.sample(fraction=fraction, seed=17)).toArrow()
    curve = Curve.from_sample(sample, cols)
    z = curve.zvalues(sample)
    keys = partition_keys(sample, parts).to_numpy(zero_copy_only=False)
    layout: dict[str, tuple[int, np.ndarray]] = {}
    next_file = 0
    for key in sorted(set(keys.tolist())):
        in_part = z[keys == key]
        est_bytes = len(in_part) / fraction * bytes_per_row
        n = max(1, math.ceil(est_bytes / target_file_size))
        layout[key] = (next_file, cut_points(in_part, n))
        next_file += n
    # Partitions the sample missed are small: they share one more task (one file each).
    overflow = next_file
    num_tasks = next_file + 1
    out_schema = StructType(df.schema.fields + [StructField(Z_COLUMN, LongType(), False),
                                                StructField(FILE_COLUMN, IntegerType(), False)])
    known = pa.array(list(layout), pa.string())
    starts = np.array([layout[k][0] for k in layout], dtype=np.int64)
    cuts = [layout[k][1] for k in layout]

    def place(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
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

    placed = (df.mapInArrow(place, out_schema)
              .repartitionById(num_tasks, F.col(FILE_COLUMN))
              .sortWithinPartitions(*[F.col(f"`{p}`") for p in parts], F.col(Z_COLUMN))
              .drop(Z_COLUMN, FILE_COLUMN))
    tags = {ZCUBE_ID: str(uuid.uuid4()), ZCUBE_ZORDER_BY: tag, ZCUBE_ZORDER_CURVE: "zorder"}
    say(f"sampled {sample.num_rows:,} rows: {curve.bits} bits per column; writing {next_file:,} files "
        f"over {len(layout):,} partitions in {num_tasks:,} tasks")
    adds: list["AddFile"] = txn.write(placed, data_change=False, tags=tags)
    say(f"wrote {len(adds):,} files ({sum(a.size for a in adds):,} bytes); committing")
    txn.remove(files, data_change=False)
    txn.stage("OPTIMIZE", {"predicate": [where] if where else [], "zOrderBy": cols,
                           "targetFileSize": target_file_size})
    if stage_only:
        return txn
    version = txn.commit()
    touched = len({tuple(sorted((f.partitionValues or {}).items())) for f in files})
    return OptimizeResult(version, len(files), len(adds), total_bytes, sum(a.size for a in adds), touched)
