"""SQL boolean text (Spark dialect) to a predicate tree bound to a table schema.

Binding resolves every column against the schema (case-insensitively, as Spark does) and casts
literals to the column's type. A literal that cannot be cast safely makes its leaf Opaque: it
is still a valid predicate for Spark, it just never prunes.
"""
from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal, InvalidOperation
from typing import Any, TypeGuard

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from skiplake.errors import InvalidPredicateError
from skiplake.expr.spark_conjuncts import spark_conjuncts
from skiplake.expr.tree import FLIPPED, And, Cmp, Col, Const, InList, IsNull, Node, Not, Opaque, Or, StartsWith
from skiplake.log.schema import COLLATIONS_KEY, INTEGER_TYPES, Schema, is_decimal, is_primitive
from skiplake.log.values import TIMESTAMP_TYPES, parse_timestamp

_CMP_NODES: dict[type, str] = {
    exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=",
    exp.NullSafeEQ: "<=>",
}

_NOT_A_LITERAL = object()
# What cast_literal gives for a value it cannot cast safely (the comparison is then left to Spark).
NOT_A_LITERAL = _NOT_A_LITERAL


def parse_sql(text: str) -> exp.Expression:
    """The sqlglot tree of the Spark SQL `text`; InvalidPredicateError when it does not parse or is empty."""
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except ParseError as e:
        first = e.errors[0] if e.errors else {}
        where = f" at column {first['col']}" if first.get("col") else ""
        detail = first.get("description") or "syntax error"
        raise InvalidPredicateError(text, f"it is not valid Spark SQL: {detail}{where}") from None
    except TokenError as e:
        raise InvalidPredicateError(text, f"it is not valid Spark SQL: {e}") from None
    if tree is None:
        raise InvalidPredicateError(text, "it is empty")
    # sqlglot types the tree as its base trait Expr; every node it builds is an Expression
    assert isinstance(tree, exp.Expression)
    return tree


def referenced_columns(text: str, schema: Schema) -> list[str]:
    """The top-level columns of `schema` that the SQL expression `text` names, in schema order
    (a struct field `a.b` names `a`); every column when `text` does not parse."""
    try:
        tree = parse_sql(text)
    except InvalidPredicateError:
        return list(schema.names)
    named = {(c.parts[0].name if c.parts else c.name).lower() for c in tree.find_all(exp.Column)}
    return [n for n in schema.names if n.lower() in named]


def substitute_columns(text: str, values: dict[str, str]) -> str:
    """The SQL expression `text` with each column it names replaced by the SQL in `values`
    (keyed by lower-case column name), parenthesised; Spark SQL out."""
    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in values:
            return exp.Paren(this=parse_sql(values[node.name.lower()]))
        return node
    return parse_sql(text).transform(swap).sql(dialect="spark")


def bind(text: str, schema: Schema) -> Node:
    """Parse `text` and bind it to `schema`; unknown columns are an InvalidPredicateError."""
    return _Binder(text, schema).bind(parse_sql(text))


def bind_conjuncts(text: str, schema: Schema) -> Node | None:
    """The AND of the conjuncts of `text` that bind to `schema`, each bound on its own (a conjunct
    naming another relation's column is left out); None when none binds."""
    binder = _Binder(text, schema)
    bound = []
    parts = spark_conjuncts(text, parse_sql)
    for part in parts if parts is not None else and_conjuncts(parse_sql(text)):
        try:
            bound.append(binder.bind(part))
        except InvalidPredicateError:
            continue
    return None if not bound else bound[0] if len(bound) == 1 else And(tuple(bound))


def and_conjuncts(node: exp.Expr) -> list[exp.Expr]:
    """The parts of a sqlglot tree joined by AND (parentheses seen through)."""
    if isinstance(node, exp.Paren):
        return and_conjuncts(node.this)
    if isinstance(node, exp.And):
        return and_conjuncts(node.left) + and_conjuncts(node.right)
    return [node]


