"""Spark-exact hash bucketing without Spark: known vectors, a scalar reference, and properties."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from skiplake.errors import InvalidArgumentError
from skiplake.layout.bucketing import SEED, bucket_ids, bucket_of, spark_hash

# (Arrow array, Delta type, expected hash) — every expected value came from Spark 4.1's hash()
# (`spark.sql("select hash(1), hash(cast(1 as bigint)), hash('abc'), ...")`).
SPARK_VECTORS = [
    (pa.array([1], pa.int32()), "integer", -559580957),
    (pa.array([-2147483648], pa.int32()), "integer", 723455942),
    (pa.array([1], pa.int8()), "byte", -559580957),
    (pa.array([-1], pa.int16()), "short", -1604776387),
    (pa.array([1], pa.int64()), "long", -1712319331),
    (pa.array([-1], pa.int64()), "long", -939490007),
    (pa.array([9223372036854775807], pa.int64()), "long", -1604625029),
    (pa.array([True]), "boolean", -559580957),
    (pa.array([False]), "boolean", 933211791),
    (pa.array([1.5], pa.float32()), "float", -221251528),
    (pa.array([-0.0], pa.float32()), "float", 933211791),
    (pa.array([float("nan")], pa.float32()), "float", -349261430),
    (pa.array([float("-inf")], pa.float32()), "float", 427440766),
    (pa.array([1.5]), "double", 1290763749),
    (pa.array([-0.0]), "double", -1670924195),
    (pa.array([float("nan")]), "double", -1281358385),
    (pa.array([float("inf")]), "double", 833680482),
    (pa.array([dt.date(2020, 1, 1)]), "date", -725858435),
    (pa.array([dt.date(1969, 12, 31)]), "date", -1604776387),
    (pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("us")), "timestamp", -1486022740),
    (pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("us")), "timestamp_ntz", -1486022740),
    (pa.array([dt.datetime(1969, 12, 31, 23, 59, 59, 999999)], pa.timestamp("us", "UTC")), "timestamp",
     -939490007),
    (pa.array(["abc"]), "string", 1322437556),
    (pa.array([""]), "string", 142593372),
    (pa.array(["a"]), "string", 1485273170),
    (pa.array(["abcd"]), "string", -396302900),
    (pa.array(["abcde"]), "string", 814637928),
    (pa.array(["é"]), "string", 2119106806),
    (pa.array(["ÿ"]), "string", 1533202516),
    (pa.array(["日本語"]), "string", -1143049834),
    (pa.array([b"\x01\x02"]), "binary", 1964783052),
    (pa.array([b""]), "binary", 142593372),
    (pa.array([b"\xff"]), "binary", 1398487324),
    (pa.array([Decimal("1.50")], pa.decimal128(9, 2)), "decimal(9,2)", -2056712946),
    (pa.array([Decimal(123456789012345678)], pa.decimal128(18, 0)), "decimal(18,0)", 367821349),
    (pa.array([Decimal("-1.5")], pa.decimal128(38, 10)), "decimal(38,10)", 1831729871),
    (pa.array([Decimal(0)], pa.decimal128(38, 10)), "decimal(38,10)", -783713497),
    (pa.array([Decimal(128)], pa.decimal128(38, 0)), "decimal(38,0)", -544401882),
    (pa.array([Decimal(-128)], pa.decimal128(38, 0)), "decimal(38,0)", 775851899),
    (pa.array([Decimal(-129)], pa.decimal128(38, 0)), "decimal(38,0)", -771458971),
    (pa.array([Decimal("9" * 38)], pa.decimal128(38, 0)), "decimal(38,0)", -817514053),
    (pa.array([Decimal("-" + "9" * 38)], pa.decimal128(38, 0)), "decimal(38,0)", 1400911110),
    (pa.array([None], pa.int32()), "integer", 42),
]


@pytest.mark.parametrize("array, type_, expected", SPARK_VECTORS,
                         ids=[f"{t}-{a[0]}" for a, t, _ in SPARK_VECTORS])
def test_spark_vectors(array: pa.Array, type_: str, expected: int) -> None:
    assert spark_hash([array], [type_]).tolist() == [expected]


def test_spark_multi_column_vectors() -> None:
    # From Spark 4.1: hash(1, 'abc'), hash(1, 2, 3), hash('a', NULL, 'b'), hash(int 1, bigint 1).
    assert spark_hash([pa.array([1], pa.int32()), pa.array(["abc"])], ["integer", "string"]).tolist() \
        == [-1267584506]
    assert spark_hash([pa.array([x], pa.int32()) for x in (1, 2, 3)], ["integer"] * 3).tolist() == [-912918097]
    cols = [pa.array(["a"]), pa.array([None], pa.string()), pa.array(["b"])]
    assert spark_hash(cols, ["string"] * 3).tolist() == [190734147]
    assert bucket_ids(cols, ["string"] * 3, 64).tolist() == [3]
    assert spark_hash([pa.array([1], pa.int32()), pa.array([1], pa.int64())], ["integer", "long"]).tolist() \
        == [807925325]
    # hash(NULL, 1) and hash(1, NULL) are hash(1).
    assert spark_hash([pa.array([None], pa.int32()), pa.array([1], pa.int32())], ["integer"] * 2).tolist() \
        == [-559580957]


def test_spark_pmod_vectors() -> None:
    # From Spark 4.1: pmod(hash(1), 7) = 2, pmod(hash(1), 64) = 35, pmod(hash('abc'), 7) = 6.
    assert bucket_ids([pa.array([1], pa.int32())], ["integer"], 7).tolist() == [2]
    assert bucket_ids([pa.array([1], pa.int32())], ["integer"], 64).tolist() == [35]
    assert bucket_ids([pa.array(["abc"])], ["string"], 7).tolist() == [6]
    assert bucket_of([1], ["integer"], 64) == 35
    assert bucket_of(["abc"], ["string"], 7) == 6


# ---------------------------------------------------------------- a scalar reference for byte strings

M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & M


def _mix_k1(k: int) -> int:
    return (_rotl((k * 0xCC9E2D51) & M, 15) * 0x1B873593) & M


def _mix_h1(h: int, k: int) -> int:
    return (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & M


def _fmix(h: int, n: int) -> int:
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M
    return h ^ (h >> 16)


def ref_hash_bytes(b: bytes, seed: int = SEED) -> int:
    """Spark's Murmur3_x86_32.hashUnsafeBytes, one row at a time, as the spec reads."""
    h = seed
    body = len(b) - len(b) % 4
    for i in range(0, body, 4):
        h = _mix_h1(h, _mix_k1(int.from_bytes(b[i:i + 4], "little")))
    for byte in b[body:]:
        h = _mix_h1(h, _mix_k1((byte - 256 if byte > 127 else byte) & M))
    h = _fmix(h, len(b))
    return h - (1 << 32) if h >= 1 << 31 else h


