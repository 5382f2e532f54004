"""The types of partition columns found in folder names: Spark's inference, and value checks.

When a Parquet directory is converted with partition columns named but not typed, each column
gets the type Spark's partition discovery infers (`spark.sql.sources.partitionColumnTypeInference
.enabled`, on by default), so the table has the columns `spark.read.parquet(dir)` shows in a
default Spark session. Each folder value is tried, in Spark's order, as an integer, a long, a
decimal without fraction digits (past a long's range), a double, a timestamp
(`yyyy-MM-dd HH:mm:ss[.fraction]`), a date (`yyyy-MM-dd`), else a string;
`__HIVE_DEFAULT_PARTITION__` (NULL) takes any type. The values of one column then meet at the
wider type by Spark's table for partition columns (int and long widen to long or a decimal,
int and double to double, date and timestamp to timestamp, and every other mix to string).

Values whose type is given are checked instead: each must be a value of that type, as Delta's
CONVERT TO DELTA checks that a folder's value casts to its column's type.
"""
from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal, InvalidOperation, localcontext
from typing import Iterable

from skiplake.layout.partitioning import HIVE_DEFAULT_PARTITION, unescape_path_name
from skiplake.log.schema import INTEGER_TYPES, is_decimal
from skiplake.log.values import format_partition_value, parse_partition_value, parse_timestamp

MAX_PRECISION = 38

_INT = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIMESTAMP = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?")
_RANGES = {"byte": 8, "short": 16, "integer": 32, "long": 64}


def _fits_bits(text: str, bits: int) -> bool:
    if not _INT.fullmatch(text):
        return False
    value = int(text)
    return -(1 << (bits - 1)) <= value < (1 << (bits - 1))


def _integral_decimal(text: str) -> str | None:
    """decimal(p,0) for a number Java's BigDecimal reads with no digits after the point, or None."""
    if not _DECIMAL.fullmatch(text):
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int) or exponent < 0:
        return None  # a fraction digit (1.1, 1.0): Spark infers a double instead
    precision = len(str(abs(int(value))))
    return f"decimal({precision},0)" if precision <= MAX_PRECISION else None


def _is_date(text: str) -> bool:
    m = _DATE.fullmatch(text)
    if not m:
        return False
    try:
        dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        return True
    except ValueError:
        return False


def _is_timestamp(text: str) -> bool:
    m = _TIMESTAMP.fullmatch(text)
    if not m:
        return False
    try:
        year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
        dt.datetime(year, month, day, hour, minute, second)
        return True
    except ValueError:
        return False


def infer_value_type(raw: str, timestamp_type: str = "timestamp") -> str | None:
    """The type Spark infers for one folder value as written (escaped); None for the NULL folder.
    `timestamp_type` is the session's default timestamp type (spark.sql.timestampType)."""
    if raw == HIVE_DEFAULT_PARTITION:
        return None
    if _fits_bits(raw, 32):
        return "integer"
    if _fits_bits(raw, 64):
        return "long"
    decimal = _integral_decimal(raw)
    if decimal is not None:
        return decimal
    if _DOUBLE.fullmatch(raw.strip()):
        return "double"
    if _is_timestamp(unescape_path_name(raw)):
        return timestamp_type
    if _is_date(raw):
        return "date"
    return "string"


def _decimal_parts(type_: str) -> tuple[int, int]:
    inner = type_[type_.index("(") + 1:-1]
    p, s = inner.split(",")
    return int(p), int(s)


# The decimal each integral type widens to (Spark's DecimalType.forType).
_AS_DECIMAL = {"integer": (10, 0), "long": (20, 0)}


def wider_type(a: str | None, b: str | None) -> str | None:
    """Spark's wider type of two inferred partition types (findWiderTypeForPartitionColumn)."""
    if a is None or a == b:
        return b
    if b is None:
        return a
    numeric = {"integer", "long"}
    if {a, b} == numeric:
        return "long"
    if (a in _AS_DECIMAL or is_decimal(a)) and (b in _AS_DECIMAL or is_decimal(b)):
        # Integral types and decimals of scale 0 meet at the decimal holding the most digits.
        pa_, _ = _AS_DECIMAL.get(a) or _decimal_parts(a)
        pb, _ = _AS_DECIMAL.get(b) or _decimal_parts(b)
        return f"decimal({min(MAX_PRECISION, max(pa_, pb))},0)"
    if {a, b} == {"integer", "double"}:
        return "double"
    times = {"date", "timestamp", "timestamp_ntz"}
    if a in times and b in times and "date" in (a, b):
        return a if a != "date" else b
    return "string"


def infer_column_type(raw_values: Iterable[str], timestamp_type: str = "timestamp") -> str:
    """The type Spark gives a partition column from all its folder values (escaped); a column of
    NULL folders only is a string column."""
    out: str | None = None
    for raw in raw_values:
        out = wider_type(out, infer_value_type(raw, timestamp_type))
    return out or "string"


def value_fits(value: str | None, type_: str) -> bool:
    """Whether a folder's value (unescaped; None for NULL) is a value of `type_` that Spark's
    reader and skiplake's planner both read as the same value (no rounding, no wrap-around, no
    NULL from a failed cast)."""
    if value is None or value == "" or type_ == "string":
        return True
    if type_ in INTEGER_TYPES:
        return _fits_bits(value, _RANGES[type_])
    if type_ in ("float", "double"):
        return bool(_DOUBLE.fullmatch(value))
    if is_decimal(type_):
        if not _DECIMAL.fullmatch(value):
            return False
        precision, scale = _decimal_parts(type_)
        with localcontext() as ctx:
            ctx.prec = 2 * MAX_PRECISION
            d = Decimal(value)
            return d == d.quantize(Decimal(1).scaleb(-scale)) and abs(d) < Decimal(10) ** (precision - scale)
    if type_ == "boolean":
        return value.lower() in ("true", "false")
    if type_ == "date":
        return _is_date(value[:10]) and (len(value) == 10 or value[10] in " T")
    if type_ in ("timestamp", "timestamp_ntz"):
        return _is_timestamp(value) or _is_date(value) or _iso_timestamp(value)
    return False


def canonical_value(value: str | None, type_: str) -> str | None:
    """A folder's value of `type_` (one value_fits accepts) as a partition value of the log: cast
    to the type and spelled the one way every Delta reader parses ('+5' is '5', 'TRUE' is 'true',
    a date '2024-01-01 10:00' is '2024-01-01'), as Delta's CONVERT casts each folder's value. A
    timestamp with an offset names an instant: it is kept in UTC, ISO-8601 with 'Z'; one without
    stays a wall-clock time, which readers take in the session's time zone as Spark reads the folder."""
    if value is None or type_ == "string":
        return value
    if value == "":
        return None
    if is_decimal(type_):
        _, scale = _decimal_parts(type_)
        return format(Decimal(value).quantize(Decimal(1).scaleb(-scale)), "f")
    if type_ in ("float", "double"):
        number = float(value)
        if math.isnan(number):
            return "NaN"  # Java's spelling, which Spark's and delta-rs's parsers both read
        if math.isinf(number):
            return "Infinity" if number > 0 else "-Infinity"
        return repr(number)
    if type_ == "timestamp_ntz":
        return format_partition_value(parse_timestamp(value, keep_wall_clock=True), type_)
    if type_ == "timestamp" and _offset(value):
        return parse_timestamp(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return format_partition_value(parse_partition_value(value, type_), type_)


def _offset(text: str) -> bool:
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).tzinfo is not None
    except ValueError:
        return False


def _iso_timestamp(text: str) -> bool:
    try:
        dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False
