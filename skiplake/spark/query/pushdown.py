"""Stage 2 of `lake.sql` planning: the literal filters Spark's optimizer pushes to each reference.

Which predicates apply to a table reference is decided by Spark's own optimizer, not guessed
from the SQL text: it already knows which filters may move through CTEs, subqueries, outer
joins and aggregates, and it infers new ones (`a.k = b.k AND b.k = 5` gives `a.k = 5`). So the
query is analysed once over the references' whole-table views; its optimized plan is read as
text (one call, see plan_text), each of its relations is matched to the reference it reads, and
the Filters directly above it are read back as SQL (one call each) and bound. A reference that
occurs several times (a CTE used twice) reads the files of the OR of its occurrences' filters.

Each reference's files are then planned (partitions, stats, buckets) from its predicate. Spark
applies every filter again to the rows when the query runs, so pruning only skips files. The
analysed plan stays on the QueryPlan for the next stages (dynamic file pruning reads its joins).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from skiplake.errors import InvalidPredicateError
from skiplake.expr.parse import bind, bind_conjuncts
from skiplake.expr.tree import And, Node, Or
from skiplake.layout.bucket_spec import bucket_spec_of
from skiplake.log.column_mapping import physical_names
from skiplake.spark.query.catalyst import optimized_plan, relation_tag, sql_frame, tree_text
from skiplake.spark.query.dynamic_cost import parallelism
from skiplake.spark.query.model import Occurrence, QueryPlan, Resolver, TableReference
from skiplake.spark.query.plan_conditions import readable_strings
from skiplake.spark.query.plan_text import PlanNode, null_tests_sql, parse_plan
from skiplake.spark.query.views import TAG_OPTION
from skiplake.spark.session.explain_text import optimized_text
from skiplake.spark.session.gateway import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from skiplake.log.snapshot import Snapshot


def push_filters(spark: "SparkSession", plan: QueryPlan, resolver: Resolver) -> QueryPlan:
    """Plan each reference's files from the filters Spark pushes to it."""
    assert plan.tree is not None
    single = _single_table_where(plan.tree, plan.references)
    if single is not None:
        plan.references[0].plan_static(spark, single)
        return plan
    why = _nothing_to_prune(spark, plan)
    if why:
        # The query then runs as written, analysed once: no stage after this one has anything to do.
        for ref in plan.references:
            ref.plan_static(spark, None)
        plan.notes.append(f"analysis pass skipped: {why}")
        return plan
    if is_connect(spark):
        # No JVM objects: the optimized plan as EXPLAIN prints it, and each Filter's condition
        # read from that text where it can be read for certain (plan_conditions).
        plan.analysis = spark.sql(plan.text(final=False))
        plan.root = parse_plan(optimized_text(plan.analysis))
        plan.strings = readable_strings({lit.this for lit in plan.tree.find_all(exp.Literal) if lit.is_string})
    else:
        plan.analysis = sql_frame(spark, plan.text(final=False))
        plan.optimized = optimized_plan(plan.analysis)
        plan.root = parse_plan(tree_text(plan.optimized))
    _find_occurrences(plan, plan.root)
    for ref in plan.references:
        ref.plan_static(spark, _predicate(ref))
    return plan


def _nothing_to_prune(spark: "SparkSession", plan: QueryPlan) -> str:
    """Why no reference can lose a file, so that the analysis pass is not worth its time, or ''.

    Either the query has no filter and no join (no WHERE, HAVING, QUALIFY, JOIN: a whole-table
    aggregate, a LIMIT), or every table it names is one file, and the cost model prices reading
    them all at less than the analysis pass (pruning could only skip a whole small table; not for
    catalog tables, whose partitions are fetched by the pushed predicate, nor bucketed ones,
    which may join without a shuffle). Tables of more files keep their static pruning, which the
    report shows, however small they are."""
    assert plan.tree is not None
    if not any(True for _ in plan.tree.find_all(exp.Where, exp.Having, exp.Qualify, exp.Join)):
        return "no filter or join can skip a file"
    settings = plan.settings
    snapshots = [ref.snapshot for ref in plan.references]
    if not settings.cost_model or not snapshots or not all(_a_plain_file(s) for s in snapshots):
        return ""
    files = sum(s.num_files for s in snapshots if s is not None)
    bytes_ = sum(s.size_bytes for s in snapshots if s is not None)
    model = settings.model(parallelism(spark))
    scan = model.scan_seconds(files, bytes_)
    if scan >= model.apply_seconds:
        return ""
    return (f"its tables are a file each, and reading them all ({files:,} files, {bytes_:,} bytes) costs "
            f"~{scan * 1000:.0f} ms, less than the pass")


def _find_occurrences(plan: QueryPlan, root: PlanNode) -> None:
    """Match each relation of the optimized plan to the reference it reads, with its filters."""
    index = _References(plan)
    for node in root.walk():
        if node.kind != "Relation":
            continue
        refs = index.of(node)
        sure = len({_identity(r) for r in refs}) == 1
        for r in refs:
            r.occurrences.append(Occurrence(node, filters_above(plan, r, node), sure=sure))


