"""Partition folder names, log path encoding, and stats from Parquet footers."""
from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given
from hypothesis import strategies as st

from skiplake.layout.partitioning import escape_path_name, parse_partition_dir, partition_dir, unescape_path_name
from skiplake.log.paths import from_log_path, to_log_path
from skiplake.log.schema import Field, Schema
from skiplake.log.stats import MAX_CHAR, file_stats


@given(st.text())
def test_escape_round_trip(value):
    assert unescape_path_name(escape_path_name(value)) == value
    assert "/" not in escape_path_name(value)


def test_partition_dir_like_spark():
    assert partition_dir(["d", "s"], {"d": "2001-01-01", "s": "a:b/c"}) == "d=2001-01-01/s=a%3Ab%2Fc"
    assert partition_dir(["s"], {"s": None}) == "s=__HIVE_DEFAULT_PARTITION__"
    assert parse_partition_dir("d=2001-01-01/s=a%3Ab%2Fc") == {"d": "2001-01-01", "s": "a:b/c"}
    assert parse_partition_dir("s=__HIVE_DEFAULT_PARTITION__") == {"s": None}
    rel = "s=a b%3A/part-0.parquet"
    assert to_log_path(rel) == "s=a%20b%253A/part-0.parquet"
    assert from_log_path(to_log_path(rel)) == rel


def test_stats_from_footer(tmp_path):
    long = "x" * 40
    table = pa.table({
        "i": pa.array([3, None, 1], pa.int64()),
        "s": pa.array(["b", long, None]),
        "d": pa.array([dt.date(2001, 1, 2), dt.date(2001, 1, 1), None]),
        "ts": pa.array([dt.datetime(2021, 1, 1, 0, 0, 0, 999999), None, dt.datetime(2020, 1, 1)],
                       pa.timestamp("us", tz="UTC")),
        "m": pa.array([Decimal("1.25"), Decimal("-3.50"), None], pa.decimal128(7, 2)),
        "b": pa.array([True, False, None]),
        "p": pa.array([1, 1, 1], pa.int32()),
    })
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, row_group_size=2)
    schema = Schema((Field("i", "long"), Field("s", "string"), Field("d", "date"), Field("ts", "timestamp"),
                     Field("m", "decimal(7,2)"), Field("b", "boolean"), Field("p", "integer"),
                     Field("added_later", "long")))
    got = json.loads(file_stats(str(path), schema, ["p"]))
    assert got["numRecords"] == 3
    assert got["minValues"] == {"i": 1, "s": "b", "d": "2001-01-01", "ts": "2020-01-01T00:00:00.000Z", "m": -3.5}
    assert got["maxValues"]["s"] == "x" * 32 + MAX_CHAR
    assert got["maxValues"]["ts"] == "2021-01-01T00:00:00.999Z"
    assert got["maxValues"]["i"] == 3 and got["maxValues"]["m"] == 1.25
    assert got["nullCount"] == {"i": 1, "s": 1, "d": 1, "ts": 1, "m": 1, "b": 1, "added_later": 3}
    assert "b" not in got["minValues"] and "p" not in got["nullCount"]


def test_absolute_path_of_log_paths():
    from skiplake.log.paths import absolute_path
    assert absolute_path("/t", "d=2001-01-01/a%20b.parquet") == "/t/d=2001-01-01/a b.parquet"
    assert absolute_path("/t", "file:///data/x%3A1.parquet") == "/data/x:1.parquet"
    assert absolute_path("/t", "file:/data/y.parquet") == "/data/y.parquet"
    assert absolute_path("/t", "/abs/z.parquet") == "/abs/z.parquet"
