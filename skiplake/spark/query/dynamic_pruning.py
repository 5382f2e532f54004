"""Stage 3 of `lake.sql` planning: dynamic file pruning.

For each equi-join of the optimized plan, one side (the probe) may be read through a lake
table whose files the other side (the build) can prune: the build's join-key values are
computed by Spark, now, and the probe's files are planned again with `key IN (values)` added to
its predicate (partition values, min/max stats and bucket ids all prune by it). The seed's rules:

- join types: INNER (either side may be the probe), LEFT SEMI (an `IN (subquery)`: the left is
  the probe), and outer joins on the side they do not preserve (the right of LEFT OUTER, the
  left of RIGHT OUTER); never FULL OUTER or anti joins. Rows of the probe whose key is not a
  build key, or is NULL, produce nothing in such a join, so skipping their files loses nothing.
- the probe: the key is traced down from the join to a column of a lake table's relation,
  unchanged, through projections, filters, unions (every branch), aggregates (on a grouping
  key) and inner or outer joins on their preserved side; the table is big enough
  (deltaTableSizeThreshold, deltaTableFilesThreshold over its statically selected files) and its
  files are clustered by the key (a key value falls into at most maxFileOverlap of its files),
  or it is bucketed by the key. A probe whose files are not clustered by the key prunes no file,
  but when the build is read in the driver (milliseconds) and gives at most ROW_FILTER_MAX_VALUES
  keys, they still filter the probe's rows before its joins and shuffles (unclusteredRowFilter).
- the build: it has a selective filter (not only `IS NOT NULL`), and it reads little
  (buildSizeThreshold, Spark's broadcast threshold by default: the bytes skiplake plans to read of
  its lake tables, Spark's estimate of any other relation), as the seed's broadcast hash join.
- the key types compare as the stats do: the probe's key column is compared as itself (or
  widened from one integer type to a wider one); a cast of the probe's key to another type
  (string against number, decimals of different scales, date against timestamp) and
  floating-point keys are skipped, with the reason in the report.

Each distinct build is evaluated once per query, concurrently, before the final query is
planned; its time and key count go to the report.
"""
from __future__ import annotations

import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import functions as F

from skiplake.errors import InvalidPredicateError
from skiplake.expr.sql import to_sql
from skiplake.expr.tree import And, Col, Const, InList, IsNull, Node, Not, conjuncts
from skiplake.layout.bucket_spec import bucket_spec_of
from skiplake.log.schema import INTEGER_TYPES, is_decimal, is_primitive
from skiplake.log.values import TIMESTAMP_TYPES
from skiplake.skipping.dfp_cost import CostEstimate, CostModel
from skiplake.skipping.key_filters import BuildKeys, KeyFilter, file_overlap
from skiplake.skipping.local_build import local_keys
from skiplake.skipping.plan import stats_table
from skiplake.skipping.report import DynamicPruningReport
from skiplake.skipping.rows import NotExact
from skiplake.spark.pruning.build_keys import distinct_keys
from skiplake.spark.pruning.pruning_settings import JOIN_TYPES
from skiplake.spark.query.catalyst import (
    frame_of,
    frame_over,
    materialized,
    node_at,
    relabeled,
    size_in_bytes,
)
from skiplake.spark.query.dynamic_cost import estimate, parallelism, probe_size, tentative_size
from skiplake.spark.query.join_candidates import Candidate, Target
from skiplake.spark.query.model import ROW_FILTER_MAX_VALUES, Occurrence, QueryPlan, Resolver, TableReference
from skiplake.spark.query.plan_text import Attr, Operand, PlanNode, split_top, trace
from skiplake.spark.query.plan_text import conjuncts as text_conjuncts
from skiplake.spark.query.pushdown import bound_condition, logical_sql
from skiplake.spark.reads.planned_reads import read_planned

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# (probe child, build child) of each join type the rule applies to.
_SIDES = {"Inner": ((0, 1), (1, 0)), "LeftSemi": ((0, 1),), "LeftOuter": ((1, 0),), "RightOuter": ((0, 1),)}
_WIDER = {"byte": ("short", "int", "integer", "bigint", "long"), "short": ("int", "integer", "bigint", "long"),
          "integer": ("bigint", "long"), "long": ()}
_EXPR_ID = re.compile(r"#\d+")
CONNECT_BUILDS = ("under Spark Connect a build side prunes only when it is Projects and Filters over one "
                  "lake table (its subtree cannot be run on its own there); this one reads more")
# The input size of a build side no estimate is available for (Spark Connect): over any threshold.
UNKNOWN_SIZE = 1 << 62
# Key column types besides integers and decimals whose values dynamic pruning compares with stats.
_KEY_TYPES = ("string", "date", "boolean", *TIMESTAMP_TYPES)


