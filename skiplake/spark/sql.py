"""Spark SQL over lake tables, each table reference reading only the files its predicates allow.

Which predicates apply to a table reference is decided by Spark's own optimizer, not guessed
from the SQL text: it already knows which filters may move through CTEs, subqueries, outer
joins and aggregates, and it infers new ones (`a.k = b.k AND b.k = 5` gives `a.k = 5`). So a
query is planned twice:

1. Each lake table reference is renamed to a view of its own over an *empty* relation with the
   table's schema. Spark optimizes the query; the filters it pushes down to each relation are
   read off the optimized plan (through py4j) and turned back into SQL text.
2. Each view is replaced by a DataFrame over the files those filters select (partition values
   and min/max stats), and the query runs for real. Spark applies every filter again to rows,
   so pruning can only skip files, never change the result.

A relation that occurs several times (a CTE used twice) reads the files of the union of its
occurrences' filters. Anything that cannot be analysed this way (SQL that sqlglot cannot parse,
a statement that is not a query) runs over whole tables, as plain Spark would.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlglot
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from skiplake.errors import InvalidPredicateError
from skiplake.expr.parse import bind
from skiplake.expr.tree import And, Node, Or
from skiplake.expr.sql import to_sql
from skiplake.layout.bucket_spec import bucket_spec_of
from skiplake.skipping.plan import ScanPlan, plan_scan
from skiplake.skipping.report import ScanReport
from skiplake.spark.bucket_join import JoinReport, planned_dataframe
from skiplake.spark.types import to_spark

if TYPE_CHECKING:
    from skiplake.log.schema import Schema
    from skiplake.table import Table


@dataclass
class TableReference:
    """One place a lake table is named in the query."""
    table: "Table"
    name: str                       # the lake table's name
    label: str                      # how the query names it ("store_sales AS ss")
    view: str                       # the temporary view that stands for it while the query runs
    filters: list[list[str]] = field(default_factory=list)  # per occurrence in the plan: conjuncts
    plan: ScanPlan | None = None     # a skiplake table's planned files
    where: str | None = None         # a catalog (Hive-style Parquet) table's pushed predicate
    alias: str = ""                  # the query's alias for it, if any
    bucketed: bool = False           # read as a bucketed relation (one side of a bucket join)
    merge_hint: bool = False         # the right side of a bucket join: keep Spark from broadcasting it

    @property
    def is_delta(self) -> bool:
        return hasattr(self.table, "snapshot")

    @property
    def schema(self) -> "Schema":
        return self.table.snapshot.schema if self.is_delta else self.table.schema

    def relation_schema(self) -> Any:
        """What the stand-in relation of the analysis is declared with (a StructType or DDL)."""
        return to_spark(self.table.snapshot.schema) if self.is_delta else self.table._ddl()

    def plan_with(self, predicate: Node | None) -> None:
        if self.is_delta:
            self.plan = plan_scan(self.table.snapshot, predicate)
            self.plan.report = replace(self.plan.report, label=self.label)
        else:
            self.where = to_sql(predicate) if predicate is not None else None

    def dataframe(self, spark: SparkSession) -> DataFrame:
        if not self.is_delta:
            return self.table.read(self.where)
        assert self.plan is not None
        df = planned_dataframe(spark, self.table, self.plan, self.bucketed)
        return df.hint("merge") if self.merge_hint else df


@dataclass
class QueryScans:
    sql: str                        # the query as it runs (references renamed to views)
    references: list[TableReference]
    analysed: bool                  # False when the query ran over whole tables
    reason: str = ""                # why it was not analysed
    joins: list[JoinReport] = field(default_factory=list)  # joins of two lake tables, one bucketed

    @property
    def reports(self) -> list[ScanReport]:
        return [r.plan.report for r in self.references if r.plan is not None]


# ------------------------------------------------------------------ finding references


def _parse(query: str) -> exp.Expression | None:
    try:
        return sqlglot.parse_one(query, read="spark")
    except (ParseError, TokenError):
        return None


def find_references(query: str, tree: exp.Expression, known: dict[str, str]) -> list[tuple[int, int, str, str]]:
    """(start, end, lake name, alias) of each lake table named in `query`, in text order.

    A name that a CTE defines anywhere in the query, or that has a database qualifier, is not a
    lake table reference."""
    out = []
    for t in tree.find_all(exp.Table):
        name = t.name.lower()
        if not isinstance(t.this, exp.Identifier) or t.db or t.catalog or names_cte(t) or name not in known:
            continue
        meta = t.this.meta if isinstance(t.this, exp.Identifier) else {}
        if "start" not in meta or t.args.get("sample") is not None or t.args.get("version") is not None:
            raise _CannotRewrite(f"cannot place table {t.name!r} in the query text")
        out.append((meta["start"], meta["end"], known[name], t.alias))
    return sorted(out)


def names_cte(table: exp.Table) -> bool:
    """Whether a table name refers to a CTE of the query rather than to a table.

    Spark's CTEs are not recursive: inside `WITH sales AS (SELECT ... FROM sales)` the inner
    `sales` is the table; a CTE sees only the CTEs defined before it, the query body sees all."""
    name = table.name.lower()
    child: exp.Expression = table
    node = table.parent
    while node is not None:
        if isinstance(node, exp.With):
            ctes = node.expressions
            mine = next((i for i, c in enumerate(ctes) if c is child), len(ctes))
            if any(c.alias_or_name.lower() == name for c in ctes[:mine]):
                return True
        else:
            with_ = node.args.get("with_") or node.args.get("with")
            if isinstance(with_, exp.With) and child is not with_ and any(
                    c.alias_or_name.lower() == name for c in with_.expressions):
                return True
        child, node = node, node.parent
    return False


class _CannotRewrite(Exception):
    pass


def _rewrite(query: str, refs: list[tuple[int, int, str, str]], views: list[str]) -> str:
    pieces = []
    last = 0
    for (start, end, name, alias), view in zip(refs, views):
        pieces.append(query[last:start])
        # Without an alias the query may qualify columns with the table's own name: keep it.
        pieces.append(view if alias else f"{view} AS {query[start:end + 1]}")
        last = end + 1
    pieces.append(query[last:])
    return "".join(pieces)


# ------------------------------------------------------------------ reading Spark's plan


_NUMERIC_SUFFIX = re.compile(r"(?<=[0-9])(?:BD|L|D|F|S|Y)\b")
_COMPARISONS = {"EqualTo": "=", "EqualNullSafe": "<=>", "LessThan": "<", "LessThanOrEqual": "<=",
                "GreaterThan": ">", "GreaterThanOrEqual": ">="}


def _kind(node: Any) -> str:
    return node.getClass().getSimpleName()


def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _literal(lit: Any) -> str | None:
    """Spark SQL text of a Catalyst literal that the predicate binder can read, else None."""
    type_ = lit.dataType().simpleString()
    if lit.value() is None:
        return "NULL"
    if type_ in ("tinyint", "smallint", "int", "bigint") or type_.startswith("decimal"):
        return lit.toString()
    if type_ in ("float", "double"):
        text = lit.toString()
        if text.lower() in ("nan", "infinity", "-infinity"):
            return None
        # A FLOAT literal is compared as a float32; written as the double it widens to, it
        # meets the stats (float32 values widened the same way) exactly.
        return repr(float(np.float32(text))) if type_ == "float" else repr(float(text))
    if type_ == "string":
        text = lit.toString()
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if type_ in ("date", "timestamp", "boolean"):
        return lit.sql()
    return None


def _attribute(node: Any) -> str | None:
    if _kind(node) != "AttributeReference":
        return None
    return "`" + node.name().replace("`", "``") + "`"


def catalyst_to_sql(node: Any) -> str | None:
    """SQL text of a Catalyst predicate over one relation's columns, or None if it is not one of
    the shapes the evaluators understand (leaving it out only makes pruning weaker)."""
    kind = _kind(node)
    if kind in ("And", "Or"):
        left, right = catalyst_to_sql(node.left()), catalyst_to_sql(node.right())
        if left is None or right is None:
            return None
        return f"({left} {kind.upper()} {right})"
    if kind == "Not":
        inner = catalyst_to_sql(node.child())
        return None if inner is None else f"(NOT {inner})"
    if kind in _COMPARISONS:
        l, r = node.left(), node.right()
        ls = _attribute(l) or (_literal(l) if _kind(l) == "Literal" else None)
        rs = _attribute(r) or (_literal(r) if _kind(r) == "Literal" else None)
        if ls is None or rs is None:
            return None
        return f"({ls} {_COMPARISONS[kind]} {rs})"
    if kind in ("IsNull", "IsNotNull"):
        a = _attribute(node.child())
        return None if a is None else f"({a} IS {'NOT ' if kind == 'IsNotNull' else ''}NULL)"
    if kind == "In":
        a = _attribute(node.value())
        items = [_literal(x) if _kind(x) == "Literal" else None for x in _seq(node.list())]
        if a is None or not items or any(i is None for i in items):
            return None
        return f"({a} IN ({', '.join(items)}))"  # type: ignore[arg-type]
    if kind == "InSet":
        child = node.child()
        a = _attribute(child)
        type_ = child.dataType().simpleString()
        numeric = type_ in ("tinyint", "smallint", "int", "bigint", "float", "double") or type_.startswith("decimal")
        if a is None or not (numeric or type_ in ("string", "date")):
            return None
        # "(<child sql> IN (<literal sql>, ...))": numbers carry Spark's type suffixes (5L, 1.5BD).
        text = node.sql()
        head = f"({child.sql()} IN ("
        if not text.startswith(head) or not text.endswith("))"):
            return None
        items = text[len(head):-2]
        return f"({a} IN ({_NUMERIC_SUFFIX.sub('', items) if numeric else items}))"
    if kind == "StartsWith":
        a = _attribute(node.left())
        prefix = node.right()
        if a is None or _kind(prefix) != "Literal" or prefix.dataType().simpleString() != "string" or prefix.value() is None:
            return None
        body = prefix.toString()
        if any(ch in body for ch in "%_\\"):
            return None
        return f"({a} LIKE '{body.replace(chr(39), chr(92) + chr(39))}%')"
    return None


def _conjuncts(condition: Any) -> list[Any]:
    if _kind(condition) == "And":
        return _conjuncts(condition.left()) + _conjuncts(condition.right())
    return [condition]


def pushed_filters(plan: Any, roots: dict[str, int]) -> dict[int, list[list[str]]]:
    """For each relation of `plan` whose root path is in `roots`: per occurrence, the SQL text
    of the filter conjuncts directly above it."""
    found: dict[int, list[list[str]]] = {}

    def visit(node: Any, above: list[Any]) -> None:
        kind = _kind(node)
        if kind == "LogicalRelation":
            location = node.relation().location() if _kind(node.relation()) == "HadoopFsRelation" else None
            paths = _seq(location.rootPaths()) if location is not None else []
            key = roots.get(_normal(paths[0].toString())) if len(paths) == 1 else None
            if key is not None:
                texts = []
                for cond in above:
                    for c in _conjuncts(cond):
                        sql = catalyst_to_sql(c)
                        if sql is not None:
                            texts.append(sql)
                found.setdefault(key, []).append(texts)
        chain = above + [node.condition()] if kind == "Filter" else []
        for child in _seq(node.children()):
            visit(child, chain)
        for sub in _seq(node.subqueries()):
            visit(sub, [])

    visit(plan, [])
    return found


def _normal(path: str) -> str:
    return os.path.normpath(path[len("file:"):] if path.startswith("file:") else path)


# ------------------------------------------------------------------ planning a query


def _predicate(ref: TableReference) -> Node | None:
    """OR over the occurrences of the AND of each occurrence's bound conjuncts; None = all files."""
    schema = ref.schema
    if not ref.filters:
        return None
    per_occurrence: list[Node] = []
    for conjunct_texts in ref.filters:
        bound = []
        for text in conjunct_texts:
            try:
                bound.append(bind(text, schema))
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


