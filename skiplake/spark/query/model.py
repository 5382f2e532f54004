"""What the stages of `lake.sql` planning share: the query, its lake table references, the reports."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence, Union

import numpy as np

from skiplake.expr.sql import sql_literal, sql_name, to_sql
from skiplake.expr.tree import And, InList, Node, Opaque, Or
from skiplake.log.column_mapping import physical_names
from skiplake.log.paths import from_log_path
from skiplake.log.snapshot import Snapshot
from skiplake.skipping.plan import ScanPlan, plan_scan
from skiplake.skipping.report import DynamicPruningReport, LogAnswerReport, ScanReport, StageCount
from skiplake.spark.buckets.bucketed_reads import BucketedRead
from skiplake.spark.buckets.join_runner import JoinReport
from skiplake.spark.query.catalyst import RelationParts, condition_sql
from skiplake.spark.query.plan_conditions import condition_sql as text_condition_sql
from skiplake.spark.reads.catalog_tables import CatalogTable
from skiplake.spark.reads.log_job import plan_files
from skiplake.spark.reads.planned_reads import read_planned

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from sqlglot import exp

    from skiplake.spark.pruning.pruning_settings import DynamicPruningSettings
    from skiplake.spark.query.plan_text import PlanNode

# What a lake table name stands for in one query: a Delta table pinned to a snapshot, or a
# catalog table of Hive-style Parquet.
Source = Union[Snapshot, CatalogTable]
# The file column of the slot views: each row's file name, which a filter prunes files by (not
# planned_reads.FILE_COLUMN, the file path DML reads identify rows by).
FILE_COLUMN = "__skiplake_file_name"
_SIMPLE_FILE_NAME = re.compile(r"^[A-Za-z0-9._=-]+$")
# Dynamic filters become a row filter only as short IN lists: Spark hands Parquet an IN list of
# up to spark.sql.parquet.pushdown.inFilterThreshold (10) values as exact equalities, which skip
# row groups and pages; a longer list reaches Parquet as its [min, max] only, skips little within
# files, and cost more than it saved (the row filter is measured in docs/benchmarks.md).
ROW_FILTER_MAX_VALUES = 10


def whole_table(spark: "SparkSession", source: Source) -> "DataFrame":
    """Every row of a lake table, as plain Spark would read it."""
    if isinstance(source, CatalogTable):
        return source.read()
    return read_planned(spark, source, plan_scan(source).files)


class Resolver(Protocol):
    """How a query's table names become lake tables (the Lake implements it)."""

    def source(self, name: str) -> Source | None:
        """The lake table `name` (unqualified, any case), pinned now; None if the lake has none."""

    def unknown(self, name: str) -> Exception:
        """The error for a name that is neither a lake table nor a table Spark knows."""


@dataclass(frozen=True)
class ViewRelation:
    """One file relation of a slot view, as the final query may swap it (skiplake.spark.query.swap)."""
    node: Any                   # the LogicalRelation (py4j)
    with_dv: bool               # whether it reads the files with deletion vectors (else those without)
    roots: Mapping[str, str]    # its files: paths.file_key -> the path as its file index names it
    # RelationParts of the node, read when first needed and kept as long as the view
    _parts: list[RelationParts] = field(default_factory=list, compare=False, repr=False)

    def parts(self, spark: "SparkSession") -> RelationParts:
        """What a node over other files of this relation keeps of it (its py4j objects, read once)."""
        if not self._parts:
            self._parts.append(RelationParts.of(spark, self.node))
        return self._parts[0]


@dataclass(frozen=True)
class SlotView:
    """A whole-table view a reference reads through (skiplake.spark.query.views)."""
    name: str                   # the view, as a query names it (global_temp.<local>)
    columns: tuple[str, ...]    # the table's columns, in order (FILE_COLUMN not among them)
    first_id: int | None        # expression id of its relation's first column, as first read
    local: str = ""             # its name in the global temporary database
    with_file: str = ""         # the twin view that adds FILE_COLUMN (for file filters)
    # Its file relations, one per kind of file (with and without deletion vectors); empty when
    # the table is read otherwise (no files, files outside the Hive layout).
    relations: tuple[ViewRelation, ...] = ()
    # No files at all, only the columns: the table has more files than a whole-table view is
    # built over (views.WHOLE_VIEW_MAX_FILES); the final query reads the planned files through
    # a view of the reference's own.
    columns_only: bool = False


