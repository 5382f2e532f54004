"""Bucketed reads under Spark Connect: a table's planned files read through a bucketed catalog table.

In classic mode a bucketed read declares the bucket spec on the relation itself
(planned_reads.bucketed_relation), through Spark's internal API, which a Connect client cannot reach. What
a client can do is say the same in SQL: an external Parquet table at the table's root, `CLUSTERED
BY ... INTO n BUCKETS`, read with a filter on `_metadata.file_path` that keeps exactly the
planned files. Spark applies such a filter while it lists the files, so the scan reads those
files and nothing else, as buckets.

The catalog table is registered once per table layout (location, columns, partition columns,
bucket spec), named by a hash of it, in `spark_catalog.default`, and refreshed before each read so that
its listing holds the files of the snapshot being read. It is external: dropping it never touches
the data. Its partitions are discovered from the folders (not tracked in the catalog), so each
read lists the table's folders once.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from skiplake.expr.sql import sql_name, sql_string
from skiplake.layout.bucket_spec import BucketSpec
from skiplake.log.actions import AddFile
from skiplake.log.location import is_under, resolve
from skiplake.log.paths import absolute_path, file_key
from skiplake.log.snapshot import Snapshot
from skiplake.spark.reads.deleted_rows import as_metadata_path
from skiplake.spark.reads.planned_reads import spark_file_key
from skiplake.spark.session.spark_types import ddl
from skiplake.spark.writes.data_files import WRITES_DIR

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DATABASE = "spark_catalog.default"
# Tracked partitions would start empty (Spark wants MSCK REPAIR TABLE); discovered ones are listed.
_TRACK_PARTITIONS = "spark.sql.hive.manageFilesourcePartitions"


@dataclass(frozen=True)
class BucketedRead:
    """Exactly some files of a lake table, read as buckets through a registered catalog table."""
    table: str                  # the catalog table's qualified name
    columns: tuple[str, ...]    # the lake table's columns, in its order
    condition: str              # keeps exactly the planned files

    def sql(self, merge_hint: bool = False) -> str:
        """The rows as a subquery of a SQL text; merge_hint keeps Spark from broadcasting them."""
        hint = "/*+ MERGE */ " if merge_hint else ""
        columns = ", ".join(sql_name(c) for c in self.columns)
        return f"(SELECT {hint}{columns} FROM {self.table} AS __skiplake_bucketed WHERE {self.condition})"

    def frame(self, spark: "SparkSession") -> "DataFrame":
        """The rows as a DataFrame of the lake table's columns."""
        return spark.table(self.table).filter(self.condition).select(*[f"`{c}`" for c in self.columns])


def bucketed_read(spark: "SparkSession", snapshot: Snapshot, files: Sequence[AddFile],
                  spec: BucketSpec) -> BucketedRead | str:
    """A bucketed read of `files` (each carrying its bucket id, in Hive-style folders), or why
    Spark's listing of the table cannot give it."""
    try:
        table = _register(spark, snapshot, spec, _location(snapshot, files))
        spark.sql(f"REFRESH TABLE {table}")
        listed = {spark_file_key(p): p for p in spark.table(table).inputFiles()}
    except Exception as e:  # any failure (a read-only metastore, say) leaves Spark's own join, which is right
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"registering a bucketed catalog table in {DATABASE} failed ({first[:200]})"
    root = resolve(snapshot.table_path)
    paths = []
    for f in files:
        found = listed.get(file_key(root, f.path))
        if found is None:
            return (f"Spark's listing of {snapshot.table_path} does not show {f.path} under the table's folder, "
                    "so a bucketed catalog table cannot read it")
        paths.append(as_metadata_path(found))
    condition = f"_metadata.file_path IN ({', '.join(sql_string(p) for p in paths)})" if paths else "false"
    return BucketedRead(table, tuple(snapshot.schema.names), condition)


def _location(snapshot: Snapshot, files: Sequence[AddFile]) -> str:
    """Where Spark lists the files: the table's root, or for the object-store writer's unpartitioned
    files its writes folder (Spark's listing skips folders whose names start with `_`)."""
    root = resolve(snapshot.table_path)
    writes = f"{root}/{WRITES_DIR}"
    if files and not snapshot.partition_columns and all(
            is_under(writes, absolute_path(root, f.path)) for f in files):
        return writes
    return root


def _register(spark: "SparkSession", snapshot: Snapshot, spec: BucketSpec, root: str) -> str:
    """The qualified name of the catalog table for this layout, created if it does not exist."""
    parts = list(snapshot.partition_columns)
    definition: dict[str, Any] = {"root": root, "schema": snapshot.schema.to_json(), "partitions": parts,
                                  "buckets": spec.num_buckets, "columns": spec.columns, "sort_by": spec.sort_by}
    digest = hashlib.sha1(json.dumps(definition, sort_keys=True, default=list).encode()).hexdigest()[:16]
    table = f"{DATABASE}.skiplake_bucketed_{digest}"
    if spark.catalog.tableExists(table):
        return table
    clauses = [f"CREATE TABLE IF NOT EXISTS {table} ({ddl(snapshot.schema)}) USING parquet"]
    if parts:
        clauses.append(f"PARTITIONED BY ({', '.join(sql_name(c) for c in parts)})")
    else:
        # Without it Spark lists only the files directly in the location (the writes folder
        # holds one folder per write).
        clauses.append("OPTIONS (recursiveFileLookup 'true')")
    clauses.append(f"CLUSTERED BY ({', '.join(sql_name(c) for c in spec.columns)})")
    if spec.sort_by:
        clauses.append(f"SORTED BY ({', '.join(sql_name(c) for c in spec.sort_by)})")
    clauses.append(f"INTO {spec.num_buckets} BUCKETS LOCATION {sql_string(root)}")
    before = spark.conf.get(_TRACK_PARTITIONS, None)
    spark.conf.set(_TRACK_PARTITIONS, "false")
    try:
        spark.sql(" ".join(clauses))
    finally:
        if before is None:
            spark.conf.unset(_TRACK_PARTITIONS)
        else:
            spark.conf.set(_TRACK_PARTITIONS, before)
    return table
