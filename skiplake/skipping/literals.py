"""A predicate's literals as Arrow values of their column's type, exactly or not at all.

The columnar evaluator compares them with arrays of file bounds, the row evaluator with the
rows themselves; both need the literal in the column's own Arrow type, and neither may let a
conversion round it (5.5 against an integer column, 1.005 against decimal(7, 2)): then
`Mismatch` says so and the caller takes a slower, exact path.
"""
from __future__ import annotations

import datetime as dt
from decimal import Decimal, localcontext
from typing import Any

import pyarrow as pa

from skiplake.log.schema import INTEGER_TYPES, is_decimal, plain_kind
from skiplake.log.values import TIMESTAMP_TYPES
from skiplake.skipping.stats_table import arrow_type


class Mismatch(Exception):
    """The literal cannot be compared with the column's array directly."""


def literal_scalar(value: Any, type_: str) -> pa.Scalar:
    """The literal as a scalar of the column's Arrow type, or Mismatch if that would change it."""
    target = arrow_type(type_)
    if target is None or isinstance(value, bool) != (type_ == "boolean"):
        raise Mismatch
    if type_ in INTEGER_TYPES:
        if isinstance(value, Decimal) and value == value.to_integral_value():
            value = int(value)
    elif is_decimal(type_):
        value = _decimal_at_scale(value, target.scale)
    if not _fits_kind(value, type_):
        raise Mismatch
    return pa.scalar(value, type=target)


def literal_array(values: tuple[Any, ...], type_: str) -> pa.Array:
    """An IN list's values as one array of the column's Arrow type, or Mismatch as literal_scalar
    says. Lists of plain ints, strings or dates (dynamic pruning sends thousands) convert in one
    call."""
    kind = plain_kind(type_)
    target = arrow_type(type_)
    if kind is not None and target is not None and all(type(v) is kind for v in values):
        try:
            return pa.array(values, type=target)
        except (pa.ArrowInvalid, OverflowError):
            pass  # out of the type's range: each value says how, below
    return pa.array([literal_scalar(v, type_).as_py() for v in values], type=target)


def _fits_kind(value: Any, type_: str) -> bool:
    """Whether a Python value is of the kind the column's Arrow scalar takes without a conversion."""
    if type_ in INTEGER_TYPES:
        return isinstance(value, int)
    if type_ in ("float", "double"):
        return isinstance(value, float)
    if type_ == "string":
        return isinstance(value, str)
    if type_ == "date":
        return isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    if type_ in TIMESTAMP_TYPES:
        return isinstance(value, dt.datetime)
    return True


def _decimal_at_scale(value: Any, scale: int) -> Decimal:
    """The literal as a decimal of the column's scale, or Mismatch if that would round it."""
    if isinstance(value, float):
        raise Mismatch
    d = Decimal(value)
    if not d.is_finite():
        raise Mismatch
    with localcontext() as ctx:
        ctx.prec = 80  # decimal(38, s) values exceed the default 28 digits
        scaled = d.quantize(Decimal(1).scaleb(-scale))
    if scaled != d:
        raise Mismatch
    return scaled
