"""Statement results as DataFrames with delta-spark's columns.

A result is a query of literals (`SELECT ... FROM VALUES ...`): Spark answers it in the driver, where
spark.createDataFrame of Python rows would run a job with Python workers to collect it (a quarter of
a second). Schemas are DDL text, so no pyspark import is needed and a Spark Connect session builds
them the same way."""
from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any, Sequence

from skiplake.expr.sql import sql_literal, sql_string

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DML = "num_affected_rows BIGINT"
MERGE = "num_affected_rows BIGINT, num_updated_rows BIGINT, num_deleted_rows BIGINT, num_inserted_rows BIGINT"
RESTORE = ("table_size_after_restore BIGINT, num_of_files_after_restore BIGINT, num_removed_files BIGINT, "
           "num_restored_files BIGINT, removed_files_size BIGINT, restored_files_size BIGINT")
_FILE_STATS = "STRUCT<min: BIGINT, max: BIGINT, avg: DOUBLE, totalFiles: BIGINT, totalSize: BIGINT>"
OPTIMIZE = (f"path STRING, metrics STRUCT<numFilesAdded: BIGINT, numFilesRemoved: BIGINT, filesAdded: {_FILE_STATS}, "
            f"filesRemoved: {_FILE_STATS}, partitionsOptimized: BIGINT, numBatches: BIGINT, "
            "totalConsideredFiles: BIGINT, totalFilesSkipped: BIGINT, preserveInsertionOrder: BOOLEAN, "
            "numFilesSkippedToReduceWriteAmplification: BIGINT, numBytesSkippedToReduceWriteAmplification: BIGINT, "
            "startTimeMs: BIGINT, endTimeMs: BIGINT, numTableColumns: BIGINT, numTableColumnsWithStats: BIGINT>")
VACUUM = "path STRING"
HISTORY = ("version BIGINT, timestamp TIMESTAMP, userId STRING, userName STRING, operation STRING, "
           "operationParameters MAP<STRING, STRING>, job STRUCT<jobId: STRING, jobName: STRING, jobRunId: STRING, "
           "runId: STRING, jobOwnerId: STRING, triggerType: STRING>, notebook STRUCT<notebookId: STRING>, "
           "clusterId STRING, readVersion BIGINT, isolationLevel STRING, isBlindAppend BOOLEAN, "
           "operationMetrics MAP<STRING, STRING>, userMetadata STRING, engineInfo STRING")
DETAIL = ("format STRING, id STRING, name STRING, description STRING, location STRING, createdAt TIMESTAMP, "
          "lastModified TIMESTAMP, partitionColumns ARRAY<STRING>, clusteringColumns ARRAY<STRING>, numFiles BIGINT, "
          "sizeInBytes BIGINT, properties MAP<STRING, STRING>, minReaderVersion INT, minWriterVersion INT, "
          "tableFeatures ARRAY<STRING>, statistics MAP<STRING, BIGINT>")
PROPERTIES = "key STRING, value STRING"


# Above this many rows (VACUUM DRY RUN's files), a query of literals grows long to parse: the rows
# go to Spark as data instead.
MOST_LITERAL_ROWS = 1000


def frame(spark: "SparkSession", schema: str, rows: Sequence[Sequence[Any]]) -> "DataFrame":
    """A DataFrame of `rows` (already computed: nothing waits for collect) under `schema`."""
    if len(rows) > MOST_LITERAL_ROWS:
        return spark.createDataFrame([tuple(r) for r in rows], schema)
    columns = columns_of(schema)
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    select = ", ".join(f"CAST(c{i} AS {type_}) AS `{name}`" for i, (name, type_) in enumerate(columns))
    if not rows:
        nulls = ", ".join(f"CAST(NULL AS {type_}) AS `{name}`" for name, type_ in columns)
        return spark.sql(f"SELECT {nulls} WHERE false")
    values = ", ".join("(" + ", ".join(literal(v, t) for v, (_, t) in zip(r, columns)) + ")" for r in rows)
    return spark.sql(f"SELECT {select} FROM VALUES {values} AS v({names})")


def columns_of(schema: str) -> list[tuple[str, str]]:
    """(name, type) of each column of a DDL schema, cut at the commas outside `<...>`."""
    out: list[tuple[str, str]] = []
    depth, start = 0, 0
    for i, c in enumerate(schema + ","):
        depth += (c == "<") - (c == ">")
        if c == "," and depth == 0:
            name, _, type_ = schema[start:i].strip().partition(" ")
            out.append((name, type_.strip()))
            start = i + 1
    return out


def literal(value: Any, type_: str) -> str:
    """A Spark SQL literal of `value` for a column of `type_`: expr.sql's literal for a plain
    value, from_json of its JSON for a struct, map or array."""
    if isinstance(value, (dict, list, tuple)):
        return f"from_json({sql_string(json.dumps(value, default=str))}, {sql_string(type_)})"
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return sql_literal(value)


def empty(spark: "SparkSession") -> "DataFrame":
    """The result of a statement that returns nothing (DDL, INSERT, CONVERT): no columns, no rows."""
    return spark.sql("SELECT 1 AS x WHERE false").drop("x")   # answered in the driver, as `frame`


def utc(ms: int | None) -> dt.datetime | None:
    """Epoch milliseconds as an aware datetime (Spark shows it in the session's time zone)."""
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)


def file_stats(sizes: Sequence[int]) -> dict[str, Any]:
    """OPTIMIZE's filesAdded / filesRemoved: the sizes' min, max, average, count and total."""
    if not sizes:
        return {"min": None, "max": None, "avg": 0.0, "totalFiles": 0, "totalSize": 0}
    return {"min": min(sizes), "max": max(sizes), "avg": sum(sizes) / len(sizes), "totalFiles": len(sizes),
            "totalSize": sum(sizes)}
