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
    """A column of the schema, as a leaf names it."""
    name: str   # the schema's spelling of the column
    type: Any   # the column's Delta type


@dataclass(frozen=True)
class Cmp:
    """`col op value`: a column compared with a literal of its type."""
    op: str     # one of COMPARISONS, column on the left
    col: Col
    value: Any  # never None: comparisons with NULL are folded to Const(None) when bound


@dataclass(frozen=True)
class InList:
    """`col IN (values)`, the values literals of the column's type."""
    col: Col
    values: tuple[Any, ...]  # non-null literals
    has_null: bool = False   # the list also holds NULL (then a non-match is NULL, not FALSE)


@dataclass(frozen=True)
class IsNull:
    """`col IS NULL` (IS NOT NULL is its Not)."""
    col: Col


@dataclass(frozen=True)
class StartsWith:
    """`col LIKE 'prefix%'` on a string column (Spark's startswith)."""
    col: Col
    prefix: str


@dataclass(frozen=True)
class And:
    """The AND of its children."""
    children: tuple["Node", ...]


@dataclass(frozen=True)
class Or:
    """The OR of its children."""
    children: tuple["Node", ...]


@dataclass(frozen=True)
class Not:
    """The NOT of its child."""
    child: "Node"


@dataclass(frozen=True)
class Const:
    """A literal TRUE, FALSE or NULL (None)."""
    value: bool | None


@dataclass(frozen=True)
class Opaque:
    """What cannot be analysed: its Spark SQL text and the columns it names. It may be anything, so it never prunes."""
    sql: str
    columns: tuple[str, ...]


Node = Union[Cmp, InList, IsNull, StartsWith, And, Or, Not, Const, Opaque]


def conjuncts(node: Node) -> list[Node]:
    """The AND parts of `node`, nested ANDs flattened; `[node]` when it is no AND."""
    if isinstance(node, And):
        out: list[Node] = []
        for c in node.children:
            out.extend(conjuncts(c))
        return out
    return [node]
