"""Every user of the bounds rules (skiplake/skipping/bounds.py) agrees, and none skips a file
that holds a matching row.

Random rows go into real Parquet files; their stats are taken from the footers as skiplake
commits them (strings cut at 32 characters, timestamps at milliseconds). Random predicates are
then judged three ways: by the scan planner's all-files evaluator, by the per-file evaluator of
the conflict checker and DML, and, for a join key, by dynamic pruning's key filter. DuckDB
evaluates the same predicate on the rows themselves: wherever a row makes it TRUE (or FALSE, or
NULL), every evaluator must say the file may.
"""
from __future__ import annotations

import datetime as dt
import json
import tempfile
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from skiplake.expr.parse import bind
from skiplake.expr.tree import Col
from skiplake.log.arrow_schema import FILES_SCHEMA, map_items
from skiplake.log.schema import Field, Schema
from skiplake.log.stats import file_stats
from skiplake.skipping.columnar import evaluate_files, may_match_files
from skiplake.skipping.key_filters import key_filter
from skiplake.skipping.metrics import evaluate, file_lookup
from skiplake.skipping.stats_table import StatsTable
from tests.tiers import examples

SCHEMA = Schema((
    Field("i", "long"), Field("x", "double"), Field("f", "float"), Field("s", "string"),
    Field("ts", "timestamp"), Field("d", "date"), Field("m", "decimal(9,2)"), Field("p", "integer"),
))
PARTS = ["p"]
ARROW = pa.schema([("i", pa.int64()), ("x", pa.float64()), ("f", pa.float32()), ("s", pa.string()),
                   ("ts", pa.timestamp("us", "UTC")), ("d", pa.date32()), ("m", pa.decimal128(9, 2))])
LONG = "k" * 31
UTC = dt.timezone.utc

ints = st.integers(-20, 20)
doubles = st.sampled_from([-2.5, -1.0, 0.0, 0.1, 1.0, 2.5, 3.3333333, 1e300])
strings = st.sampled_from(["", "a", "ab", "abc", "b", "ba", "zz", LONG, LONG + "k", LONG + "kk", LONG + "l",
                           LONG + "kz", "\u00e9t\u00e9"])
# A few milliseconds and microseconds within them: the stats keep the millisecond only.
stamps = st.tuples(st.integers(0, 3), st.sampled_from([0, 1, 500, 999])).map(
    lambda t: dt.datetime(2000, 1, 1) + dt.timedelta(milliseconds=t[0], microseconds=t[1]))
days = st.dates(dt.date(2000, 1, 1), dt.date(2000, 1, 20))
decimals = st.integers(-999, 999).map(lambda v: Decimal(v).scaleb(-2))


def _maybe(values):
    return st.one_of(st.none(), values, values, values)


rows = st.fixed_dictionaries({"i": _maybe(ints), "x": _maybe(doubles), "f": _maybe(doubles), "s": _maybe(strings),
                              "ts": _maybe(stamps), "d": _maybe(days), "m": _maybe(decimals)})
_NULLS = dict.fromkeys(["i", "x", "f", "s", "ts", "d", "m"])
files = st.lists(st.tuples(st.sampled_from([1, 2, None]), st.lists(rows, max_size=5)), min_size=1, max_size=5)


def _leaf(column: str, values, ops=("=", "<>", "<", "<=", ">", ">=", "<=>")):
    return st.tuples(st.sampled_from(ops), values).map(lambda t: (column, t[0], t[1]))


def _sql(value) -> str:
    if isinstance(value, str):
        return "'" + value + "'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return repr(value) if isinstance(value, float) else str(value)


def _texts(leaf) -> tuple[str, str]:
    """A leaf as Spark SQL (skiplake parses it) and as DuckDB SQL (the judge), which spells
    null-safe equality its own way and must compare a FLOAT column as the double Spark widens
    it to."""
    column, op, value = leaf
    duck_column = "CAST(f AS DOUBLE)" if column == "f" else column
    if op == "like":
        return f"{column} LIKE '{value}%'", f"{duck_column} LIKE '{value}%'"
    if op == "in":
        items = ", ".join(_sql(v) for v in value)
        return f"{column} IN ({items})", f"{duck_column} IN ({items})"
    if op == "is null":
        return f"{column} IS NULL", f"{duck_column} IS NULL"
    duck_op = "IS NOT DISTINCT FROM" if op == "<=>" else op
    return f"{column} {op} {_sql(value)}", f"{duck_column} {duck_op} {_sql(value)}"


LEAVES = st.one_of(
    _leaf("i", ints), _leaf("x", doubles), _leaf("f", doubles), _leaf("s", strings), _leaf("ts", stamps),
    _leaf("d", days), _leaf("m", decimals), _leaf("p", st.sampled_from([1, 2, 3])),
    st.tuples(st.just("s"), st.just("like"), st.sampled_from(["a", "k", LONG, LONG + "k", "zz", "\u00e9"])),
    st.tuples(st.sampled_from(["i", "p"]), st.just("in"), st.lists(ints, min_size=1, max_size=8)),
    st.tuples(st.just("s"), st.just("in"), st.lists(strings, min_size=1, max_size=6)),
    st.tuples(st.sampled_from(["i", "s", "ts", "p", "x"]), st.just("is null"), st.none()),
).map(_texts)
PREDICATES = st.recursive(LEAVES, lambda kids: st.one_of(
    st.tuples(kids, kids).map(lambda t: (f"({t[0][0]}) AND ({t[1][0]})", f"({t[0][1]}) AND ({t[1][1]})")),
    st.tuples(kids, kids).map(lambda t: (f"({t[0][0]}) OR ({t[1][0]})", f"({t[0][1]}) OR ({t[1][1]})")),
    kids.map(lambda k: (f"NOT ({k[0]})", f"NOT ({k[1]})"))), max_leaves=4)


