"""The predicate tree: immutable nodes bound to a table schema.

A leaf compares one column with literal values already cast to the column's type. What cannot
be analysed (a function of columns, a column compared with a column, a subquery) becomes an
`Opaque` leaf, which may evaluate to anything, so it never causes a file to be skipped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

COMPARISONS = ("=", "<>", "<", "<=", ">", ">=", "<=>")
FLIPPED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<=", "<=>": "<=>"}


@dataclass(frozen=True)
class Col:
    name: str   # the schema's spelling of the column
    type: Any   # the column's Delta type


@dataclass(frozen=True)
class Cmp:
    op: str     # one of COMPARISONS, column on the left
    col: Col
    value: Any  # never None: comparisons with NULL are folded to Const(None) when bound


@dataclass(frozen=True)
class InList:
    col: Col
    values: tuple[Any, ...]  # non-null literals
    has_null: bool = False   # the list also holds NULL (then a non-match is NULL, not FALSE)


@dataclass(frozen=True)
class IsNull:
    col: Col


@dataclass(frozen=True)
class StartsWith:
    col: Col
    prefix: str


@dataclass(frozen=True)
class And:
    children: tuple["Node", ...]


@dataclass(frozen=True)
class Or:
    children: tuple["Node", ...]


@dataclass(frozen=True)
class Not:
    child: "Node"


@dataclass(frozen=True)
class Const:
    value: bool | None


@dataclass(frozen=True)
class Opaque:
    sql: str
    columns: tuple[str, ...]


Node = Union[Cmp, InList, IsNull, StartsWith, And, Or, Not, Const, Opaque]


def columns_of(node: Node) -> set[str]:
    """Names of the columns a predicate refers to."""
    if isinstance(node, (Cmp, InList, IsNull, StartsWith)):
        return {node.col.name}
    if isinstance(node, (And, Or)):
        out: set[str] = set()
        for c in node.children:
            out |= columns_of(c)
        return out
    if isinstance(node, Not):
        return columns_of(node.child)
    if isinstance(node, Opaque):
        return set(node.columns)
    return set()


def conjuncts(node: Node) -> list[Node]:
    if isinstance(node, And):
        out: list[Node] = []
        for c in node.children:
            out.extend(conjuncts(c))
        return out
    return [node]


def _lit_sql(value: Any) -> str:
    import datetime as dt
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "\\'") + "'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP'{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE'{value.isoformat()}'"
    return str(value)


def to_sql(node: Node) -> str:
    """Spark SQL text of a bound predicate (for reports and explain output)."""
    if isinstance(node, Cmp):
        return f"{node.col.name} {node.op} {_lit_sql(node.value)}"
    if isinstance(node, InList):
        items = [_lit_sql(v) for v in node.values] + (["NULL"] if node.has_null else [])
        return f"{node.col.name} IN ({', '.join(items)})"
    if isinstance(node, IsNull):
        return f"{node.col.name} IS NULL"
    if isinstance(node, StartsWith):
        return f"{node.col.name} LIKE {_lit_sql(node.prefix + '%')}"
    if isinstance(node, And):
        return " AND ".join(f"({to_sql(c)})" if isinstance(c, Or) else to_sql(c) for c in node.children)
    if isinstance(node, Or):
        return " OR ".join(f"({to_sql(c)})" if isinstance(c, And) else to_sql(c) for c in node.children)
    if isinstance(node, Not):
        if isinstance(node.child, IsNull):
            return f"{node.child.col.name} IS NOT NULL"
        if isinstance(node.child, InList):
            return to_sql(node.child).replace(" IN (", " NOT IN (", 1)
        return f"NOT ({to_sql(node.child)})"
    if isinstance(node, Const):
        return "NULL" if node.value is None else _lit_sql(node.value)
    return node.sql
