"""Spark SQL expressions evaluated over Arrow tables, without Spark.

Writes made in Python workers (the `skiplake` data source and its streaming sink) have no Spark
to evaluate a table's CHECK constraints and generation expressions, so this module does it with
pyarrow.compute, for the part of Spark SQL whose results it can match exactly:

* columns (struct fields too), literals, `DATE '...'` and `TIMESTAMP '...'`;
* comparisons (`=`, `<>`, `<`, `<=`, `>`, `>=`, `<=>`), `AND`/`OR`/`NOT` with SQL's three
  values, `IS [NOT] NULL`, `IN`, `BETWEEN`, `LIKE`;
* `+`, `-`, `*`, unary minus and `abs`, failing on overflow as ANSI mode does;
* `CAST` between integer types, to floating point, integers to decimal, to string from strings,
  integers, dates and booleans, to date from dates, timestamps and ISO strings;
* `year`, `month`, `day`, `hour`, `to_date`, in the session time zone for `timestamp` columns;
* `length`, `upper`, `lower`, `trim`, `substring`/`substr` with literal positions, `concat`;
* `coalesce`, `if` and searched `CASE`.

Anything else (division, whose ANSI and legacy results differ, regular expressions, float to
string, user functions...) is NotEvaluable, and so is an expression whose types Arrow cannot
combine: `compile_expression` finds both before any row is written, by a dry run on no rows.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Sequence, TypeAlias
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from skiplake.errors import InvalidPredicateError
from skiplake.expr.parse import parse_sql

__all__ = ["NotEvaluable", "ArrowExpression", "compile_expression"]

# An Arrow array or scalar (pyarrow's own classes carry no types mypy can follow).
Value: TypeAlias = Any


class NotEvaluable(Exception):
    """An expression (or a part of one) that cannot be evaluated without Spark; the message says which part."""


_COMPARE: dict[type, str] = {exp.EQ: "equal", exp.NEQ: "not_equal", exp.LT: "less", exp.LTE: "less_equal",
                             exp.GT: "greater", exp.GTE: "greater_equal"}
_ARITHMETIC: dict[type, str] = {exp.Add: "add_checked", exp.Sub: "subtract_checked", exp.Mul: "multiply_checked"}
_PARTS: dict[type, Callable[[Any], Any]] = {exp.Year: pc.year, exp.Month: pc.month, exp.Day: pc.day,
                                            exp.DayOfMonth: pc.day, exp.Hour: pc.hour}
_TEXT: dict[type, Callable[[Any], Any]] = {exp.Upper: pc.utf8_upper, exp.Lower: pc.utf8_lower,
                                           exp.Length: pc.utf8_length}
_INTEGER_TYPES = {exp.DataType.Type.TINYINT: pa.int8(), exp.DataType.Type.SMALLINT: pa.int16(),
                  exp.DataType.Type.INT: pa.int32(), exp.DataType.Type.BIGINT: pa.int64()}
_FLOAT_TYPES = {exp.DataType.Type.FLOAT: pa.float32(), exp.DataType.Type.DOUBLE: pa.float64()}
_STRING_TYPES = {exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR}
_TIMESTAMP_TYPES = {exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ}


@dataclass(frozen=True)
class ArrowExpression:
    """A Spark SQL expression that `evaluate` computes over an Arrow table."""
    text: str

    def evaluate(self, table: pa.Table, time_zone: str = "UTC") -> pa.Array:
        """The expression's value for every row of `table` (columns named as the expression
        names them, matched case-insensitively); `time_zone` is Spark's session time zone."""
        try:
            tree = parse_sql(self.text)
        except InvalidPredicateError as e:
            raise NotEvaluable(str(e)) from None
        value = _Evaluation(table, ZoneInfo(time_zone)).value(tree)
        if isinstance(value, pa.Scalar):
            return pa.array([value.as_py()] * table.num_rows, value.type)
        return value


def compile_expression(text: str, columns: pa.Schema) -> ArrowExpression:
    """`text` ready to evaluate over tables of `columns`; NotEvaluable (saying what) when this
    module cannot evaluate it exactly as Spark would."""
    out = ArrowExpression(text)
    # One row of NULLs, not none: some kernels check their types only when they meet a row.
    probe = pa.table([pa.nulls(1, f.type) for f in columns], schema=pa.schema([f.with_nullable(True) for f in columns]))
    try:
        out.evaluate(probe)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
        raise NotEvaluable(f"its types do not combine without Spark's implicit casts ({str(e).splitlines()[0]})") from None
    return out


