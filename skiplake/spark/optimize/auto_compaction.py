"""Auto compaction, as delta-spark 3.1+ does it: after a write commits, the partitions it touched
that hold at least `minNumFiles` small files are bin-packed in a commit of their own.

On with the table property `delta.autoOptimize.autoCompact` (true or auto) or, for every table
without that property, the session setting `spark.databricks.delta.autoCompact.enabled`. A file
is small below `spark.databricks.delta.autoCompact.maxFileSize` (128 MB, also the target size).
The compaction only rearranges rows (dataChange=false), so it conflicts with no append, streaming
sink or row-level write; should another rearrangement win first, it gives way, and the write that
triggered it has committed either way."""
from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable

from skiplake.errors import ConcurrentModificationError
from skiplake.log.actions import AddFile
from skiplake.log.column_mapping import partition_values_by_name
from skiplake.log.schema import INTEGER_TYPES, is_decimal
from skiplake.spark.optimize.compaction import optimize
from skiplake.spark.optimize.optimize_result import OptimizeResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from skiplake.spark.writes.transaction import Transaction

TABLE_PROPERTY = "delta.autoOptimize.autoCompact"
SESSION_ENABLED = "spark.databricks.delta.autoCompact.enabled"
SESSION_MIN_FILES = "spark.databricks.delta.autoCompact.minNumFiles"
SESSION_MAX_FILE_SIZE = "spark.databricks.delta.autoCompact.maxFileSize"
DEFAULT_MIN_FILES = 50
DEFAULT_MAX_FILE_SIZE = 128 << 20

log = logging.getLogger(__name__)


def enabled(spark: "SparkSession", configuration: dict[str, str]) -> bool:
    """Whether writes to a table of `configuration` compact after committing."""
    value = configuration.get(TABLE_PROPERTY)
    if value is None:
        value = spark.conf.get(SESSION_ENABLED, "false")
    return str(value).strip().lower() in ("true", "auto", "legacy")


def _setting(spark: "SparkSession", key: str, default: int) -> int:
    try:
        return int(str(spark.conf.get(key, str(default))).strip().rstrip("bB"))
    except ValueError:
        return default


def auto_compact(write: "Transaction", begin: Callable[[], "Transaction"]) -> OptimizeResult | None:
    """After `write` committed: compact the partitions it added files to, where they hold enough
    small files; `begin()` starts a transaction on the latest snapshot. None when there was
    nothing to do, compaction is off, or a concurrent rearrangement won."""
    if write.no_op or not enabled(write.spark, write.snapshot.configuration):
        return None
    txn = begin()
    snapshot = txn.snapshot
    touched = {_key(snapshot, a) for a in write.committed_actions if isinstance(a, AddFile) and a.dataChange}
    if not touched:
        return None
    min_files = _setting(txn.spark, SESSION_MIN_FILES, DEFAULT_MIN_FILES)
    max_size = _setting(txn.spark, SESSION_MAX_FILE_SIZE, DEFAULT_MAX_FILE_SIZE)
    small = Counter(_key(snapshot, f) for f in snapshot.add_files if f.size < max_size)
    keys = [k for k in touched if small[k] >= min_files]
    if not keys:
        return None
    where = _partitions_predicate(snapshot, keys)
    try:
        return optimize(txn, where, target_file_size=max_size).commit()
    except ConcurrentModificationError as e:
        log.info("auto compaction of %s gave way to a concurrent commit: %s", snapshot.table_path, e)
        return None


def _key(snapshot: Any, f: AddFile) -> tuple[tuple[str, str | None], ...]:
    """The file's partition, by logical names (a commit's actions name them physically)."""
    values = partition_values_by_name(f.partitionValues or {}, snapshot.schema, snapshot.partition_columns,
                                      snapshot.column_mapping)
    return tuple(sorted(values.items()))


def _partitions_predicate(snapshot: Any, keys: list[tuple[tuple[str, str | None], ...]]) -> str | None:
    """SQL selecting the partitions `keys` (logical partition values) name; None: the whole table."""
    if not snapshot.partition_columns:
        return None
    types = {f.name: f.type for f in snapshot.schema.fields}
    parts = []
    for key in keys:
        terms = [f"`{c}` IS NULL" if v is None else f"`{c}` = {_literal(v, types[c])}" for c, v in key]
        parts.append("(" + " AND ".join(terms) + ")")
    return " OR ".join(parts)


def _literal(value: str, type_: Any) -> str:
    if type_ in INTEGER_TYPES or type_ in ("float", "double") or is_decimal(type_) or type_ == "boolean":
        return value
    text = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"DATE'{text}'" if type_ == "date" else f"'{text}'"