@dataclass
class _Verdict:
    """Why a join direction cannot prune, or the candidate that can."""
    candidate: Candidate | None = None
    reason: str = ""
    probe_bytes: int = 0
    report_fields: dict = field(default_factory=dict)


def prune_dynamically(spark: "SparkSession", plan: QueryPlan, resolver: Resolver | None) -> QueryPlan:
    """Stage 3, dynamic file pruning: each join's build side worth evaluating is evaluated once, and its keys
    prune the probe side's lake table files (or filter its rows); every join considered is reported."""
    # `resolver` is unused: the planner's rules share one signature, and frames.py passes None.
    settings = plan.settings
    if not settings.enabled or plan.root is None:
        return plan
    candidates = _candidates(plan)
    groups = _groups(plan, candidates)
    if plan.optimized is None:
        groups = _driver_builds(plan, groups)
    model = settings.model(parallelism(spark)) if groups and settings.cost_model else None
    if model is not None:
        groups = _worth_building(plan, groups, model)
    if groups:
        _evaluate_builds(spark, plan, groups)
        _apply(plan, [c for group in groups.values() for c in group], model)
    plan.dynamic = _alike_once(plan.dynamic)
    return plan


def _candidates(plan: QueryPlan) -> list[Candidate]:
    """Every join's candidates, each probe traced to the reads of skiplake tables below it."""
    assert plan.root is not None
    occurrences = {occ.node.number: (ref, occ) for ref in plan.references for occ in ref.occurrences
                   if ref.snapshot is not None}
    return [c for join in plan.root.walk() if join.kind == "Join" for c in _join_candidates(plan, join, occurrences)]


def _join_candidates(plan: QueryPlan, join: PlanNode,
                     occurrences: dict[int, tuple[TableReference, Occurrence]]) -> list[Candidate]:
    """The candidates of one join, in the directions its type allows; when there are none, the
    report of why (for the direction whose probe reads most) goes to the plan."""
    verdicts = [_consider(plan, join, sides, occurrences) for sides in _sides(join)]
    chosen = [v.candidate for v in verdicts if v.candidate is not None]
    reported = [v for v in verdicts if v.report_fields]
    if not reported:
        return []
    best = max(reported, key=lambda v: v.probe_bytes)
    settings = plan.settings
    if join.join_type not in _SIDES:
        reason = _never(join)
    elif join.join_type not in settings.join_types:
        reason = f"{join.join_type} is not among {JOIN_TYPES} ({', '.join(settings.join_types)})"
    elif chosen:
        return chosen
    else:
        reason = best.reason
    plan.dynamic.append(DynamicPruningReport(applied=False, reason=reason, **best.report_fields))
    return []


def _alike_once(reports: list[DynamicPruningReport]) -> list[DynamicPruningReport]:
    """One report per kind of join: a CTE that Spark inlines n times has n alike joins (TPC-DS
    q14 repeated each of its reports up to six times)."""
    first: dict[str, DynamicPruningReport] = {}
    counts: Counter[str] = Counter()
    for r in reports:
        key = repr(r.to_dict())
        first.setdefault(key, r)
        counts[key] += 1
    return [replace(r, joins=counts[key]) if counts[key] > 1 else r for key, r in first.items()]


def _sides(join: PlanNode) -> tuple[tuple[int, int], ...]:
    """(probe child, build child) pairs to consider; for a type the rule never applies to, both
    directions, so that the report can say so."""
    return _SIDES.get(join.join_type, ((0, 1), (1, 0)))


def _never(join: PlanNode) -> str:
    jt = join.join_type
    if jt == "FullOuter":
        return "a FULL OUTER join keeps every row of both sides, so neither side can skip files"
    if jt == "LeftAnti":
        return "a LEFT ANTI join keeps the rows that do not match, so no key rules a file out"
    return f"dynamic file pruning does not apply to {jt} joins"


# ---------------------------------------------------------------- deciding


