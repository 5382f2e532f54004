"""Spark-exact hash bucket ids, computed over Arrow arrays without Spark.

A row's bucket is `pmod(hash(c1, c2, ...), n)`: Spark's `Murmur3Hash` expression with seed 42,
which is also what `bucketBy` writes with. Matching Spark bit for bit is the point: files written
here must sit in the bucket Spark's bucketed scan and join expect, and planning must find the
one bucket an equality predicate can match.

Spark's hash (`Murmur3_x86_32` plus `HashExpression`):

* The columns are chained: the running seed starts at 42, each column's hash becomes the seed
  of the next, and a NULL leaves the running seed unchanged.
* boolean, byte, short, integer, date (days) hash as `hashInt`; long, timestamp and
  timestamp_ntz (microseconds) as `hashLong` (low word, then high word).
* float/double hash their IEEE bits, with -0.0 as 0.0 and every NaN as Java's canonical NaN.
* string/binary hash their bytes with `hashUnsafeBytes`: little-endian 4-byte words, then each
  remaining byte on its own, *sign-extended* (Spark's legacy tail, not standard Murmur3).
* decimal(p,s) hashes the unscaled value as `hashLong` when p <= 18, else the bytes of
  `BigInteger.toByteArray()` (minimal big-endian two's complement).

All of it is NumPy uint32 arithmetic over whole columns: multiplications wrap mod 2**32 just
like Java's int, so no per-row Python runs except for the last words of a few very long strings.
Every rule is checked against Spark itself in tests/test_bucketing_parity.py.
"""
from __future__ import annotations

import datetime as dt
import decimal
import re
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiplake.errors import InvalidArgumentError
from skiplake.log.schema import INTEGER_TYPES, is_decimal, type_name

__all__ = ["SEED", "spark_hash", "bucket_ids", "bucket_of"]

SEED = 42

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_N = np.uint32(0xE6546B64)
_F1 = np.uint32(0x85EBCA6B)
_F2 = np.uint32(0xC2B2AE35)
_FIVE = np.uint32(5)
# Java's Float.floatToIntBits / Double.doubleToLongBits map every NaN to these.
_FLOAT_NAN_BITS = np.uint32(0x7FC00000)
_DOUBLE_NAN_BITS = np.uint64(0x7FF8000000000000)
# Spark keeps decimals of up to 18 digits as an unscaled long (Decimal.MAX_LONG_DIGITS).
_MAX_LONG_DIGITS = 18
# Below this many strings still having words left, a Python loop beats NumPy's per-call cost.
_SCALAR_TAIL_ROWS = 8

_DECIMAL_RE = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_TIMESTAMP_TYPES = ("timestamp", "timestamp_ntz")
_INT_TYPES = ("byte", "short", "integer")
_SUPPORTED = ("boolean", "byte", "short", "integer", "long", "float", "double", "date",
              "timestamp", "timestamp_ntz", "string", "binary")


# ---------------------------------------------------------------- Murmur3_x86_32 on uint32 arrays
# The arrays are uint32 throughout, so *, + and << wrap mod 2**32 the way Java's int does; the
# errstate in spark_hash silences NumPy's overflow warnings for the scalar cases.


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k1(k: np.ndarray) -> np.ndarray:
    k = np.multiply(k, _C1, dtype=np.uint32)
    k = _rotl(k, 15)
    return np.multiply(k, _C2, dtype=np.uint32)


