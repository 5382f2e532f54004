"""Reading a planned list of data files with Spark's native Parquet reader.

Partition values come from the log, never from guessing at folder names. When every file sits
in the Hive-style folder that spells its logged partition values (always so for files skiplake
or delta-spark wrote), Spark reads them in one scan with `basePath`, and the schema we pass gives
the partition columns their types. Otherwise files are read per partition with the values as
literals.
"""
from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from skiplake.layout.bucket_spec import BucketSpec, bucket_spec_of, files_without_bucket_ids
from skiplake.layout.partitioning import parse_partition_dir
from skiplake.log.actions import AddFile
from skiplake.log.column_mapping import physical_names, physical_schema, without_mapping
from skiplake.log.deletion_vectors import marked_rows
from skiplake.log.location import dirname, from_spark_uri, is_under, norm, relative, resolve
from skiplake.log.paths import absolute_path, file_key
from skiplake.log.schema import Schema
from skiplake.log.snapshot import Snapshot
from skiplake.log.values import parse_partition_value
from skiplake.spark.reads.deleted_rows import PATH_COLUMN as DV_PATH_COLUMN
from skiplake.spark.reads.deleted_rows import ROW_COLUMN as DV_ROW_COLUMN
from skiplake.spark.reads.deleted_rows import SIZE_COLUMN as DV_SIZE_COLUMN
from skiplake.spark.reads.deleted_rows import as_metadata_path, without_deleted
from skiplake.spark.session.spark_types import spark_type, to_spark

FILE_COLUMN = "__skiplake_file"
ROW_COLUMN = "__skiplake_row"


def _extra_columns(with_file_info: bool, file_column: str | None) -> list:
    out = []
    if with_file_info:
        out += [F.col("_metadata.file_path").alias(FILE_COLUMN), F.col("_metadata.row_index").alias(ROW_COLUMN)]
    if file_column:
        out.append(F.col("_metadata.file_name").alias(file_column))
    return out


def path_from_spark(file_path: str) -> str:
    """The path (local, or an object-store URI) of a file URI Spark reports (`_metadata.file_path`)."""
    return from_spark_uri(file_path)


def spark_file_key(file_path: str) -> str:
    """What a file Spark reports is compared by with the log's files (paths.file_key)."""
    return norm(path_from_spark(file_path))


_FILE_KEY = "__skiplake_file_key"


def with_file_values(df: DataFrame, root: str, values: Mapping[str, tuple], fields: pa.Schema) -> DataFrame:
    """`df` (read with file info) with each row's file's values as columns named by `fields`.

    `values` maps each file's log path (under `root`) to its values. They are joined by the path
    Spark reads the file at, through a broadcast of one row per file: no work per row but the
    join's lookup. A file Spark lists that `values` does not name is a bug, and raises."""
    by_key = {file_key(root, p): v for p, v in values.items()}
    listed = df.inputFiles()
    found = [by_key.get(spark_file_key(p)) for p in listed]
    rows = [r for r in found if r is not None]
    if len(rows) < len(found):
        missing = [p for p, r in zip(listed, found) if r is None]
        raise RuntimeError(f"Spark reads {missing[:3]} under {root}, which are not among the files asked for")
    if len({spark_file_key(p) for p in listed}) != len(by_key):
        raise RuntimeError(f"Spark lists {len(listed)} files where {len(by_key)} were asked for under {root}")
    table = pa.table([pa.array([as_metadata_path(p) for p in listed], pa.string())]
                     + [pa.array([r[i] for r in rows], f.type) for i, f in enumerate(fields)],
                     names=[_FILE_KEY, *fields.names])
    per_file = df.sparkSession.createDataFrame(table)
    return df.join(F.broadcast(per_file), F.col(FILE_COLUMN) == F.col(_FILE_KEY)).drop(_FILE_KEY)


def _same_values(from_dir: dict[str, str | None], logged: dict[str, str | None], columns: list[str]) -> bool:
    for c in columns:
        a, b = from_dir.get(c), logged.get(c)
        if (a or None) != (b or None):
            return False
    return True


def hive_layout(table_path: str, partition_columns: list[str], files: Sequence[AddFile]) -> bool:
    """Whether every file sits in the Hive-style folder that spells its logged partition values."""
    if not partition_columns:
        return True
    root = resolve(table_path)
    for f in files:
        p = absolute_path(root, f.path)
        if not is_under(root, p):
            return False
        folder = relative(root, dirname(p)).replace(os.sep, "/")
        # One folder level per partition column, nothing between (object-store writes keep
        # files under a per-write prefix, which Spark's partition discovery would trip on).
        if folder.count("/") + 1 != len(partition_columns) or not _same_values(
                parse_partition_dir(folder), f.partitionValues, partition_columns):
            return False
    return True


