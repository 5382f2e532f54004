"""Dynamic file pruning without Spark: build keys as a predicate, key types, clustering, settings."""
from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiplake.errors import InvalidArgumentError
from skiplake.expr.tree import And, Cmp, Col, Const, InList, Or
from skiplake.log.schema import Field, Schema
from skiplake.skipping.columnar import may_match_files
from skiplake.skipping.key_filters import file_overlap, key_filter, probe_value
from skiplake.skipping.stats_table import StatsTable
from skiplake.spark.pruning.pruning_settings import DynamicPruningSettings, _join_types, conf_bytes
from tests.tiers import examples

K = Col("k", "long")


def files(ranges: list[tuple[int | None, int | None]]) -> StatsTable:
    """A stats table of files with the given [min, max] of column k (None: unknown)."""
    stats = [json.dumps({"numRecords": 10, "minValues": {} if lo is None else {"k": lo},
                         "maxValues": {} if hi is None else {"k": hi}, "nullCount": {"k": 0}})
             for lo, hi in ranges]
    table = pa.table({"path": [f"f{i}" for i in range(len(ranges))], "stats": stats,
                      "partitionValues": pa.array([[] for _ in ranges], pa.map_(pa.string(), pa.string())),
                      "tags": pa.array([None] * len(ranges), pa.map_(pa.string(), pa.string()))})
    return StatsTable(table, Schema((Field("k", "long"),)), [])


def test_keys_become_an_in_list_without_nulls_and_duplicates():
    kf = key_filter(K, [3, None, 1, 3, 2], max_values=10, max_ranges=4)
    assert kf.predicate == InList(K, (1, 2, 3)) and kf.keys == 3 and kf.ranges == 0
    assert kf.text("item WHERE x = 1") == "k IN (3 keys of item WHERE x = 1)"


def test_no_keys_match_nothing():
    assert key_filter(K, [None, None], 10, 4).predicate == Const(False)
    assert key_filter(K, [], 10, 4).predicate == Const(False)


def test_too_many_keys_become_ranges_cut_at_the_widest_gaps():
    keys = list(range(0, 10)) + list(range(100, 110)) + list(range(1000, 1005))
    kf = key_filter(K, keys, max_values=5, max_ranges=3)
    assert kf.ranges == 3 and kf.keys == 25
    assert kf.predicate == Or(tuple(And((Cmp(">=", K, lo), Cmp("<=", K, hi)))
                                    for lo, hi in [(0, 9), (100, 109), (1000, 1004)]))
    one = key_filter(K, keys, max_values=5, max_ranges=1)
    assert one.predicate == And((Cmp(">=", K, 0), Cmp("<=", K, 1004)))


def test_string_keys_past_the_limit_become_runs_of_equal_count():
    s = Col("s", "string")
    kf = key_filter(s, ["a", "b", "c", "d", "e"], max_values=2, max_ranges=2)
    assert kf.predicate == Or((And((Cmp(">=", s, "a"), Cmp("<=", s, "c"))), And((Cmp(">=", s, "d"), Cmp("<=", s, "e")))))


@pytest.mark.parametrize("value, type_, expected", [
    (5, "integer", 5), (2 ** 40, "integer", None), (-129, "byte", None), (Decimal("7"), "long", 7),
    (Decimal("7.5"), "long", None), (True, "long", None), ("5", "long", None),
    (Decimal("1.25"), "decimal(5,2)", Decimal("1.25")), (Decimal("1.255"), "decimal(5,2)", None),
    (Decimal("1234.5"), "decimal(5,2)", None), (3, "decimal(5,2)", Decimal("3")),
    (dt.date(2001, 1, 2), "date", dt.date(2001, 1, 2)), (dt.datetime(2001, 1, 2), "date", None),
    (dt.datetime(2001, 1, 2, 3, tzinfo=dt.timezone(dt.timedelta(hours=2))), "timestamp", dt.datetime(2001, 1, 2, 1)),
    ("x", "string", "x"), (b"x", "string", None), (None, "long", None),
])
def test_probe_value_keeps_only_values_the_column_can_hold_exactly(value, type_, expected):
    assert probe_value(value, type_) == expected


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 20)), min_size=1, max_size=12),
       st.lists(st.one_of(st.none(), st.integers(-80, 80)), max_size=30),
       st.integers(1, 5), st.integers(1, 4))
