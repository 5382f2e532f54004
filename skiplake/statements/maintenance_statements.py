"""OPTIMIZE, VACUUM, RESTORE, DESCRIBE HISTORY | DETAIL, SHOW TBLPROPERTIES and CONVERT TO DELTA."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from skiplake.errors import InvalidArgumentError
from skiplake.log.features import table_features
from skiplake.statements import results
from skiplake.statements.names import open_table
from skiplake.statements.records import (
    ConvertToDelta,
    DescribeDetail,
    DescribeHistory,
    Optimize,
    Restore,
    ShowProperties,
    Vacuum,
)
from skiplake.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from skiplake.statements.lake_access import LakeAccess


def optimize(lake: "LakeAccess", s: Optimize) -> "DataFrame":
    """OPTIMIZE: delta-spark's `path` and `metrics`."""
    table = open_table(lake, s.table)
    started = int(time.time() * 1000)
    considered = table.snapshot.num_files
    r = table.optimize(where=s.where, zorder_by=list(s.zorder_by) or None, full=s.full)
    ended = int(time.time() * 1000)
    metrics = {
        "numFilesAdded": r.files_added, "numFilesRemoved": r.files_removed,
        "filesAdded": results.file_stats(r.sizes_added), "filesRemoved": results.file_stats(r.sizes_removed),
        "partitionsOptimized": r.partitions_optimized, "numBatches": 1 if r.files_added else 0,
        "totalConsideredFiles": considered, "totalFilesSkipped": considered - r.files_removed,
        "preserveInsertionOrder": not s.zorder_by, "numFilesSkippedToReduceWriteAmplification": 0,
        "numBytesSkippedToReduceWriteAmplification": 0, "startTimeMs": started, "endTimeMs": ended,
        "numTableColumns": len(table.schema.fields), "numTableColumnsWithStats": len(table.schema.fields),
    }
    return results.frame(lake.spark, results.OPTIMIZE, [(table.path, metrics)])


def vacuum(lake: "LakeAccess", s: Vacuum) -> "DataFrame":
    """VACUUM: the table's path; with DRY RUN, the files it would delete."""
    table = open_table(lake, s.table)
    hours = 168.0 if s.retain_hours is None else s.retain_hours
    # Delta's switch for a retention under the table's minimum (safe only with no reader or writer running).
    check = lake.spark.conf.get("spark.databricks.delta.retentionDurationCheck.enabled", "true")
    r = table.vacuum(retention_hours=hours, dry_run=s.dry_run, force=str(check).lower() == "false")
    if s.dry_run:
        return results.frame(lake.spark, results.VACUUM, [(f,) for f in r.files])
    return results.frame(lake.spark, results.VACUUM, [(table.path,)])


def restore(lake: "LakeAccess", s: Restore) -> "DataFrame":
    """RESTORE: delta-spark's six columns."""
    table = open_table(lake, s.table)
    timestamp = s.timestamp
    if timestamp is not None and not s.timestamp_is_literal:
        # An expression (current_timestamp() - INTERVAL 1 DAY): Spark computes it, in UTC text.
        row = lake.spark.sql(f"SELECT date_format(to_utc_timestamp(CAST(({timestamp}) AS TIMESTAMP), "
                             "current_timezone()), \"yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'\") AS t").first()
        if row is None or row[0] is None:
            raise InvalidArgumentError(f"RESTORE ... TIMESTAMP AS OF {timestamp}: the expression gives no timestamp")
        timestamp = str(row[0])
    r = table.restore(version=s.version, timestamp=timestamp)
    return results.frame(lake.spark, results.RESTORE, [(r.table_size_after_restore, r.num_of_files_after_restore,
                                                         r.num_removed_files, r.num_restored_files,
                                                         r.removed_files_size, r.restored_files_size)])


def describe_history(lake: "LakeAccess", s: DescribeHistory) -> "DataFrame":
    """DESCRIBE HISTORY: one row per commit, newest first."""
    table = open_table(lake, s.table)
    rows = []
    for h in table.history(limit=s.limit):
        params = {k: v if isinstance(v, str) else _json(v) for k, v in (h.get("operationParameters") or {}).items()}
        metrics = {k: str(v) for k, v in (h.get("operationMetrics") or {}).items()}
        rows.append((h["version"], results.utc(h.get("timestamp")), h.get("userId"), h.get("userName"),
                     h.get("operation"), params, None, None, h.get("clusterId"), h.get("readVersion"),
                     h.get("isolationLevel"), h.get("isBlindAppend"), metrics, h.get("userMetadata"),
                     h.get("engineInfo")))
    return results.frame(lake.spark, results.HISTORY, rows)


def _json(value: object) -> str:
    import json
    return json.dumps(value, separators=(",", ":"))


def describe_detail(lake: "LakeAccess", s: DescribeDetail) -> "DataFrame":
    """DESCRIBE DETAIL: one row."""
    d = open_table(lake, s.table).detail()
    stats = {"numDeletionVectors": d.num_deletion_vectors,
             "numRowsDeletedByDeletionVectors": d.num_rows_deleted_by_deletion_vectors}
    return results.frame(lake.spark, results.DETAIL, [(
        d.format, d.id, d.name, d.description, d.location, d.created_at, d.last_modified, d.partition_columns,
        d.clustering_columns, d.num_files, d.size_in_bytes, d.properties, d.min_reader_version,
        d.min_writer_version, d.table_features, stats)])


def show_properties(lake: "LakeAccess", s: ShowProperties) -> "DataFrame":
    """The table's configuration, with the protocol's versions and features as delta-spark shows them."""
    table = open_table(lake, s.table)
    snap = table.snapshot
    props = dict(snap.configuration)
    props["delta.minReaderVersion"] = str(snap.protocol.minReaderVersion)
    props["delta.minWriterVersion"] = str(snap.protocol.minWriterVersion)
    if snap.protocol.writerFeatures is not None:
        for feature in table_features(snap.protocol):
            props[f"delta.feature.{feature}"] = "supported"
    if s.key is not None:
        value = props.get(s.key)
        if value is None:
            value = f"Table {table.path} does not have property: {s.key}"
        return results.frame(lake.spark, results.PROPERTIES, [(s.key, value)])
    return results.frame(lake.spark, results.PROPERTIES, sorted(props.items()))


def convert(lake: "LakeAccess", s: ConvertToDelta) -> "DataFrame":
    """CONVERT TO DELTA parquet.`path`: in place (no result rows)."""
    Table.convert(lake.spark, s.path, partition_by=s.partition_schema)
    return results.empty(lake.spark)
