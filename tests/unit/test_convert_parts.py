"""The no-Spark parts of converting a Parquet directory: partition types, listings, file schemas,
schema merging and which columns get stats. (Spark's own inference is compared in
tests/test_convert.py.)"""
from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skiplake.layout.hive_directory import hidden, list_data_files
from skiplake.layout.partition_types import (
    canonical_value,
    infer_column_type,
    infer_value_type,
    value_fits,
    wider_type,
)
from skiplake.log.parquet_schema import SPARK_SCHEMA_KEY, SchemaConflict, UnsupportedColumnError, file_schema, merged
from skiplake.log.schema import Field, Schema
from skiplake.log.stats import indexed_columns, stats_from_metadata, stats_settings


@pytest.mark.parametrize("raw, expected", [
    ("1", "integer"), ("-5", "integer"), ("+7", "integer"), ("007", "integer"),
    ("2147483648", "long"), ("99999999999999999999", "decimal(20,0)"), ("1e3", "decimal(4,0)"),
    ("1.5", "double"), ("1.0", "double"), ("NaN", "double"), ("-Infinity", "double"),
    ("2024-01-01", "date"), ("2024-01-01 10%3A00%3A00", "timestamp"), ("2024-01-01 10%3A00%3A00.5", "timestamp"),
    ("2024-13-01", "string"), ("north", "string"), ("", "string"), ("__HIVE_DEFAULT_PARTITION__", None),
])
def test_value_types_are_inferred_in_sparks_order(raw: str, expected: str | None) -> None:
    assert infer_value_type(raw) == expected


def test_a_column_takes_the_wider_type_of_its_values() -> None:
    assert infer_column_type(["1", "2147483648"]) == "long"
    assert infer_column_type(["1", "1.5"]) == "double"
    assert infer_column_type(["2147483648", "1.5"]) == "string"       # long and double lose precision
    assert infer_column_type(["1", "99999999999999999999"]) == "decimal(20,0)"
    assert infer_column_type(["2024-01-01", "2024-01-01 10%3A00%3A00"]) == "timestamp"
    assert infer_column_type(["2024-01-01", "1"]) == "string"
    assert infer_column_type(["__HIVE_DEFAULT_PARTITION__", "3"]) == "integer"
    assert infer_column_type(["__HIVE_DEFAULT_PARTITION__"]) == "string"
    assert infer_column_type(["2024-01-01 10%3A00%3A00"], timestamp_type="timestamp_ntz") == "timestamp_ntz"
    assert wider_type("decimal(25,0)", "long") == "decimal(25,0)"


@pytest.mark.parametrize("value, type_, fits", [
    ("12", "integer", True), ("300", "byte", False), ("-128", "byte", True), ("1.5", "integer", False),
    ("9223372036854775808", "long", False), ("1.50", "decimal(5,2)", True), ("1.505", "decimal(5,2)", False),
    ("1000", "decimal(5,2)", False), ("999.99", "decimal(5,2)", True), ("1e2", "decimal(5,2)", True),
    ("2024-02-29", "date", True), ("2023-02-29", "date", False), ("2024-01-01 10:00:00", "date", True),
    ("2024-01-01 10:00:00.123456", "timestamp", True), ("2024-01-01T10:00:00Z", "timestamp", True),
    ("yesterday", "timestamp", False), ("1.5", "double", True), ("inf", "double", False),
    ("TRUE", "boolean", True), ("yes", "boolean", False), (None, "integer", True), ("x", "string", True),
])
def test_folder_values_are_checked_against_given_types(value: str | None, type_: str, fits: bool) -> None:
    assert value_fits(value, type_) is fits