class _Binder:
    def __init__(self, text: str, schema: Schema) -> None:
        self.text = text
        self.schema = schema

    def nested(self, node: exp.Column) -> bool:
        """`s.a` where `s` is a column: a struct field, which the stats of top-level columns say
        nothing about (a qualifier that is not a column is a table name, as in `t.a`)."""
        return bool(node.table) and self.schema.find(node.table) is not None

    def col(self, node: exp.Column) -> Col:
        name = node.table if self.nested(node) else node.name
        field = self.schema.find(name)
        if field is None:
            raise InvalidPredicateError(
                self.text, f"unknown column {name!r}; the table's columns are {', '.join(self.schema.names)}")
        return Col(field.name, field.type)

    def usable(self, node: exp.Expr) -> TypeGuard[exp.Column]:
        """A column the evaluators can reason about: top-level and of a primitive type."""
        if not isinstance(node, exp.Column) or self.nested(node) or not is_primitive(self.col(node).type):
            return False
        # A collated string compares by its collation (case-blind, ...): stats and partition
        # values, in binary order, cannot answer for it.
        field = self.schema.find(node.name)
        return field is None or COLLATIONS_KEY not in field.metadata

    def opaque(self, node: exp.Expr) -> Opaque:
        cols = tuple(sorted({self.col(c).name for c in node.find_all(exp.Column)}))
        return Opaque(node.sql(dialect="spark"), cols)

    def bind(self, node: exp.Expr) -> Node:
        if type(node) in _CMP_NODES:
            return self.comparison(node, _CMP_NODES[type(node)])
        for kind, method in _BINDERS:
            if isinstance(node, kind):
                return method(self, node)
        return self.opaque(node)

    def paren(self, node: exp.Paren) -> Node:
        return self.bind(node.this)

    def and_(self, node: exp.And) -> Node:
        return And((self.bind(node.left), self.bind(node.right)))

    def or_(self, node: exp.Or) -> Node:
        return Or((self.bind(node.left), self.bind(node.right)))

    def not_(self, node: exp.Not) -> Node:
        return Not(self.bind(node.this))

    def boolean(self, node: exp.Boolean) -> Node:
        return Const(bool(node.this))

    def null(self, node: exp.Null) -> Node:
        return Const(None)

    def between(self, node: exp.Between) -> Node:
        col, low, high = node.this, node.args.get("low"), node.args.get("high")
        return And((self.comparison_parts(col, low, ">=", node), self.comparison_parts(col, high, "<=", node)))

    def is_(self, node: exp.Is) -> Node:
        if isinstance(node.expression, exp.Null) and self.usable(node.this):
            return IsNull(self.col(node.this))
        return self.opaque(node)

    def function(self, node: exp.Anonymous) -> Node:
        """`isnull(c)` and `isnotnull(c)`: Spark's functions for `c IS NULL` and `c IS NOT NULL`."""
        name, args = str(node.this).lower(), node.expressions
        if name in ("isnull", "isnotnull") and len(args) == 1 and self.usable(args[0]):
            test = IsNull(self.col(args[0]))
            return test if name == "isnull" else Not(test)
        return self.opaque(node)

    def starts_with(self, node: exp.StartsWith) -> Node:
        """`startswith(col, 'prefix')`, as Spark writes a `LIKE 'prefix%'` it simplified."""
        prefix = literal_value(node.expression)
        if not self.usable(node.this) or self.col(node.this).type != "string" or not isinstance(prefix, str):
            return self.opaque(node)
        return StartsWith(self.col(node.this), prefix)

    def column(self, node: exp.Column) -> Node:
        c = self.col(node)
        if self.usable(node) and c.type == "boolean":
            return Cmp("=", c, True)
        return self.opaque(node)

    def comparison(self, node: exp.Expr, op: str) -> Node:
        left, right = node.this, node.expression
        if self.usable(right) and not isinstance(left, exp.Column):
            left, right, op = right, left, FLIPPED[op]
        return self.comparison_parts(left, right, op, node)

    def comparison_parts(self, left: exp.Expr, right: exp.Expr | None, op: str, whole: exp.Expr) -> Node:
        """`left op right`; a `right` that is missing (a BETWEEN without a bound) is no literal."""
        if not self.usable(left):
            return self.opaque(whole)
        col = self.col(left)
        raw = literal_value(right)
        if raw is _NOT_A_LITERAL:
            return self.opaque(whole)
        if raw is None:
            return IsNull(col) if op == "<=>" else Const(None)
        value = cast_literal(raw, col.type)
        if value is _NOT_A_LITERAL:
            return self.opaque(whole)
        return Cmp(op, col, value)

    def in_list(self, node: exp.In) -> Node:
        if not self.usable(node.this) or node.args.get("query") or not node.expressions:
            return self.opaque(node)
        col = self.col(node.this)
        values: list[Any] = []
        has_null = False
        for e in node.expressions:
            raw = literal_value(e)
            if raw is _NOT_A_LITERAL:
                return self.opaque(node)
            if raw is None:
                has_null = True
                continue
            v = cast_literal(raw, col.type)
            if v is _NOT_A_LITERAL:
                return self.opaque(node)
            values.append(v)
        return InList(col, tuple(dict.fromkeys(values)), has_null)

    def like(self, node: exp.Like) -> Node:
        if not self.usable(node.this):
            return self.opaque(node)
        col = self.col(node.this)
        pattern = literal_value(node.expression)
        if col.type != "string" or not isinstance(pattern, str):
            return self.opaque(node)
        # Only 'prefix%' with no other wildcard or escape is a range test.
        body = pattern[:-1] if pattern.endswith("%") else None
        if body is None or any(ch in body for ch in "%_\\"):
            return self.opaque(node)
        return StartsWith(col, body)


# How each kind of sqlglot node binds (comparisons are looked up in _CMP_NODES first).
_BINDERS: tuple[tuple[type, Any], ...] = (
    (exp.Paren, _Binder.paren), (exp.And, _Binder.and_), (exp.Or, _Binder.or_), (exp.Not, _Binder.not_),
    (exp.Boolean, _Binder.boolean), (exp.Null, _Binder.null), (exp.Between, _Binder.between),
    (exp.In, _Binder.in_list), (exp.Is, _Binder.is_), (exp.Like, _Binder.like), (exp.Column, _Binder.column),
    (exp.StartsWith, _Binder.starts_with), (exp.Anonymous, _Binder.function),
)