def plan_query(spark: SparkSession, query: str, tables: dict[str, "Table"],
               tree: exp.Expression | None = None) -> QueryScans:
    """Rename the lake tables of `query` to views and plan each one's files (see the module doc).

    `tables` maps each lake table name (lower case) to its Table, pinned for this query; `tree`
    is the query parsed by sqlglot, if the caller has it already."""
    tree = tree if tree is not None else _parse(query)
    if tree is None:
        return QueryScans(query, [], False, "sqlglot could not parse the query")
    if not isinstance(tree, exp.Query):
        return QueryScans(query, [], False, "not a query")
    try:
        found = find_references(query, tree, {k: k for k in tables})
    except _CannotRewrite as e:
        return QueryScans(query, [], False, str(e))
    token = uuid.uuid4().hex[:8]
    refs: list[TableReference] = []
    for i, (start, end, key, alias) in enumerate(found):
        label = query[start:end + 1] + (f" AS {alias}" if alias else "")
        refs.append(TableReference(tables[key], key, label, f"__skiplake_{token}_{i}", alias=alias or ""))
    sql = _rewrite(query, found, [r.view for r in refs])
    single = _single_table_where(tree, refs)
    if single is not None:
        refs[0].plan_with(single)
        return QueryScans(sql, refs, True)
    scans = _plan_references(spark, sql, refs)
    scans.joins = plan_bucket_joins(spark, tree, refs, {start: i for i, (start, *_r) in enumerate(found)})
    return scans