def test_listing_skips_what_spark_skips(tmp_path) -> None:
    names = ["d=1/part-0.parquet", "d=1/.part-0.parquet.crc", "_SUCCESS", "_committed_123", "_started_123",
             "_temporary/0/part-9.parquet", ".spark-staging-1/x.parquet", "_delta_log/00.json", "_x=2/p.parquet",
             "d=2/part-1.parquet._COPYING_", "_metadata", "README"]
    for n in names:
        (tmp_path / n).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / n).write_bytes(b"x" * 3)
    listing = list_data_files(str(tmp_path))
    assert [f.rel for f in listing.files] == ["README", "_x=2/p.parquet", "d=1/part-0.parquet"]
    assert len(listing.skipped) == len(names) - 3 and listing.total_bytes == 9
    f = listing.files[1]
    assert [(x.column, x.value) for x in f.folders] == [("_x", "2")]
    assert hidden("_SUCCESS") and hidden(".x") and not hidden("_p=1") and not hidden("part-0")


def _write(path, table: pa.Table, spark_schema: dict | None = None, **kw) -> pq.FileMetaData:
    if spark_schema is not None:
        table = table.replace_schema_metadata({SPARK_SCHEMA_KEY: json.dumps(spark_schema).encode()})
    pq.write_table(table, path, **kw)
    return pq.read_metadata(path)


