"""Dynamic file pruning for DataFrames: `lake.prune(df)` for joins of `t.read()` results.

Users who compose DataFrames rather than SQL get the same planning as `lake.sql`: the stages run
over the DataFrame's own optimized plan. Each relation a `t.read()` created names its table and
version (a reader option, skiplake.spark.reads.planned_reads.READ_TAG); each becomes a reference with one
occurrence, its pushed filters plan its files statically, the join build sides prune them
dynamically, and every relation whose files shrank is swapped, in the DataFrame's analysed plan,
for a relation over just those files with the very same output columns. The DataFrame returned
is the same query over fewer files.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from skiplake.errors import SparkConnectUnsupportedError
from skiplake.log.actions import AddFile
from skiplake.log.paths import file_key
from skiplake.log.snapshot import Snapshot
from skiplake.spark.pruning.pruning_settings import DynamicPruningSettings
from skiplake.spark.query.catalyst import (
    RelationParts,
    node_at,
    optimized_plan,
    relation_roots,
    relation_tag,
    replace_nodes,
    tree_text,
)
from skiplake.spark.query.dynamic_pruning import prune_dynamically
from skiplake.spark.query.model import Occurrence, QueryPlan, TableReference
from skiplake.spark.query.plan_text import parse_plan
from skiplake.spark.query.pushdown import filters_above
from skiplake.spark.query.views import files_with_dv
from skiplake.spark.reads.planned_reads import READ_TAG, parse_read_tag, spark_file_key
from skiplake.spark.session.gateway import is_connect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from skiplake.spark.query.views import SlotViews

SnapshotOf = Callable[[str, int], Snapshot]
# A relation to swap: its reference, the files planned for it, its node (py4j), the files it reads now.
_Swap = tuple[TableReference, list[AddFile], Any, list[str]]


def prune_frame(spark: "SparkSession", df: "DataFrame", snapshot_of: SnapshotOf,
                views: "SlotViews") -> tuple["DataFrame", QueryPlan]:
    """`df` reading only the files its filters and joins allow, and the plan that says so."""
    if is_connect(spark):
        raise SparkConnectUnsupportedError(
            "lake.prune(df)", "it swaps the relations inside the DataFrame's plan, which only classic PySpark "
            "can reach", "Write the query as SQL over the lake's table names: lake.sql(...) plans the same "
            "static and dynamic pruning on Spark Connect; or filter each read itself, t.read(where=...).")
    # Only file lists are swapped here: a probe that takes keys as a row filter only would gain nothing.
    plan = QueryPlan("", None, views, replace(DynamicPruningSettings.of(spark), unclustered_row_filter=False))
    plan.analysis = df
    plan.optimized = optimized_plan(df)
    plan.root = parse_plan(tree_text(plan.optimized))
    relations: dict[int, tuple[Any, list[str]]] = {}  # per reference: its relation, the files it reads now
    for node in plan.root.walk():
        if node.kind != "Relation":
            continue
        tag = relation_tag(plan.optimized, node.number, READ_TAG)
        if tag is None:
            continue
        path, version = parse_read_tag(tag)
        snapshot = snapshot_of(path, version)
        name = path.rstrip("/").rsplit("/", 1)[-1]
        # A t.read() relation lists its files as its roots.
        relation = node_at(plan.optimized, node.number)
        read = relation_roots(relation)
        within, dv_branch = _kind_of_files(snapshot, read[0] if read else None)
        label = f"{name} (files with deletion vectors)" if dv_branch else name
        ref = TableReference(snapshot, name.lower(), label, within=within)
        ref.occurrences.append(Occurrence(node, filters_above(plan, ref, node)))
        ref.plan_static(spark, ref.occurrences[0].static)
        plan.references.append(ref)
        relations[id(ref)] = relation, read
    prune_dynamically(spark, plan, None)
    swaps: list[_Swap] = []
    for ref in plan.references:
        if ref.plan is None:
            continue
        # The relation keeps its own output (a DV branch's _metadata and the join above it that
        # drops deleted rows): only its file list changes.
        files = [replace(f, deletionVector=None) for f in ref.plan.files]
        relation, read = relations[id(ref)]
        if len(files) < len(read):
            swaps.append((ref, files, relation, read))
    if not swaps:
        return df, plan
    return _swapped(spark, df, swaps), plan


def _kind_of_files(snapshot: Snapshot, first_root: str | None) -> tuple[np.ndarray | None, bool]:
    """Which of the snapshot's files a relation may read (None: any), and whether they are the
    ones with deletion vectors: each relation of a read plans, reports and keeps to its own kind."""
    with_dv, marked = files_with_dv(snapshot)
    if not with_dv.any():
        return None, False
    dv_branch = first_root is not None and spark_file_key(first_root) in marked
    return (with_dv if dv_branch else ~with_dv), dv_branch


def _swapped(spark: "SparkSession", df: "DataFrame", swaps: list[_Swap]) -> "DataFrame":
    """`df` with each swapped relation reading its reference's planned files instead (a new file
    index over those of its own files, from Spark's file status cache: nothing listed again)."""
    pairs = []
    for ref, files, old, read in swaps:
        assert ref.snapshot is not None and ref.plan is not None
        roots = {spark_file_key(r): r for r in read}
        try:
            paths = [roots[file_key(ref.snapshot.table_path, f.path)] for f in files]
        except KeyError:
            continue  # a planned file its relation does not read: it stays as it is
        parts = RelationParts.of(spark, old)
        pairs.append((old, parts.node_over(parts.relation_over(spark, paths))))
    if not pairs:
        return df
    return replace_nodes(spark, df._jdf.queryExecution().analyzed(), pairs)