class Views(Protocol):
    """Where a query's references get their slot views (skiplake.spark.query.views.SlotViews)."""

    def get(self, source: Source, slot: int) -> "SlotView":
        """The whole-table view of `source` for the `slot`-th reference of its table in a query."""


@dataclass
class Occurrence:
    """One place a reference's relation appears in Spark's optimized plan (a CTE used twice
    appears twice); each gets its own static and dynamic predicate."""
    node: "PlanNode"
    static: Node | None = None               # the literal filters Spark put above it, bound
    dynamic: list[Node] = field(default_factory=list)  # filters from join build sides
    # Short key lists of build sides whose keys do not prune this table's files (they are not
    # clustered by the key): they filter its rows only, above the scan (see row_filter).
    kept: list[InList] = field(default_factory=list)
    # False when the relation may be another table's (a copy whose columns several tables have):
    # it then widens what the reference reads, but is not read as a build side of this table.
    sure: bool = True


@dataclass
class TableReference:
    """One place a lake table is named in the query."""
    source: Source
    name: str                       # the lake table's name (lower case)
    label: str                      # how the query names it ("store_sales AS ss")
    alias: str = ""                 # the query's alias for it, if any
    view: "SlotView | None" = None  # the whole-table view it reads through
    occurrences: list[Occurrence] = field(default_factory=list)
    static: ScanPlan | None = None  # files its literal predicates select
    plan: ScanPlan | None = None    # files it reads (static and dynamic pruning)
    dynamic_filters: list[str] = field(default_factory=list)
    where: str | None = None        # a catalog table's pushed predicate
    bucketed: bool = False          # read as a bucketed relation (one side of a bucket join)
    merge_hint: bool = False        # the right side of a bucket join: keep Spark from broadcasting it
    bucketed_read: BucketedRead | None = None  # how a bucketed side reads under Spark Connect
    own_view: str = ""              # a per-query view the final query reads instead (see frame)
    within: Any = None              # a mask of the snapshot's files the reference may read (None: all)
    _file_filter: tuple[Any, str | None] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def snapshot(self) -> Snapshot | None:
        """The Delta table's snapshot; None for a catalog table."""
        return self.source if isinstance(self.source, Snapshot) else None

    @property
    def schema(self) -> Any:
        """The lake table's schema."""
        return self.source.schema

    def column_types(self) -> dict[str, str]:
        """Each top-level column's primitive type by the name a relation of its view outputs:
        its logical name, and under column mapping its physical one too."""
        fields = self.schema.fields
        out = {f.name: f.type for f in fields if isinstance(f.type, str)}
        snapshot = self.snapshot
        if snapshot is not None and snapshot.column_mapping != "none":
            for logical, physical in physical_names(snapshot.schema, snapshot.column_mapping).items():
                if logical in out:
                    out[physical] = out[logical]
        return out

    def plan_static(self, spark: "SparkSession", predicate: Node | None) -> None:
        """Plan the files `predicate` (the literal filters, bound; None: all) selects; a catalog table keeps
        it as SQL for its read instead. A table whose files are pending (past the replay bound)
        is planned by a Spark job, and from then on stands for the files it kept: every later
        stage plans over those, never the whole table."""
        if not isinstance(self.source, Snapshot):
            self.where = to_sql(predicate) if predicate is not None else None
            return
        if self.source.files_pending:
            whole = plan_files(spark, self.source, predicate)
            self.source = self.source.with_files(whole.selected)
            plan = ScanPlan(whole.selected, whole.report, whole.predicate, whole.buckets,
                            np.ones(whole.selected.num_rows, dtype=bool), self.source)
        else:
            plan = plan_scan(self.source, predicate, within=self.within)
        plan.report = replace(plan.report, label=self.label, stages=static_stages(plan.report))
        self.static = self.plan = plan

    def plan_dynamic(self) -> None:
        """Re-plan the files from each occurrence's static and dynamic predicates (their OR)."""
        assert isinstance(self.source, Snapshot) and self.static is not None
        per_occurrence: list[Node] = []  # of the occurrences with a predicate
        for occ in self.occurrences:
            parts = ([occ.static] if occ.static is not None else []) + occ.dynamic
            if parts:
                per_occurrence.append(parts[0] if len(parts) == 1 else _and(parts))
        # None (all files) when there is no occurrence, or one without a predicate.
        predicate = None if not per_occurrence or len(per_occurrence) < len(self.occurrences) else (
            per_occurrence[0] if len(per_occurrence) == 1 else Or(tuple(per_occurrence)))
        plan = plan_scan(self.source, predicate, describe=False, within=self.within)
        stages = [*self.static.report.stages, _stage("dynamic", plan.report)]
        # The totals are the static plan's: the same files, or (planned by a Spark job) the
        # whole table's, of which this reference's source holds only the files the job kept.
        static = self.static.report
        plan.report = replace(plan.report, files_total=static.files_total, bytes_total=static.bytes_total,
                              rows_total=static.rows_total, partitions_total=static.partitions_total,
                              buckets_total=static.buckets_total, replay=static.replay,
                              label=self.label, predicate=self.static.report.predicate,
                              partition_filters=self.static.report.partition_filters,
                              data_filters=self.static.report.data_filters,
                              dynamic_filters=list(self.dynamic_filters), stages=stages)
        self.plan = plan

    def file_filter(self) -> str | None:
        """The condition on FILE_COLUMN that keeps just the planned files; None when nothing is
        pruned. Raises ValueError when a file name cannot be matched exactly."""
        assert self.plan is not None and self.snapshot is not None
        if self._file_filter is None or self._file_filter[0] is not self.plan:
            self._file_filter = (self.plan, self._new_file_filter())
        return self._file_filter[1]

    def _new_file_filter(self) -> str | None:
        assert self.plan is not None and self.snapshot is not None
        if self.plan.report.files_selected == self.plan.report.files_total:
            return None
        kept = self.plan.selected.column("path").to_pylist()
        if not kept:
            return "false"
        # The shorter list of the two: Spark parses every name of the final query's text, and a
        # table of 1,024 files whose filters keep 900 says NOT IN of 124 names instead. Only when
        # no two files share a name (in two partition folders): NOT IN would drop both.
        keep = set(kept)
        every = self.snapshot.file_rows.column("path").to_pylist()
        dropped = [p for p in every if p not in keep]
        negated = len(dropped) < len(kept) and len({_file_name(p) for p in every}) == len(every)
        names = [_file_name(p) for p in (dropped if negated else kept)]
        if any(not _SIMPLE_FILE_NAME.match(n) for n in names):
            raise ValueError("file names that need quoting")
        return f"{FILE_COLUMN} {'NOT IN' if negated else 'IN'} ({', '.join(repr(n) for n in names)})"

    def row_filter(self) -> str | None:
        """The dynamic filters as a condition on the rows, so that fewer rows reach the joins: the
        OR over the occurrences of each one's short IN lists; None when an occurrence has none.
        Spark pushes an IN list into the Parquet scan, which skips row groups and pages by it.
        A kept list (files not clustered by its key) is written so that Spark cannot push it:
        Parquet would read every row group's dictionary to test it, which cost more than it
        saved on files sorted by another key, where the filter kept above the scan costs
        nothing measurable and still filters rows before the query's shuffles."""
        per_occurrence = [[d for d in occ.dynamic if isinstance(d, InList) and len(d.values) <= ROW_FILTER_MAX_VALUES]
                          + [_not_pushed(k) for k in occ.kept] for occ in self.occurrences]
        if not per_occurrence or any(not d for d in per_occurrence):
            return None
        nodes = [d[0] if len(d) == 1 else And(tuple(d)) for d in per_occurrence]
        return to_sql(nodes[0] if len(nodes) == 1 else Or(tuple(nodes)))

    def frame(self, spark: "SparkSession") -> "DataFrame":
        """The rows this reference reads when it cannot go through its slot view."""
        if isinstance(self.source, CatalogTable):
            return self.source.read(self.where)
        assert self.plan is not None
        df = read_planned(spark, self.source, self.plan.files, bucketed=self.bucketed)
        return df.hint("merge") if self.merge_hint else df