@dataclass(frozen=True)
class ReadRequest:
    """What a read asks for: exactly `files` of the table at `table_path`, with the table's
    columns (partition columns included), without the rows their deletion vectors mark deleted.

    with_file_info adds FILE_COLUMN (the file's path as Spark names it) and ROW_COLUMN (the
    row's index in its file), which identify every target row of a DELETE/UPDATE/MERGE.
    file_column adds a column of each row's file name under that name (a filter on it prunes
    files). bucket_spec declares the files bucketed to Spark (see bucketed_relation): the caller
    checks that every file carries its bucket id in its name and that the files are in Hive
    layout. tag is a reader option (name, value) that names the relation in Spark's plans.
    column_mapping (`name` or `id`) reads the files' physical column names (the files' partition
    values keyed by logical names, as Snapshot gives them) and renames them to the logical ones.
    `deleted` (row indexes by log path) drops more rows of the files it names, as a deletion
    vector would (rows a MERGE is about to mark deleted)."""
    table_path: str
    schema: Schema
    partition_columns: Sequence[str]
    files: Sequence[AddFile]
    columns: Sequence[str] | None = None
    with_file_info: bool = False
    bucket_spec: BucketSpec | None = None
    file_column: str | None = None
    tag: tuple[str, str] | None = None
    column_mapping: str = "none"
    deleted: Mapping[str, np.ndarray] | None = None


def read_files(spark: SparkSession, table_path: str, schema: Schema, partition_columns: list[str],
               files: Sequence[AddFile], columns: Sequence[str] | None = None,
               with_file_info: bool = False, bucket_spec: BucketSpec | None = None,
               file_column: str | None = None, tag: tuple[str, str] | None = None,
               column_mapping: str = "none", deleted: Mapping[str, np.ndarray] | None = None) -> DataFrame:
    """read(ReadRequest(...)) with the request's fields as arguments."""
    return read(spark, ReadRequest(table_path, schema, partition_columns, files, columns, with_file_info,
                                   bucket_spec, file_column, tag, column_mapping, deleted))


def read(spark: SparkSession, request: ReadRequest) -> DataFrame:
    """A DataFrame over exactly the request's files (see ReadRequest). Files with a deletion
    vector (or rows in `deleted`) are read apart and their deleted rows dropped
    (_read_with_deletions); the others in one relation."""
    deleted = {p: rows for p, rows in (request.deleted or {}).items() if len(rows)}
    with_dv = [f for f in request.files if f.deletionVector or f.path in deleted]
    if with_dv:
        df = _read_with_deletions(spark, request, with_dv, deleted)
    else:
        df = _read_exactly(spark, request, request.files)
    return df.select(*[f"`{c}`" for c in request.columns]) if request.columns else df


def _read_with_deletions(spark: SparkSession, request: ReadRequest, with_dv: list[AddFile],
                         deleted: Mapping[str, np.ndarray]) -> DataFrame:
    """The request's rows when `with_dv` of its files have rows to drop: those files by a second
    relation whose deleted rows skiplake.spark.reads.deleted_rows drops, unioned with the others. Such a
    read is not declared bucketed (Spark's bucketed scan is one relation)."""
    unbucketed = replace(request, bucket_spec=None)
    plain = [f for f in request.files if not f.deletionVector and f.path not in deleted]
    marked = _read_exactly(spark, unbucketed, with_dv, dv_columns=True)
    root = resolve(request.table_path)
    by_path = {file_key(root, f.path): f for f in with_dv}
    spark_paths = marked.inputFiles()
    found = [by_path.get(spark_file_key(p)) for p in spark_paths]
    files = [f for f in found if f is not None]
    if len(files) < len(found) or len(found) != len(with_dv):
        raise RuntimeError(f"Spark lists {len(spark_paths)} files where {len(with_dv)} with deletion vectors "
                           f"were asked for under {request.table_path}")
    dropped = [_dropped(root, f, deleted) for f in files]
    df = without_deleted(spark, marked, [as_metadata_path(p) for p in spark_paths], dropped,
                         [f.size for f in files])
    if plain:
        df = _read_exactly(spark, unbucketed, plain).unionByName(df)
    return df