def test_a_key_filter_never_skips_a_file_that_holds_a_key(spans, keys, max_values, max_ranges):
    ranges = [(lo, lo + width) for lo, width in spans]
    table = files(ranges)
    kept = may_match_files(key_filter(K, keys, max_values, max_ranges).predicate, table)
    for i, (lo, hi) in enumerate(ranges):
        if any(k is not None and lo <= k <= hi for k in keys):
            assert kept[i], (ranges[i], keys)


def test_file_overlap_tells_clustered_from_spread_files():
    clustered = files([(i * 10, i * 10 + 9) for i in range(20)])
    spread = files([(0, 199 - i) for i in range(20)])
    assert file_overlap(clustered, "k") == pytest.approx(1 / 20)
    assert file_overlap(spread, "k") > 0.9
    assert file_overlap(files([(None, None)] * 3), "k") == 1.0


def test_settings_parse_sizes_and_join_types():
    assert conf_bytes("10GB", 0) == 10 << 30 and conf_bytes("64m", 0) == 64 << 20 and conf_bytes("123", 0) == 123
    assert conf_bytes(None, 7) == 7
    with pytest.raises(InvalidArgumentError, match="not a size"):
        conf_bytes("lots", 0)
    assert _join_types("inner, left_semi,LEFTOUTER") == ("Inner", "LeftSemi", "LeftOuter")
    with pytest.raises(InvalidArgumentError, match="full"):
        _join_types("inner,full")
    assert DynamicPruningSettings().join_types == ("Inner", "LeftSemi", "LeftOuter", "RightOuter")


def test_alike_join_reports_are_listed_once_with_their_count() -> None:
    """A CTE Spark inlines several times repeats its joins; the report lists each kind once."""
    from skiplake.skipping.report import DynamicPruningReport
    from skiplake.spark.query.dynamic_pruning import _alike_once
    a = DynamicPruningReport("store_sales", "date_dim WHERE d_year = 2000", "Inner", [("ss_sold_date_sk", "d_date_sk")],
                             True, "366 keys", 0.1, 366, ["ss_sold_date_sk IN (keys of date_dim ...)"])
    b = DynamicPruningReport("item", "store_sales", "Inner", [("i_item_sk", "ss_item_sk")], False, "no selective filter")
    out = _alike_once([a, b, a, a])
    assert [(r.probe, r.joins) for r in out] == [("store_sales", 3), ("item", 1)]
    assert "3 joins alike" in out[0].text() and "alike" not in out[1].text()
    assert out[0].to_dict()["joins"] == 3


@settings(max_examples=examples(200), deadline=None)
@given(st.sampled_from(["byte", "short", "integer", "long", "string", "date"]),
       st.lists(st.one_of(st.none(), st.integers(-2 ** 64, 2 ** 64), st.text(max_size=3),
                          st.dates(), st.booleans()), max_size=30),
       st.booleans())
def test_plain_keys_convert_as_probe_value_says(type_, keys, uniform):
    """Keys all of the column's plain kind take a one-pass path: the same values as key by key."""
    if uniform:  # mostly of the column's own kind, so the one-pass path runs
        kind = {"string": str, "date": dt.date}.get(type_, int)
        keys = [k for k in keys if k is None or type(k) is kind]
    col = Col("k", type_)
    by_key = sorted({v for v in (probe_value(k, type_) for k in keys) if v is not None})
    kf = key_filter(col, keys, max_values=10_000, max_ranges=4)
    expected = InList(col, tuple(by_key)) if by_key else Const(False)
    assert kf.predicate == expected


def test_stats_of_no_files_are_typed():
    """A build side whose static pruning selected no file: its stats table is empty, and a string
    or timestamp column's stats are still typed (the cost model reads the build key's range)."""
    table = pa.table({"path": pa.array([], pa.string()), "stats": pa.array([], pa.string()),
                      "partitionValues": pa.array([], pa.map_(pa.string(), pa.string())),
                      "tags": pa.array([], pa.map_(pa.string(), pa.string()))})
    stats = StatsTable(table, Schema((Field("s", "string"), Field("t", "timestamp"))), [])
    for name in ("s", "t"):
        col = stats.column(name)
        assert len(col.min) == len(col.max) == 0 and col.min.type != pa.null()
