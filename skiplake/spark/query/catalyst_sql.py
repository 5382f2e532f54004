"""Catalyst predicates back into Spark SQL text that skiplake's binder reads.

Only the shapes the evaluators understand are written (comparisons and IN of a column with
literals, IS [NOT] NULL, prefix LIKE, AND/OR/NOT of those); anything else gives None, and
leaving a conjunct out only makes pruning weaker, never wrong.
"""
from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

from skiplake.expr.sql import sql_string
from skiplake.spark.query.catalyst import kind, seq

_NUMERIC_SUFFIX = re.compile(r"(?<=[0-9])(?:BD|L|D|F|S|Y)\b")
_COMPARISONS = {"EqualTo": "=", "EqualNullSafe": "<=>", "LessThan": "<", "LessThanOrEqual": "<=",
                "GreaterThan": ">", "GreaterThanOrEqual": ">="}
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")


def catalyst_to_sql(node: Any) -> str | None:
    """SQL text of a Catalyst predicate over one relation's columns, or None if it is not one of
    the shapes the evaluators understand."""
    name = kind(node)
    writer = _WRITERS.get(name)
    if writer is not None:
        return writer(node)
    if name in _COMPARISONS:
        return _comparison(node, _COMPARISONS[name])
    return None


def _literal(lit: Any) -> str | None:
    """Spark SQL text of a Catalyst literal that the predicate binder can read, else None."""
    type_ = lit.dataType().simpleString()
    if lit.value() is None:
        return "NULL"
    if type_ in _INTEGRAL or type_.startswith("decimal"):
        return lit.toString()
    if type_ in ("float", "double"):
        text = lit.toString()
        if text.lower() in ("nan", "infinity", "-infinity"):
            return None
        # A FLOAT literal is compared as a float32; written as the double it widens to, it
        # meets the stats (float32 values widened the same way) exactly.
        return repr(float(np.float32(text))) if type_ == "float" else repr(float(text))
    if type_ == "string":
        return sql_string(lit.toString())
    if type_ in ("date", "timestamp", "boolean"):
        return lit.sql()
    return None


def _operand(node: Any) -> str | None:
    """A column reference or a literal as SQL text, else None."""
    if kind(node) == "Literal":
        return _literal(node)
    return _attribute(node)


def _attribute(node: Any) -> str | None:
    if kind(node) != "AttributeReference":
        return None
    return "`" + node.name().replace("`", "``") + "`"


def _boolean(node: Any) -> str | None:
    left, right = catalyst_to_sql(node.left()), catalyst_to_sql(node.right())
    if left is None or right is None:
        return None
    return f"({left} {kind(node).upper()} {right})"


def _not(node: Any) -> str | None:
    inner = catalyst_to_sql(node.child())
    return None if inner is None else f"(NOT {inner})"


def _comparison(node: Any, op: str) -> str | None:
    left, right = _operand(node.left()), _operand(node.right())
    if left is None or right is None:
        return None
    return f"({left} {op} {right})"


def _is_null(node: Any) -> str | None:
    a = _attribute(node.child())
    return None if a is None else f"({a} IS {'NOT ' if kind(node) == 'IsNotNull' else ''}NULL)"


def _in(node: Any) -> str | None:
    a = _attribute(node.value())
    items = [_literal(x) if kind(x) == "Literal" else None for x in seq(node.list())]
    if a is None or not items or any(i is None for i in items):
        return None
    return f"({a} IN ({', '.join(items)}))"  # type: ignore[arg-type]


def _in_set(node: Any) -> str | None:
    child = node.child()
    a = _attribute(child)
    type_ = child.dataType().simpleString()
    numeric = type_ in _INTEGRAL + ("float", "double") or type_.startswith("decimal")
    if a is None or not (numeric or type_ in ("string", "date")):
        return None
    # "(<child sql> IN (<literal sql>, ...))": numbers carry Spark's type suffixes (5L, 1.5BD).
    text = node.sql()
    head = f"({child.sql()} IN ("
    if not text.startswith(head) or not text.endswith("))"):
        return None
    items = text[len(head):-2]
    return f"({a} IN ({_NUMERIC_SUFFIX.sub('', items) if numeric else items}))"


def _starts_with(node: Any) -> str | None:
    a = _attribute(node.left())
    prefix = node.right()
    if a is None or kind(prefix) != "Literal" or prefix.dataType().simpleString() != "string" or prefix.value() is None:
        return None
    body = prefix.toString()
    if any(ch in body for ch in "%_\\"):
        return None
    return f"({a} LIKE {sql_string(body + '%')})"


_WRITERS: dict[str, Callable[[Any], str | None]] = {
    "And": _boolean, "Or": _boolean, "Not": _not, "IsNull": _is_null, "IsNotNull": _is_null,
    "In": _in, "InSet": _in_set, "StartsWith": _starts_with,
}