def _dropped(root: str, f: AddFile, deleted: Mapping[str, np.ndarray]) -> np.ndarray:
    """The rows of `f` its DV marks and `deleted` adds (sorted, unique)."""
    rows = marked_rows(root, f.deletionVector)
    more = deleted.get(f.path)
    # A DV's rows are sorted and unique already: a union only where there is something to add.
    return rows if more is None else np.union1d(rows, more).astype(np.uint64)


def _read_exactly(spark: SparkSession, request: ReadRequest, files: Sequence[AddFile],
                  dv_columns: bool = False) -> DataFrame:
    """Every row of `files` (deletion vectors not applied), all the table's columns and the
    extra ones the request asks for; dv_columns adds the three columns skiplake.spark.reads.deleted_rows
    drops deleted rows by."""
    if request.column_mapping != "none" and files:
        return _read_mapped(spark, request, files, dv_columns)
    schema, partition_columns = request.schema, list(request.partition_columns)
    full_schema = to_spark(schema)
    extra = _extra_columns(request.with_file_info, request.file_column)
    if dv_columns:
        extra += [F.col("_metadata.file_path").alias(DV_PATH_COLUMN), F.col("_metadata.row_index").alias(DV_ROW_COLUMN),
                  F.col("_metadata.file_size").alias(DV_SIZE_COLUMN)]
    if not files:
        return _read_nothing(spark, request)
    root = resolve(request.table_path)
    paths = [absolute_path(root, f.path) for f in files]
    if not hive_layout(root, partition_columns, files):
        return _read_by_partition(spark, schema, partition_columns, files, paths, extra, request.tag)
    options = ({"basePath": root} if partition_columns else {}) | (dict([request.tag]) if request.tag else {})
    df = spark.read.schema(full_schema).options(**options).parquet(*paths)
    if request.bucket_spec is not None:
        df = bucketed_relation(df, request.bucket_spec)
    return _in_table_order(df, schema, partition_columns, extra)


def _in_table_order(df: DataFrame, schema: Schema, partition_columns: list[str], extra: list[Column]) -> DataFrame:
    """The table's columns in its order, then `extra`. Spark puts partition columns last; a
    select that changes nothing still costs an analysis, so it is left out then."""
    lowered = {c.lower() for c in partition_columns}
    natural = [n for n in schema.names if n.lower() not in lowered] + partition_columns
    if natural != list(schema.names) or extra:
        df = df.select(*[f"`{n}`" for n in schema.names], *extra)
    return df


def _read_nothing(spark: SparkSession, request: ReadRequest) -> DataFrame:
    """No rows, with the columns of a read of some files: a caller selects them whatever it read."""
    df = spark.createDataFrame([], to_spark(request.schema))
    if request.with_file_info:
        df = df.withColumn(FILE_COLUMN, F.lit(None).cast("string")).withColumn(ROW_COLUMN, F.lit(None).cast("long"))
    if request.file_column:
        df = df.withColumn(request.file_column, F.lit(None).cast("string"))
    return df


def _read_mapped(spark: SparkSession, request: ReadRequest, files: Sequence[AddFile], dv_columns: bool) -> DataFrame:
    """_read_exactly of a table with column mapping: the files read under their physical names,
    then every column given its logical name (and nested fields theirs: a cast between structs
    of the same shape renames by position)."""
    schema, mode = request.schema, request.column_mapping
    phys = physical_names(schema, mode)
    renamed = [replace(f, partitionValues={phys.get(k, k): v for k, v in (f.partitionValues or {}).items()})
               for f in files]
    physical = replace(request, schema=physical_schema(schema, mode, mode == "id"),
                       partition_columns=[phys[c] for c in request.partition_columns], files=renamed,
                       columns=None, column_mapping="none")
    df = _read_exactly(spark, physical, renamed, dv_columns)
    # Nested fields keep no mapping metadata (ids, physical names), as delta-spark's reads: it
    # would otherwise show in the DataFrame's schema and travel into tables it is written to.
    logical = [F.col(f"`{phys[f.name]}`").cast(spark_type(f.type)).alias(f.name) if isinstance(f.type, dict)
               else F.col(f"`{phys[f.name]}`").alias(f.name) for f in without_mapping(schema).fields]
    return df.select(*logical, *[F.col(f"`{c}`") for c in df.columns[len(schema.fields):]])


# A reader option naming the table and version a relation reads (lake.prune finds them by it).
READ_TAG = "skiplake.read"


def read_tag(snapshot: Snapshot) -> tuple[str, str]:
    """The READ_TAG reader option (name, value) naming `snapshot`'s table and version."""
    return READ_TAG, f"{snapshot.version}@{snapshot.table_path}"