def test_bytes_match_reference() -> None:
    rng = np.random.default_rng(1)
    values = [rng.bytes(int(n)) for n in rng.integers(0, 41, 2000)]
    # A few long ones so the last words go through the Python loop for the last rows.
    values += [rng.bytes(int(n)) for n in (100, 1000, 1001, 1002, 4096, 333, 64, 65, 66, 67, 68)]
    got = spark_hash([pa.array(values, pa.binary())], ["binary"]).tolist()
    assert got == [ref_hash_bytes(v) for v in values]


def test_string_layouts_agree() -> None:
    values = ["", "a", "ab", "abc", "abcd", "héllo wörld", "日本語テキスト", None, "x" * 37]
    expected = spark_hash([pa.array(values)], ["string"]).tolist()
    assert expected[:-1] != [SEED] * 8
    encoded = [None if v is None else v.encode() for v in values]
    for t in (pa.large_string(), pa.string_view()):
        assert spark_hash([pa.array(values, t)], ["string"]).tolist() == expected
    for t in (pa.binary(), pa.large_binary(), pa.binary_view()):
        assert spark_hash([pa.array(encoded, t)], ["string"]).tolist() == expected
        assert spark_hash([pa.array(encoded, t)], ["binary"]).tolist() == expected
    assert spark_hash([pa.array(values).dictionary_encode()], ["string"]).tolist() == expected


# ---------------------------------------------------------------- properties


def test_pmod_is_nonnegative() -> None:
    rng = np.random.default_rng(2)
    col = pa.array(rng.integers(-2**31, 2**31, 10_000, dtype=np.int64).astype(np.int32))
    h = spark_hash([col], ["integer"]).astype(np.int64)
    assert (h < 0).any()
    for n in (1, 2, 7, 64, 100_000):
        b = bucket_ids([col], ["integer"], n)
        assert b.dtype == np.int32
        assert ((b >= 0) & (b < n)).all()
        assert (b == np.mod(h, n)).all()
    assert (bucket_ids([col], ["integer"], 1) == 0).all()


