"""Writing a DataFrame as data files of a table: Spark's native Parquet writer, then footer stats.

Spark writes into a private staging folder under the table root (so concurrent jobs never share
Spark's `_temporary` folder), then each finished file is renamed into its Hive-style partition
folder. Nothing is visible to readers until the commit names the files in the log.

On an object store a rename is a copy, so nothing is renamed: Spark writes each job under its
own prefix `_skiplake_writes/<uuid>/` with S3A's magic committer (which completes multipart
uploads at job commit instead of renaming task output), and the log names the files where they
are. Partition folders sit under that prefix (readers take partition values from the log); a
bucketed table's files are written by Spark's bucketed writer, which puts the bucket id in the
name itself.
"""
from __future__ import annotations

import json
import os
import posixpath
import shutil
import uuid
from dataclasses import dataclass, replace
from typing import Mapping

from pyspark.sql import DataFrame, DataFrameWriter
from pyspark.sql import functions as F

from skiplake.errors import InvalidArgumentError, PartitionValueError
from skiplake.layout.bucket_spec import BUCKET_COLUMN, BUCKET_TAG, BucketSpec, bucket_file_name, bucket_id_from_name
from skiplake.layout.partitioning import check_partition_types, parse_partition_dir
from skiplake.log.actions import AddFile
from skiplake.log.location import is_remote, join, relative
from skiplake.log.paths import to_log_path
from skiplake.log.schema import Schema
from skiplake.log.stats import DEFAULT_NUM_INDEXED_COLS, many_file_stats, stats_settings
from skiplake.log.storage_for import storage_at
from skiplake.spark.session.object_stores import check_s3a

STAGING_DIR = "_skiplake_staging"
WRITES_DIR = "_skiplake_writes"
MAX_NAME_BYTES = 255


@dataclass(frozen=True)
class WriteOptions:
    """How new data files are written: rows per file, the columns that get stats, compression, and
    the sizes of bucket files, row groups and pages."""
    max_records_per_file: int | None = None
    # Leaf columns that get stats; None: the table's delta.dataSkippingNumIndexedCols (32 when
    # unset) or delta.dataSkippingStatsColumns, as the table's properties say.
    num_indexed_cols: int | None = None
    stats_columns: tuple[str, ...] | None = None
    compression: str = "snappy"
    # A bucketed table gets one file per bucket per partition, split only past this size
    # (rows per file estimated from the table's stored bytes per row).
    target_file_size: int = 512 * 1024 * 1024
    # Parquet row group size in bytes (Parquet's default, 128 MiB, when None): smaller row groups
    # give readers finer min/max statistics to skip by, at some cost to full scans.
    row_group_size: int | None = None
    # Most rows per Parquet page (Parquet's default, 20,000, when None). Spark's reader skips
    # pages by the column index's min/max too, so small pages of sorted data skip most rows of
    # a file for a point filter, while full scans keep the few large row groups they read best.
    page_rows: int | None = None


def bucketed(df: DataFrame, spec: BucketSpec, partition_columns: list[str]) -> DataFrame:
    """`df` with each row's bucket id in BUCKET_COLUMN, laid out so that every (partition, bucket)
    lands whole in one task, sorted by the bucket's sort columns: one file per bucket per
    partition instead of Spark's one per task per bucket."""
    if BUCKET_COLUMN.lower() in (c.lower() for c in df.columns):
        raise InvalidArgumentError(f"a bucketed table cannot take a column named {BUCKET_COLUMN!r} (the writer uses "
                                   "that name for each row's bucket id); rename the column")
    df = df.withColumn(BUCKET_COLUMN, F.expr(spec.bucket_sql()))
    bucket = F.col(BUCKET_COLUMN)
    parts = [F.col(f"`{p}`") for p in partition_columns]
    if parts:
        # Hashing (partition, bucket) keeps each pair in one task; AQE may merge small tasks.
        df = df.repartition(max(spec.num_buckets, _shuffle_partitions(df)), *parts, bucket)
    else:
        df = df.repartitionById(spec.num_buckets, bucket)  # task i writes bucket i
    return df.sortWithinPartitions(*parts, bucket, *[F.col(f"`{c}`") for c in spec.sort_by])


def _shuffle_partitions(df: DataFrame) -> int:
    return int(df.sparkSession.conf.get("spark.sql.shuffle.partitions") or 200)