def _consider(plan: QueryPlan, join: PlanNode, sides: tuple[int, int],
              occurrences: dict[int, tuple[TableReference, Occurrence]]) -> _Verdict:
    probe_node, build_node = join.children[sides[0]], join.children[sides[1]]
    pairs = _oriented_keys(join, probe_node, build_node)
    if not pairs:
        return _no_key_pairs(plan, join, probe_node, build_node, occurrences)
    traced: list[tuple[list[Target], Operand]] = []
    reasons: list[str] = []
    for probe_op, build_op in pairs:
        targets, why = _targets(plan, probe_node, probe_op, occurrences)
        if targets:
            traced.append((targets, build_op))
        elif why:
            reasons.append(why)
    labels = sorted({t.ref.label for targets, _ in traced for t in targets})
    probe_label = ", ".join(labels) or _relations(plan, probe_node, occurrences)
    build_label = _describe(plan, build_node)
    fields: dict[str, Any] = {"probe": probe_label, "build": build_label, "join_type": join.join_type,
                              "keys": [(p.attr.name, b.attr.name) for p, b in pairs]}
    # The direction worth explaining is the one whose probe side reads more.
    probe_bytes = _bytes_read(probe_node, occurrences)
    if not traced:
        return _Verdict(reason=reasons[0] if reasons else "", probe_bytes=probe_bytes,
                        report_fields=fields if reasons else {})
    why_not = _probe_problem(plan, traced) or _build_problem(plan, build_node)
    if why_not:
        return _Verdict(reason=why_not, probe_bytes=probe_bytes, report_fields=fields)
    keys = [(ts[0].column.name, b.attr.name) for ts, b in traced]
    candidate = Candidate(join, build_node, traced, keys, probe_label, build_label)
    return _Verdict(candidate, probe_bytes=probe_bytes, report_fields=fields)


def _no_key_pairs(plan: QueryPlan, join: PlanNode, probe: PlanNode, build: PlanNode,
                  occurrences: dict[int, tuple[TableReference, Occurrence]]) -> _Verdict:
    """Why an equi-join over a lake table has no key to prune by (nothing to say for a join
    without equalities, or one that reads no lake table on the probe side)."""
    cond = join.join_condition
    equalities = [c for c in text_conjuncts(cond) if len(split_top(c, " = ")) == 2] if cond else []
    if not equalities or not any(n.number in occurrences for n in probe.walk()):
        return _Verdict()
    if any("normalizenanandzero(" in c for c in equalities):
        reason = ("the join compares floating-point values, which Spark normalizes first (NaN, -0.0): "
                  "min/max stats do not show what it compares")
    else:
        reason = "the join's equalities compare computed values, not a column of each side"
    fields = {"probe": _relations(plan, probe, occurrences), "build": _describe(plan, build),
              "join_type": join.join_type, "keys": []}
    return _Verdict(reason=reason, probe_bytes=_bytes_read(probe, occurrences), report_fields=fields)


def _bytes_read(node: PlanNode, occurrences: dict[int, tuple[TableReference, Occurrence]]) -> int:
    """The bytes the lake tables under `node` read after static pruning."""
    return sum(_static_bytes(occurrences[n.number][0]) for n in node.walk() if n.number in occurrences)


def _static_bytes(ref: TableReference) -> int:
    # A reference of a snapshot has its static plan from stage 2 (push_filters, plan_static).
    assert ref.static is not None
    return ref.static.report.bytes_selected


def _oriented_keys(join: PlanNode, probe: PlanNode, build: PlanNode) -> list[tuple[Operand, Operand]]:
    """(probe operand, build operand) of each equality of the join's condition."""
    probe_ids = {a.id for a in probe.output or []}
    build_ids = {a.id for a in build.output or []}
    out = []
    for left, right in join.equi_keys():
        if left.attr.id in probe_ids and right.attr.id in build_ids:
            out.append((left, right))
        elif right.attr.id in probe_ids and left.attr.id in build_ids:
            out.append((right, left))
    return out


def _targets(plan: QueryPlan, probe: PlanNode, op: Operand,
             occurrences: dict[int, tuple[TableReference, Occurrence]]) -> tuple[list[Target], str]:
    """The lake relations (and columns) the probe key comes from unchanged, or why none."""
    found: list[Target] = []
    reasons: list[str] = []
    for relation, attr in trace(probe, op.attr.id):
        hit = occurrences.get(relation.number)
        if hit is None:
            continue  # a relation that is not a lake table: it is read whole
        ref, occ = hit
        name = next((a.name for a in relation.output or [] if a.id == attr), None)
        field_ = ref.schema.find(name) if name else None
        if field_ is None or not is_primitive(field_.type):
            reasons.append(f"{ref.label}'s key {name} has no min/max stats")
            continue
        problem = _type_problem(field_.name, field_.type, op.cast)
        if problem:
            reasons.append(problem)
            continue
        found.append(Target(ref, occ, Col(field_.name, field_.type)))
    if not found and not reasons:
        reasons.append("the probe side's key does not come unchanged from a lake table's column")
    return found, reasons[0] if not found else ""


def _type_problem(column: str, type_: Any, cast: str | None) -> str:
    if type_ in ("float", "double"):
        return (f"{column} is {type_}: Spark joins floating-point keys on normalized values (NaN, -0.0), "
                "which min/max stats do not show")
    if not (type_ in INTEGER_TYPES or is_decimal(type_) or type_ in _KEY_TYPES):
        # skiplake.skipping.key_filters.probe_value turns build keys into these types' values only.
        return f"{column} is {type_}: its keys are not compared with file statistics"
    if cast is None:
        return ""
    wider = _WIDER.get(type_) if type_ in INTEGER_TYPES else None
    if wider is not None and cast in wider:
        return ""
    return f"the join compares cast({column} as {cast}), not {column} itself ({type_}), so its stats do not apply"


