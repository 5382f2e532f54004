"""Typed Python values from the strings the log stores: partition values and stats, by Delta type.

Values come out as int, float, Decimal, str, bool, datetime.date or naive-UTC datetime, so the
evaluators can compare them with the literals of a predicate.
"""
from __future__ import annotations

import datetime as dt
import math
import struct
from decimal import Decimal
from typing import Any

from skiplake.errors import CorruptPartitionValueError
from skiplake.log.schema import INTEGER_TYPES, is_decimal, is_primitive

TIMESTAMP_TYPES = ("timestamp", "timestamp_ntz")


def parse_timestamp(text: str, keep_wall_clock: bool = False) -> dt.datetime:
    """Timestamps as Delta writes them: '2021-01-01 00:00:00[.ffffff]' or ISO-8601 with 'T' and 'Z'/offset.

    An offset converts the value to UTC, or with keep_wall_clock is dropped (TIMESTAMP_NTZ)."""
    t = text.strip().replace("T", " ")
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    value = dt.datetime.fromisoformat(t)
    if value.tzinfo is not None:
        value = value.replace(tzinfo=None) if keep_wall_clock else value.astimezone(
            dt.timezone.utc).replace(tzinfo=None)
    return value


def float32(value: float) -> float:
    """`value` as a FLOAT column holds it, widened back to a double: what Spark compares (0.1 is
    0.10000000149011612; past the float range, infinity)."""
    if not math.isfinite(value):
        return value
    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def parse_partition_value(text: str | None, type_: Any) -> Any:
    """A partition value string of the log to a typed value; None stays None. Text that is not
    of the type is a CorruptPartitionValueError."""
    # Delta (and Spark's Hive layout) store NULL and '' alike as a null partition value.
    if text is None or text == "" or not is_primitive(type_):
        return None if text in (None, "") else text
    try:
        return _typed_partition_value(text, type_)
    except (ValueError, ArithmeticError) as e:  # int(), float(), Decimal(), fromisoformat()
        raise CorruptPartitionValueError(text, str(type_), str(e) or type(e).__name__) from None


def _typed_partition_value(text: str, type_: Any) -> Any:
    if type_ == "string":
        return text
    if type_ in INTEGER_TYPES:
        return int(text)
    if type_ in ("float", "double"):
        return float32(float(text)) if type_ == "float" else float(text)
    if is_decimal(type_):
        return Decimal(text)
    if type_ == "boolean":
        return text.lower() == "true"
    if type_ == "date":
        return dt.date.fromisoformat(text[:10])
    if type_ in TIMESTAMP_TYPES:
        return parse_timestamp(text)
    return text


def format_partition_value(value: Any, type_: Any) -> str | None:
    """A typed value to the partition value string Delta writers store."""
    if value is None:
        return None
    if type_ == "boolean":
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float):
        return repr(value)
    return str(value)