def test_null_keeps_seed() -> None:
    for t, at in [("integer", pa.int32()), ("string", pa.string()), ("double", pa.float64()),
                  ("decimal(38,2)", pa.decimal128(38, 2)), ("boolean", pa.bool_())]:
        assert spark_hash([pa.array([None, None], at)], [t]).tolist() == [SEED, SEED]
    assert spark_hash([pa.nulls(3)], ["long"]).tolist() == [SEED] * 3
    assert bucket_of([None], ["string"], 100) == SEED
    a, b = pa.array([1, None, 3], pa.int64()), pa.array(["x", "y", None])
    both = spark_hash([a, b], ["long", "string"])
    assert both[1] == spark_hash([pa.array(["y"])], ["string"])[0]
    assert both[2] == spark_hash([pa.array([3], pa.int64())], ["long"])[0]


def test_chaining_uses_previous_hash_as_seed() -> None:
    a = pa.array([1, 2, 3], pa.int32())
    b = pa.array(["p", "q", "r"])
    one = spark_hash([a], ["integer"]).view(np.uint32)
    two = spark_hash([a, b], ["integer", "string"])
    assert two.tolist() == [ref_hash_bytes(s.encode(), int(h)) for s, h in zip(["p", "q", "r"], one)]
    assert two.tolist() != spark_hash([b, a], ["string", "integer"]).tolist()


@pytest.mark.parametrize("type_, array", [
    ("integer", pa.array(list(range(-50, 50)) + [None] * 5, pa.int32())),
    ("long", pa.array([i * 7919 ** 3 for i in range(-50, 50)] + [None], pa.int64())),
    ("boolean", pa.array([True, False, None] * 30)),
    ("double", pa.array([i / 3 for i in range(100)] + [None])),
    ("string", pa.array([("s" * (i % 13)) + str(i) for i in range(100)] + [None])),
    ("binary", pa.array([bytes(range(i % 17)) for i in range(100)] + [None])),
    ("decimal(9,2)", pa.array([Decimal(i) / 4 for i in range(-50, 50)] + [None], pa.decimal128(9, 2))),
    ("decimal(38,10)", pa.array([Decimal(i) ** 5 * 7919 + Decimal(i) / 8 for i in range(-50, 50)] + [None],
                                pa.decimal128(38, 10))),
    ("timestamp", pa.array([dt.datetime(2000, 1, 1) + dt.timedelta(hours=i) for i in range(100)],
                           pa.timestamp("us"))),
])
def test_sliced_and_chunked_equal_whole(type_: str, array: pa.Array) -> None:
    whole = spark_hash([array], [type_])
    for start, stop in [(0, 10), (3, 50), (17, len(array)), (len(array) - 1, len(array))]:
        assert spark_hash([array.slice(start, stop - start)], [type_]).tolist() == whole[start:stop].tolist()
    chunked = pa.chunked_array([array.slice(0, 7), array.slice(7, 0), array.slice(7, 40), array.slice(47)])
    assert spark_hash([chunked], [type_]).tolist() == whole.tolist()
    # Differently chunked columns side by side.
    other = pa.array(range(len(array)), pa.int64())
    both = spark_hash([array, other], [type_, "long"])
    other_chunked = pa.chunked_array([other.slice(0, 30), other.slice(30)])
    assert spark_hash([chunked, other_chunked], [type_, "long"]).tolist() == both.tolist()
    assert spark_hash([pa.chunked_array([], array.type)], [type_]).tolist() == []