def _probe_problem(plan: QueryPlan, traced: list[tuple[list[Target], Operand]]) -> str:
    """Why no probe target is worth pruning (thresholds, clustering), or ''."""
    s = plan.settings
    reasons = []
    keep: list[tuple[list[Target], Operand]] = []
    for targets, op in traced:
        good = []
        for t in targets:
            why = _size_problem(t, s.size_threshold, s.files_threshold)
            if not why:
                t.unclustered = _clustering_problem(t, s.max_file_overlap)
                # An unclustered target stays, for a row filter only, if the keys turn out few.
                why = "" if s.unclustered_row_filter else t.unclustered
            (reasons.append(why) if why else good.append(t))
        if good:
            keep.append((good, op))
    traced[:] = keep
    return "" if keep else reasons[0]


def _size_problem(t: Target, size_threshold: int, files_threshold: int) -> str:
    assert t.ref.static is not None
    report = t.ref.static.report
    if report.files_selected < files_threshold:
        return (f"{t.ref.label} reads {report.files_selected} files, fewer than deltaTableFilesThreshold "
                f"({files_threshold})")
    if report.bytes_selected < size_threshold:
        return (f"{t.ref.label} reads {report.bytes_selected:,} bytes, less than deltaTableSizeThreshold "
                f"({size_threshold:,})")
    return ""


def _clustering_problem(t: Target, max_overlap: float) -> str:
    """Why the key cannot prune the target's files, or ''."""
    snapshot = t.ref.snapshot
    assert snapshot is not None
    spec = bucket_spec_of(snapshot.configuration)
    if spec is not None and [c.lower() for c in spec.columns] == [t.column.name.lower()]:
        t.overlap = 1 / max(1, spec.num_buckets)
        return ""  # bucket pruning selects the keys' buckets whatever the clustering
    overlap = t.overlap = file_overlap(stats_table(snapshot), t.column.name)
    if overlap > max_overlap:
        return (f"{t.ref.label}'s files are not clustered by {t.column.name}: a key value falls in "
                f"{overlap:.0%} of them on average (maxFileOverlap {max_overlap:.0%})")
    return ""


def _build_problem(plan: QueryPlan, build: PlanNode) -> str:
    if not _selective(build):
        return "the build side has no selective filter (only IS NOT NULL, or none)"
    limit = plan.settings.build_size_threshold
    reads = _build_input(plan, build)
    if reads > limit:
        return (f"the build side reads {reads:,} bytes, more than buildSizeThreshold ({limit:,}): "
                "evaluating it first would cost about what it saves")
    return ""


def _build_input(plan: QueryPlan, build: PlanNode) -> int:
    """What evaluating the build side reads: the planned bytes of its lake tables, Spark's size
    estimate of any other relation. (Spark's estimate of the build's output would not do: it
    takes a semi join's output for its left side, however big the right side it reads.)"""
    total = 0
    for node in build.walk():
        if not node.children and node.kind not in ("OneRowRelation", "LocalRelation"):
            hit = plan.occurrence(node)
            if hit is not None and hit[0].static is not None:
                total += hit[0].static.report.bytes_selected
            elif plan.optimized is None:
                # Spark Connect: no size estimate of a relation that is not a lake table's.
                return UNKNOWN_SIZE
            else:
                total += size_in_bytes(plan.optimized, node.number)
    return total


def _selective(build: PlanNode) -> bool:
    """Whether the build side filters its rows by more than NULL checks (as Spark's DPP asks)."""
    for node in build.walk():
        if node.kind == "Filter" and any(not c.startswith("isnotnull(") for c in text_conjuncts(node.text)):
            return True
        if node.kind in ("GlobalLimit", "LocalLimit") or (node.kind == "Aggregate" and node.text.startswith("[]")):
            return True
    return False


# ---------------------------------------------------------------- evaluating and applying


def _groups(plan: QueryPlan, candidates: list[Candidate]) -> dict[str, list[Candidate]]:
    """The candidates by their build side: the same subtree and keys give the same keys."""
    groups: dict[str, list[Candidate]] = {}
    for c in candidates:
        groups.setdefault(_canonical(plan, c), []).append(c)
    return groups


