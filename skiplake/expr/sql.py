"""Spark SQL text of bound predicates and of literal values: the one writer of SQL literals.

The text goes into reports and explain output, and back to Spark (a catalog table's pushed
filter, a query's per-table predicate), so it must read back as the same value: Spark's parser
treats a backslash in a string literal as an escape (`'a\\b'` is the three characters a, \\, b),
so backslashes are doubled and quotes escaped with one.
"""
from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal
from typing import Any

from skiplake.expr.tree import And, Cmp, Const, InList, IsNull, Node, Not, Opaque, Or, StartsWith
from skiplake.expr.visitor import BooleanVisitor, visit

_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def sql_string(text: str) -> str:
    """A Spark SQL string literal that Spark (and sqlglot's Spark dialect) reads back as `text`."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_literal(value: Any) -> str:
    """Spark SQL text of a typed Python value as the predicate tree holds it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return sql_string(value)
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP'{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE'{value.isoformat()}'"
    if isinstance(value, Decimal):
        return format(value, "f")  # never exponent notation, which Spark would read as a DOUBLE
    if isinstance(value, float) and not math.isfinite(value):
        return f"CAST('{'NaN' if math.isnan(value) else ('Infinity' if value > 0 else '-Infinity')}' AS DOUBLE)"
    return str(value)


def sql_name(name: str) -> str:
    """A column name as Spark SQL text: bare when it is a plain identifier, else in backticks."""
    return name if _PLAIN_NAME.match(name) else "`" + name.replace("`", "``") + "`"


class _SqlWriter(BooleanVisitor[str]):
    def visit_const(self, node: Const) -> str:
        return sql_literal(node.value)

    def visit_opaque(self, node: Opaque) -> str:
        return node.sql

    def visit_cmp(self, node: Cmp) -> str:
        return f"{sql_name(node.col.name)} {node.op} {sql_literal(node.value)}"

    def visit_in(self, node: InList) -> str:
        items = [sql_literal(v) for v in node.values] + (["NULL"] if node.has_null else [])
        return f"{sql_name(node.col.name)} IN ({', '.join(items)})"

    def visit_is_null(self, node: IsNull) -> str:
        return f"{sql_name(node.col.name)} IS NULL"

    def visit_starts_with(self, node: StartsWith) -> str:
        if any(ch in node.prefix for ch in "%_\\"):
            return f"startswith({sql_name(node.col.name)}, {sql_string(node.prefix)})"
        return f"{sql_name(node.col.name)} LIKE {sql_string(node.prefix + '%')}"

    def visit_and(self, node: And, children: list[str]) -> str:
        return " AND ".join(f"({text})" if isinstance(c, Or) else text for c, text in zip(node.children, children))

    def visit_or(self, node: Or, children: list[str]) -> str:
        return " OR ".join(f"({text})" if isinstance(c, And) else text for c, text in zip(node.children, children))

    def visit_not(self, node: Not, child: str) -> str:
        if isinstance(node.child, IsNull):
            return f"{sql_name(node.child.col.name)} IS NOT NULL"
        if isinstance(node.child, InList):
            return child.replace(" IN (", " NOT IN (", 1)
        return f"NOT ({child})"


def to_sql(node: Node) -> str:
    """Spark SQL text of a bound predicate (reports, explain output, filters handed to Spark)."""
    return visit(node, _SqlWriter())
