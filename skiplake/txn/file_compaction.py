"""Auto compaction without Spark, for the `skiplake` streaming sink and data source writes: after a
commit, the partitions it added files to that hold at least `minNumFiles` (50) files under the
target size (128 MB) are bin-packed in Python, in a commit of their own that only rearranges rows
(dataChange=false), as delta-spark 3.1+ compacts after a write.

It follows the table property `delta.autoOptimize.autoCompact` only: Spark's session settings
are out of reach of the Python worker the commit runs in. A table that keeps row ids through
rewrites (row tracking) or that is clustered or bucketed is left to OPTIMIZE, which keeps
those. A concurrent commit that conflicts wins: the compaction gives way, never the write."""
from __future__ import annotations

import logging
from collections import Counter
from typing import Iterator

import pyarrow as pa

from skiplake.errors import ConcurrentModificationError
from skiplake.layout.bucket_spec import bucket_spec_of
from skiplake.log.actions import Action, AddFile, now_ms
from skiplake.log.arrow_reads import read_file
from skiplake.log.column_mapping import partition_values_by_name
from skiplake.log.snapshot import Snapshot
from skiplake.txn.arrow_writes import FileWritePlan, discard, logical_arrow_schema, write_batches
from skiplake.txn.clustering import clustering_columns
from skiplake.txn.commit import commit
from skiplake.txn.read_set import ReadSet
from skiplake.txn.row_tracking import enabled as row_tracking_enabled

AUTO_COMPACT = "delta.autoOptimize.autoCompact"
MIN_FILES = 50
TARGET_SIZE = 128 << 20

log = logging.getLogger(__name__)


def wants_compaction(configuration: dict[str, str]) -> bool:
    """Whether the table asks for auto compaction (`true` or `auto`)."""
    return str(configuration.get(AUTO_COMPACT, "false")).strip().lower() in ("true", "auto", "legacy")


def compact_after(table_path: str, written: list[Action], min_files: int = MIN_FILES,
                  target_size: int = TARGET_SIZE) -> int | None:
    """Compact the partitions `written` (a commit's actions) added files to, when the table asks
    for it; the version of the compaction's commit, or None when there was none."""
    snapshot = Snapshot.load(table_path)
    if not wants_compaction(snapshot.configuration) or not _compactable(snapshot):
        return None
    chosen = _small_files(snapshot, written, min_files, target_size)
    if not chosen:
        return None
    plan = FileWritePlan.of(table_path, snapshot.metadata, snapshot.column_mapping, with_rules=False)
    adds: list[AddFile] = []
    for part in sorted({_key(snapshot, f) for f in chosen}, key=str):
        files = [f for f in chosen if _key(snapshot, f) == part]
        adds += write_batches(plan, _rows(snapshot, files), data_change=False)
    ts = now_ms()
    actions: list[Action] = [*adds, *(f.remove(ts, data_change=False) for f in chosen)]
    read_set = ReadSet()
    read_set.files.update(f.path for f in chosen)
    try:
        return commit(snapshot, actions, "OPTIMIZE", {"auto": "true", "predicate": "[]"}, read_set,
                      {"numRemovedFiles": str(len(chosen)), "numAddedFiles": str(len(adds))}).version
    except ConcurrentModificationError as e:
        log.info("auto compaction of %s gave way to a concurrent commit: %s", table_path, e)
        discard(table_path, adds)
        return None


def _small_files(snapshot: Snapshot, written: list[Action], min_files: int, target_size: int) -> list[AddFile]:
    """The files under `target_size` of the partitions `written` added to that hold `min_files` of them."""
    touched = {_key(snapshot, a) for a in written if isinstance(a, AddFile) and a.dataChange}
    small = [f for f in snapshot.add_files if f.size < target_size and _key(snapshot, f) in touched]
    counts = Counter(_key(snapshot, f) for f in small)
    return [f for f in small if counts[_key(snapshot, f)] >= min_files]


def _compactable(snapshot: Snapshot) -> bool:
    config = snapshot.configuration
    return not (row_tracking_enabled(config) or clustering_columns(snapshot) or bucket_spec_of(config))


def _key(snapshot: Snapshot, f: AddFile) -> tuple[tuple[str, str | None], ...]:
    """The file's partition, by logical names (a commit's actions name them physically)."""
    values = partition_values_by_name(f.partitionValues or {}, snapshot.schema, snapshot.partition_columns,
                                      snapshot.column_mapping)
    return tuple(sorted(values.items()))


def _rows(snapshot: Snapshot, files: list[AddFile]) -> Iterator[pa.RecordBatch]:
    schema = logical_arrow_schema(snapshot.schema)
    for f in files:
        yield from read_file(snapshot.table_path, f, snapshot.schema, snapshot.partition_columns,
                             snapshot.column_mapping, schema)
