"""One MERGE into one transaction: resolve its clauses, run its jobs, stage what the commit says."""
from __future__ import annotations

from typing import TYPE_CHECKING

from skiplake.spark.merge.clauses import MergeSpec
from skiplake.spark.merge.engine import run
from skiplake.spark.merge.merge_result import MergeMetrics
from skiplake.spark.merge.resolve import resolve

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from skiplake.spark.writes.transaction import Transaction


def stage(txn: "Transaction", source: "DataFrame", spec: MergeSpec) -> MergeMetrics:
    """Fill `txn` with the MERGE's actions and stage its commitInfo (operation MERGE, Delta's
    parameters and metrics); refusals (MergeClauseError, MergeConflictError) come before any
    action is staged, and the table is only changed by `txn.commit()`."""
    merge = resolve(txn.path, txn.snapshot.schema, source, spec)
    metrics = run(txn, source, merge)
    txn.stage("MERGE", spec.parameters(), metrics.operation_metrics())
    return metrics