def _driver_builds(plan: QueryPlan, groups: dict[str, list[Candidate]]) -> dict[str, list[Candidate]]:
    """Under Spark Connect, the build sides over one lake table (read in the driver, or by a
    query of their own); the others are reported."""
    kept: dict[str, list[Candidate]] = {}
    for key, group in groups.items():
        if _chain_shape(plan, group[0]) is not None:
            kept[key] = group
            continue
        plan.dynamic.extend(DynamicPruningReport(c.probe_label, c.build_label, c.join.join_type, c.keys, False,
                                                 CONNECT_BUILDS) for c in group)
    return kept


def _worth_building(plan: QueryPlan, groups: dict[str, list[Candidate]],
                    model: CostModel) -> dict[str, list[Candidate]]:
    """The build sides the cost model finds worth evaluating; the others' joins are reported with
    the figures. Builds whose keys can prune files are priced by what pruning saves; the others
    (their probes' files are not clustered by the key, and they take a short key list as a row
    filter only) are worth it only when they are cheap next to their probes' scans."""
    kept: dict[str, list[Candidate]] = {}
    for key, group in groups.items():
        first = group[0]
        local = _local_shape(plan, first) is not None
        build_bytes = _build_input(plan, first.build)
        pruning = [c for c in group if not c.rows_only]
        rows = [c for c in group if c.rows_only]
        if pruning:
            e = estimate(plan, pruning, model, build_bytes, local)
            worth, why = e.worth_building()
            if worth:
                kept[key] = group  # the row filters come with it for free
                for c in pruning:
                    c.estimate = e
                continue
            _decline(plan, pruning, why, e)
        if rows and local:
            e = estimate(plan, rows, model, build_bytes, local, rows_only=True)
            worth, why = e.worth_filtering_rows()
            if not worth:
                _decline(plan, rows, why, e)
                continue
        if rows:
            kept[key] = rows
    return kept


def _decline(plan: QueryPlan, candidates: list[Candidate], why: str, e: CostEstimate) -> None:
    plan.dynamic.extend(DynamicPruningReport(c.probe_label, c.build_label, c.join.join_type, c.keys, False, why,
                                             cost=e) for c in candidates)


def _evaluate_builds(spark: "SparkSession", plan: QueryPlan, groups: dict[str, list[Candidate]]) -> None:
    """Each distinct build once, concurrently."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=min(4, len(groups))) as pool:
        # A Spark job only where some probe can prune files by the keys.
        results = list(pool.map(lambda key: _keys_of(spark, plan, groups[key][0],
                                                     not all(c.rows_only for c in groups[key])), list(groups)))
    plan.build_seconds = time.perf_counter() - t0
    for key, (keys, seconds) in zip(groups, results):
        first = groups[key][0]
        for c in groups[key]:
            c.result, c.seconds = keys, seconds
            if first.rows is not None:
                # Alike builds have alike outputs, column for column: each copy gets the rows
                # under its own attributes.
                output = node_at(plan.optimized, c.build.number).output()
                plan.materialized[c.build.number] = relabeled(spark, first.rows, output)


def _canonical(plan: QueryPlan, c: Candidate) -> str:
    """A build's identity: its subtree without expression ids, what each relation reads, its keys."""
    lines = []
    for node in c.build.walk():
        line = node.line()
        if node.kind == "Relation":
            hit = plan.occurrence(node)
            snapshot = hit[0].snapshot if hit else None
            line += f" <{snapshot.table_path if snapshot else node.number}>"
        lines.append(line)
    lines.append(repr([(b.attr.name, b.cast) for _t, b in c.pairs]))
    return _EXPR_ID.sub("#", "\n".join(lines))


def _keys_of(spark: "SparkSession", plan: QueryPlan, c: Candidate,
             spark_job: bool) -> tuple[BuildKeys | None, float]:
    """The build's distinct non-null keys, per key column; None when they cannot be read. A small
    one-table build is read in the driver; any other is a Spark job, if `spark_job`."""
    local = _local_keys(plan, c)
    if local is not None:
        return local, local.seconds
    if not spark_job:
        return None, 0.0
    if plan.optimized is None or _reads_no_files(plan, c):
        # Under Spark Connect (no plan to run), or where the analysis pass read a table through
        # a view of its columns only (past wholeTableViewMaxFiles or the replay bound: its rows
        # are not in that plan), a query of its own over the table's planned files gives the keys.
        return _own_query_keys(spark, plan, c)
    out = c.build.output
    positions = _positions(out, c)
    if out is None or positions is None:
        return None, 0.0
    if plan.settings.materialize_builds and size_in_bytes(plan.optimized, c.build.number) <= \
            plan.settings.build_size_threshold:
        # Evaluated once: the rows stay in the JVM, give the keys, and take the build's place
        # in the final plan (so the query does not evaluate it again, and the keys are exactly
        # those of the rows it joins, even for a LIMIT or a nondeterministic build).
        local = materialized(spark, plan.optimized, c.build.number)
        c.rows = local.data()
        df = frame_over(spark, local)
    else:
        df = frame_of(spark, plan.optimized, c.build.number)
    names = df.columns
    if len(names) != len(out) or any(names[p] != out[p].name for p in positions):
        return None, 0.0
    df = df.toDF(*[f"c{i}" for i in range(len(names))])
    cols = [F.col(f"c{p}").cast(b.cast) if b.cast else F.col(f"c{p}") for p, (_t, b) in zip(positions, c.pairs)]
    keys = distinct_keys(df, cols)
    return keys, keys.seconds