def _plan_references(spark: SparkSession, sql: str, refs: list[TableReference]) -> QueryScans:
    scratch = tempfile.mkdtemp(prefix="skiplake-sql-")
    try:
        roots: dict[str, int] = {}
        for i, ref in enumerate(refs):
            empty = os.path.join(scratch, str(i))
            os.mkdir(empty)
            roots[os.path.normpath(empty)] = i
            spark.read.schema(ref.relation_schema()).parquet(empty).createOrReplaceTempView(ref.view)
        optimized = spark.sql(sql)._jdf.queryExecution().optimizedPlan()
        for i, filters in pushed_filters(optimized, roots).items():
            refs[i].filters = filters
    finally:
        for ref in refs:
            spark.catalog.dropTempView(ref.view)
        shutil.rmtree(scratch, ignore_errors=True)
    for ref in refs:
        ref.plan_with(_predicate(ref))
    return QueryScans(sql, refs, True)


# ------------------------------------------------------------------ bucket joins


def _join_type(join: exp.Join) -> str:
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    if kind == "SEMI":
        return "left_semi" if side in ("", "LEFT") else "right_semi"
    if kind == "ANTI":
        return "left_anti"
    if side == "LEFT":
        return "left_outer"
    if side == "RIGHT":
        return "right_outer"
    if side == "FULL":
        return "full_outer"
    if (join.method or "").upper() == "NATURAL":
        return "natural"  # keys implied by shared names: left to Spark's own join
    if kind == "CROSS" and not join.args.get("on") and not join.args.get("using"):
        return "comma"  # `FROM a, b` (or CROSS JOIN): WHERE equalities make it an inner join
    return "inner"