class _Evaluation:
    """One evaluation over one table: a walk of the sqlglot tree, node by node."""

    def __init__(self, table: pa.Table, zone: ZoneInfo) -> None:
        self.table = table
        self.zone = zone
        self.by_name = {n.lower(): i for i, n in enumerate(table.column_names)}

    def value(self, node: exp.Expression) -> Value:
        for kinds, handler in _HANDLERS:
            if isinstance(node, kinds):
                return handler(self, node)
        raise NotEvaluable(f"{node.sql(dialect='spark')} is not evaluated without Spark")

    def values(self, nodes: Sequence[exp.Expression]) -> list[Value]:
        return [self.value(n) for n in nodes]

    # ---- leaves

    def column(self, node: exp.Column | exp.Dot) -> Value:
        names = [p.name for p in node.parts] if isinstance(node, exp.Column) else _dotted(node)
        index = self.by_name.get(names[0].lower())
        if index is None:
            raise NotEvaluable(f"it reads {names[0]!r}, which is not a column of the table")
        chunked = self.table.column(index)
        out: Value = pa.concat_arrays(chunked.chunks) if chunked.num_chunks else pa.array([], chunked.type)
        for name in names[1:]:
            out = _struct_field(out, name)
        return out

    def literal(self, node: exp.Literal) -> Value:
        text = str(node.this)
        if node.is_string:
            return pa.scalar(text, pa.string())
        if text.lstrip("+-").isdigit():
            number = int(text)
            return pa.scalar(number, pa.int32() if -2**31 <= number < 2**31 else pa.int64())
        if "e" in text.lower():
            return pa.scalar(float(text), pa.float64())
        return pa.scalar(Decimal(text))

    def boolean(self, node: exp.Boolean) -> Value:
        return pa.scalar(bool(node.this), pa.bool_())

    def null(self, node: exp.Null) -> Value:
        return pa.scalar(None, pa.null())

    def paren(self, node: exp.Paren) -> Value:
        return self.value(node.this)

    # ---- logic and comparisons

    def compare(self, node: exp.Binary) -> Value:
        left, right = self._coerced(self.value(node.this), self.value(node.expression))
        return pc.call_function(_COMPARE[type(node)], [left, right])

    def null_safe_equal(self, node: exp.NullSafeEQ) -> Value:
        left, right = self._coerced(self.value(node.this), self.value(node.expression))
        both, either = pc.and_(pc.is_null(left), pc.is_null(right)), pc.or_(pc.is_null(left), pc.is_null(right))
        return pc.if_else(both, True, pc.if_else(either, False, pc.equal(left, right)))

    def and_(self, node: exp.And) -> Value:
        return pc.and_kleene(self.value(node.this), self.value(node.expression))

    def or_(self, node: exp.Or) -> Value:
        return pc.or_kleene(self.value(node.this), self.value(node.expression))

    def not_(self, node: exp.Not) -> Value:
        return pc.invert(self.value(node.this))

    def is_(self, node: exp.Is) -> Value:
        if not isinstance(node.expression, exp.Null):
            raise NotEvaluable(f"{node.sql(dialect='spark')}: only IS [NOT] NULL is evaluated without Spark")
        return pc.is_null(self.value(node.this))

    def in_(self, node: exp.In) -> Value:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise NotEvaluable(f"{node.sql(dialect='spark')}: only IN with a list of values is evaluated without Spark")
        subject = self.value(node.this)
        items = [self.value(e) for e in node.expressions]
        if not all(isinstance(i, pa.Scalar) for i in items):
            raise NotEvaluable(f"{node.sql(dialect='spark')}: only IN with a list of literals is evaluated without Spark")
        listed = [i for i in items if i.is_valid]
        found = pc.is_in(subject, value_set=pa.array([self._coerced(subject, i)[1].as_py() for i in listed],
                                                     subject.type))
        if len(listed) < len(items):  # x IN (..., NULL) is NULL, not FALSE, where x is not listed
            found = pc.if_else(found, True, pa.scalar(None, pa.bool_()))
        return pc.if_else(pc.is_null(subject), pa.scalar(None, pa.bool_()), found)

    def between(self, node: exp.Between) -> Value:
        subject = self.value(node.this)
        low = pc.greater_equal(*self._coerced(subject, self.value(node.args["low"])))
        high = pc.less_equal(*self._coerced(subject, self.value(node.args["high"])))
        return pc.and_kleene(low, high)

    def like(self, node: exp.Like) -> Value:
        pattern = self.value(node.expression)
        if not isinstance(pattern, pa.Scalar) or not pa.types.is_string(pattern.type) or node.args.get("escape"):
            raise NotEvaluable(f"{node.sql(dialect='spark')}: only LIKE with a literal pattern is evaluated without Spark")
        out = pc.match_like(self.value(node.this), pattern.as_py())
        return pc.invert(out) if node.args.get("negate") else out

    # ---- arithmetic and functions

    def arithmetic(self, node: exp.Binary) -> Value:
        return pc.call_function(_ARITHMETIC[type(node)], [self.value(node.this), self.value(node.expression)])

    def negate(self, node: exp.Neg) -> Value:
        return pc.negate_checked(self.value(node.this))

    def abs_(self, node: exp.Abs) -> Value:
        return pc.abs_checked(self.value(node.this))

    def date_part(self, node: exp.Func) -> Value:
        return _PARTS[type(node)](self._local(self.value(node.this)))

    def text(self, node: exp.Func) -> Value:
        return _TEXT[type(node)](self.value(node.this))

    def trim(self, node: exp.Trim) -> Value:
        if node.args.get("expression") or node.args.get("position"):
            raise NotEvaluable(f"{node.sql(dialect='spark')}: only trim(s) is evaluated without Spark")
        return pc.utf8_trim(self.value(node.this), characters=" ")

    def substring(self, node: exp.Substring) -> Value:
        start, length = node.args.get("start"), node.args.get("length")
        bounds = [self.value(n) for n in (start, length) if n is not None]
        if not all(isinstance(b, pa.Scalar) and pa.types.is_integer(b.type) for b in bounds):
            raise NotEvaluable(f"{node.sql(dialect='spark')}: only substring with literal positions is evaluated "
                               "without Spark")
        pos = int(bounds[0].as_py()) if bounds else 1
        count = int(bounds[1].as_py()) if len(bounds) > 1 else None
        subject = self.value(node.this)
        if count is not None and count <= 0:
            return pc.utf8_slice_codeunits(subject, 0, 0)
        # Spark's substringSQL: 1-based, 0 reads as 1, a negative position counts from the end
        # (as Arrow's negative start does, clipped at the beginning the same way).
        begin = pos - 1 if pos > 0 else pos
        stop = None if count is None else begin + count
        if pos < 0 and stop is not None and stop >= 0:
            stop = None
        return pc.utf8_slice_codeunits(subject, begin, stop)

    def concat(self, node: exp.Concat) -> Value:
        parts = self.values(node.expressions)
        return pc.binary_join_element_wise(*parts, pa.scalar("", pa.string()), null_handling="emit_null")

    def coalesce(self, node: exp.Coalesce) -> Value:
        first = self.value(node.this)
        rest = [self._coerced(first, v)[1] for v in self.values(node.expressions)]
        return pc.coalesce(first, *rest)

    def if_(self, node: exp.If) -> Value:
        otherwise = node.args.get("false")
        other = self.value(otherwise) if otherwise is not None else pa.scalar(None, pa.null())
        chosen = self.value(node.args["true"])
        chosen, other = self._coerced(chosen, other)
        return pc.if_else(pc.fill_null(self.value(node.this), False), chosen, other)

    def case(self, node: exp.Case) -> Value:
        if node.this is not None:
            raise NotEvaluable(f"{node.sql(dialect='spark')}: only CASE WHEN ... (searched) is evaluated without Spark")
        default = node.args.get("default")
        out = self.value(default) if default is not None else pa.scalar(None, pa.null())
        for branch in reversed(node.args.get("ifs") or []):
            chosen, out = self._coerced(self.value(branch.args["true"]), out)
            out = pc.if_else(pc.fill_null(self.value(branch.this), False), chosen, out)
        return out

    # ---- casts

    def to_date(self, node: exp.TsOrDsToDate) -> Value:
        if node.args.get("format"):
            raise NotEvaluable(f"{node.sql(dialect='spark')}: to_date with a format is not evaluated without Spark")
        return self._date(self.value(node.this))

    def cast(self, node: exp.Cast) -> Value:
        to = node.to
        value = self.value(node.this)
        if isinstance(value, pa.Scalar) and pa.types.is_string(value.type) and value.is_valid:
            typed = self._typed_literal(value.as_py(), to)
            if typed is not None:
                return typed
        out = _CASTS[to.this](self, value, to) if to.this in _CASTS else None
        if out is None:
            raise NotEvaluable(f"{node.sql(dialect='spark')}: a cast from {value.type} to {to.sql(dialect='spark')} "
                               "is not evaluated without Spark")
        return out

    def _to_float(self, value: Value, to: exp.DataType) -> Value | None:
        return pc.cast(value, _FLOAT_TYPES[to.this]) if _numeric(value.type) else None

    def _to_decimal(self, value: Value, to: exp.DataType) -> Value | None:
        t = value.type
        return pc.cast(value, _decimal_type(to)) if pa.types.is_integer(t) or pa.types.is_decimal(t) else None

    def _to_string(self, value: Value, to: exp.DataType) -> Value | None:
        t = value.type
        # Spark and Arrow write these alike; floats and timestamps they do not.
        alike = pa.types.is_string(t) or pa.types.is_integer(t) or pa.types.is_date32(t) or pa.types.is_boolean(t)
        return pc.cast(value, pa.string()) if alike else None

    def _to_date_cast(self, value: Value, to: exp.DataType) -> Value | None:
        return self._date(value)

    def _to_boolean(self, value: Value, to: exp.DataType) -> Value | None:
        return value if pa.types.is_boolean(value.type) else None

    def _to_timestamp(self, value: Value, to: exp.DataType) -> Value | None:
        zoned = to.this != exp.DataType.Type.TIMESTAMPNTZ
        same = pa.types.is_timestamp(value.type) and (value.type.tz is not None) == zoned
        return value if same else None

    def _to_integer(self, value: Value, to: exp.DataType) -> Value | None:
        target = _INTEGER_TYPES[to.this]
        if pa.types.is_floating(value.type):
            value = pc.trunc(value)   # Spark truncates toward zero; out of range fails, as the safe cast does
        elif not (pa.types.is_integer(value.type) or pa.types.is_decimal(value.type)):
            return None
        elif pa.types.is_decimal(value.type):
            value = pc.trunc(value)
        return pc.cast(value, target)

    def _typed_literal(self, text: str, to: exp.DataType) -> pa.Scalar | None:
        kind = to.this
        try:
            if kind == exp.DataType.Type.DATE:
                return pa.scalar(dt.date.fromisoformat(text.strip()), pa.date32())
            if kind in _TIMESTAMP_TYPES or kind == exp.DataType.Type.TIMESTAMPNTZ:
                when = dt.datetime.fromisoformat(text.strip())
                if kind == exp.DataType.Type.TIMESTAMPNTZ:
                    return pa.scalar(when.replace(tzinfo=None), pa.timestamp("us"))
                when = when if when.tzinfo is not None else when.replace(tzinfo=self.zone)
                return pa.scalar(when.astimezone(dt.timezone.utc), pa.timestamp("us", "UTC"))
        except ValueError:
            raise NotEvaluable(f"{text!r} is not a {to.sql(dialect='spark')} this module reads") from None
        return None

    def _local(self, value: Value) -> Value:
        """Timestamps with a zone as wall-clock time in the session's zone, as Spark sees them."""
        if pa.types.is_timestamp(value.type) and value.type.tz is not None:
            return pc.local_timestamp(pc.cast(value, pa.timestamp(value.type.unit, str(self.zone))))
        return value

    def _date(self, value: Value) -> Value:
        t = value.type
        if pa.types.is_date32(t):
            return value
        if pa.types.is_timestamp(t):
            return pc.cast(pc.floor_temporal(self._local(value), unit="day"), pa.date32())
        if pa.types.is_string(t):
            return pc.cast(pc.utf8_trim(value, characters=" "), pa.date32())
        raise NotEvaluable(f"a {t} is not made a date without Spark")

    def _coerced(self, left: Value, right: Value) -> tuple[Value, Value]:
        """The operands with a string literal compared to a date or timestamp read as one, and a
        NULL literal typed as the other side, as Spark's implicit casts do."""
        for a, b, swap in ((left, right, False), (right, left, True)):
            if isinstance(b, pa.Scalar) and pa.types.is_null(b.type) and not pa.types.is_null(a.type):
                b = pa.scalar(None, a.type)
            elif (isinstance(b, pa.Scalar) and pa.types.is_string(b.type) and b.is_valid
                  and (pa.types.is_date32(a.type) or pa.types.is_timestamp(a.type))):
                kind = (exp.DataType.Type.DATE if pa.types.is_date32(a.type) else
                        exp.DataType.Type.TIMESTAMPTZ if a.type.tz is not None else exp.DataType.Type.TIMESTAMPNTZ)
                typed = self._typed_literal(b.as_py(), exp.DataType(this=kind))
                assert typed is not None
                b = typed
            else:
                continue
            return (b, a) if swap else (a, b)
        return left, right