def write_files(df: DataFrame, table_path: str, schema: Schema, partition_columns: list[str],
                options: WriteOptions | None = None, data_change: bool = True,
                tags: dict[str, str] | None = None, bucket_spec: BucketSpec | None = None,
                bytes_per_row: float | None = None) -> list[AddFile]:
    """Write `df` (already conformed to `schema`) as Parquet files under `table_path`; return their adds.

    With a bucket spec, rows are bucketed as Spark's bucketBy would place them; each file's bucket
    id goes into its name and its tags."""
    options = options or WriteOptions()
    check_partition_types(table_path, schema, partition_columns)
    remote = is_remote(table_path)
    staging = join(table_path, WRITES_DIR if remote else STAGING_DIR, uuid.uuid4().hex)
    max_records = options.max_records_per_file
    if bucket_spec is not None:
        df = bucketed(df, bucket_spec, partition_columns)
        if max_records is None and bytes_per_row:
            max_records = max(1, int(options.target_file_size / bytes_per_row))
    if remote:
        check_s3a(df.sparkSession, table_path)
    try:
        if remote and bucket_spec is not None:
            _save_bucketed(df, staging, options, max_records, partition_columns, bucket_spec)
        else:
            dirs = list(partition_columns) + ([BUCKET_COLUMN] if bucket_spec is not None else [])
            _writer(df, options, max_records, dirs).save(staging)
    except Exception as e:
        _discard(staging)
        _explain_write_failure(e, df, table_path, partition_columns)
        raise
    if remote:
        written = _written_in_place(table_path, staging, bucket_spec is not None)
    else:
        try:
            written = _move_into_table(staging, table_path)
        finally:
            _discard(staging)
    if not written:
        return []
    return _adds(table_path, written, schema, partition_columns, options, data_change, tags)


def with_table_stats(options: WriteOptions | None, configuration: Mapping[str, str],
                     column_mapping: str = "none") -> WriteOptions:
    """`options` with the stats columns the table's properties choose, unless they set their own."""
    options = options or WriteOptions()
    if options.num_indexed_cols is not None:
        return options
    try:
        limit, names = stats_settings(configuration)
    except ValueError as e:
        raise InvalidArgumentError(f"the table's properties: {e}") from None
    # Stats columns are named by logical names; a mapped table's files use physical ones.
    names = names if column_mapping == "none" else None
    return replace(options, num_indexed_cols=limit, stats_columns=tuple(names) if names is not None else None)


def _writer(df: DataFrame, options: WriteOptions, max_records: int | None, dirs: list[str]) -> DataFrameWriter:
    # "error", not its alias "errorifexists": a Spark Connect writer knows only append,
    # overwrite, error and ignore.
    writer = df.write.mode("error").format("parquet").option("compression", options.compression)
    if max_records:
        writer = writer.option("maxRecordsPerFile", str(max_records))
    if options.row_group_size:
        writer = writer.option("parquet.block.size", str(options.row_group_size))
    if options.page_rows:
        writer = writer.option("parquet.page.row.count.limit", str(options.page_rows))
    return writer.partitionBy(*dirs) if dirs else writer


def _save_bucketed(df: DataFrame, staging: str, options: WriteOptions, max_records: int | None,
                   partition_columns: list[str], spec: BucketSpec) -> None:
    """A bucketed write where files cannot be renamed (object stores): Spark's own bucketed
    writer names each file with its bucket id (`..._00003.c000.snappy.parquet`), through a
    throwaway external table over `staging` whose entry is dropped at once (the files stay).
    Its bucket ids are the ones skiplake computes: Spark's hash, the same spec."""
    # In the built-in catalog whatever the session's default catalog is (a Glue or Iceberg one
    # must not see it).
    name = f"spark_catalog.default.skiplake_write_{uuid.uuid4().hex}"
    writer = _writer(df.drop(BUCKET_COLUMN), options, max_records, list(partition_columns))
    writer = writer.bucketBy(spec.num_buckets, *spec.columns)
    if spec.sort_by:
        writer = writer.sortBy(*spec.sort_by)
    try:
        writer.option("path", staging).saveAsTable(name)
    finally:
        df.sparkSession.sql(f"DROP TABLE IF EXISTS {name}")