def test_input_widths_and_units() -> None:
    ints = [1, -5, 127, None]
    expected = spark_hash([pa.array(ints, pa.int32())], ["integer"]).tolist()
    for t in (pa.int8(), pa.int16(), pa.int64()):
        assert spark_hash([pa.array(ints, t)], ["integer"]).tolist() == expected
    ts = [dt.datetime(1960, 5, 6, 7, 8, 9, 123456), dt.datetime(2030, 1, 1)]
    expected = spark_hash([pa.array(ts, pa.timestamp("us"))], ["timestamp"]).tolist()
    assert spark_hash([pa.array(ts, pa.timestamp("ns", "UTC"))], ["timestamp"]).tolist() == expected
    assert spark_hash([pa.array([t.replace(microsecond=0) for t in ts], pa.timestamp("s"))], ["timestamp"]) \
        .tolist() == spark_hash([pa.array([t.replace(microsecond=0) for t in ts], pa.timestamp("us"))],
                                ["timestamp"]).tolist()
    days = [dt.date(1900, 1, 1), dt.date(2024, 2, 29)]
    assert spark_hash([pa.array(days, pa.date64())], ["date"]).tolist() == \
        spark_hash([pa.array(days, pa.date32())], ["date"]).tolist()
    # A decimal column stored with another precision/scale hashes as the Delta type says.
    d = [Decimal("1.5"), Decimal("-2.25")]
    assert spark_hash([pa.array(d, pa.decimal128(20, 3))], ["decimal(9,2)"]).tolist() == \
        spark_hash([pa.array(d, pa.decimal128(9, 2))], ["decimal(9,2)"]).tolist()


def test_bucket_of_matches_bucket_ids() -> None:
    rows = [
        ([7], ["byte"]), ([-300], ["short"]), ([123456], ["integer"]), ([2**40], ["long"]),
        ([0.1], ["float"]), ([0.1], ["double"]), ([Decimal("12.34")], ["decimal(9,2)"]),
        ([Decimal("-1e20")], ["decimal(38,0)"]), (["héllo"], ["string"]), ([b"\x00\xff"], ["binary"]),
        ([True], ["boolean"]), ([dt.date(2021, 3, 4)], ["date"]),
        ([dt.datetime(2021, 3, 4, 5, 6, 7, 8)], ["timestamp"]),
        ([dt.datetime(2021, 3, 4, 5, 6, 7, 8)], ["timestamp_ntz"]),
        ([1, "a", None, Decimal("3.5")], ["integer", "string", "long", "decimal(38,10)"]),
    ]
    for values, types in rows:
        arrays = []
        for v, t in zip(values, types):
            at = {"byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "long": pa.int64(),
                  "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "binary": pa.binary(),
                  "boolean": pa.bool_(), "date": pa.date32(), "timestamp": pa.timestamp("us"),
                  "timestamp_ntz": pa.timestamp("us"), "decimal(9,2)": pa.decimal128(9, 2),
                  "decimal(38,0)": pa.decimal128(38, 0), "decimal(38,10)": pa.decimal128(38, 10)}[t]
            arrays.append(pa.array([v], at))
        for n in (1, 7, 64):
            assert bucket_of(values, types, n) == int(bucket_ids(arrays, types, n)[0]), (values, types)
    aware = dt.datetime(2021, 3, 4, 7, 6, 7, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert bucket_of([aware], ["timestamp"], 64) == bucket_of([dt.datetime(2021, 3, 4, 5, 6, 7)], ["timestamp"], 64)


def test_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="array<integer>"):
        spark_hash([pa.array([[1]])], [{"type": "array", "elementType": "integer", "containsNull": True}])
    with pytest.raises(InvalidArgumentError, match="type struct"):
        bucket_of([1], [{"type": "struct", "fields": []}], 4)
    with pytest.raises(InvalidArgumentError, match="variant"):
        bucket_ids([pa.array([1])], ["variant"], 4)
    with pytest.raises(InvalidArgumentError, match="num_buckets"):
        bucket_ids([pa.array([1])], ["long"], 0)
    with pytest.raises(InvalidArgumentError, match="num_buckets"):
        bucket_of([1], ["long"], True)
    with pytest.raises(InvalidArgumentError, match="lengths"):
        spark_hash([pa.array([1]), pa.array([1, 2])], ["long", "long"])
    with pytest.raises(InvalidArgumentError, match="not a value of type byte"):
        bucket_of([300], ["byte"], 4)
    with pytest.raises(InvalidArgumentError, match="not a value of type integer"):
        bucket_of(["1"], ["integer"], 4)
    with pytest.raises(InvalidArgumentError, match="not a value of type decimal"):
        bucket_of([Decimal("1.234")], ["decimal(9,2)"], 4)
    with pytest.raises(InvalidArgumentError, match="as Delta type long"):
        spark_hash([pa.array(["x"])], ["long"])
    with pytest.raises(InvalidArgumentError, match="as Delta type date"):
        spark_hash([pa.array([1.5])], ["date"])
    with pytest.raises(InvalidArgumentError, match="as Delta type integer"):
        spark_hash([pa.array([1.5])], ["integer"])
