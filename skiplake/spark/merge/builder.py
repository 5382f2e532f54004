"""The MERGE builder: `t.merge(source, on)` and its ordered WHEN clauses, then `execute()`.

Shaped like delta-spark's DeltaMergeBuilder (snake_case, as delta-rs spells it): each call returns a
new builder with one more clause, so a half-built MERGE can be reused; nothing runs until
`execute()`, which commits one transaction and returns a MergeResult (the version and Delta's
metrics).
"""
from __future__ import annotations

from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Callable, Mapping

from skiplake.errors import InvalidArgumentError
from skiplake.spark.merge.clauses import MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, Expr, MergeClause, MergeSpec
from skiplake.spark.merge.merge_result import MergeResult
from skiplake.spark.merge.stage import stage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from skiplake.spark.writes.transaction import Transaction


class MergeBuilder:
    """MERGE INTO the table USING `source` ON `on`: add clauses, then `execute()`.

    Conditions and expressions are Spark SQL text (or Columns) naming columns as
    `target.col` / `source.col` (or the aliases given). Within each kind of clause the first one
    whose condition holds acts on a row; only the last clause of a kind may omit its condition."""

    def __init__(self, begin: Callable[[], "Transaction"], source: "DataFrame", spec: MergeSpec,
                 after_commit: Callable[["Transaction"], object] | None = None) -> None:
        """A builder over `source` whose `spec` holds ON, the aliases and the clauses so far; `begin`
        starts the transaction execute() commits, `after_commit` hears it committed (auto
        compaction). Made by Table.merge, not by hand."""
        self._begin = begin
        self._source = source
        self.spec = spec
        self._after_commit = after_commit

    def _with(self, clause: MergeClause) -> "MergeBuilder":
        return MergeBuilder(self._begin, self._source, replace(self.spec, clauses=self.spec.clauses + (clause,)),
                            self._after_commit)

    # ---- WHEN MATCHED

    def when_matched_update(self, condition: Expr | None = None,
                            set: Mapping[str, Expr] | None = None) -> "MergeBuilder":
        """WHEN MATCHED [AND condition] THEN UPDATE SET col = expr, ...: the other columns keep
        their values; a key `s.a` sets a field of the struct column `s`."""
        return self._with(MergeClause(MATCHED, "update", condition, _given(set, "when_matched_update", "set")))

    def when_matched_update_all(self, condition: Expr | None = None) -> "MergeBuilder":
        """WHEN MATCHED [AND condition] THEN UPDATE SET *: every column from the source column of its name."""
        return self._with(MergeClause(MATCHED, "update", condition))

    def when_matched_delete(self, condition: Expr | None = None) -> "MergeBuilder":
        """WHEN MATCHED [AND condition] THEN DELETE."""
        return self._with(MergeClause(MATCHED, "delete", condition))

    # ---- WHEN NOT MATCHED [BY TARGET]

    def when_not_matched_insert(self, condition: Expr | None = None,
                                values: Mapping[str, Expr] | None = None) -> "MergeBuilder":
        """WHEN NOT MATCHED [AND condition] THEN INSERT (col, ...) VALUES (expr, ...): the
        columns not named are NULL. Expressions see only the source's columns."""
        return self._with(MergeClause(NOT_MATCHED, "insert", condition,
                                      _given(values, "when_not_matched_insert", "values")))

    def when_not_matched_insert_all(self, condition: Expr | None = None) -> "MergeBuilder":
        """WHEN NOT MATCHED [AND condition] THEN INSERT *: every column from the source column of its name."""
        return self._with(MergeClause(NOT_MATCHED, "insert", condition))

    # ---- WHEN NOT MATCHED BY SOURCE

    def when_not_matched_by_source_update(self, condition: Expr | None = None,
                                          set: Mapping[str, Expr] | None = None) -> "MergeBuilder":
        """WHEN NOT MATCHED BY SOURCE [AND condition] THEN UPDATE SET ...: for target rows no source
        row matches. The condition and expressions see only the target's columns."""
        return self._with(MergeClause(NOT_MATCHED_BY_SOURCE, "update", condition,
                                      _given(set, "when_not_matched_by_source_update", "set")))

    def when_not_matched_by_source_delete(self, condition: Expr | None = None) -> "MergeBuilder":
        """WHEN NOT MATCHED BY SOURCE [AND condition] THEN DELETE."""
        return self._with(MergeClause(NOT_MATCHED_BY_SOURCE, "delete", condition))

    # ---- options and execution

    def with_schema_evolution(self) -> "MergeBuilder":
        """Let `*` clauses and assignments naming source columns add the source's new columns to
        the table (MERGE WITH SCHEMA EVOLUTION)."""
        return MergeBuilder(self._begin, self._source, replace(self.spec, schema_evolution=True), self._after_commit)

    def stage(self, txn: "Transaction") -> "Transaction":
        """Fill `txn` (a transaction of this table) with the MERGE without committing it."""
        stage(txn, self._source, self.spec)
        return txn

    def execute(self, app_id: str | None = None, app_version: int | None = None) -> MergeResult:
        """Run the MERGE and commit it: the version and Delta's metrics. A refused or failed
        MERGE leaves the table as it was. With app_id/app_version (Delta's txnAppId/txnVersion) a
        version the application already committed is not run again: the result's `skipped` says so."""
        txn = self._begin()
        if not txn.claim_app_version(app_id, app_version):
            return MergeResult(version=txn.commit(), skipped=True)
        metrics = stage(txn, self._source, self.spec)
        version = txn.commit()
        if self._after_commit is not None:
            self._after_commit(txn)
        return MergeResult(**asdict(metrics), version=version)

    def __repr__(self) -> str:
        """The ON condition and each clause's heading and action, in order."""
        kinds = ", ".join(f"{c.heading} {c.action}" for c in self.spec.clauses) or "no clauses yet"
        return f"MergeBuilder(on={self.spec.on!r}, {kinds})"


def _given(mapping: object, method: str, name: str) -> dict[str, Expr]:
    # `mapping` as the user passed it (typed or not): checked here, not trusted.
    if mapping is None or not isinstance(mapping, Mapping) or not mapping:
        raise InvalidArgumentError(f"{method} needs {name}= as a non-empty mapping of column to expression "
                                   f"(to set every column from the source, use {method}_all)")
    return dict(mapping)
