"""skiplake predicates in Glue's partition expression language, and Glue column types as Delta types.

A bound predicate on partition keys becomes the `Expression` of GetPartitions; what Glue's
language cannot say (a timestamp or boolean literal, NULL in an IN list, a NOT IN with NULL)
gives None, and the caller leaves that part out (the catalog then returns more partitions,
never fewer).
"""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from skiplake.expr.tree import And, Cmp, Const, InList, IsNull, Node, Not, Opaque, Or, StartsWith
from skiplake.expr.visitor import BooleanVisitor, visit

_GLUE_TO_DELTA = {"string": "string", "varchar": "string", "char": "string", "int": "integer",
                  "integer": "integer", "bigint": "long", "long": "long", "smallint": "short", "tinyint": "byte",
                  "double": "double", "float": "float", "date": "date", "timestamp": "timestamp",
                  "boolean": "boolean", "binary": "binary"}


def delta_type(glue_type: str) -> Any:
    """The Delta type of a Glue column type; a nested or unknown type is an empty struct (a predicate on
    it never prunes)."""
    t = glue_type.strip().lower()
    if t.startswith("decimal"):
        return t.replace(" ", "")
    base = t.split("(")[0].strip()
    # Nested types are left unanalysed: a predicate on them never prunes.
    return _GLUE_TO_DELTA.get(base, {"type": "struct", "fields": []})


def glue_literal(value: Any) -> str | None:
    """A value in Glue's expression syntax (strings quoted with '' doubled), or None if it has none."""
    if isinstance(value, bool) or isinstance(value, dt.datetime):
        return None
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.date):
        return f"'{value.isoformat()}'"
    if isinstance(value, (int, Decimal)):
        return str(value)
    return None


class _GlueWriter(BooleanVisitor["str | None"]):
    def visit_const(self, node: Const) -> str | None:
        return None

    def visit_opaque(self, node: Opaque) -> str | None:
        return None

    def visit_cmp(self, node: Cmp) -> str | None:
        lit = glue_literal(node.value)
        return None if lit is None or node.op == "<=>" else f"{node.col.name} {node.op} {lit}"

    def visit_in(self, node: InList) -> str | None:
        items = [glue_literal(v) for v in node.values]
        known = [i for i in items if i is not None]
        if node.has_null or len(known) < len(items):
            return None
        return f"{node.col.name} IN ({', '.join(known)})"

    def visit_is_null(self, node: IsNull) -> str | None:
        """No Glue form: a NULL partition value is stored as "" (as Glue spells it), which Glue's
        IS NULL does not match, so the partitions are fetched and Spark applies the test."""
        return None

    def visit_starts_with(self, node: StartsWith) -> str | None:
        if any(ch in node.prefix for ch in "%_"):
            return None
        return f"{node.col.name} LIKE {glue_literal(node.prefix + '%')}"

    def visit_and(self, node: And, children: list[str | None]) -> str | None:
        known = [c for c in children if c is not None]
        return None if len(known) < len(children) else "(" + " AND ".join(known) + ")"

    def visit_or(self, node: Or, children: list[str | None]) -> str | None:
        known = [c for c in children if c is not None]
        return None if len(known) < len(children) else "(" + " OR ".join(known) + ")"

    def visit_not(self, node: Not, child: str | None) -> str | None:
        return None if child is None else f"NOT ({child})"


def glue_expression(node: Node) -> str | None:
    """Glue expression text for a predicate on partition keys, or None if it has no Glue form."""
    return visit(node, _GlueWriter())