def _local_keys(plan: QueryPlan, c: Candidate) -> BuildKeys | None:
    """The keys of a build that is Projects and Filters over one unpartitioned lake table whose
    selected files are at most localBuildThreshold bytes, read in the driver; None when the build
    is of another shape, or its filter or key columns are not ones skiplake evaluates exactly as
    Spark (skiplake.skipping.rows says which). A filter conjunct that does not bind (it names
    something else) is left out: more rows give more keys, which prunes less, never wrongly."""
    shape = _local_shape(plan, c)
    if shape is None:
        return None
    ref, chain, keys = shape
    snapshot, static = ref.snapshot, ref.static
    assert snapshot is not None and static is not None
    try:
        parts = [p for p in (_bound_filter(plan, ref, n) for n in chain if n.kind == "Filter") if p is not None]
        predicate = None if not parts else parts[0] if len(parts) == 1 else And(tuple(parts))
        return local_keys(snapshot.table_path, static.selected, snapshot.schema, predicate, keys)
    except (NotExact, InvalidPredicateError, OSError, pa.ArrowException):
        return None


def _reads_no_files(plan: QueryPlan, c: Candidate) -> bool:
    """Whether the build reads a lake table through a view of its columns only (no files)."""
    hits = (plan.occurrence(node) for node in c.build.walk() if node.kind == "Relation")
    return any(hit is not None and hit[0].view is not None and hit[0].view.columns_only for hit in hits)


def _own_query_keys(spark: "SparkSession", plan: QueryPlan, c: Candidate) -> tuple[BuildKeys | None, float]:
    """The keys of a build over one lake table too big (or partitioned) to read in the driver,
    where the analysis pass cannot run it (Spark Connect; a view of columns only): a query of
    its own over the table's statically selected files with the filter conjuncts read from the
    plan (under Spark Connect, from its text). A conjunct that cannot be read is left out: more
    rows give more keys, which prunes less, never wrongly. None when the build is of another
    shape (a join, an aggregate)."""
    shape = _chain_shape(plan, c)
    if shape is None:
        return None, 0.0
    ref, chain, keys = shape
    snapshot, static = ref.snapshot, ref.static
    assert snapshot is not None and static is not None
    where = _filter_sql(plan, ref, [n for n in chain if n.kind == "Filter"])
    df = read_planned(spark, snapshot, static.files)
    if where:
        df = df.where(" AND ".join(f"({w})" for w in where))
    cols = [F.col(f"`{k}`").cast(b.cast) if b.cast else F.col(f"`{k}`") for k, (_t, b) in zip(keys, c.pairs)]
    found = distinct_keys(df, cols)
    return found, found.seconds


def _filter_sql(plan: QueryPlan, ref: TableReference, filters: list[PlanNode]) -> list[str]:
    """The conditions of a build's Filters as SQL over the table's own columns."""
    if plan.optimized is not None:
        # Catalyst's SQL of a condition names columns by the query's alias of the table: bound,
        # they are the table's own (a conjunct skiplake cannot bind is left out).
        return [to_sql(b) for b in (_bound_filter(plan, ref, n) for n in filters) if b is not None]
    return [logical_sql(p, ref) for p in (plan.condition_sql(n, ref) for n in filters) if p is not None]


def _local_shape(plan: QueryPlan, c: Candidate) -> tuple[TableReference, list[PlanNode], list[str]] | None:
    """(its table, its Projects and Filters, its key columns) of a build read in the driver, or
    None when it is not of that shape (nothing is read to tell)."""
    limit = plan.settings.local_build_threshold
    shape = _chain_shape(plan, c) if limit > 0 else None
    if shape is None:
        return None
    static, snapshot = shape[0].static, shape[0].snapshot
    assert static is not None and snapshot is not None
    if snapshot.partition_columns or static.report.bytes_selected > limit:
        return None
    return shape