def _written(folder: Path, entries, short_floats: bool = False) -> tuple[pa.Table, list[pa.Table]]:
    """Each file's rows as a Parquet file, and the log's view of the files: their partition
    value and the stats skiplake takes from the footers. With `short_floats` the FLOAT column's
    stats are spelled as delta-spark writes them, as the shortest decimal of the float32 (0.1,
    where skiplake writes 0.10000000149011612)."""
    log_rows, tables = [], []
    for n, (p, file_rows) in enumerate(entries):
        table = pa.Table.from_pylist([{**r, "ts": r["ts"] and r["ts"].replace(tzinfo=UTC)} for r in file_rows],
                                     schema=ARROW)
        path = folder / f"part-{n}.parquet"
        pq.write_table(table, path)
        stats = file_stats(str(path), SCHEMA, PARTS)
        if short_floats:
            parsed = json.loads(stats)
            for side in ("minValues", "maxValues"):
                if "f" in parsed.get(side, {}):
                    parsed[side]["f"] = float(str(np.float32(parsed[side]["f"])))
            stats = json.dumps(parsed)
        values = {"p": None if p is None else str(p)}
        log_rows.append({"path": path.name, "partitionValues": map_items(values), "size": 1, "modificationTime": 0,
                         "dataChange": True, "stats": stats, "tags": None})
        tables.append(table.append_column("p", pa.array([p] * len(table), pa.int32())))
    return pa.Table.from_pylist(log_rows, schema=FILES_SCHEMA), tables


def _outcomes(con: duckdb.DuckDBPyConnection, table: pa.Table, where: str) -> set[bool | None]:
    """The values the predicate takes on the file's rows, by DuckDB."""
    con.register("t", table)
    try:
        return {v for (v,) in con.execute(f"SELECT DISTINCT ({where}) FROM t").fetchall()}
    finally:
        con.unregister("t")


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=files, where=PREDICATES, short_floats=st.booleans())
@example(entries=[(1, [{**_NULLS, "f": 0.1}])], where=("f > 0.1", "CAST(f AS DOUBLE) > 0.1"), short_floats=True)
@example(entries=[(None, [{**_NULLS, "ts": dt.datetime(2000, 1, 1, 0, 0, 0, 999)}])],
         where=("ts > TIMESTAMP '2000-01-01 00:00:00'",) * 2, short_floats=False)
def test_every_evaluator_keeps_the_files_whose_rows_match(entries, where, short_floats):
    spark_where, duck_where = where
    node = bind(spark_where, SCHEMA)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    with tempfile.TemporaryDirectory() as folder:
        log, tables = _written(Path(folder), entries, short_floats)
        planner = evaluate_files(node, StatsTable(log, SCHEMA, PARTS))
        for n, table in enumerate(tables):
            stats = log.column("stats")[n].as_py()
            values = dict(log.column("partitionValues")[n].as_py())
            per_file = evaluate(node, file_lookup(SCHEMA, values, stats))
            by_planner = {v for v, mask in ((True, planner.t), (False, planner.f), (None, planner.n)) if mask[n]}
            assert by_planner == set(per_file), (spark_where, n, stats)
            actual = _outcomes(con, table, duck_where)
            assert actual <= set(per_file), (spark_where, duck_where, n, stats, table.to_pylist())


@settings(max_examples=examples(50), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=files, column=st.sampled_from(["i", "s", "d", "m", "p"]), keys=st.lists(
    st.one_of(ints, strings, days, decimals), max_size=12), max_values=st.sampled_from([0, 2, 100]))
def test_dynamic_pruning_keeps_the_files_holding_a_key(entries, column, keys, max_values):
    """A join's build keys, as dynamic pruning turns them into a filter (values or ranges), keep
    every file holding a row whose key equals one of them."""
    probe = Col(column, SCHEMA.field(column).type)
    with tempfile.TemporaryDirectory() as folder:
        log, tables = _written(Path(folder), entries)
        keep = may_match_files(key_filter(probe, keys, max_values, 2).predicate, StatsTable(log, SCHEMA, PARTS))
    for n, table in enumerate(tables):
        held = set(table.column(column).to_pylist()) - {None}
        if held & set(keys):
            assert keep[n], (column, keys, n, held)


def test_a_cut_string_max_is_an_upper_bound_only_with_its_marker():
    """A 40-character value is stored as a 32-character max ending in U+10FFFF; without the
    marker (another writer's bare prefix) the max bounds nothing."""
    stats = {"numRecords": 1, "minValues": {"s": LONG + "k"}, "maxValues": {"s": LONG + "k\U0010ffff"},
             "nullCount": {"s": 0}}
    bare = {**stats, "maxValues": {"s": LONG + "k"}}
    node = bind(f"s > '{LONG}l'", SCHEMA)
    assert True not in evaluate(node, file_lookup(SCHEMA, {"p": "1"}, json.dumps(stats)))
    assert True in evaluate(node, file_lookup(SCHEMA, {"p": "1"}, json.dumps(bare)))


def test_null_fact_arrays_agree_with_null_facts_file_by_file():
    from skiplake.skipping.bounds import null_fact_arrays, null_facts
    values = [None, 0, 1, 2, 5]
    pairs = [(nc, nr) for nc in values for nr in values]
    as_float = lambda v: np.nan if v is None else float(v)   # noqa: E731
    may, every, empty = null_fact_arrays(np.array([as_float(nc) for nc, _ in pairs]),
                                         np.array([as_float(nr) for _, nr in pairs]))
    for i, (nc, nr) in enumerate(pairs):
        assert (bool(may[i]), bool(every[i])) == null_facts(nc, nr), (nc, nr)
        assert bool(empty[i]) == (nr == 0)
