"""MERGE INTO as Delta defines it: ordered WHEN clauses, run as Spark jobs over planned files.

- clauses: the MERGE's ON condition and clauses, Delta's grammar rules, the commit's parameters;
- conditions: what the conditions' SQL says (target-only parts, key equalities, refused parts);
- resolve: each clause against the columns Delta lets it see, as values per column of the table;
- target_files: which target files can matter (static conjuncts, the source's keys, the clauses);
- engine: the Spark jobs and the transaction's actions; merge_result: Delta's metrics;
- stage / builder / keywords: one MERGE into a transaction, the builder, the keyword form.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from skiplake.spark.merge.builder import MergeBuilder
from skiplake.spark.merge.clauses import MergeClause, MergeSpec
from skiplake.spark.merge.keywords import MergeClauses
from skiplake.spark.merge.merge_result import MergeMetrics, MergeResult
from skiplake.spark.merge.stage import stage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from skiplake.spark.writes.transaction import Transaction

__all__ = ["MergeBuilder", "MergeClause", "MergeClauses", "MergeMetrics", "MergeResult", "MergeSpec", "merge",
           "stage"]


def merge(txn: "Transaction", source: "DataFrame", clauses: MergeClauses | MergeSpec) -> "Transaction":
    """Fill `txn` with a MERGE (keyword form or spec) without committing it."""
    stage(txn, source, clauses.spec() if isinstance(clauses, MergeClauses) else clauses)
    return txn