def test_file_schemas_as_spark_reads_them(tmp_path) -> None:
    t = pa.table({"i8": pa.array([1], pa.int8()), "u32": pa.array([1], pa.uint32()), "u64": pa.array([1], pa.uint64()),
                  "d": pa.array([Decimal("1.25")], pa.decimal128(9, 2)), "day": pa.array([dt.date(2024, 1, 1)]),
                  "utc": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us", tz="UTC")),
                  "local": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us")),
                  "s": pa.array([{"a": 1, "b": ["x"]}]), "m": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64()))})
    schema = file_schema(_write(tmp_path / "plain.parquet", t))
    assert [(f.name, f.type if isinstance(f.type, str) else f.type["type"]) for f in schema.fields] == [
        ("i8", "byte"), ("u32", "long"), ("u64", "decimal(20,0)"), ("d", "decimal(9,2)"), ("day", "date"),
        ("utc", "timestamp"), ("local", "timestamp_ntz"), ("s", "struct"), ("m", "map")]
    assert all(f.nullable for f in schema.fields)
    # INT96 is Spark's legacy timestamp: an instant, not timestamp_ntz.
    int96 = _write(tmp_path / "int96.parquet", pa.table({"ts": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us"))}),
                   use_deprecated_int96_timestamps=True)
    assert file_schema(int96).fields[0].type == "timestamp"
    # The schema Spark stored wins (a short stays a short), made nullable.
    stored = {"type": "struct", "fields": [{"name": "a", "type": "short", "nullable": False, "metadata": {}}]}
    meta = _write(tmp_path / "spark.parquet", pa.table({"a": pa.array([1], pa.int32())}), stored)
    assert file_schema(meta).fields == (Field("a", "short", True),)
    with pytest.raises(UnsupportedColumnError, match="'t'"):
        file_schema(_write(tmp_path / "time.parquet", pa.table({"t": pa.array([dt.time(1)], pa.time64("us"))})))


def test_merging_unions_columns_and_refuses_type_changes() -> None:
    a = Schema((Field("id", "long"), Field("s", {"type": "struct", "fields": [
        {"name": "x", "type": "integer", "nullable": True, "metadata": {}}]})))
    b = Schema((Field("id", "long"), Field("new", "string"), Field("s", {"type": "struct", "fields": [
        {"name": "y", "type": "date", "nullable": True, "metadata": {}}]})))
    m = merged(a, b)
    assert m.names == ["id", "s", "new"]
    assert [f["name"] for f in m.field("s").type["fields"]] == ["x", "y"]
    with pytest.raises(SchemaConflict, match="'id' is long in one file and integer"):
        merged(a, Schema((Field("id", "integer"),)))
    # Names compare as Spark compares them by default, ignoring case: one column, the first file's spelling.
    c = Schema((Field("ID", "long"), Field("S", {"type": "struct", "fields": [
        {"name": "X", "type": "integer", "nullable": True, "metadata": {}}]})))
    m = merged(a, c)
    assert m.names == ["id", "s"] and [f["name"] for f in m.field("s").type["fields"]] == ["x"]
    with pytest.raises(SchemaConflict):
        merged(a, Schema((Field("ID", "string"),)))


@pytest.mark.parametrize("value, type_, stored", [
    ("+5", "integer", "5"), ("007", "long", "7"), ("-0", "short", "0"), ("TRUE", "boolean", "true"),
    ("2024-01-01 10:00", "date", "2024-01-01"), ("2024-01-01T00:00:00", "date", "2024-01-01"),
    ("2024-01-01", "timestamp", "2024-01-01 00:00:00.000000"),
    ("2024-01-01 10:00:00.5", "timestamp", "2024-01-01 10:00:00.500000"),
    ("2024-01-01T10:00:00+02:00", "timestamp", "2024-01-01T08:00:00.000000Z"),   # an instant: kept in UTC
    ("2024-01-01T10:00:00Z", "timestamp", "2024-01-01T10:00:00.000000Z"),
    ("2024-01-01T10:00:00+02:00", "timestamp_ntz", "2024-01-01 10:00:00.000000"),  # the wall clock
    ("1e3", "decimal(4,0)", "1000"), ("1.5", "decimal(5,2)", "1.50"), ("-.5", "decimal(3,1)", "-0.5"),
    ("1.50", "double", "1.5"), ("NaN", "double", "NaN"), ("-Infinity", "float", "-Infinity"),
    ("a b=c", "string", "a b=c"), ("", "string", ""), ("", "integer", None), (None, "date", None),
])
def test_folder_values_are_stored_as_delta_spells_them(value: str | None, type_: str, stored: str | None) -> None:
    assert value_fits(value, type_)
    assert canonical_value(value, type_) == stored


def test_stats_columns_follow_the_table_properties(tmp_path) -> None:
    schema = Schema((Field("a", "long"), Field("b", "string"), Field("s", {"type": "struct", "fields": [
        {"name": "x", "type": "integer", "nullable": True, "metadata": {}},
        {"name": "y", "type": "integer", "nullable": True, "metadata": {}}]}), Field("p", "string")))
    assert stats_settings({}) == (32, None)
    assert stats_settings({"delta.dataSkippingNumIndexedCols": "2"}) == (2, None)
    assert stats_settings({"delta.dataSkippingStatsColumns": "b, s.y"})[1] == ["b", "s.y"]
    with pytest.raises(ValueError, match="dataSkippingNumIndexedCols"):
        stats_settings({"delta.dataSkippingNumIndexedCols": "two"})
    assert [p for p, _ in indexed_columns(schema, {"p"}, 3)] == [("a",), ("b",), ("s", "x")]
    assert [p for p, _ in indexed_columns(schema, {"p"}, -1)] == [("a",), ("b",), ("s", "x"), ("s", "y")]
    assert [p for p, _ in indexed_columns(schema, {"p"}, 1, ["B", "s.y"])] == [("b",), ("s", "y")]
    assert [p for p, _ in indexed_columns(schema, {"p"}, 1, ["s"])] == [("s", "x"), ("s", "y")]


def test_int96_columns_never_get_min_max(tmp_path) -> None:
    path = tmp_path / "int96.parquet"
    pq.write_table(pa.table({"ts": pa.array([dt.datetime(2024, 1, 1), None], pa.timestamp("us")),
                             "n": pa.array([1, 2])}), path, use_deprecated_int96_timestamps=True)
    meta = pq.read_metadata(path)
    stats = json.loads(stats_from_metadata(meta, Schema((Field("ts", "timestamp"), Field("n", "long"))), []))
    assert stats["minValues"] == {"n": 1} and stats["maxValues"] == {"n": 2}
