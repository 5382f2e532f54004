"""Statement results as DataFrames with delta-spark's columns (their schemas in DDL text, so that
no pyspark import is needed and a Spark Connect session builds them the same way)."""
from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Sequence

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


def frame(spark: "SparkSession", schema: str, rows: Sequence[Sequence[Any]]) -> "DataFrame":
    """A DataFrame of `rows` (already computed: nothing waits for collect) under `schema`."""
    return spark.createDataFrame([tuple(r) for r in rows], schema)


def empty(spark: "SparkSession") -> "DataFrame":
    """The result of a statement that returns nothing (DDL, INSERT, CONVERT): no columns, no rows."""
    return spark.range(0).select()


def utc(ms: int | None) -> dt.datetime | None:
    """Epoch milliseconds as an aware datetime (Spark shows it in the session's time zone)."""
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)


def file_stats(sizes: Sequence[int]) -> dict[str, Any]:
    """OPTIMIZE's filesAdded / filesRemoved: the sizes' min, max, average, count and total."""
    if not sizes:
        return {"min": None, "max": None, "avg": 0.0, "totalFiles": 0, "totalSize": 0}
    return {"min": min(sizes), "max": max(sizes), "avg": sum(sizes) / len(sizes), "totalFiles": len(sizes),
            "totalSize": sum(sizes)}