def _chain_shape(plan: QueryPlan, c: Candidate) -> tuple[TableReference, list[PlanNode], list[str]] | None:
    """(its table, its Projects and Filters, its key columns) of a build that is pass-through
    Projects and Filters over one lake table, or None."""
    chain, node = [], c.build
    while node.kind in ("Project", "Filter") and len(node.children) == 1 and not node.subqueries:
        chain.append(node)
        node = node.children[0]
    hit = plan.occurrence(node) if node.kind == "Relation" else None
    if hit is None or not hit[1].sure or hit[0].snapshot is None or hit[0].static is None:
        return None
    ref = hit[0]
    columns = {a.id: a.name for a in node.output or []}
    if not _passes_through(chain, columns):
        return None
    keys = _key_columns(ref, columns, c)
    return None if keys is None else (ref, chain, keys)


def _passes_through(chain: list[PlanNode], columns: dict[int, str]) -> bool:
    """Whether every Project of the chain only passes the relation's columns on: one that
    computes something gives its result a new id."""
    return not any(n.kind == "Project" and (n.output is None or any(a.id not in columns for a in n.output))
                   for n in chain)


def _key_columns(ref: TableReference, columns: dict[int, str], c: Candidate) -> list[str] | None:
    """The table's column each build key reads; None when one reads none (see _key_column)."""
    found = [_key_column(ref, columns, b) for _targets, b in c.pairs]
    keys = [k for k in found if k is not None]
    return keys if len(keys) == len(found) else None


def _key_column(ref: TableReference, columns: dict[int, str], b: Operand) -> str | None:
    """The table's column a build key reads, or None when it is no column of the relation or
    its cast is not a widening of the column's type."""
    field_ = ref.schema.find(columns[b.attr.id]) if b.attr.id in columns else None
    if field_ is None or (b.cast is not None and b.cast not in _WIDER.get(field_.type, ())):
        return None
    return field_.name


def _bound_filter(plan: QueryPlan, ref: TableReference, node: PlanNode) -> Node | None:
    """A Filter's condition bound to the reference's table, as pushdown binds it (one cache)."""
    sql = plan.condition_sql(node, ref)
    return None if sql is None else bound_condition(plan, ref, sql)


def _positions(out: list[Attr] | None, c: Candidate) -> list[int] | None:
    """Where each build key's attribute is in the build's output; None when one is not there once."""
    found = [_position(out, b.attr) for _t, b in c.pairs]
    positions = [p for p in found if p is not None]
    return positions if len(positions) == len(found) else None


def _position(out: list[Attr] | None, attr: Attr) -> int | None:
    hits = [i for i, a in enumerate(out or []) if a.id == attr.id]
    return hits[0] if len(hits) == 1 else None


def _apply(plan: QueryPlan, candidates: list[Candidate], model: CostModel | None) -> None:
    touched: dict[int, TableReference] = {}
    key_filter = _KeyFilters(plan.settings.max_values, plan.settings.max_ranges)
    for c in candidates:
        unapplied = _unapplied(c, model, key_filter)
        if unapplied is not None:
            plan.dynamic.append(unapplied)
            continue
        filters: list[str] = []
        counts: list[int] = []
        declined: list[str] = []
        on_rows = False
        for i, (targets, _op) in enumerate(c.pairs):
            used = False
            for t in targets:
                kf = key_filter(c, i, t.column)
                placed = _place(t, kf, c.build_label)
                if placed.why_not:
                    declined.append(placed.why_not)
                    continue
                filters.append(placed.text)
                on_rows = on_rows or placed.rows_only
                touched[id(t.ref)] = t.ref
                used = True
            if used:
                counts.append(kf.keys)
        if not filters:
            plan.dynamic.append(DynamicPruningReport(c.probe_label, c.build_label, c.join.join_type, c.keys, False,
                                                     declined[0]))
            continue
        how = ", ".join(f"{n:,} keys" for n in counts)
        if on_rows:
            how += " (a row filter where the files are not clustered by the key)"
        plan.dynamic.append(DynamicPruningReport(c.probe_label, c.build_label, c.join.join_type, c.keys, True,
                                                 how, round(c.seconds, 4), max(counts, default=0),
                                                 list(dict.fromkeys(filters)), build_local=c.result.local,
                                                 cost=c.estimate))
    for ref in touched.values():
        ref.plan_dynamic()


_ON_ROWS = " on rows only"


@dataclass(frozen=True)
class _Placed:
    """What one probe target took of a key filter."""
    text: str = ""            # the filter as the report shows it
    why_not: str = ""         # why it took none
    rows_only: bool = False   # a row filter only: the target's files are not clustered by the key


class _KeyFilters:
    """One filter per build, key column and probe column: builds feed several probes (a date build
    the three sales channels), and a filter of 10,000 keys takes milliseconds to make."""

    def __init__(self, max_values: int, max_ranges: int) -> None:
        self.max_values, self.max_ranges = max_values, max_ranges
        self._made: dict[tuple[int, int, str, Any], KeyFilter] = {}

    def __call__(self, c: Candidate, i: int, column: Col) -> KeyFilter:
        key = (id(c.result), i, column.name, column.type)
        if key not in self._made:
            self._made[key] = c.result.key_filter(i, column, self.max_values, self.max_ranges)
        return self._made[key]