def _not_pushed(keys: InList) -> Node:
    """`col IN (...)` as a condition Spark evaluates per row but cannot hand a file source (no
    data source filter stands for array_contains)."""
    values = ", ".join(sql_literal(v) for v in keys.values)
    return Opaque(f"array_contains(array({values}), {sql_name(keys.col.name)})", (keys.col.name,))


def _file_name(log_path: str) -> str:
    return from_log_path(log_path).rsplit("/", 1)[-1]


def _and(parts: list[Node]) -> Node:
    return And(tuple(parts))


def _stage(name: str, report: ScanReport) -> StageCount:
    return StageCount(name, report.files_selected, report.bytes_selected, report.rows_selected)


def static_stages(report: ScanReport) -> list[StageCount]:
    """A static plan's stage counts: all files, then those its literal filters select."""
    return [StageCount("all", report.files_total, report.bytes_total, report.rows_total), _stage("static", report)]


@dataclass
class QueryPlan:
    """A query as the stages leave it: its references, their planned files, the joins planned;
    `analysed` is False when it runs over whole tables instead."""
    query: str                                   # the query as the user wrote it
    tree: "exp.Expr | None"                      # the query parsed by sqlglot, None if it cannot be
    views: Views
    settings: "DynamicPruningSettings"
    references: list[TableReference] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)   # each reference's place in `query`
    positions: dict[int, int] = field(default_factory=dict)      # a reference's offset -> its index
    sources: dict[str, Source] = field(default_factory=dict)     # lake tables named (lower case)
    analysed: bool = True
    reason: str = ""                             # why it was not analysed
    analysis: Any = None                         # the DataFrame of the analysis pass (whole tables)
    optimized: Any = None                        # its optimized plan (py4j), for `apply(number)`
    root: "PlanNode | None" = None               # that plan, parsed
    joins: list[JoinReport] = field(default_factory=list)  # joins of two lake tables, one bucketed
    dynamic: list[DynamicPruningReport] = field(default_factory=list)
    build_seconds: float = 0.0                   # wall time of the build sides (they run concurrently)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per planning stage, in order
    notes: list[str] = field(default_factory=list)          # how planning went, for the report ("analysis pass skipped: ...")
    bound: dict[tuple[str, int], Node | None] = field(default_factory=dict)  # (filter SQL, id(reference)) -> bound
    # Build sides a Spark job evaluated, by node number of the optimized plan: their rows as a
    # LocalRelation (py4j) under the node's output, to take the node's place in the final plan.
    materialized: dict[int, Any] = field(default_factory=dict)
    # Under Spark Connect: the query's string literals that its plan's text may be read for
    # (skiplake.spark.query.plan_conditions).
    strings: frozenset[str] = frozenset()
    _conditions: dict[int, str | None] = field(default_factory=dict, repr=False)

    def condition_sql(self, node: "PlanNode", ref: "TableReference") -> str | None:
        """Spark SQL of the condition of an optimized plan's Filter over `ref`'s columns (fetched
        once: static pruning and the build sides both read it). Under Spark Connect, read from
        the plan's text: only the conjuncts that can be read for certain; None if none can."""
        if node.number not in self._conditions:
            self._conditions[node.number] = (
                condition_sql(self.optimized, node.number) if self.optimized is not None
                else text_condition_sql(node.text, ref.column_types(), self.strings))
        return self._conditions[node.number]

    def give_up(self, reason: str) -> "QueryPlan":
        """Run over whole tables, as plain Spark would, and say why."""
        self.analysed = False
        self.reason = reason
        return self

    def occurrence(self, node: "PlanNode") -> tuple[TableReference, Occurrence] | None:
        """The reference, and its occurrence, a relation node of the optimized plan reads."""
        for ref in self.references:
            for occ in ref.occurrences:
                if occ.node is node:
                    return ref, occ
        return None

    @property
    def reports(self) -> list[ScanReport]:
        """The scan report of each reference whose files were planned."""
        return [r.plan.report for r in self.references if r.plan is not None]

    def explain(self) -> "QueryExplain":
        """The plan's reports, as lake.explain answers."""
        return QueryExplain(self.reports, self.joins, self.dynamic, self.build_seconds, self.timings, self.notes)

    def text(self, final: bool) -> str:
        """The query with each reference replaced: by its slot view (for the analysis), or by what
        it finally reads (its slot view with a file filter, or its own view)."""
        bodies = self._final_bodies() if final else {}
        pieces, last = [], 0
        for i, (ref, (start, end)) in enumerate(zip(self.references, self.spans)):
            pieces.append(self.query[last:start])
            name = ref.alias or self.query[start:end + 1]
            assert ref.view is not None
            # The analysis pass names the slot view itself: it has the table's columns and no
            # other, and a subquery listing them costs Spark's analysis and optimizer a Project
            # per reference to resolve, then to remove (measured: docs/benchmarks.md).
            body = bodies.get(i) or ref.view.name
            # Without an alias the query may qualify columns with the table's own name: keep it.
            pieces.append(body if ref.alias else f"{body} AS {name}")
            last = end + 1
        pieces.append(self.query[last:])
        return "".join(pieces)

    def _final_bodies(self) -> dict[int, str]:
        """What each reference finally reads, where it differs from its own slot view. References
        of one table version that read the same files and rows under the same filters read them
        through one view (the first's), so that Spark sees one relation and reuses its scans
        (TPC-DS q44 names store_sales four times: through four views Spark scanned it four
        times, through one, twice, as plain Spark does)."""
        bodies: dict[int, str] = {}
        first_view: dict[tuple, SlotView] = {}
        for i, ref in enumerate(self.references):
            if ref.own_view:
                bodies[i] = ref.own_view
                continue
            if ref.bucketed_read is not None:
                bodies[i] = ref.bucketed_read.sql(ref.merge_hint)
                continue
            if ref.snapshot is None:
                continue
            assert ref.view is not None
            files, rows = ref.file_filter(), ref.row_filter()
            # Alike filters above the relations too: otherwise no subtree can be reused, and a
            # changed text costs the query a second analysis for nothing (TPC-DS q41).
            filters = tuple(to_sql(o.static) if o.static is not None else "" for o in ref.occurrences)
            view = first_view.setdefault((ref.snapshot.table_path, ref.snapshot.version, files, rows, filters), ref.view)
            condition = " AND ".join(f"({c})" for c in (files, rows) if c) or None
            bodies[i] = _relation_text(view, view.with_file if files else view.name, condition) if condition \
                else view.name
        return bodies