def _side_of(column: exp.Column, candidates: dict[int, TableReference]) -> int | None:
    """Which reference a column belongs to: by its qualifier, else the one schema holding it."""
    qualifier = column.table.lower()
    name = column.name.lower()
    if qualifier:
        hits = [i for i, r in candidates.items() if qualifier == (r.alias or r.name).lower()]
    else:
        hits = [i for i, r in candidates.items() if r.schema.find(name) is not None]
    if len(hits) != 1 or candidates[hits[0]].schema.find(name) is None:
        return None
    return hits[0]


def _equalities(condition: exp.Expression | None, candidates: dict[int, TableReference]
                ) -> list[tuple[int, str, int, str]]:
    """(ref, column, ref, column) of each `x.a = y.b` conjunct between two different references."""
    out = []
    if condition is None:
        return out
    for conj in condition.flatten() if isinstance(condition, exp.And) else [condition]:
        if not isinstance(conj, exp.EQ) or not isinstance(conj.left, exp.Column) or not isinstance(
                conj.right, exp.Column):
            continue
        a, b = _side_of(conj.left, candidates), _side_of(conj.right, candidates)
        if a is None or b is None or a == b:
            continue
        out.append((a, candidates[a].schema.field(conj.left.name).name, b,
                    candidates[b].schema.field(conj.right.name).name))
    return out