def _unapplied(c: Candidate, model: CostModel | None, key_filter: _KeyFilters) -> DynamicPruningReport | None:
    """The report of a candidate whose keys are not applied (by cost, or not read), or None."""
    why_not = _not_worth_applying(c, model, key_filter) if model is not None else ""
    if why_not:
        return DynamicPruningReport(c.probe_label, c.build_label, c.join.join_type, c.keys, False, why_not,
                                    round(c.seconds, 4), c.result.count, build_local=c.result.local, cost=c.estimate)
    if c.result is not None:
        return None
    reason = "the build side's key columns could not be read"
    if c.rows_only:
        reason = (f"{c.pairs[0][0][0].unclustered}; its keys could reach only its rows, which is worth "
                  "it for a build side read in the driver, and this one is not")
    return DynamicPruningReport(c.probe_label, c.build_label, c.join.join_type, c.keys, False, reason)


def _not_worth_applying(c: Candidate, model: CostModel, key_filter: _KeyFilters) -> str:
    """Why the build's keys, now known, do not save what applying them costs; '' when they do
    (or the cost model did not price this build). The files they keep are planned exactly."""
    clustered = [(i, t) for i, (targets, _op) in enumerate(c.pairs) for t in targets if not t.unclustered]
    if c.estimate is None or c.result is None or not clustered:
        return ""
    # Per probe reference, every key column's filter at once, as _apply will give them.
    filters: dict[int, tuple[Target, list[Node]]] = {}
    for i, t in clustered:
        kf = key_filter(c, i, t.column)
        filters.setdefault(id(t.ref), (t, []))[1].append(kf.predicate)
    before = probe_size([t for t, _p in filters.values()])
    after = [tentative_size(t, p[0] if len(p) == 1 else And(tuple(p))) for t, p in filters.values()]
    worth, why = c.estimate.worth_applying(before, (sum(f for f, _b in after), sum(b for _f, b in after)), model)
    return "" if worth else why


def _place(t: Target, kf: KeyFilter, build: str) -> _Placed:
    """Give one probe target its key filter. A clustered target prunes its files by it; an
    unclustered one takes a short key list as a row filter only (Occurrence.kept), and longer
    ones not at all."""
    # The key list, when it is short enough to be a row filter.
    short = (kf.predicate if isinstance(kf.predicate, InList) and len(kf.predicate.values) <= ROW_FILTER_MAX_VALUES
             else None)
    if t.unclustered and short is None and not isinstance(kf.predicate, Const):
        return _Placed(why_not=f"{t.unclustered}; its {kf.keys:,} keys are more than a row filter takes "
                               f"({ROW_FILTER_MAX_VALUES})")
    row_filter = short if t.unclustered else None
    if row_filter is not None:
        t.occ.kept.append(row_filter)
        text = kf.text(build) + _ON_ROWS
    else:
        t.occ.dynamic.append(kf.predicate)  # (no key at all selects no file, clustered or not)
        text = kf.text(build)
    if text not in t.ref.dynamic_filters:
        t.ref.dynamic_filters.append(text)
    return _Placed(text, "", row_filter is not None)


# ---------------------------------------------------------------- describing


def _describe(plan: QueryPlan, build: PlanNode) -> str:
    """What the build side reads: its lake tables with their literal filters."""
    parts = []
    for node in build.walk():
        if node.kind != "Relation":
            continue
        hit = plan.occurrence(node)
        if hit is None:
            parts.append("a Spark relation")
            continue
        ref, occ = hit
        if not occ.sure:
            names = [r.name for r in plan.references if any(o.node is node for o in r.occurrences)]
            parts.append(" or ".join(dict.fromkeys(names)))
            continue
        shown = [c for c in conjuncts(occ.static) if not _is_not_null(c)] if occ.static is not None else []
        parts.append(ref.name + (f" WHERE {' AND '.join(to_sql(c) for c in shown)}" if shown else ""))
    return ", ".join(dict.fromkeys(parts)) or "a computed relation"


def _relations(plan: QueryPlan, node: PlanNode, occurrences: dict[int, tuple[TableReference, Occurrence]]) -> str:
    labels = [occurrences[n.number][0].label for n in node.walk() if n.number in occurrences]
    return ", ".join(dict.fromkeys(labels)) or "a Spark relation"


def _is_not_null(node: Node) -> bool:
    return isinstance(node, Not) and isinstance(node.child, IsNull)