def _dotted(node: exp.Dot) -> list[str]:
    inner = node.this
    head = [p.name for p in inner.parts] if isinstance(inner, exp.Column) else _dotted(inner)
    return [*head, node.expression.name]


def _struct_field(value: Value, name: str) -> Value:
    if not pa.types.is_struct(value.type):
        raise NotEvaluable(f"it reads the field {name!r} of a {value.type}, which is no struct")
    for i in range(value.type.num_fields):
        if value.type.field(i).name.lower() == name.lower():
            return pc.struct_field(value, [i])
    raise NotEvaluable(f"it reads the field {name!r}, which the struct has not")


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _decimal_type(to: exp.DataType) -> pa.DataType:
    params = [int(p.this.this) for p in to.expressions]
    precision, scale = (params + [10, 0][len(params):])[:2] if params else (10, 0)
    return pa.decimal128(precision, scale)


_CASTS: dict[Any, Callable[[Any, Any, Any], Value | None]] = {
    **{k: _Evaluation._to_integer for k in _INTEGER_TYPES},
    **{k: _Evaluation._to_float for k in _FLOAT_TYPES},
    **{k: _Evaluation._to_string for k in _STRING_TYPES},
    **{k: _Evaluation._to_timestamp for k in (*_TIMESTAMP_TYPES, exp.DataType.Type.TIMESTAMPNTZ)},
    exp.DataType.Type.DECIMAL: _Evaluation._to_decimal,
    exp.DataType.Type.DATE: _Evaluation._to_date_cast,
    exp.DataType.Type.BOOLEAN: _Evaluation._to_boolean,
}