def _mix_h1(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    h = _rotl(h ^ k, 13)
    return np.add(np.multiply(h, _FIVE, dtype=np.uint32), _N, dtype=np.uint32)


def _fmix(h: np.ndarray, length: Any) -> np.ndarray:
    h = h ^ np.asarray(length, dtype=np.uint32)
    h = h ^ (h >> np.uint32(16))
    h = np.multiply(h, _F1, dtype=np.uint32)
    h = h ^ (h >> np.uint32(13))
    h = np.multiply(h, _F2, dtype=np.uint32)
    return h ^ (h >> np.uint32(16))


def _hash_int(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """hashInt of int32 values (any 32-bit pattern) with per-row seeds."""
    return _fmix(_mix_h1(seed, _mix_k1(values.view(np.uint32))), 4)


def _hash_long(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """hashLong of int64 values: the low 32 bits, then the high 32 bits."""
    u = values.view(np.uint64)
    low = (u & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    high = (u >> np.uint64(32)).astype(np.uint32)
    h = _mix_h1(seed, _mix_k1(low))
    h = _mix_h1(h, _mix_k1(high))
    return _fmix(h, 8)


def _scalar_mix(h: int, k: int) -> int:
    """mixK1 then mixH1 on Python ints, for the few rows left with many words."""
    k = (k * 0xCC9E2D51) & 0xFFFFFFFF
    k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
    k = (k * 0x1B873593) & 0xFFFFFFFF
    h ^= k
    h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
    return (h * 5 + 0xE6546B64) & 0xFFFFFFFF


def _hash_bytes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """Spark's hashUnsafeBytes of the byte strings data[starts[i] : starts[i] + lengths[i]].

    Loops over word positions, not rows: step j mixes the j-th 4-byte word of every string
    that has one, so the work is one NumPy pass per word of the longest string, each over only
    the strings still that long.
    """
    h = seed.copy()
    starts = starts.astype(np.int64, copy=False)
    lengths = lengths.astype(np.int64, copy=False)
    n_words = lengths >> 2
    max_words = int(n_words.max()) if len(n_words) else 0
    if max_words:
        # A uint32 at every byte offset (stride 1): one gather reads an unaligned little-endian
        # word, as Platform.getInt does on x86. Offset o is valid while o + 4 <= len(data),
        # which holds for every full word of a string inside data.
        words = np.ndarray(shape=(len(data) - 3,), dtype="<u4", buffer=data, strides=(1,))
        active = np.flatnonzero(n_words)
        pos = starts[active]
        j = 0
        while j < max_words:
            if len(active) <= _SCALAR_TAIL_ROWS:
                for r, p in zip(active.tolist(), pos.tolist()):
                    hr = int(h[r])
                    for word in np.frombuffer(data, "<u4", count=int(n_words[r]) - j, offset=p).tolist():
                        hr = _scalar_mix(hr, word)
                    h[r] = hr
                break
            h[active] = _mix_h1(h[active], _mix_k1(words[pos]))
            j += 1
            keep = n_words[active] > j
            if not keep.all():
                active = active[keep]
                pos = pos[keep]
            pos = pos + 4
    # Spark's tail: each byte after the last full word is mixed alone as a sign-extended int.
    tail = lengths & 3
    body = starts + (lengths - tail)
    for t in range(3):
        rows = np.flatnonzero(tail > t)
        if not len(rows):
            break
        byte = data[body[rows] + t].view(np.int8).astype(np.int32).view(np.uint32)
        h[rows] = _mix_h1(h[rows], _mix_k1(byte))
    return _fmix(h, lengths.astype(np.uint32))


# ---------------------------------------------------------------- Arrow arrays to hashable values


def _fixed(arr: pa.Array, dtype: Any) -> np.ndarray:
    """The value buffer of a fixed-width array as NumPy, zero-copy and honouring arr.offset.

    NULL slots hold arbitrary values; the caller masks them.
    """
    buf = arr.buffers()[1]
    return np.frombuffer(buf, dtype=dtype, count=len(arr), offset=arr.offset * np.dtype(dtype).itemsize)


def _like(arr: pa.Array, family: Any, target: pa.DataType) -> pa.Array:
    """`arr` itself if its Arrow type is of `family`, else cast to `target` (Arrow's safe cast,
    which refuses what would change a value)."""
    return arr if family(arr.type) else pc.cast(arr, target)


def _integers(arr: pa.Array, dtype: Any) -> np.ndarray:
    """Integer values of `arr` as `dtype` (int32/int64) whatever the integer width it comes in."""
    arr = _like(arr, pa.types.is_integer, pa.int64())
    return _fixed(arr, arr.type.to_pandas_dtype()).astype(dtype, copy=False)


def _epoch_micros(arr: pa.Array) -> np.ndarray:
    arr = _like(arr, pa.types.is_timestamp, pa.timestamp("us"))
    unit = arr.type.unit
    v = _fixed(arr, np.int64)
    if unit == "us":
        return v
    if unit == "ns":
        # Floor, as Spark's instantToMicros does: the nanos of a second are never negative.
        return np.floor_divide(v, 1000)
    return v * (1_000_000 if unit == "s" else 1000)


def _epoch_days(arr: pa.Array) -> np.ndarray:
    arr = _like(arr, pa.types.is_date, pa.date32())
    if pa.types.is_date32(arr.type):
        return _fixed(arr, np.int32)
    return np.floor_divide(_fixed(arr, np.int64), 86_400_000).astype(np.int32)  # date64: millis


def _byte_strings(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, starts, lengths) of a string/binary array, read from its Arrow buffers."""
    t = arr.type
    if not (pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t)
            or pa.types.is_large_binary(t)):
        # View, fixed-size and other layouts: one cast to the offsets layout.
        arr = pc.cast(arr, pa.large_binary())
        t = arr.type
    large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64 if large else np.int32, count=len(arr) + 1,
                            offset=arr.offset * (8 if large else 4))
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return data, offsets[:-1], np.diff(offsets)


def _decimal_units(arr: pa.Array, precision: int, scale: int) -> np.ndarray:
    """The 128-bit unscaled values as an (n, 2) uint64 array of (low, high) words."""
    want = pa.decimal128(precision, scale)
    if arr.type != want:
        arr = pc.cast(arr, want)
    return np.frombuffer(arr.buffers()[1], dtype=np.uint64, count=2 * len(arr),
                         offset=arr.offset * 16).reshape(-1, 2)


def _bit_length(x: np.ndarray) -> np.ndarray:
    """Bits needed for non-negative uint64 values (0 for 0), exact for all 64 bits."""
    out = np.zeros(x.shape, np.int64)
    for shift in (32, 16, 8, 4, 2, 1):
        big = x >= (np.uint64(1) << np.uint64(shift))
        out[big] += shift
        x = np.where(big, x >> np.uint64(shift), x)
    return out + (x > 0)


def _hash_big_decimal(units: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """hashUnsafeBytes of BigInteger.toByteArray() of each 128-bit unscaled value."""
    low, high = units[:, 0], units[:, 1]
    negative = (high >> np.uint64(63)) == 1
    # toByteArray's length is bitLength() // 8 + 1, bitLength not counting the sign bit:
    # the bit length of v for v >= 0 and of ~v for v < 0.
    mlow = np.where(negative, ~low, low)
    mhigh = np.where(negative, ~high, high)
    bits = np.where(mhigh != 0, 64 + _bit_length(mhigh), _bit_length(mlow))
    lengths = bits // 8 + 1
    # Big-endian 16-byte images; each row's bytes are the last `lengths` of its image.
    image = units.astype("<u8").view(np.uint8).reshape(-1, 16)[:, ::-1]
    data = np.ascontiguousarray(image).reshape(-1)
    starts = np.arange(len(units), dtype=np.int64) * 16 + (16 - lengths)
    return _hash_bytes(data, starts, lengths, seed)


def _parse_decimal(type_: str) -> tuple[int, int]:
    m = _DECIMAL_RE.match(type_)
    assert m
    return int(m.group(1)), int(m.group(2))


def is_hashable(type_: Any) -> bool:
    """Whether Spark-compatible bucketing can hash a column of this Delta type."""
    return isinstance(type_, str) and (type_ in _SUPPORTED or is_decimal(type_))


def _check_type(type_: Any) -> None:
    if is_hashable(type_):
        return
    shown = type_name(type_) if isinstance(type_, (str, dict)) else repr(type_)
    raise InvalidArgumentError(
        f"cannot hash a column of type {shown} into buckets: Spark-compatible bucketing supports "
        "boolean, byte, short, integer, long, float, double, decimal, date, timestamp, "
        "timestamp_ntz, string and binary columns")


def _hash_boolean(arr: pa.Array, seed: np.ndarray) -> np.ndarray:
    arr = _like(arr, pa.types.is_boolean, pa.bool_())
    return _hash_int(pc.fill_null(arr, False).to_numpy(zero_copy_only=False).astype(np.int32), seed)


def _hash_float(arr: pa.Array, seed: np.ndarray) -> np.ndarray:
    v = _fixed(arr if arr.type == pa.float32() else pc.cast(arr, pa.float32(), safe=False), np.float32)
    # -0.0 == 0.0, so this maps both zeros to +0.0 as Spark does before floatToIntBits.
    v = np.where(v == 0, np.float32(0), v)
    return _hash_int(np.where(np.isnan(v), _FLOAT_NAN_BITS, v.view(np.uint32)), seed)


def _hash_double(arr: pa.Array, seed: np.ndarray) -> np.ndarray:
    v = _fixed(arr if arr.type == pa.float64() else pc.cast(arr, pa.float64()), np.float64)
    v = np.where(v == 0, 0.0, v)
    return _hash_long(np.where(np.isnan(v), _DOUBLE_NAN_BITS, v.view(np.uint64)), seed)


def _hash_strings(arr: pa.Array, seed: np.ndarray) -> np.ndarray:
    data, starts, lengths = _byte_strings(arr)
    return _hash_bytes(data, starts, lengths, seed)


def _hash_decimal(arr: pa.Array, type_: str, seed: np.ndarray) -> np.ndarray:
    precision, scale = _parse_decimal(type_)
    units = _decimal_units(arr, precision, scale)
    if precision <= _MAX_LONG_DIGITS:
        return _hash_long(units[:, 0].copy(), seed)  # the unscaled value fits the low word
    return _hash_big_decimal(units, seed)


# Spark's hash of a column of each Delta type, given the running seeds (NULL slots masked after).
_HASHERS: dict[str, Any] = {
    "boolean": _hash_boolean,
    "byte": lambda arr, seed: _hash_int(_integers(arr, np.int32), seed),
    "short": lambda arr, seed: _hash_int(_integers(arr, np.int32), seed),
    "integer": lambda arr, seed: _hash_int(_integers(arr, np.int32), seed),
    "long": lambda arr, seed: _hash_long(_integers(arr, np.int64), seed),
    "date": lambda arr, seed: _hash_int(_epoch_days(arr), seed),
    "timestamp": lambda arr, seed: _hash_long(_epoch_micros(arr), seed),
    "timestamp_ntz": lambda arr, seed: _hash_long(_epoch_micros(arr), seed),
    "float": _hash_float,
    "double": _hash_double,
    "string": _hash_strings,
    "binary": _hash_strings,
}


def _hash_array(arr: pa.Array, type_: str, seed: np.ndarray) -> np.ndarray:
    """Spark's hash of every row of one column given the running seeds; NULL keeps its seed."""
    if len(arr) == 0:
        return seed
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if arr.null_count == len(arr):
        return seed
    hasher = _HASHERS.get(type_)
    h = hasher(arr, seed) if hasher is not None else _hash_decimal(arr, type_, seed)
    if arr.null_count:
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        h = np.where(valid, h, seed)
    return h


def _hash_column(column: pa.Array | pa.ChunkedArray, type_: str, seed: np.ndarray) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        # Chunk by chunk, each against its rows' seeds: no copy of the column into one array.
        out, at = [], 0
        for chunk in column.chunks:
            out.append(_hash_array(chunk, type_, seed[at:at + len(chunk)]))
            at += len(chunk)
        return np.concatenate(out) if out else seed
    return _hash_array(column, type_, seed)


# ---------------------------------------------------------------- public API


def spark_hash(columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[Any]) -> np.ndarray:
    """Spark's `hash(c1, c2, ...)` of every row, as int32."""
    if len(columns) != len(types):
        raise InvalidArgumentError(f"spark_hash got {len(columns)} columns but {len(types)} types")
    if not columns:
        raise InvalidArgumentError("spark_hash needs at least one column")
    for t in types:
        _check_type(t)
    n = len(columns[0])
    for c in columns:
        if len(c) != n:
            raise InvalidArgumentError(f"spark_hash got columns of different lengths ({n} and {len(c)})")
    seed = np.full(n, SEED, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for column, type_ in zip(columns, types):
            try:
                seed = _hash_column(column, type_, seed)
            except (TypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise InvalidArgumentError(
                    f"cannot hash an Arrow column of type {column.type} as Delta type {type_}: {e}") from e
    return seed.view(np.int32)


def bucket_ids(columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[Any],
               num_buckets: int) -> np.ndarray:
    """Spark's `pmod(hash(c1, c2, ...), num_buckets)` of every row, as int32 in [0, num_buckets)."""
    n: object = num_buckets   # as the caller passed it (typed or not): checked here, not trusted
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InvalidArgumentError(f"num_buckets must be a positive integer, not {num_buckets!r}")
    # NumPy's % takes the divisor's sign, so for n > 0 it is already pmod.
    return (spark_hash(columns, types).astype(np.int64) % int(num_buckets)).astype(np.int32)


def _arrow_type(type_: str) -> pa.DataType:
    """The Arrow type Spark's toArrow gives a Delta type (exact widths, unlike the stats types).

    Not `skiplake.expr.stats_table.arrow_type`: that one widens to comparison types (float to
    double, every integer to int64) and has no binary, and a float's hash depends on its 32 bits.
    """
    if is_decimal(type_):
        return pa.decimal128(*_parse_decimal(type_))
    return {
        "boolean": pa.bool_(), "byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(),
        "long": pa.int64(), "float": pa.float32(), "double": pa.float64(), "date": pa.date32(),
        "timestamp": pa.timestamp("us"), "timestamp_ntz": pa.timestamp("us"),
        "string": pa.string(), "binary": pa.binary(),
    }[type_]


def _literal(value: Any, type_: str) -> Any:
    """A predicate literal as pyarrow takes it for `type_`, refusing what would change its value."""
    if value is None:
        return None
    if type_ in INTEGER_TYPES and not isinstance(value, (int, np.integer)):
        raise TypeError(f"an integer is needed, not {type(value).__name__}")
    if type_ in _TIMESTAMP_TYPES and isinstance(value, dt.datetime) and value.tzinfo is not None:
        # The repo's literals are naive UTC; an aware one is converted rather than misread.
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if type_ == "date" and isinstance(value, dt.datetime):
        raise TypeError("a datetime.date is needed, not a datetime")
    if is_decimal(type_) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return decimal.Decimal(str(value))  # str: 0.1 as 0.1, not its binary expansion
    return value


def literal_array(values: Sequence[Any], type_: Any) -> pa.Array:
    """Typed Python values (None for NULL) as the Arrow array bucket_ids hashes for `type_`;
    InvalidArgumentError when one is not a value of that type (300 for a byte, 1.234 for
    decimal(9,2))."""
    _check_type(type_)
    try:
        return pa.array([_literal(v, type_) for v in values], type=_arrow_type(type_))
    except (TypeError, ValueError, OverflowError, decimal.InvalidOperation,
            pa.ArrowInvalid, pa.ArrowTypeError) as e:
        bad = next((v for v in values if not _fits(v, type_)), list(values)[:3])
        raise InvalidArgumentError(f"{bad!r} is not a value of type {type_}: {e}") from e


def _fits(value: Any, type_: Any) -> bool:
    try:
        pa.array([_literal(value, type_)], type=_arrow_type(type_))
        return True
    except Exception:
        return False


def bucket_of(values: Sequence[Any], types: Sequence[Any], num_buckets: int) -> int:
    """The bucket of one row of typed Python values (None for NULL)."""
    if len(values) != len(types):
        raise InvalidArgumentError(f"bucket_of got {len(values)} values but {len(types)} types")
    arrays = [literal_array([value], type_) for value, type_ in zip(values, types)]
    return int(bucket_ids(arrays, types, num_buckets)[0])
