"""What a table is and what it did, from its log alone (no Spark): describe, history, explain.

One copy, used by the CLI's describe/history/explain and by the demo.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from skiplake.console import iso_ms
from skiplake.layout.bucket_spec import bucket_spec_of
from skiplake.log.features import table_features
from skiplake.log.history import commits
from skiplake.log.location import basename
from skiplake.log.schema import type_name
from skiplake.log.snapshot import Snapshot
from skiplake.skipping.plan import plan_scan
from skiplake.txn.clustering import clustering_columns
from skiplake.txn.isolation import isolation_level


def describe_table(path: str) -> dict[str, Any]:
    """Schema, partitioning, bucketing, properties, size, rows and protocol of a table."""
    snap = Snapshot.load(path)
    md = snap.metadata
    rows, files_without_stats = _row_count(snap)
    proto = snap.protocol
    spec = bucket_spec_of(dict(md.configuration))
    return {
        "path": snap.table_path,
        "name": md.name or basename(snap.table_path),
        "description": md.description,
        "id": md.id,
        "version": snap.version,
        "format": md.format.provider,
        "schema": [{"name": f.name, "type": type_name(f.type), "nullable": f.nullable}
                   for f in md.schema.fields],
        "partition_columns": list(md.partitionColumns),
        "bucketing": None if spec is None else {"num_buckets": spec.num_buckets, "columns": list(spec.columns),
                                                "sort_by": list(spec.sort_by)},
        "properties": dict(md.configuration),
        "isolation_level": isolation_level(dict(md.configuration)),
        "num_files": snap.num_files,
        "total_bytes": snap.size_bytes,
        "total_rows": rows,
        "files_without_stats": files_without_stats,
        "protocol": {
            "minReaderVersion": proto.minReaderVersion,
            "minWriterVersion": proto.minWriterVersion,
            "readerFeatures": list(proto.readerFeatures) if proto.readerFeatures is not None else None,
            "writerFeatures": list(proto.writerFeatures) if proto.writerFeatures is not None else None,
        },
        "created_time": iso_ms(md.createdTime),
        "last_commit_time": iso_ms(snap.timestamp or None),
        "detail": table_detail(snap).to_dict(),
    }


@dataclass(frozen=True)
class TableDetail:
    """DESCRIBE DETAIL of a table: Delta's fields, in snake case (`to_dict` gives Delta's names)."""
    format: str
    id: str
    name: str | None
    description: str | None
    location: str
    created_at: dt.datetime | None
    last_modified: dt.datetime | None
    partition_columns: list[str]
    clustering_columns: list[str]
    num_files: int
    size_in_bytes: int
    properties: dict[str, str]
    min_reader_version: int
    min_writer_version: int
    table_features: list[str]
    num_deletion_vectors: int
    num_rows_deleted_by_deletion_vectors: int
    version: int

    def to_dict(self) -> dict[str, Any]:
        """DESCRIBE DETAIL's columns under its names (timestamps as ISO-8601 text), plus the version."""
        return {
            "format": self.format, "id": self.id, "name": self.name, "description": self.description,
            "location": self.location, "createdAt": _iso(self.created_at), "lastModified": _iso(self.last_modified),
            "partitionColumns": list(self.partition_columns), "clusteringColumns": list(self.clustering_columns),
            "numFiles": self.num_files, "sizeInBytes": self.size_in_bytes, "properties": dict(self.properties),
            "minReaderVersion": self.min_reader_version, "minWriterVersion": self.min_writer_version,
            "tableFeatures": list(self.table_features),
            "statistics": {"numDeletionVectors": self.num_deletion_vectors,
                           "numRowsDeletedByDeletionVectors": self.num_rows_deleted_by_deletion_vectors},
            "version": self.version,
        }


def table_detail(snap: Snapshot) -> TableDetail:
    """DESCRIBE DETAIL of the table at `snap`'s version."""
    md, proto = snap.metadata, snap.protocol
    deleted = snap.deleted_rows
    return TableDetail(
        format="delta", id=md.id, name=md.name, description=md.description, location=snap.table_path,
        created_at=_utc(md.createdTime), last_modified=_utc(snap.timestamp or None),
        partition_columns=list(md.partitionColumns), clustering_columns=clustering_columns(snap) or [],
        num_files=snap.num_files, size_in_bytes=snap.size_bytes, properties=dict(md.configuration),
        min_reader_version=proto.minReaderVersion, min_writer_version=proto.minWriterVersion,
        table_features=table_features(proto),
        num_deletion_vectors=int(snap.file_rows.column("deletionVector").is_valid().to_numpy(zero_copy_only=False).sum())
        if snap.num_files else 0,
        num_rows_deleted_by_deletion_vectors=int(deleted.sum()), version=snap.version)


def _utc(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)


def _iso(when: dt.datetime | None) -> str | None:
    return None if when is None else when.isoformat(timespec="milliseconds")


def _row_count(snap: Snapshot) -> tuple[int | None, int]:
    """(rows in the table, or None when some file has no row count; files without one)."""
    rows = 0
    missing = 0
    for stats in snap.files.column("stats").to_pylist():
        n = None
        if stats:
            try:
                n = json.loads(stats).get("numRecords")
            except ValueError:
                n = None
        if n is None:
            missing += 1
        else:
            rows += int(n)
    return (None if missing else rows), missing


def table_history(path: str, limit: int | None = None) -> list[dict[str, Any]]:
    """One entry per version still in the log, newest first."""
    out = []
    for c in commits(path, limit):
        info = c.info
        metrics = dict(info.operationMetrics or {}) if info else {}
        out.append({
            "version": c.version,
            "timestamp": iso_ms(c.timestamp_ms),
            "operation": info.operation if info else None,
            "parameters": {k: _decode_param(val) for k, val in (info.operationParameters or {}).items()}
            if info else {},
            "readVersion": info.readVersion if info else None,
            "isBlindAppend": info.isBlindAppend if info else None,
            "isolationLevel": info.isolationLevel if info else None,
            "engineInfo": info.engineInfo if info else None,
            "metrics": metrics,
            "files_added": _int_or_none(metrics.get("numAddedFiles")),
            "files_removed": _int_or_none(metrics.get("numRemovedFiles")),
            "rows_written": _int_or_none(metrics.get("numOutputRows")),
            "rows_deleted": _int_or_none(metrics.get("numDeletedRows")),
        })
    return out


def explain_scan(path: str, where: str | None, version: int | None = None) -> dict[str, Any]:
    """The scan report of `where` over the table (at `version`), with its text form."""
    report = plan_scan(Snapshot.load(path, version), where).report
    doc = report.to_dict()
    doc["files_skipped"] = report.files_skipped
    doc["text"] = report.text()
    return doc


def _decode_param(value: Any) -> Any:
    """operationParameters values are JSON-encoded strings in Delta logs; decode them when they are."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
