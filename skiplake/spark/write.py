"""Writing a DataFrame as data files of a table: Spark's native Parquet writer, then footer stats.

Spark writes into a private staging folder under the table root (so concurrent jobs never share
Spark's `_temporary` folder), then each finished file is renamed into its Hive-style partition
folder. Nothing is visible to readers until the commit names the files in the log.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass

from pyspark.sql import DataFrame

from skiplake.errors import PartitionValueError
from skiplake.layout.partitioning import parse_partition_dir, to_log_path
from skiplake.log.actions import AddFile
from skiplake.log.schema import Schema, is_primitive
from skiplake.log.stats import DEFAULT_NUM_INDEXED_COLS, many_file_stats

STAGING_DIR = "_skiplake_staging"
_PARTITION_TYPES_REFUSED = {"binary"}
MAX_NAME_BYTES = 255


@dataclass(frozen=True)
class WriteOptions:
    max_records_per_file: int | None = None
    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS
    compression: str = "snappy"


def check_partition_types(table_path: str, schema: Schema, partition_columns: list[str]) -> None:
    for name in partition_columns:
        f = schema.find(name)
        if f is None:
            raise PartitionValueError(table_path, name, None, "the partition column is not in the schema")
        if not is_primitive(f.type) or f.type in _PARTITION_TYPES_REFUSED:
            raise PartitionValueError(table_path, name, f"<{f.type if isinstance(f.type, str) else f.type['type']}>",
                                      "values of this type have no partition value encoding")


def write_files(df: DataFrame, table_path: str, schema: Schema, partition_columns: list[str],
                options: WriteOptions | None = None, data_change: bool = True,
                tags: dict[str, str] | None = None) -> list[AddFile]:
    """Write `df` (already conformed to `schema`) as Parquet files under `table_path`; return their adds."""
    options = options or WriteOptions()
    check_partition_types(table_path, schema, partition_columns)
    staging = os.path.join(table_path, STAGING_DIR, uuid.uuid4().hex)
    writer = df.write.mode("errorifexists").format("parquet").option("compression", options.compression)
    if options.max_records_per_file:
        writer = writer.option("maxRecordsPerFile", str(options.max_records_per_file))
    if partition_columns:
        writer = writer.partitionBy(*partition_columns)
    try:
        writer.save(staging)
    except Exception as e:
        shutil.rmtree(staging, ignore_errors=True)
        _explain_write_failure(e, df, table_path, partition_columns)
        raise
    try:
        moved = _move_into_table(staging, table_path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not moved:
        return []
    full_paths = [os.path.join(table_path, rel) for rel, _ in moved]
    stats = many_file_stats(full_paths, schema, partition_columns, options.num_indexed_cols)
    adds = []
    for (rel, values), full, st in zip(moved, full_paths, stats):
        if json.loads(st)["numRecords"] == 0:
            os.unlink(full)  # Spark writes an empty file for an empty DataFrame; the log needs none
            continue
        info = os.stat(full)
        adds.append(AddFile(path=to_log_path(rel), partitionValues=values, size=info.st_size,
                            modificationTime=int(info.st_mtime * 1000), dataChange=data_change,
                            stats=st, tags=dict(tags) if tags else None))
    return adds


def _move_into_table(staging: str, table_path: str) -> list[tuple[str, dict[str, str | None]]]:
    moved: list[tuple[str, dict[str, str | None]]] = []
    for root, _dirs, files in os.walk(staging):
        rel_dir = os.path.relpath(root, staging)
        rel_dir = "" if rel_dir == "." else rel_dir
        for name in files:
            if not name.endswith(".parquet") or name.startswith((".", "_")):
                continue  # Spark's .crc side files and markers stay behind
            rel = os.path.join(rel_dir, name) if rel_dir else name
            dest = os.path.join(table_path, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            os.rename(os.path.join(root, name), dest)
            moved.append((rel, parse_partition_dir(rel_dir)))
    return moved


def _explain_write_failure(error: Exception, df: DataFrame, table_path: str, partition_columns: list[str]) -> None:
    """Turn Spark's failure on an unwritable partition value into a PartitionValueError naming it.

    Checked only after a failed write, so successful writes pay nothing for it."""
    from pyspark.sql import functions as F
    for col in partition_columns:
        try:
            row = (df.select(F.col(f"`{col}`").cast("string").alias("v"))
                   .where(F.length(F.encode("v", "UTF-8")) > MAX_NAME_BYTES - len(col.encode()) - 1)
                   .limit(1).collect())
        except Exception:
            return  # the failure was elsewhere (the input itself cannot be computed)
        if row:
            raise PartitionValueError(table_path, col, row[0]["v"][:40] + "...",
                                      f"its folder name would exceed the filesystem's {MAX_NAME_BYTES} bytes"
                                      ) from error