class _References:
    """The plan's table references, found by what a relation node shows of them."""

    def __init__(self, plan: QueryPlan) -> None:
        self.plan = plan
        views = [(ref, ref.view) for ref in plan.references if ref.view is not None]
        self.by_first_id = {view.first_id: ref for ref, view in views if view.first_id is not None}
        self.by_view = {view.local: ref for ref, view in views}
        self.by_columns: dict[frozenset[str], list[TableReference]] = {}
        for ref, view in views:
            self.by_columns.setdefault(frozenset(view.columns), []).append(ref)

    def of(self, node: PlanNode) -> list[TableReference]:
        """The references a relation node may read: the one whose first column it outputs, else
        those of a copy (see `_copy_of`)."""
        out = node.output
        ref = self.by_first_id.get(out[0].id) if out else None
        return [ref] if ref is not None else self._copy_of(node)

    def _copy_of(self, node: PlanNode) -> list[TableReference]:
        """A copy of a relation (a CTE inlined twice) has new expression ids. When one reference
        alone has its columns, it is that one's. Else the JVM names the view it reads (a few
        round trips), which says only which table version: the slot views of one version share
        their relations. Where even that cannot be known (Spark Connect), the copy belongs to
        one of the references with its columns. Either way it becomes an occurrence of each
        candidate: one too many only widens what a reference reads (the OR of its occurrences),
        where one too few would lose the copy's rows."""
        out = node.output
        alike = self.by_columns.get(frozenset(a.name for a in out), []) if out else []
        tagged = self.by_view.get(_tag(self.plan, node)) if len(alike) != 1 else None
        if tagged is None:
            return alike
        return [r for r in self.plan.references if r.view and _identity(r) == _identity(tagged)]


def _identity(ref: TableReference) -> tuple:
    """Which data a reference reads: references alike in it read the same rows."""
    snapshot = ref.snapshot
    return (snapshot.table_path, snapshot.version) if snapshot is not None else (id(ref.source),)


def _tag(plan: QueryPlan, node: PlanNode) -> str:
    """The view a relation node reads, by its reader option; '' when the plan cannot say (under
    Spark Connect, whose plan text does not print a relation's options)."""
    if plan.optimized is None:
        return ""
    return relation_tag(plan.optimized, node.number, TAG_OPTION) or ""


def filters_above(plan: QueryPlan, ref: TableReference, relation: PlanNode) -> Node | None:
    """The bound conjuncts of the Filters directly above a relation (above a Project its columns
    may mean something else, so the search stops there)."""
    bound: list[Node] = []
    child, node = relation, relation.parent
    # Only as a child: a Filter whose subquery reads the relation says nothing of its rows.
    while node is not None and node.kind == "Filter" and node.children and node.children[0] is child:
        sql = null_tests_sql(node.text.strip()) or plan.condition_sql(node, ref)
        if sql is not None:
            part = bound_condition(plan, ref, sql)
            if part is not None:
                bound.append(part)
        child, node = node, node.parent
    return None if not bound else bound[0] if len(bound) == 1 else And(tuple(bound))


def bound_condition(plan: QueryPlan, ref: TableReference, sql: str) -> Node | None:
    """A Filter's condition (Spark's SQL of it) bound to the reference's table, in its logical
    column names. Copies of a CTE (occurrences of one reference) repeat their filters: each text
    is parsed and bound once per reference."""
    key = (sql, id(ref))
    if key not in plan.bound:
        plan.bound[key] = bind_conjuncts(logical_sql(sql, ref), ref.schema)
    return plan.bound[key]


def _a_plain_file(snapshot: "Snapshot | None") -> bool:
    """Whether a reference is a Delta table of at most one file, not bucketed (files pending:
    past the replay bound, so many more)."""
    return snapshot is not None and not snapshot.files_pending and snapshot.num_files <= 1 \
        and bucket_spec_of(snapshot.configuration) is None


def logical_sql(sql: str, ref: TableReference) -> str:
    """A filter's SQL with the columns named as the table's schema names them. Under column
    mapping the relation reads the files' physical names (`col-<uuid>`) and a projection gives
    the logical ones, so Spark's optimizer puts the filters above the relation in physical names."""
    snapshot = ref.snapshot
    if snapshot is None or snapshot.column_mapping == "none":
        return sql
    for logical, physical in physical_names(snapshot.schema, snapshot.column_mapping).items():
        if physical != logical:
            sql = sql.replace(f"`{physical}`", f"`{logical.replace('`', '``')}`")
    return sql


def _predicate(ref: TableReference) -> Node | None:
    """OR over the occurrences of each occurrence's filter; None (all files) when one has none."""
    filters = [occ.static for occ in ref.occurrences if occ.static is not None]
    if not filters or len(filters) < len(ref.occurrences):  # no occurrence, or one without a filter
        return None
    return filters[0] if len(filters) == 1 else Or(tuple(filters))


def _single_table_where(tree: exp.Expr, refs: list[TableReference]) -> Node | None:
    """The bound WHERE of a query that is one SELECT over one lake table and nothing else.

    Such a WHERE applies to that table's rows as a whole, so Spark's optimizer has nothing to
    add and the analysis pass is skipped. None when the query has any other shape, or the WHERE
    names something that is not a column of the table."""
    tables = list(tree.find_all(exp.Table))
    if len(refs) != 1 or len(tables) != 1:
        return None
    if any(value for key, value in tables[0].args.items() if key not in ("this", "alias")):
        return None  # PIVOT, UNPIVOT, TABLESAMPLE ...: the WHERE filters something else
    if not isinstance(tree, exp.Select) or any(
            True for _ in tree.find_all(exp.Join, exp.Subquery, exp.CTE, exp.Union, exp.Lateral, exp.Unnest)):
        return None
    if any(len(list(node.find_all(exp.Select))) for node in tree.expressions):
        return None
    where = tree.args.get("where")
    if where is None:
        return None
    try:
        return bind(where.this.sql(dialect="spark"), refs[0].schema)
    except InvalidPredicateError:
        return None