def _relation_text(view: SlotView, name: str, condition: str) -> str:
    """The view's rows under `condition`, in the table's columns (the file column left out)."""
    columns = ", ".join(f"`{c.replace('`', '``')}`" for c in view.columns)
    # The alias keeps Spark from reading `name WHERE (...)` as a table alias WHERE with columns.
    return f"(SELECT {columns} FROM {name} AS __skiplake_view WHERE {condition})"


class QueryExplain(list):
    """lake.explain's answer: a list of ScanReport (one per table reference), plus `joins` (bucket
    joins) and `dynamic` (dynamic file pruning, per join)."""

    def __init__(self, reports: Sequence[ScanReport], joins: Sequence[JoinReport] = (),
                 dynamic: Sequence[DynamicPruningReport] = (), build_seconds: float = 0.0,
                 planning: Mapping[str, float] | None = None, notes: Sequence[str] = (),
                 log_answer: LogAnswerReport | None = None) -> None:
        """The scan reports, join and dynamic pruning reports, build sides' wall time, stage timings,
        notes, and how much the log's stats answered (`log_answer`, for a query answered from them)."""
        super().__init__(reports)
        self.joins = list(joins)
        self.dynamic = list(dynamic)
        # Wall time of the dynamic pruning build sides: they run concurrently, so it can be less
        # than the sum of each DynamicPruningReport.build_seconds.
        self.build_seconds = build_seconds
        # Seconds each planning stage took (the build sides' time is within dynamic pruning's),
        # and the final query's making: where lake.sql's overhead over spark.sql goes.
        self.planning = dict(planning or {})
        self.notes = list(notes)  # how planning went ("analysis pass skipped: ...")
        self.log_answer = log_answer

    def text(self) -> str:
        """Each report's text, one per line, then the build sides' time and the planning notes."""
        lines = [r.text() for r in self] + [j.text() for j in self.joins] + [d.text() for d in self.dynamic]
        if self.build_seconds:
            lines.append(f"Build sides: {self.build_seconds:.3f} s (run concurrently)")
        lines += [f"Planning: {note}" for note in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The reports as a dict: scans, joins, dynamic, build_seconds, notes and planning."""
        return {"scans": [r.to_dict() for r in self], "joins": [j.to_dict() for j in self.joins],
                "dynamic": [d.to_dict() for d in self.dynamic], "build_seconds": self.build_seconds, "notes": self.notes,
                "planning": self.planning,
                "log_answer": self.log_answer.to_dict() if self.log_answer is not None else None}
