"""Stage 1 of `lake.sql` planning: which lake tables the query names, and where.

This is the one place that decides it. sqlglot's tree of the query gives each table reference
with its position in the text; a reference is a lake table when its name is unqualified, is not
a CTE the query defines in its scope, and resolves to a lake table.

Each reference reads through a slot view of its table (skiplake.spark.query.views): the n-th
reference of a table in the query through the table's n-th view, so every reference is its own
relation in Spark's plan.

A query sqlglot cannot read (or a statement that is not a query) is run over whole tables: the
names come from Spark's own parser then, so what it reads is exactly what Spark would.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from skiplake.spark.query.catalyst import kind, plan_children, seq
from skiplake.spark.query.model import QueryPlan, Resolver, Source, TableReference
from skiplake.spark.session.gateway import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def parse(query: str) -> exp.Expr | None:
    """The query parsed by sqlglot as Spark SQL; None when sqlglot cannot read it."""
    try:
        return sqlglot.parse_one(query, read="spark")
    except (ParseError, TokenError):
        return None


def find_references(spark: "SparkSession", plan: QueryPlan, resolver: Resolver) -> QueryPlan:
    """Resolve the query's lake table names and rename each reference to a view of its own."""
    if plan.tree is None:
        plan.tree = parse(plan.query)
    if plan.tree is None or not isinstance(plan.tree, exp.Query):
        _whole_table_names(spark, plan, resolver)
        return plan.give_up("sqlglot could not parse the query" if plan.tree is None else "not a query")
    tables = [t for t in plan.tree.find_all(exp.Table)
              if isinstance(t.this, exp.Identifier) and not t.db and not t.catalog and not names_cte(t)]
    # Every name is resolved before any is placed: an unknown name is an error either way.
    lake_tables = [t for t in tables if _resolve(spark, plan, resolver, t.name) is not None]
    found: list[tuple[int, int, str, str]] = []
    for t in lake_tables:
        meta = t.this.meta
        if "start" not in meta or t.args.get("sample") is not None or t.args.get("version") is not None:
            return plan.give_up(f"cannot place table {t.name!r} in the query text")
        found.append((meta["start"], meta["end"], t.name.lower(), t.alias))
    found.sort()
    slots: dict[str, int] = {}
    for i, (start, end, name, alias) in enumerate(found):
        label = plan.query[start:end + 1] + (f" AS {alias}" if alias else "")
        slot = slots.get(name, 0)
        slots[name] = slot + 1
        source = plan.sources[name]
        plan.references.append(TableReference(source, name, label, alias=alias or "",
                                              view=plan.views.get(source, slot)))
        plan.spans.append((start, end))
        plan.positions[start] = i
    return plan


def _resolve(spark: "SparkSession", plan: QueryPlan, resolver: Resolver, name: str) -> Source | None:
    """The lake table `name` (remembered in plan.sources); None for a table only Spark knows;
    the resolver's error for a name nobody knows."""
    key = name.lower()
    if key not in plan.sources:
        source = resolver.source(name)
        if source is None:
            if not spark.catalog.tableExists(name):
                raise resolver.unknown(name)
            return None
        plan.sources[key] = source
    return plan.sources[key]


def names_cte(table: exp.Table) -> bool:
    """Whether a table name refers to a CTE of the query rather than to a table.

    Spark's CTEs are not recursive: inside `WITH sales AS (SELECT ... FROM sales)` the inner
    `sales` is the table; a CTE sees only the CTEs defined before it, the query body sees all."""
    name = table.name.lower()
    child: exp.Expr = table
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


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _whole_table_names(spark: "SparkSession", plan: QueryPlan, resolver: Resolver) -> None:
    """The lake tables of a statement sqlglot cannot read, from the names Spark's parser finds.
    A Spark Connect client has no parser of Spark's: there every word of the statement that is
    the name of a lake table is taken for one (a view too many costs nothing but its making)."""
    if is_connect(spark):
        for word in sorted({w.lower() for w in _WORD.findall(plan.query)}):
            source = resolver.source(word)
            if source is not None:
                plan.sources[word] = source
        return
    try:
        parsed = spark._jsparkSession.sessionState().sqlParser().parsePlan(plan.query)
    except Exception:
        return  # not Spark SQL either: running it raises Spark's own error
    for name in sorted(_relation_names(parsed)):
        source = resolver.source(name)
        if source is not None:
            plan.sources[name.lower()] = source


def _relation_names(node: Any) -> set[str]:
    """Unqualified names of the tables a parsed (unresolved) plan reads."""
    out: set[str] = set()
    if kind(node) == "UnresolvedRelation":
        parts = seq(node.multipartIdentifier())
        if len(parts) == 1:
            out.add(parts[0])
    for child in plan_children(node):
        out |= _relation_names(child)
    return out