def parse_read_tag(value: str) -> tuple[str, int]:
    """(table path, version) of a READ_TAG value."""
    version, _, path = value.partition("@")
    return path, int(version)


def read_planned(spark: SparkSession, snapshot: Snapshot, files: Sequence[AddFile], where: str | None = None,
                 columns: Sequence[str] | None = None, bucketed: bool | None = None) -> DataFrame:
    """The rows of planned files of `snapshot` that satisfy `where` (pruning only skips files;
    Spark filters the rows).

    A bucketed table's files are declared to Spark as buckets (see bucketed_relation) when
    `bucketed` is True (the caller checked the files), or when it is None and every file carries
    its bucket id: joins and aggregations of such reads on the bucket columns then need no
    shuffle either (Spark drops the bucketed scan where it does not help)."""
    spec = bucket_spec_of(snapshot.configuration) if bucketed is not False else None
    if spec is not None and bucketed is None and files_without_bucket_ids(files, spec):
        spec = None
    df = read_files(spark, snapshot.table_path, snapshot.schema, snapshot.partition_columns, files,
                    bucket_spec=spec, tag=read_tag(snapshot), column_mapping=snapshot.column_mapping)
    if where:
        df = df.filter(where)
    return df.select(*[f"`{c}`" for c in columns]) if columns else df


def bucketed_relation(df: DataFrame, spec: BucketSpec) -> DataFrame:
    """`df` (one Parquet relation over a file list) with the table's bucket spec declared.

    Spark's bucketed scan then reads bucket i's files in task i (taking each file's bucket from
    the `_%05d` suffix of its name) and reports its output hash-partitioned by the bucket
    columns, so a join or aggregation on them needs no Exchange. Only the relation's metadata
    changes: the same files, schema and options, through Spark's internal API (py4j). Where
    that API is not reachable (Spark Connect) the plain relation is returned: same rows, no
    bucketed scan (bucket joins there read through skiplake.spark.buckets.bucketed_reads instead)."""
    jvm = getattr(df.sparkSession, "_jvm", None) if hasattr(df, "_jdf") else None
    if jvm is None:
        return df
    plan = df._jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() != "LogicalRelation":
        raise TypeError(f"expected a file relation, found {plan.getClass().getSimpleName()}")
    rel = plan.relation()
    convert = jvm.scala.jdk.javaapi.CollectionConverters

    def seq(items: Sequence[str]) -> object:
        return convert.asScala(jvm.java.util.ArrayList(list(items))).toSeq()

    spec_j = jvm.org.apache.spark.sql.catalyst.catalog.BucketSpec(spec.num_buckets, seq(spec.columns),
                                                                   seq(spec.sort_by))
    relation = jvm.org.apache.spark.sql.execution.datasources.HadoopFsRelation(
        rel.location(), rel.partitionSchema(), rel.dataSchema(), jvm.scala.Some(spec_j), rel.fileFormat(),
        rel.options(), rel.sparkSession())
    bucketed = plan.copy(relation, plan.output(), plan.catalogTable(), plan.isStreaming(), plan.stream())
    jdf = jvm.org.apache.spark.sql.classic.Dataset.ofRows(df.sparkSession._jsparkSession, bucketed)
    return DataFrame(jdf, df.sparkSession)


def _read_by_partition(spark: SparkSession, schema: Schema, partition_columns: list[str],
                       files: Sequence[AddFile], paths: list[str], extra: list,
                       tag: tuple[str, str] | None) -> DataFrame:
    part_lower = {c.lower() for c in partition_columns}
    data_schema = Schema(tuple(f for f in schema.fields if f.name.lower() not in part_lower))
    groups: dict[tuple, list[str]] = defaultdict(list)
    for f, p in zip(files, paths):
        key = tuple((f.partitionValues or {}).get(c) for c in partition_columns)
        groups[key].append(p)
    frames = []
    for key, group_paths in groups.items():
        reader = spark.read.schema(to_spark(data_schema))
        if tag is not None:
            reader = reader.option(*tag)
        df = reader.parquet(*group_paths)
        df = df.select("*", *extra)
        extra_names = df.columns[len(data_schema.fields):]
        for col, raw in zip(partition_columns, key):
            type_ = schema.field(col).type
            value = parse_partition_value(raw, type_)
            df = df.withColumn(col, F.lit(None if value is None else raw).cast(spark_type(type_)))
        frames.append(df.select(*[f"`{n}`" for n in schema.names], *[f"`{n}`" for n in extra_names]))
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out
