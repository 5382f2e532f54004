"""What a MERGE did, as Delta reports it: the metrics of its commit and the result of execute().

Delta writes these `operationMetrics` for a MERGE (all counts as strings); MergeResult carries the
same numbers under delta-rs's snake_case names, with the version committed. Files with a deletion
vector (re-logged with more rows marked) count as neither added nor removed, as in Delta: they
are `numTargetDeletionVectorsAdded` (no vector before) or `...Updated` (a new one replaces it);
`...Removed` counts vectors of files removed whole.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields
from typing import Sequence

from skiplake.log.actions import Action, AddFile, RemoveFile

# Delta's name of each MergeResult field (the commit's operationMetrics keys).
DELTA_NAMES = {
    "num_source_rows": "numSourceRows",
    "num_target_rows_inserted": "numTargetRowsInserted",
    "num_target_rows_updated": "numTargetRowsUpdated",
    "num_target_rows_matched_updated": "numTargetRowsMatchedUpdated",
    "num_target_rows_not_matched_by_source_updated": "numTargetRowsNotMatchedBySourceUpdated",
    "num_target_rows_deleted": "numTargetRowsDeleted",
    "num_target_rows_matched_deleted": "numTargetRowsMatchedDeleted",
    "num_target_rows_not_matched_by_source_deleted": "numTargetRowsNotMatchedBySourceDeleted",
    "num_target_rows_copied": "numTargetRowsCopied",
    "num_output_rows": "numOutputRows",
    "num_target_files_added": "numTargetFilesAdded",
    "num_target_files_removed": "numTargetFilesRemoved",
    "num_target_change_files_added": "numTargetChangeFilesAdded",
    "num_target_bytes_added": "numTargetBytesAdded",
    "num_target_bytes_removed": "numTargetBytesRemoved",
    "num_target_deletion_vectors_added": "numTargetDeletionVectorsAdded",
    "num_target_deletion_vectors_removed": "numTargetDeletionVectorsRemoved",
    "num_target_deletion_vectors_updated": "numTargetDeletionVectorsUpdated",
    "execution_time_ms": "executionTimeMs",
    "materialize_source_time_ms": "materializeSourceTimeMs",
    "scan_time_ms": "scanTimeMs",
    "rewrite_time_ms": "rewriteTimeMs",
}


@dataclass(frozen=True)
class MergeMetrics:
    """The numbers Delta reports for a MERGE."""
    num_source_rows: int = 0
    num_target_rows_inserted: int = 0
    num_target_rows_updated: int = 0
    num_target_rows_matched_updated: int = 0
    num_target_rows_not_matched_by_source_updated: int = 0
    num_target_rows_deleted: int = 0
    num_target_rows_matched_deleted: int = 0
    num_target_rows_not_matched_by_source_deleted: int = 0
    num_target_rows_copied: int = 0
    num_output_rows: int = 0
    num_target_files_added: int = 0
    num_target_files_removed: int = 0
    num_target_change_files_added: int = 0
    num_target_bytes_added: int = 0
    num_target_bytes_removed: int = 0
    num_target_deletion_vectors_added: int = 0
    num_target_deletion_vectors_removed: int = 0
    num_target_deletion_vectors_updated: int = 0
    execution_time_ms: int = 0
    materialize_source_time_ms: int = 0
    scan_time_ms: int = 0
    rewrite_time_ms: int = 0

    def operation_metrics(self) -> dict[str, str]:
        """The commit's operationMetrics, under Delta's names."""
        return {DELTA_NAMES[f.name]: str(getattr(self, f.name)) for f in fields(MergeMetrics)}


@dataclass(frozen=True)
class MergeResult(MergeMetrics):
    """What `execute()` returns: the version the MERGE committed and its metrics; `skipped` when
    an idempotent MERGE's application version was already committed (then nothing ran)."""
    version: int = -1
    skipped: bool = False

    @property
    def num_affected_rows(self) -> int:
        """Rows inserted, updated or deleted (delta-spark's `num_affected_rows`)."""
        return self.num_target_rows_inserted + self.num_target_rows_updated + self.num_target_rows_deleted


@dataclass(frozen=True)
class FileChanges:
    """The files a MERGE's actions add and remove, told apart from deletion-vector re-logs."""
    added: tuple[AddFile, ...]        # new data files
    removed: tuple[RemoveFile, ...]   # files removed whole
    dv_added: int
    dv_updated: int
    dv_removed: int

    @staticmethod
    def of(actions: Sequence[Action]) -> "FileChanges":
        """The changes `actions` make; a file both removed and added is logged again, and counts only by what
        happened to its deletion vector."""
        removes = {a.path: a for a in actions if isinstance(a, RemoveFile)}
        adds = [a for a in actions if isinstance(a, AddFile)]
        relogged = {a.path: a for a in adds if a.path in removes}
        dv = Counter(_vector_change(removes[p], a) for p, a in relogged.items())
        gone = tuple(r for p, r in removes.items() if p not in relogged)
        dv_removed = dv["removed"] + sum(1 for r in gone if r.deletionVector)
        return FileChanges(tuple(a for a in adds if a.path not in removes), gone, dv["added"], dv["updated"], dv_removed)

    @property
    def rows_added(self) -> int:
        """Rows in the new data files, by their stats (a file without numRecords counts none)."""
        return sum(a.num_records or 0 for a in self.added)


def _vector_change(before: RemoveFile, after: AddFile) -> str:
    """What re-logging a file did to its deletion vector: added, updated, removed, or nothing."""
    if after.deletionVector:
        return "updated" if before.deletionVector else "added"
    return "removed" if before.deletionVector else ""
