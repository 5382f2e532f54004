"""skiplake.layout.bucketing against Spark itself: hash() and pmod(hash(), n) row by row.

One wide DataFrame holds a column of every hashable type (edge values first, then random values,
NULLs sprinkled in); Spark computes hash() and pmod(hash(), n) of single columns and of several
column combinations, and the same rows, via df.toArrow(), go through spark_hash/bucket_ids.
"""
from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from skiplake.layout.bucketing import bucket_ids, bucket_of, spark_hash

pytestmark = pytest.mark.spark

ROWS = 2500
BUCKETS = (1, 7, 64)
UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1)


def _ints(bits: int) -> Callable[[random.Random], int]:
    return lambda r: r.randrange(-(1 << (bits - 1)), 1 << (bits - 1))


def _int_edges(bits: int) -> list[int]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return [0, 1, -1, lo, hi, lo + 1, hi - 1, 127, -128, 255, 256]


def _float(r: random.Random) -> float:
    kind = r.random()
    if kind < 0.5:
        return r.uniform(-1e6, 1e6)
    if kind < 0.8:
        return float(r.randrange(-1000, 1000))
    return r.choice([1.0, -1.0]) * 10 ** r.uniform(-30, 30)


FLOAT_EDGES = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1.0, -1.0, 0.1, 1.5,
               3.4028234663852886e38, 1.401298464324817e-45, 1.1754943508222875e-38]
DOUBLE_EDGES = FLOAT_EDGES + [1.7976931348623157e308, 5e-324, 2.2250738585072014e-308]


def _unscaled(unscaled: int, scale: int) -> Decimal:
    # From a string: exact, where Decimal arithmetic would round to the context's 28 digits.
    return Decimal(f"{unscaled}e-{scale}")


def _decimal(precision: int, scale: int) -> Callable[[random.Random], Decimal]:
    def gen(r: random.Random) -> Decimal:
        digits = r.randint(1, precision)
        unscaled = r.randrange(-(10 ** digits) + 1, 10 ** digits)
        return _unscaled(unscaled, scale)
    return gen


def _decimal_edges(precision: int, scale: int) -> list[Decimal]:
    top = 10 ** precision - 1
    unscaled = [0, 1, -1, top, -top, top // 2]
    # Where BigInteger.toByteArray() gains a byte: +-2**(8k-1) and their neighbours.
    for k in range(1, 17):
        for v in (1 << (8 * k - 1), -(1 << (8 * k - 1))):
            unscaled += [u for u in (v - 1, v, v + 1) if -top <= u <= top]
    return [_unscaled(u, scale) for u in unscaled]


_ALPHABET = "abcXYZ09 _-éüß日本語€😀\u00ff\u0080"


def _string(r: random.Random) -> str:
    n = r.choice([r.randint(0, 12), r.randint(0, 40), r.randint(100, 600)] if r.random() < 0.05
                 else [r.randint(0, 12), r.randint(0, 40)])
    return "".join(r.choice(_ALPHABET) for _ in range(n))


STRING_EDGES = ["", "a", "ab", "abc", "abcd", "abcde", "é", "aé", "aaé", "aaaé", "ÿ", "€", "😀", "a😀",
                "日本語", "\u0080", "x" * 1000, "y" * 1001 + "é", "\x00", "\x00\x00\x00\x00\x00"]


def _binary(r: random.Random) -> bytes:
    return r.randbytes(r.choice([r.randint(0, 9), r.randint(0, 40), r.randint(0, 300)]))


BINARY_EDGES = [b"", b"\x80", b"\xff", b"\x7f", b"\xff\xff\xff", b"\x00\x80\xff\x7f", b"\x80\x81\x82\x83\x84",
                bytes(range(256))]


def _date(r: random.Random) -> dt.date:
    return dt.date(1970, 1, 1) + dt.timedelta(days=r.randint(-30000, 30000))


DATE_EDGES = [dt.date(1970, 1, 1), dt.date(1969, 12, 31), dt.date(1, 1, 1), dt.date(9999, 12, 31),
              dt.date(1582, 10, 15), dt.date(2024, 2, 29)]


def _ntz(r: random.Random) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=r.randint(-2 * 10**15, 2 * 10**15))


