"""The final query of `lake.sql` as an edit of the analysis pass's plan, not a second query text.

The analysis pass analysed the query over each reference's whole-table view. Once the files are
planned, each file relation of a pruned reference is replaced, in that analysed plan, by a
relation over just its planned files under the very same output columns (expression ids
included), so nothing above it changes; a reference that build sides left a short key list also
gets it as a Filter right above the relation. Spark then does not parse and analyse the query a
second time, and the scan does not carry each row's file name, as the text's filter on the file
name makes it do (the slot views' twin, which costs full scans 10-20%).

Only where a build side was evaluated once is the optimized plan edited instead (its rows take
the build's place there). Spark's optimizer does not give the same plan again over its own
output: over an optimized plan whose CTEs are read several times its physical plan can have
more scans than plain Spark's, and run slower, so the analysed plan stays the rule.

References of one table version pruned to the same files share one relation (one file index),
so Spark reuses their scans as it does for a table named several times (TPC-DS q44 names
store_sales four times). A relation that reads all its files stays as it is: the slot views of
one table version share their relations already (skiplake.spark.query.views), so a query that
prunes nothing is the analysis pass's plan, its optimization already made.

Where the edit cannot be made with certainty, `swapped` says why and the caller writes the final
query as text (planner.final_frame): a catalog table or a bucket join (they read through views of
their own), a pruned table its view reads in more relations than one per kind of file (files
outside the Hive layout), a key list over renamed columns (column mapping), or a relation that
is not found in the analysed plan.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skiplake.log.paths import file_key
from skiplake.spark.query.catalyst import (
    filtered,
    found_nodes,
    node_at,
    replace_nodes,
)
from skiplake.spark.query.model import QueryPlan, TableReference, ViewRelation
from skiplake.spark.reads.catalog_tables import CatalogTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class _NotSwapped(Exception):
    """Why the final query cannot be an edit of the analysed plan."""


def swapped(spark: "SparkSession", plan: QueryPlan) -> tuple["DataFrame | None", str]:
    """(the analysis pass's DataFrame with every pruned relation swapped, how many were) or
    (None, why it cannot be)."""
    if plan.analysis is None:
        return None, "no analysis pass"
    try:
        pairs = _Swaps(spark).of(plan.references)
    except _NotSwapped as e:
        return None, str(e)
    if plan.materialized:
        frame = _with_builds(spark, plan, pairs)
        if frame is not None:
            return frame, (f"the analysis pass's optimized plan, {len(plan.materialized)} build sides evaluated "
                           f"once, {len(pairs)} relations swapped")
        plan.notes.append("build sides evaluated again: a relation they read is copied in the plan")
    if not pairs:
        return plan.analysis, "the analysis pass's plan, nothing swapped"
    analysed = plan.analysis._jdf.queryExecution().analyzed()
    missing = sum(1 for n in found_nodes(spark, analysed, [old for old, _ in pairs]) if not n)
    if missing:
        return None, f"{missing} of {len(pairs)} relations not found in the analysed plan"
    return replace_nodes(spark, analysed, pairs), f"the analysis pass's plan, {len(pairs)} relations swapped"


def _with_builds(spark: "SparkSession", plan: QueryPlan, pairs: list[tuple[Any, Any]]) -> "DataFrame | None":
    """The optimized plan with each evaluated build side replaced by its rows and the relations
    swapped; None when a swapped table's relation is copied in the optimized plan (a CTE
    inlined twice gets new expression ids that the swap cannot find)."""
    builds = [(node_at(plan.optimized, n), local) for n, local in plan.materialized.items()]
    swapped_refs = [ref for ref in plan.references if any(old is r.node for old, _ in pairs for r in _relations(ref))]
    relations = [r.node for ref in swapped_refs for r in _relations(ref)]
    counts = found_nodes(spark, plan.optimized, [node for node, _ in builds] + relations)
    if not all(counts[:len(builds)]):
        return None
    if sum(counts[len(builds):]) != sum(len(ref.occurrences) for ref in swapped_refs):
        return None
    return replace_nodes(spark, plan.optimized, pairs, subtrees=builds)


def _relations(ref: TableReference) -> tuple[ViewRelation, ...]:
    # _Swaps.of has checked that every reference of the plan reads through its slot view.
    assert ref.view is not None
    return ref.view.relations


class _Swaps:
    """The (old node, new node) pairs of a query's references; one relation per distinct read."""

    def __init__(self, spark: "SparkSession") -> None:
        self.spark = spark
        # (table, version, deletion-vector kind, files) -> the relation every reference reading
        # exactly those files shares
        self.reads: dict[tuple, Any] = {}

    def of(self, references: list[TableReference]) -> list[tuple[Any, Any]]:
        pairs = []
        for ref in references:
            if isinstance(ref.source, CatalogTable):
                raise _NotSwapped("a catalog table reads through a view of its own")
            if ref.bucketed:
                raise _NotSwapped("a bucket join reads through views of its own")
            if ref.view is not None and ref.view.columns_only:
                raise _NotSwapped(f"{ref.label}: a table of {ref.plan.report.files_total if ref.plan else 0:,} files "
                                  f"reads its planned files through a view of its own")
            pairs += self._of_reference(ref)
        return pairs

    def _of_reference(self, ref: TableReference) -> list[tuple[Any, Any]]:
        snapshot, view = ref.snapshot, ref.view
        assert snapshot is not None and view is not None and ref.plan is not None
        rows = ref.row_filter()
        pruned = ref.plan.report.files_selected < ref.plan.report.files_total
        if not view.relations:
            if pruned or rows:
                raise _NotSwapped(f"{ref.label}: its files are read in several relations")
            return []
        if rows and snapshot.column_mapping != "none":
            raise _NotSwapped(f"{ref.label}: a key list over renamed columns (column mapping)")
        pairs = []
        planned = ref.plan.files  # made from the plan's table each time it is asked for
        for relation in view.relations:
            files = [f for f in planned if (f.deletionVector is not None) == relation.with_dv]
            new = self._node(ref, relation, files)
            if rows:
                new = filtered(self.spark, new, rows)
            if new is not relation.node:
                pairs.append((relation.node, new))
        return pairs

    def _node(self, ref: TableReference, relation: ViewRelation, files: list) -> Any:
        """The node that reads `files` in place of the view's relation (over all files of its kind)."""
        snapshot = ref.snapshot
        assert snapshot is not None
        old = relation.node
        if not files:
            return filtered(self.spark, old, "false")
        if len(files) == len(relation.roots):
            return old  # all its files, in the relation every slot of its table version shares
        key = (snapshot.table_path, snapshot.version, relation.with_dv, frozenset(f.path for f in files))
        if key not in self.reads:
            try:
                roots = [relation.roots[file_key(snapshot.table_path, f.path)] for f in files]
            except KeyError:
                raise _NotSwapped(f"{ref.label}: a planned file is not among its relation's") from None
            self.reads[key] = relation.parts(self.spark).relation_over(self.spark, roots)
        return relation.parts(self.spark).node_over(self.reads[key])