def literal_value(node: exp.Expr | None) -> Any:
    """The Python value of a literal expression, or _NOT_A_LITERAL."""
    if isinstance(node, exp.Paren):
        return literal_value(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        return _number(node.this)
    if isinstance(node, exp.Neg):
        inner = literal_value(node.this)
        if isinstance(inner, (int, Decimal, float)) and not isinstance(inner, bool):
            return -inner
        return _NOT_A_LITERAL
    if isinstance(node, exp.Cast):  # also TryCast: Spark's typed literals (5L, 1.5BD) read as casts
        return _cast_value(node)
    return _NOT_A_LITERAL


_INTEGRAL_CASTS = {exp.DataType.Type.BIGINT, exp.DataType.Type.INT, exp.DataType.Type.SMALLINT,
                   exp.DataType.Type.TINYINT}
_TIMESTAMP_CASTS = {exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPNTZ,
                    exp.DataType.Type.DATETIME}


def _cast_value(node: exp.Cast) -> Any:
    """The value of a cast of a literal when it is exactly that literal's value in the target type
    (`5L`, `1.5BD`, `DATE '2001-01-01'`); anything Spark would round or reinterpret is not one."""
    raw = literal_value(node.this)
    target = node.to.this
    if raw is None or raw is _NOT_A_LITERAL:
        return raw
    try:
        if target == exp.DataType.Type.DATE and isinstance(raw, str):
            return dt.date.fromisoformat(raw.strip())
        if target in _TIMESTAMP_CASTS and isinstance(raw, str):
            return parse_timestamp(raw)
        # A string cast to a number is left to Spark (its rules depend on ANSI mode), except as a
        # decimal: sqlglot reads Spark's `1.50BD` as a cast of the string '1.50'.
        number = _number(raw) if isinstance(raw, str) and target == exp.DataType.Type.DECIMAL else raw
        if isinstance(number, bool) or not isinstance(number, (int, Decimal, float)):
            return _NOT_A_LITERAL
        if target in _INTEGRAL_CASTS:
            return int(number) if number == int(number) else _NOT_A_LITERAL
        if target == exp.DataType.Type.DECIMAL:
            return Decimal(str(number))
        if target == exp.DataType.Type.DOUBLE:
            return float(number)
        if target == exp.DataType.Type.FLOAT:
            return struct.unpack("f", struct.pack("f", float(number)))[0]
    except (ValueError, OverflowError, InvalidOperation):
        return _NOT_A_LITERAL
    return _NOT_A_LITERAL


def _number(text: str) -> Any:
    """A numeric literal as Spark types it: integers exact, 1.5 a decimal, 1.5e3 a DOUBLE."""
    try:
        return int(text)
    except ValueError:
        pass
    if "e" in text.lower():
        try:
            return float(text)
        except ValueError:
            return _NOT_A_LITERAL
    try:
        return Decimal(text)
    except InvalidOperation:
        return _NOT_A_LITERAL


def cast_literal(value: Any, type_: Any) -> Any:
    """Cast a literal to the column's value domain as Spark's comparison would; _NOT_A_LITERAL if unsure.

    A string compared with a number or a date is left to Spark: how Spark casts it depends on
    ANSI mode, and guessing wrong would skip files that hold matching rows."""
    if not is_primitive(type_):
        return _NOT_A_LITERAL
    if isinstance(value, bool):
        return value if type_ == "boolean" else _NOT_A_LITERAL
    if type_ in INTEGER_TYPES or is_decimal(type_) or type_ in ("float", "double"):
        return _numeric(value, type_)
    if type_ == "string":
        return value if isinstance(value, str) else _NOT_A_LITERAL
    if type_ == "date":
        return _date(value)
    if type_ in TIMESTAMP_TYPES:
        return _timestamp(value, type_)
    return _NOT_A_LITERAL  # a boolean column compared with a non-boolean, and other types


def _numeric(value: Any, type_: str) -> Any:
    floating = type_ in ("float", "double")
    if isinstance(value, float) and not floating:
        # A DOUBLE literal makes Spark compare in doubles, where 2**60 + 1 equals 2**60:
        # exact comparisons here could skip a file Spark would match.
        return _NOT_A_LITERAL
    if isinstance(value, (int, Decimal, float)):
        # Kept numeric as written: 5.5 against an int column must not become 5.
        return float(value) if floating else value
    return _NOT_A_LITERAL


def _date(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return _NOT_A_LITERAL
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            return _NOT_A_LITERAL
    return _NOT_A_LITERAL


def _timestamp(value: Any, type_: str) -> Any:
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    if not isinstance(value, str):
        return _NOT_A_LITERAL
    try:
        # Spark reads a zone in the text of a TIMESTAMP_NTZ literal and ignores it.
        return parse_timestamp(value, keep_wall_clock=type_ == "timestamp_ntz")
    except ValueError:
        return _NOT_A_LITERAL
