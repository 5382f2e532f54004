"""What dynamic file pruning's cost model is told about one build side, gathered from the plan.

skiplake.skipping.dfp_cost prices a build against what it can save; this reads the inputs off
the query's plan before any build runs: the probe's files and bytes after static pruning, the
share a single key keeps at best (each probe's file overlap on the key), and the share the
build's key range keeps for sure. The range comes from the stats of the build table's
statically selected files, when the build key is a lake table's column unchanged; the probe's
files that may hold a value in it are planned as a `BETWEEN` would be.
"""
from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiplake.expr.tree import And
from skiplake.skipping.dfp_cost import CostEstimate, CostModel, combined_share
from skiplake.skipping.key_filters import key_filter, probe_value
from skiplake.skipping.plan import plan_scan, stats_table
from skiplake.spark.query.model import QueryPlan, TableReference
from skiplake.spark.query.plan_text import Operand, PlanNode, trace
from skiplake.spark.session.gateway import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from skiplake.spark.query.join_candidates import Candidate, Target


def parallelism(spark: "SparkSession") -> int:
    """How many tasks a scan runs at once: Spark's default parallelism (one round trip per session).
    A Spark Connect client has no SparkContext to ask: the setting, else the cores of a local
    master, else those of this machine."""
    if is_connect(spark):
        return _connect_parallelism(spark)
    return _parallelism(spark.sparkContext)


def _connect_parallelism(spark: "SparkSession") -> int:
    key = id(spark)
    if key not in _CONNECT_PARALLELISM:
        conf = spark.conf.getAll
        found = conf.get("spark.default.parallelism")
        master = conf.get("spark.master", "")
        local = re.fullmatch(r"local\[(\d+)(?:,\d+)?\]", master)
        _CONNECT_PARALLELISM[key] = (int(found) if found and found.isdigit() else int(local.group(1)) if local
                                     else os.cpu_count() or 2)
    return _CONNECT_PARALLELISM[key]


_CONNECT_PARALLELISM: dict[int, int] = {}


@lru_cache(maxsize=8)
def _parallelism(context: Any) -> int:
    return int(context.defaultParallelism)


def estimate(plan: QueryPlan, group: "list[Candidate]", model: CostModel, build_bytes: int,
             build_local: bool, rows_only: bool = False) -> CostEstimate:
    """The costs and savings of one build side for the probes of every candidate that shares it:
    the probes whose files it can prune, or with `rows_only` those it can only filter rows of."""
    targets: dict[int, tuple["Target", float]] = {}   # per probe reference: its target, the share kept for sure
    for c in group:
        for probe_targets, build_op in c.pairs:
            key_range = None if rows_only else _build_key_range(plan, c.build, build_op)
            for t in probe_targets:
                if bool(t.unclustered) != rows_only:
                    continue
                sure = _kept_share(t, key_range) if key_range is not None else 1.0
                seen = targets.get(id(t.ref))
                targets[id(t.ref)] = (t, sure if seen is None else min(seen[1], sure))
    files, bytes_ = probe_size([t for t, _s in targets.values()])
    best = 1.0 if rows_only else combined_share([(t.overlap, _static(t)[1]) for t, _s in targets.values()])
    sure = combined_share([(s, _static(t)[1]) for t, s in targets.values()])
    return model.estimate(files, bytes_, best, sure, build_bytes, _build_rows(plan, group[0].build, build_bytes),
                          build_local)


def _build_rows(plan: QueryPlan, build: PlanNode, build_bytes: int) -> int:
    """The rows of the lake tables a build reads (their statically selected files' record counts);
    a table whose stats lack them counts a row per 10 bytes."""
    rows = 0
    for node in build.walk():
        hit = plan.occurrence(node) if node.kind == "Relation" else None
        if hit is not None and hit[0].static is not None:
            report = hit[0].static.report
            rows += report.rows_selected if report.rows_selected is not None else report.bytes_selected // 10
    return rows or build_bytes // 10


def probe_size(targets: "list[Target]") -> tuple[int, int]:
    """The (files, bytes) static pruning left the distinct references of `targets`."""
    seen = {id(t.ref): _static(t) for t in targets}
    return sum(f for f, _b in seen.values()), sum(b for _f, b in seen.values())


def tentative_size(t: "Target", predicate: Any) -> tuple[int, int]:
    """The (files, bytes) the target's occurrence would read with `predicate` added."""
    node = predicate if t.occ.static is None else And((t.occ.static, predicate))
    snapshot = t.ref.snapshot
    assert snapshot is not None  # a probe target is a reference of a snapshot (dynamic_pruning._candidates)
    report = plan_scan(snapshot, node, describe=False, within=t.ref.within).report
    return report.files_selected, report.bytes_selected


def _static(t: "Target") -> tuple[int, int]:
    assert t.ref.static is not None
    report = t.ref.static.report
    return report.files_selected, report.bytes_selected


def _key_column(plan: QueryPlan, build: PlanNode, op: Operand) -> tuple[TableReference, str] | None:
    """(the lake table's reference, its column) the build's key reads unchanged, or None."""
    if op.cast is not None:
        return None
    sources = trace(build, op.attr.id)
    if len(sources) != 1:
        return None
    relation, attr_id = sources[0]
    hit = plan.occurrence(relation)
    if hit is None or hit[0].snapshot is None or hit[0].static is None:
        return None
    name = next((a.name for a in relation.output or [] if a.id == attr_id), None)
    field_ = hit[0].schema.find(name) if name else None
    return None if field_ is None else (hit[0], field_.name)


def _build_key_range(plan: QueryPlan, build: PlanNode, op: Operand) -> tuple[Any, Any] | None:
    """[min, max] of the build's key over its lake table's selected files, from stats; None when
    the key is not one lake table's column unchanged, or a file's bounds are unknown."""
    found = _key_column(plan, build, op)
    if found is None:
        return None
    ref, column = found
    snapshot = ref.snapshot
    assert snapshot is not None and ref.static is not None
    stats = stats_table(snapshot).column(column)  # parsed once per snapshot
    selected = ref.static.mask if ref.static.mask is not None else np.ones(snapshot.num_files, dtype=bool)
    some = selected & ~np.asarray(stats.all_null, dtype=bool)
    if not some.any():
        return None
    mask = pa.array(some)
    lows, highs = stats.min.filter(mask), stats.max.filter(mask)
    if lows.null_count or highs.null_count:
        return None
    return pc.min(lows).as_py(), pc.max(highs).as_py()


def _kept_share(t: "Target", key_range: tuple[Any, Any]) -> float:
    """The share of the target's statically selected bytes whose files may hold a key in range."""
    lo, hi = (probe_value(v, t.column.type) for v in key_range)
    if lo is None or hi is None:
        return 1.0
    kept = tentative_size(t, key_filter(t.column, [lo, hi], 0, 1).predicate)[1]
    return kept / max(1, _static(t)[1])