NTZ_EDGES = [EPOCH, EPOCH - dt.timedelta(microseconds=1), EPOCH + dt.timedelta(microseconds=1),
             dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
             dt.datetime(2038, 1, 19, 3, 14, 8), dt.datetime(1900, 1, 1, 12)]

# name -> (Delta type, Spark type, edge values, random value generator)
COLUMNS: dict[str, tuple[str, T.DataType, list[Any], Callable[[random.Random], Any]]] = {
    "c_boolean": ("boolean", T.BooleanType(), [True, False], lambda r: r.random() < 0.5),
    "c_byte": ("byte", T.ByteType(), _int_edges(8)[:9], _ints(8)),
    "c_short": ("short", T.ShortType(), _int_edges(16), _ints(16)),
    "c_integer": ("integer", T.IntegerType(), _int_edges(32), _ints(32)),
    "c_long": ("long", T.LongType(), _int_edges(64) + [1 << 32, -(1 << 32), (1 << 31)], _ints(64)),
    "c_float": ("float", T.FloatType(), FLOAT_EDGES, _float),
    "c_double": ("double", T.DoubleType(), DOUBLE_EDGES, _float),
    "c_date": ("date", T.DateType(), DATE_EDGES, _date),
    "c_timestamp": ("timestamp", T.TimestampType(), [t.replace(tzinfo=UTC) for t in NTZ_EDGES],
                    lambda r: _ntz(r).replace(tzinfo=UTC)),
    "c_timestamp_ntz": ("timestamp_ntz", T.TimestampNTZType(), NTZ_EDGES, _ntz),
    "c_string": ("string", T.StringType(), STRING_EDGES, _string),
    "c_binary": ("binary", T.BinaryType(), BINARY_EDGES, _binary),
    "c_dec9": ("decimal(9,2)", T.DecimalType(9, 2), _decimal_edges(9, 2), _decimal(9, 2)),
    "c_dec18": ("decimal(18,0)", T.DecimalType(18, 0), _decimal_edges(18, 0), _decimal(18, 0)),
    "c_dec38": ("decimal(38,10)", T.DecimalType(38, 10), _decimal_edges(38, 10), _decimal(38, 10)),
    "c_dec20": ("decimal(20,0)", T.DecimalType(20, 0), _decimal_edges(20, 0), _decimal(20, 0)),
}

COMBINATIONS = [
    ["c_integer", "c_string"],
    ["c_string", "c_integer"],
    ["c_long", "c_date", "c_boolean"],
    ["c_string", "c_binary"],
    ["c_dec38", "c_timestamp", "c_binary", "c_double"],
    ["c_byte", "c_short", "c_float", "c_timestamp_ntz", "c_dec9"],
    ["c_dec18", "c_dec20", "c_string"],
    list(COLUMNS),
]


ARROW_INPUT = {
    "boolean": pa.bool_(), "byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "long": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "date": pa.date32(), "timestamp": pa.timestamp("us", "UTC"),
    "timestamp_ntz": pa.timestamp("us"), "string": pa.string(), "binary": pa.binary(),
}


def _rows() -> list[tuple[Any, ...]]:
    r = random.Random(20240601)
    columns = []
    for _, _, edges, gen in COLUMNS.values():
        values = list(edges) + [None] + [gen(r) for _ in range(ROWS - len(edges) - 1)]
        # NULLs in about 5% of the random rows, placed per column so combinations mix them.
        values = [None if i > len(edges) and r.random() < 0.05 else v for i, v in enumerate(values)]
        columns.append(values)
    return list(zip(*columns))


@pytest.fixture(scope="module")
def hashed(spark):
    """(Arrow table of the values, Arrow table of Spark's results) for the same rows."""
    schema = T.StructType([T.StructField("id", T.IntegerType(), False)] +
                          [T.StructField(name, st, True) for name, (_, st, _, _) in COLUMNS.items()])
    rows = _rows()
    arrays = [pa.array(range(len(rows)), pa.int32())]
    for (type_, st, _, _), values in zip(COLUMNS.values(), zip(*rows)):
        arrays.append(pa.array(values, ARROW_INPUT.get(type_) or pa.decimal128(st.precision, st.scale)))
    # Handed over as Arrow (a JVM-side conversion): Python rows would start Python workers, seconds
    # more on a busy machine. The explicit schema keeps timestamp_ntz apart from timestamp.
    df = spark.createDataFrame(pa.table(arrays, names=["id", *COLUMNS]), schema=schema)
    exprs = ["id"] + list(COLUMNS)
    for key, cols in _cases():
        h = f"hash({', '.join(cols)})"
        exprs.append(f"{h} AS `h:{key}`")
        exprs += [f"pmod({h}, {n}) AS `b{n}:{key}`" for n in BUCKETS]
    # One Spark job computes every hash; the values and Spark's answers arrive in the same rows.
    return df.selectExpr(*exprs).toArrow().sort_by("id")


