"""Stage 2 of `lake.sql` planning: the literal filters Spark's optimizer pushes to each reference.

Which predicates apply to a table reference is decided by Spark's own optimizer, not guessed
from the SQL text: it already knows which filters may move through CTEs, subqueries, outer
joins and aggregates, and it infers new ones (`a.k = b.k AND b.k = 5` gives `a.k = 5`). So each
reference's view is first an *empty* relation with the table's schema; Spark optimizes the
query over those, and the filters directly above each relation are read off the optimized plan
and turned back into SQL. A reference that occurs several times (a CTE used twice) reads the
files of the OR of its occurrences' filters.

Each reference's files are then planned (partitions, stats, buckets) from its predicate. Spark
applies every filter again to the rows when the query runs, so pruning only skips files.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from skiplake.errors import InvalidPredicateError
from skiplake.expr.parse import bind
from skiplake.expr.tree import And, Node, Or
from skiplake.spark.query.catalyst import conjuncts, kind, relation_root, seq
from skiplake.spark.query.catalyst_sql import catalyst_to_sql
from skiplake.spark.query.model import QueryPlan, Resolver, TableReference

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def push_filters(spark: "SparkSession", plan: QueryPlan, resolver: Resolver) -> QueryPlan:
    """Plan each reference's files from the filters Spark pushes to it."""
    assert plan.tree is not None
    single = _single_table_where(plan.tree, plan.references)
    if single is not None:
        plan.references[0].plan_with(single)
        return plan
    for i, filters in _pushed(spark, plan).items():
        plan.references[i].filters = filters
    for ref in plan.references:
        ref.plan_with(_predicate(ref))
    return plan


def _pushed(spark: "SparkSession", plan: QueryPlan) -> dict[int, list[list[str]]]:
    """Per reference (by index), per occurrence in Spark's optimized plan: its filter conjuncts."""
    scratch = tempfile.mkdtemp(prefix="skiplake-sql-")
    try:
        roots: dict[str, int] = {}
        for i, ref in enumerate(plan.references):
            empty = os.path.join(scratch, str(i))
            os.mkdir(empty)
            roots[os.path.normpath(empty)] = i
            spark.read.schema(ref.relation_schema()).parquet(empty).createOrReplaceTempView(ref.view)
        optimized = spark.sql(plan.sql)._jdf.queryExecution().optimizedPlan()
        return pushed_filters(optimized, roots)
    finally:
        for ref in plan.references:
            spark.catalog.dropTempView(ref.view)
        shutil.rmtree(scratch, ignore_errors=True)


def pushed_filters(plan: Any, roots: dict[str, int]) -> dict[int, list[list[str]]]:
    """For each relation of `plan` whose root path is in `roots`: per occurrence, the SQL text
    of the filter conjuncts directly above it."""
    found: dict[int, list[list[str]]] = {}

    def visit(node: Any, above: list[Any]) -> None:
        root = relation_root(node)
        key = roots.get(root) if root is not None else None
        if key is not None:
            texts = [sql for cond in above for c in conjuncts(cond) if (sql := catalyst_to_sql(c)) is not None]
            found.setdefault(key, []).append(texts)
        chain = above + [node.condition()] if kind(node) == "Filter" else []
        for child in seq(node.children()):
            visit(child, chain)
        for sub in seq(node.subqueries()):
            visit(sub, [])  # a subquery's relations see only the filters inside it

    visit(plan, [])
    return found


def _predicate(ref: TableReference) -> Node | None:
    """OR over the occurrences of the AND of each occurrence's bound conjuncts; None = all files."""
    if not ref.filters:
        return None
    per_occurrence: list[Node] = []
    for conjunct_texts in ref.filters:
        bound = []
        for text in conjunct_texts:
            try:
                bound.append(bind(text, ref.schema))
            except InvalidPredicateError:
                continue
        if not bound:
            return None
        per_occurrence.append(bound[0] if len(bound) == 1 else And(tuple(bound)))
    return per_occurrence[0] if len(per_occurrence) == 1 else Or(tuple(per_occurrence))


def _single_table_where(tree: exp.Expression, refs: list[TableReference]) -> Node | None:
    """The bound WHERE of a query that is one SELECT over one lake table and nothing else.

    Such a WHERE applies to that table's rows as a whole, so Spark's optimizer has nothing to
    add and the analysis round trip (tens of milliseconds) is skipped. None when the query has
    any other shape, or the WHERE names something that is not a column of the table."""
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