def plan_bucket_joins(spark: SparkSession, tree: exp.Expression, refs: list[TableReference],
                      ref_at: dict[int, int]) -> list[JoinReport]:
    """Decide, for each join whose right side is a lake table joined by equalities to one lake
    table on its left, whether it runs as a bucket join; mark the references that do.

    A join's left candidates are the tables of the same FROM clause before it, as long as every
    join before it was a bucket join (only then is its output still laid out by buckets), and of
    those, not the right side of a left outer or semi join. For inner joins Spark also turns
    WHERE equalities between the two into join keys, so those count as keys too."""
    from skiplake.spark.bucket_join import JoinSide, prepare_session, check
    reports: list[JoinReport] = []

    def ref_of(node: exp.Expression) -> int | None:
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            return None
        i = ref_at.get(node.this.meta.get("start", -1))
        return i if i is not None and refs[i].is_delta and refs[i].plan is not None else None

    for select in tree.find_all(exp.Select):
        from_ = select.args.get("from_") or select.args.get("from")
        joins = select.args.get("joins") or []
        if from_ is None or not joins:
            continue
        before: dict[int, TableReference] = {}
        chain: int | None = None  # buckets per task of the bucket joins so far in this FROM
        first = ref_of(from_.this)
        if first is not None:
            before[first] = refs[first]
        where = select.args.get("where")
        for join in joins:
            right = ref_of(join.this)
            kind = _join_type(join)
            if right is None:
                before = {}
                continue
            ok = False
            scope = dict(before)
            scope[right] = refs[right]
            using = join.args.get("using") or []
            if using:
                pairs_by_left: dict[int, list[tuple[str, str]]] = {}
                for ident in using:
                    holders = [i for i in before if refs[i].schema.find(ident.name) is not None]
                    if len(holders) == 1 and refs[right].schema.find(ident.name) is not None:
                        pairs_by_left.setdefault(holders[0], []).append(
                            (refs[holders[0]].schema.field(ident.name).name, refs[right].schema.field(ident.name).name))
            else:
                conditions = [join.args.get("on")]
                if kind in ("inner", "comma", "cross") and where is not None:
                    conditions.append(where.this)
                pairs_by_left = {}
                for cond in conditions:
                    for a, ca, b, cb in _equalities(cond, scope):
                        if b == right and a != right:
                            pairs_by_left.setdefault(a, []).append((ca, cb))
                        elif a == right and b != right:
                            pairs_by_left.setdefault(b, []).append((cb, ca))
            if kind in ("comma", "cross"):
                kind = "inner" if pairs_by_left else kind
            if len(pairs_by_left) == 1:
                (left, pairs), = pairs_by_left.items()
                lref, rref = refs[left], refs[right]
                if bucket_spec_of(lref.table.snapshot.configuration) or bucket_spec_of(
                        rref.table.snapshot.configuration):
                    assert lref.plan is not None and rref.plan is not None
                    lside, rside = JoinSide(lref.table, lref.plan, lref.label), JoinSide(rref.table, rref.plan,
                                                                                          rref.label)
                    ok, reason, buckets = check(lside, rside, pairs, kind, spark)
                    counts = {spec.num_buckets for spec in (lside.spec, rside.spec) if spec is not None}
                    if ok and chain is not None and counts != {chain}:
                        # The left input is a join's output, not a bucketed scan, and Spark
                        # coalesces buckets only between two scans.
                        ok, buckets = False, 0
                        reason = (f"it follows a bucket join of {chain} buckets, so both tables need {chain} "
                                  f"buckets (they have {lside.spec.num_buckets} and "  # type: ignore[union-attr]
                                  f"{rside.spec.num_buckets})")  # type: ignore[union-attr]
                    if ok:
                        chain = buckets
                        lref.bucketed = rref.bucketed = rref.merge_hint = True
                        prepare_session(spark, lside, rside)
                    reports.append(JoinReport(lref.label, rref.label, kind, pairs, ok, reason, lref.plan.report,
                                              rref.plan.report, buckets))
            # A later join meets this join's output, laid out by buckets only if this was a bucket
            # join (a left outer or semi join keeps the left side's layout, an inner join both).
            if not ok:
                before, chain = {}, None
            elif kind == "inner":
                before[right] = refs[right]
    return reports


def run_query(spark: SparkSession, query: str, tables: dict[str, "Table"],
              tree: exp.Expression | None = None) -> tuple[DataFrame, QueryScans]:
    scans = plan_query(spark, query, tables, tree)
    if not scans.analysed:
        # Whole tables under their own names: what plain Spark would read.
        lowered = query.lower()
        for key, table in tables.items():
            if re.search(rf"\b{re.escape(key)}\b", lowered):
                table.read().createOrReplaceTempView(key)
        return spark.sql(query), scans
    for ref in scans.references:
        ref.dataframe(spark).createOrReplaceTempView(ref.view)
    try:
        df = spark.sql(scans.sql)
    finally:
        # The DataFrame holds the analysed views; the names are not needed once it exists.
        for ref in scans.references:
            spark.catalog.dropTempView(ref.view)
    return df, scans