def _cases() -> list[tuple[str, list[str]]]:
    return [(name, [name]) for name in COLUMNS] + [("+".join(c), c) for c in COMBINATIONS]


@pytest.mark.parametrize("key, cols", _cases(), ids=[k for k, _ in _cases()])
def test_hash_and_buckets_match_spark(hashed, key: str, cols: list[str]) -> None:
    arrays = [hashed.column(c) for c in cols]
    types = [COLUMNS[c][0] for c in cols]
    expected = hashed.column(f"h:{key}").to_numpy()
    got = spark_hash(arrays, types)
    bad = np.flatnonzero(got != expected)
    assert not len(bad), (f"{len(bad)} rows differ, first: row {bad[0]} "
                          f"{[hashed.column(c)[int(bad[0])] for c in cols]}: ours {got[bad[0]]}, "
                          f"Spark {expected[bad[0]]}")
    for n in BUCKETS:
        assert (bucket_ids(arrays, types, n) == hashed.column(f"b{n}:{key}").to_numpy()).all(), n


def test_rows_cover_what_they_should(hashed) -> None:
    # The edge values survived the trip through Spark (not e.g. -0.0 turned into 0.0 on the way).
    assert hashed.schema.field("c_timestamp").type == pa.timestamp("us", "UTC")
    assert hashed.schema.field("c_timestamp_ntz").type == pa.timestamp("us")
    floats = hashed.column("c_float").to_numpy(zero_copy_only=False)
    assert np.signbit(floats[1]) and floats[1] == 0 and np.isnan(floats[2])
    assert hashed.column("c_string")[16].as_py() == "x" * 1000
    for name in COLUMNS:
        assert 0 < hashed.column(name).null_count < ROWS // 10, name


SINGLE_VALUES = [
    (True, "boolean", "true"),
    (-7, "byte", "cast(-7 as tinyint)"),
    (-30000, "short", "cast(-30000 as smallint)"),
    (123456789, "integer", "123456789"),
    (-(1 << 40), "long", f"cast({-(1 << 40)} as bigint)"),
    (0.1, "float", "cast(0.1 as float)"),
    (-0.0, "double", "cast('-0.0' as double)"),
    (float("nan"), "double", "cast('NaN' as double)"),
    (Decimal("-12.34"), "decimal(9,2)", "cast('-12.34' as decimal(9,2))"),
    (Decimal("12345678901234.5678901234"), "decimal(38,10)", "cast('12345678901234.5678901234' as decimal(38,10))"),
    ("héllo wörld", "string", "'héllo wörld'"),
    (b"\x00\xfe\xff", "binary", "X'00FEFF'"),
    (dt.date(1999, 12, 31), "date", "date'1999-12-31'"),
    (dt.datetime(2021, 6, 30, 12, 34, 56, 789012), "timestamp", "timestamp'2021-06-30 12:34:56.789012'"),
    (dt.datetime(1950, 1, 2, 3, 4, 5, 6), "timestamp_ntz", "timestamp_ntz'1950-01-02 03:04:05.000006'"),
    (None, "string", "cast(null as string)"),
]


def test_bucket_of_matches_spark(spark) -> None:
    # The session time zone is UTC, so the timestamp literals are UTC, as bucket_of's are.
    exprs = [f"pmod(hash({sql}), {n})" for _, _, sql in SINGLE_VALUES for n in BUCKETS]
    exprs.append("pmod(hash(123456789, 'héllo wörld', cast(null as int), date'1999-12-31'), 64)")
    spark_row = list(spark.sql("SELECT " + ", ".join(exprs)).collect()[0])
    ours = [bucket_of([v], [t], n) for v, t, _ in SINGLE_VALUES for n in BUCKETS]
    ours.append(bucket_of([123456789, "héllo wörld", None, dt.date(1999, 12, 31)],
                          ["integer", "string", "integer", "date"], 64))
    assert ours == spark_row