_HANDLERS: list[tuple[type | tuple[type, ...], Callable[[Any, Any], Value]]] = [
    ((exp.Column, exp.Dot), _Evaluation.column),
    (exp.Literal, _Evaluation.literal),
    (exp.Boolean, _Evaluation.boolean),
    (exp.Null, _Evaluation.null),
    (exp.Paren, _Evaluation.paren),
    (tuple(_COMPARE), _Evaluation.compare),
    (exp.NullSafeEQ, _Evaluation.null_safe_equal),
    (exp.And, _Evaluation.and_),
    (exp.Or, _Evaluation.or_),
    (exp.Not, _Evaluation.not_),
    (exp.Is, _Evaluation.is_),
    (exp.In, _Evaluation.in_),
    (exp.Between, _Evaluation.between),
    (exp.Like, _Evaluation.like),
    (tuple(_ARITHMETIC), _Evaluation.arithmetic),
    (exp.Neg, _Evaluation.negate),
    (exp.Abs, _Evaluation.abs_),
    (tuple(_PARTS), _Evaluation.date_part),
    (tuple(_TEXT), _Evaluation.text),
    (exp.Trim, _Evaluation.trim),
    (exp.Substring, _Evaluation.substring),
    (exp.Concat, _Evaluation.concat),
    (exp.Coalesce, _Evaluation.coalesce),
    (exp.If, _Evaluation.if_),
    (exp.Case, _Evaluation.case),
    (exp.TsOrDsToDate, _Evaluation.to_date),
    (exp.Cast, _Evaluation.cast),   # TryCast is a Cast: Spark's dialect reads CAST as one
]