def _adds(table_path: str, written: list["_Written"], schema: Schema, partition_columns: list[str],
          options: WriteOptions, data_change: bool, tags: dict[str, str] | None) -> list[AddFile]:
    """The add actions of written files, with their footer stats; empty files are deleted."""
    full_paths = [join(table_path, w.rel) for w in written]
    limit = DEFAULT_NUM_INDEXED_COLS if options.num_indexed_cols is None else options.num_indexed_cols
    stats = many_file_stats(full_paths, schema, partition_columns, limit, options.stats_columns)
    adds, empty = [], []
    for w, full, st in zip(written, full_paths, stats):
        if json.loads(st)["numRecords"] == 0:
            empty.append(w.rel)  # Spark writes an empty file for an empty DataFrame; the log needs none
            continue
        size, mtime_ms = w.size_mtime if w.size_mtime is not None else _local_size_mtime(full)
        file_tags = dict(tags or {})
        if w.bucket is not None:
            file_tags[BUCKET_TAG] = str(w.bucket)
        adds.append(AddFile(path=to_log_path(w.rel), partitionValues=w.values, size=size,
                            modificationTime=mtime_ms, dataChange=data_change, stats=st, tags=file_tags or None))
    if empty:
        storage_at(table_path).delete_many(empty)
    return adds


@dataclass(frozen=True)
class _Written:
    rel: str                                  # path below the table root
    values: dict[str, str | None]             # partition values from the folder names
    bucket: int | None
    size_mtime: tuple[int, int] | None = None  # known from an object-store listing


def _local_size_mtime(path: str) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_size, int(info.st_mtime * 1000)


def _discard(staging: str) -> None:
    if is_remote(staging):
        storage = storage_at(staging)
        storage.delete_many([o.name for o in storage.walk()])
    else:
        shutil.rmtree(staging, ignore_errors=True)


def _folder_values(rel_dir: str) -> tuple[dict[str, str | None], int | None, str]:
    """Partition values and bucket id of a folder Spark wrote, and the folder without its bucket level."""
    values = parse_partition_dir(rel_dir)
    bucket_value = values.pop(BUCKET_COLUMN, None)
    bucket = int(bucket_value) if bucket_value is not None else None
    if bucket is not None:
        rel_dir = posixpath.dirname(rel_dir)
    return values, bucket, rel_dir


def _hidden(rel: str) -> bool:
    """A file Spark's readers would skip: a name or folder starting with . or _ (a committer's
    leftovers, e.g. S3A's __magic_job-* if a job's cleanup failed), partition folders aside."""
    parts = rel.split("/")
    return any(p.startswith(".") or (p.startswith("_") and "=" not in p) for p in parts[:-1]) \
        or parts[-1].startswith((".", "_"))


def _written_in_place(table_path: str, staging: str, bucketed: bool) -> list[_Written]:
    """The data files Spark wrote under `staging` on an object store, left where they are."""
    prefix = relative(table_path, staging)
    out = []
    for obj in storage_at(staging).walk():
        name = posixpath.basename(obj.name)
        if not name.endswith(".parquet") or _hidden(obj.name):
            continue
        values, bucket, _ = _folder_values(posixpath.dirname(obj.name))
        if bucket is None and bucketed:
            bucket = bucket_id_from_name(name)  # written by _save_bucketed
        out.append(_Written(f"{prefix}/{obj.name}", values, bucket, (obj.size, obj.mtime_ms)))
    return out


def _move_into_table(staging: str, table_path: str) -> list[_Written]:
    """Rename Spark's output into the table's partition folders; a bucket folder level written
    for BUCKET_COLUMN becomes the bucket suffix of the file's name instead."""
    moved: list[_Written] = []
    for root, _dirs, files in os.walk(staging):
        rel_dir = os.path.relpath(root, staging)
        values, bucket, rel_dir = _folder_values("" if rel_dir == "." else rel_dir)
        for name in files:
            if not name.endswith(".parquet") or name.startswith((".", "_")):
                continue  # Spark's .crc side files and markers stay behind
            name_out = name if bucket is None else bucket_file_name(name, bucket)
            rel = os.path.join(rel_dir, name_out) if rel_dir else name_out
            dest = os.path.join(table_path, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            os.rename(os.path.join(root, name), dest)
            moved.append(_Written(rel, values, bucket))
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
