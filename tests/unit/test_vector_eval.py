"""The columnar evaluator agrees with the per-file scalar evaluator on random stats and predicates."""
from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import numpy as np
import pyarrow as pa
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from skiplake.expr.parse import bind
from skiplake.log.arrow_schema import FILES_SCHEMA, map_items
from skiplake.log.schema import Field, Schema
from skiplake.skipping.columnar import evaluate_files, may_match_files
from skiplake.skipping.literals import literal_array, literal_scalar
from skiplake.skipping.metrics import evaluate, file_lookup
from skiplake.skipping.stats_table import StatsTable, arrow_type
from tests.tiers import examples

SCHEMA = Schema((
    Field("i", "integer"), Field("l", "long"), Field("f", "float"), Field("x", "double"),
    Field("m", "decimal(9,2)"), Field("s", "string"), Field("d", "date"), Field("ts", "timestamp"),
    Field("b", "boolean"), Field("p", "integer"), Field("q", "string"),
))
PARTS = ["p", "q"]
LONG = "k" * 32

ints = st.integers(-50, 50)
strs = st.sampled_from(["", "a", "ab", "abc", "b", "ba", "zz", LONG, LONG + "\U0010ffff", LONG[:31] + "l"])
dates = st.dates(dt.date(2000, 1, 1), dt.date(2000, 3, 1))
stamps = st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2000, 1, 3)).map(
    lambda t: t.replace(microsecond=(t.microsecond // 1000) * 1000))
decs = st.integers(-9999, 9999).map(lambda v: Decimal(v).scaleb(-2))
floats = st.sampled_from([-2.5, -1.0, 0.0, 0.1, 1.0, 2.5, 3.3333333])


def _json(col: str, v):
    if col == "d":
        return v.isoformat()
    if col == "ts":
        return v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z"
    if col == "m":
        return float(v)
    return v


@st.composite
def file_stats(draw):
    rows = draw(st.sampled_from([0, 1, 5, 5, 5]))
    stats: dict = {"numRecords": rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    for col, strat in (("i", ints), ("l", ints), ("f", floats), ("x", floats), ("m", decs), ("s", strs),
                       ("d", dates), ("ts", stamps), ("b", st.booleans())):
        kind = draw(st.sampled_from(["range", "range", "point", "nulls", "missing"]))
        if kind == "missing":
            continue
        if kind == "nulls":
            stats["nullCount"][col] = rows
            continue
        a = draw(strat)
        b = a if kind == "point" else draw(strat)
        lo, hi = min(a, b), max(a, b)
        stats["minValues"][col] = _json(col, lo)
        stats["maxValues"][col] = _json(col, hi)
        stats["nullCount"][col] = draw(st.sampled_from([0, 0, 1]))
    if draw(st.integers(0, 9)) == 0:
        return None
    return json.dumps(stats)


@st.composite
def files(draw):
    n = draw(st.integers(1, 25))
    out = []
    for _ in range(n):
        p = draw(st.sampled_from(["1", "2", "", None]))
        q = draw(st.sampled_from(["x", "y z", None]))
        out.append(({"p": p, "q": q}, draw(file_stats())))
    return out


LEAVES = st.one_of(
    st.tuples(st.sampled_from(["i", "l", "p"]), st.sampled_from(["=", "<>", "<", "<=", ">", ">=", "<=>"]),
              st.sampled_from(["-3", "0", "2", "7", "2.5", "NULL"])).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
    st.tuples(st.sampled_from(["f", "x"]), st.sampled_from(["=", "<", ">=", "<>"]),
              st.sampled_from(["0.1", "1", "2.5", "-1.0", "3.3333333"])).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
    st.tuples(st.sampled_from(["=", "<", ">", "<=>"]), st.sampled_from(["0.00", "1.5", "-3.21", "99.99", "2"])).map(
        lambda t: f"m {t[0]} {t[1]}"),
    st.tuples(st.sampled_from(["s", "q"]), st.sampled_from(["=", "<", ">=", "<>"]),
              st.sampled_from(["''", "'a'", "'ab'", "'b'", f"'{LONG}'", "'y z'", "'x'"])).map(
        lambda t: f"{t[0]} {t[1]} {t[2]}"),
    st.sampled_from(["s LIKE 'a%'", "s LIKE 'k%'", "s LIKE 'zz%'", f"s LIKE '{LONG}%'", "q LIKE 'y%'"]),
    st.tuples(st.sampled_from(["=", "<", ">"]), dates).map(lambda t: f"d {t[0]} DATE'{t[1].isoformat()}'"),
    st.tuples(st.sampled_from(["=", "<=", ">"]), stamps).map(
        lambda t: f"ts {t[0]} TIMESTAMP'{t[1].isoformat(sep=' ')}'"),
    st.sampled_from(["b", "NOT b", "b = false"]),
    st.tuples(st.sampled_from(["i", "l", "p", "m"]), st.lists(st.integers(-60, 60), min_size=1, max_size=12),
              st.booleans()).map(lambda t: f"{t[0]} IN ({', '.join(map(str, t[1]))}{', NULL' if t[2] else ''})"),
    st.lists(strs, min_size=1, max_size=8).map(lambda vs: "s IN (" + ", ".join(f"'{v}'" for v in vs) + ")"),
    st.sampled_from(["i IS NULL", "s IS NULL", "p IS NULL", "q IS NULL", "d IS NULL", "abs(i) > 3"]),
)
PREDICATES = st.recursive(LEAVES, lambda kids: st.one_of(
    st.tuples(kids, kids).map(lambda t: f"({t[0]}) AND ({t[1]})"),
    st.tuples(kids, kids).map(lambda t: f"({t[0]}) OR ({t[1]})"),
    kids.map(lambda k: f"NOT ({k})")), max_leaves=5)


def _table(entries) -> pa.Table:
    rows = [{"path": f"f{i}", "partitionValues": map_items(pv), "size": 1, "modificationTime": 0,
             "dataChange": True, "stats": stats, "tags": None} for i, (pv, stats) in enumerate(entries)]
    return pa.Table.from_pylist(rows, schema=FILES_SCHEMA)


@settings(max_examples=examples(250), deadline=None, phases=[Phase.explicit, Phase.generate])
@given(entries=files(), where=PREDICATES)
def test_columnar_equals_scalar(entries, where):
    node = bind(where, SCHEMA)
    table = StatsTable(_table(entries), SCHEMA, PARTS)
    masks = evaluate_files(node, table)
    for i, (pv, stats) in enumerate(entries):
        expected = evaluate(node, file_lookup(SCHEMA, pv, stats))
        got = {v for v, m in ((True, masks.t), (False, masks.f), (None, masks.n)) if m[i]}
        assert got == set(expected), (where, i, got, set(expected), pv, stats)


def test_large_in_list_uses_bounds():
    entries = [({"p": "1", "q": "x"}, json.dumps({"numRecords": 10, "minValues": {"l": lo}, "maxValues": {"l": lo + 9},
                                                  "nullCount": {"l": 0}})) for lo in range(0, 100_000, 10)]
    table = StatsTable(_table(entries), SCHEMA, PARTS)
    wanted = list(range(5, 100_000, 1000))  # one value in every 100th file
    node = bind(f"l IN ({', '.join(map(str, wanted))})", SCHEMA)
    mask = may_match_files(node, table)
    assert mask.sum() == len(wanted)
    assert np.flatnonzero(mask).tolist() == [v // 10 for v in wanted]


def test_unparseable_stats_fall_back_to_per_file_parsing():
    # NaN is not JSON; some writers emit it anyway. The typed reader refuses it, the fallback copes.
    entries = [({"p": "1", "q": "x"}, '{"numRecords":3,"minValues":{"x":NaN,"l":1},"maxValues":{"x":NaN,"l":4},'
                                      '"nullCount":{"x":0,"l":0}}'),
               ({"p": "1", "q": "x"}, '{"numRecords":3,"minValues":{"l":10},"maxValues":{"l":14},"nullCount":{"l":0}}')]
    table = StatsTable(_table(entries), SCHEMA, PARTS)
    assert may_match_files(bind("l = 12", SCHEMA), table).tolist() == [False, True]
    assert may_match_files(bind("x > 100", SCHEMA), table).tolist() == [True, True]
    assert table.num_records.tolist() == [3.0, 3.0]


def test_double_literals_against_integers_never_prune():
    # Spark compares bigint with a DOUBLE literal in doubles: 2**60 + 64 <= 1.152921504606847e18 is true there.
    big = 2 ** 60 + 64
    entries = [({"p": "1", "q": "x"}, json.dumps({"numRecords": 1, "minValues": {"l": big}, "maxValues": {"l": big},
                                                  "nullCount": {"l": 0}}))]
    table = StatsTable(_table(entries), SCHEMA, PARTS)
    for where in (f"l <= {float(2 ** 60)!r}", f"l = {float(2 ** 60)!r}", "l <= 1.152921504606847e18"):
        assert may_match_files(bind(where, SCHEMA), table).tolist() == [True], where


def test_nan_partition_values_are_never_skipped_by_ranges():
    schema = Schema((Field("id", "integer"), Field("p", "double")))
    entries = [({"p": v}, None) for v in ("NaN", "1.0", "-0.0", None)]
    table = StatsTable(_table(entries), schema, ["p"])
    for where, expected in (("p > 2.5", [True, False, False, False]), ("p >= 1.0", [True, True, False, False]),
                            ("NOT (p <= 1.0)", [True, False, False, False]), ("p IS NULL", [False, False, False, True])):
        assert may_match_files(bind(where, schema), table).tolist() == expected, where
        for i, (pv, _) in enumerate(entries):
            assert (True in evaluate(bind(where, schema), file_lookup(schema, pv, None))) == expected[i], (where, pv)


def test_wide_decimal_literals_plan():
    schema = Schema((Field("d", "decimal(38,18)"),))
    entries = [({}, json.dumps({"numRecords": 1, "minValues": {"d": 5}, "maxValues": {"d": 20000000000},
                                "nullCount": {"d": 0}}))]
    table = StatsTable(_table(entries), schema, [])
    assert may_match_files(bind("d > 10000000000", schema), table).tolist() == [True]
    assert may_match_files(bind("d > 30000000000", schema), table).tolist() == [False]


@settings(max_examples=examples(200), deadline=None)
@given(st.sampled_from(["byte", "short", "integer", "long", "string", "date", "decimal(9,2)"]),
       st.lists(st.one_of(st.integers(-2 ** 70, 2 ** 70), st.text(max_size=3), st.dates(), st.booleans(),
                          st.datetimes(), st.decimals(allow_nan=False, allow_infinity=False, places=3)),
                min_size=1, max_size=12),
       st.booleans())
def test_in_list_values_convert_as_scalars_do(type_, values, uniform):
    """An IN list's values become one Arrow array in one call when all are of the column's plain
    kind; the outcome (the array, or the error) is the one value-by-value conversion gives."""
    if uniform:
        kind = {"string": str, "date": dt.date, "decimal(9,2)": Decimal}.get(type_, int)
        values = [v for v in values if type(v) is kind] or values
    def outcome(convert):
        try:
            return convert().to_pylist()
        except Exception as e:  # noqa: BLE001 - the kind of error is what is compared
            return type(e)

    expected = outcome(lambda: pa.array([literal_scalar(v, type_).as_py() for v in values], type=arrow_type(type_)))
    assert outcome(lambda: literal_array(tuple(values), type_)) == expected


@settings(max_examples=examples(60), deadline=None, phases=[Phase.explicit, Phase.generate])
@given(entries=files(), cut=st.integers(0, 25), blank=st.integers(0, 25))
def test_stats_parse_over_column_chunks_equals_per_file_parse(entries, cut, blank):
    # The JSON reader parses each chunk's string data in place; files without stats (null, or an
    # empty string) and chunk boundaries must not shift any file's stats onto another.
    entries = [(pv, "" if i == blank else stats) for i, (pv, stats) in enumerate(entries)]
    whole = _table(entries)
    cut = min(cut, whole.num_rows)
    chunked = pa.Table.from_batches(whole.slice(0, cut).to_batches() + whole.slice(cut).to_batches(), FILES_SCHEMA)
    names = ["i", "l", "x", "m", "s", "d", "ts", "b"]
    fast = StatsTable(chunked, SCHEMA, PARTS)
    records, columns = fast._parse_arrow(names)
    slow_records, slow_columns = StatsTable(whole, SCHEMA, PARTS)._parse_python(names)
    assert np.array_equal(records, slow_records, equal_nan=True)
    for name in names:
        for got, want in zip(columns[name], slow_columns[name]):
            assert got.to_pylist() == want.cast(got.type).to_pylist(), name


def test_stats_that_are_not_one_object_fall_back_to_per_file_parsing():
    entries = [({"p": "1", "q": "x"}, '{"numRecords":1}{"numRecords":2}'),
               ({"p": "1", "q": "x"}, '{"numRecords":3}')]
    table = StatsTable(_table(entries), SCHEMA, PARTS)
    assert np.isnan(table.num_records[0]) and table.num_records[1] == 3.0
