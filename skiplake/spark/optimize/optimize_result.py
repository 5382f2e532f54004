"""A staged OPTIMIZE (bin-packing or Z-order) and what committing it reports."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from skiplake.errors import InvalidArgumentError
from skiplake.log.actions import AddFile, RemoveFile

if TYPE_CHECKING:
    from skiplake.skipping.plan import ScanPlan
    from skiplake.spark.writes.transaction import Transaction


@dataclass(frozen=True)
class OptimizeResult:
    """What an OPTIMIZE committed: its version (None: nothing to compact), the files and bytes it removed and
    added, and the partitions it rewrote."""
    version: int | None       # None when there was nothing to compact
    files_removed: int
    files_added: int
    bytes_removed: int
    bytes_added: int
    partitions_optimized: int
    sizes_removed: tuple[int, ...] = ()   # each removed file's size, for OPTIMIZE's metrics
    sizes_added: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        """The result's counts as a dict."""
        return {k: v for k, v in self.__dict__.items() if not k.startswith("sizes_")}


@dataclass
class Compaction:
    """An OPTIMIZE staged in its transaction (None: nothing to rewrite); commit() makes it so."""
    txn: "Transaction | None"
    removed: Sequence[AddFile] = ()
    added: Sequence[AddFile] = ()

    def commit(self) -> OptimizeResult:
        """Commit the staged OPTIMIZE; what the commit holds after any rebase past concurrent commits.

        A logical conflict with one of them is a ConcurrentModificationError subclass."""
        if self.txn is None:
            return OptimizeResult(None, 0, 0, 0, 0, 0)
        version = self.txn.commit()
        # What was committed: a rebase onto a concurrent DML may have changed what was staged (a
        # compaction whose rows the DML deleted commits nothing).
        removed = [a for a in self.txn.committed_actions if isinstance(a, RemoveFile)]
        added = [a for a in self.txn.committed_actions if isinstance(a, AddFile)]
        partitions = {tuple(sorted((f.partitionValues or {}).items())) for f in removed}
        return OptimizeResult(version, len(removed), len(added), sum(f.size or 0 for f in removed),
                              sum(a.size for a in added), len(partitions),
                              tuple(f.size or 0 for f in removed), tuple(a.size for a in added))


def check_where(txn: "Transaction", plan: "ScanPlan", where: str | None) -> None:
    """OPTIMIZE rewrites whole partitions: its where may name partition columns only."""
    if where is not None and plan.report.data_filters:
        raise InvalidArgumentError(
            f"optimize(where={where!r}) may only filter on partition columns {txn.partition_columns}; "
            f"these parts name other columns: {', '.join(plan.report.data_filters)}")
