"""Data skipping end to end: pruned reads, Lake.sql/Lake.explain, OPTIMIZE ZORDER BY and `skiplake explain`.

Every test compares what skiplake reads after skipping files with what plain Spark reads over
all of a table's files, or checks that skipping actually happened where it must.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import os
import random
from decimal import Decimal
from typing import Any, Iterable, Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import skiplake
from skiplake.cli import main as cli_main
from skiplake.errors import InvalidArgumentError
from skiplake.log.actions import AddFile
from skiplake.log.paths import absolute_path
from skiplake.spark.reads.planned_reads import path_from_spark, read_files
from skiplake.table import Table
from testing_support.query_tools import scan_metrics
from tests.tiers import examples

pytestmark = [pytest.mark.spark, pytest.mark.connect]

ZORDER_TAGS = ("ZCUBE_ID", "ZCUBE_ZORDER_BY", "ZCUBE_ZORDER_CURVE")


# ---------------------------------------------------------------- helpers


def all_files_df(spark: SparkSession, table: Table) -> DataFrame:
    """Plain Spark over every live file of the table: no skipping at all."""
    snap = table.snapshot
    return read_files(spark, table.path, snap.schema, snap.partition_columns, snap.add_files)


def canon(rows: Iterable[Any]) -> list[str]:
    """Rows as sorted strings: NaN, -0.0 and None compare by their spelling."""
    return sorted(repr(tuple(r)) for r in rows)


def plain_sql(spark: SparkSession, tables: dict[str, Table], query: str) -> list[str]:
    """`query` run by plain Spark with each lake table a temporary view over all its files."""
    for name, t in tables.items():
        all_files_df(spark, t).createOrReplaceTempView(name)
    try:
        return canon(spark.sql(query).collect())
    finally:
        for name in tables:
            spark.catalog.dropTempView(name)


def skiplake_views(spark: SparkSession) -> list[str]:
    return [t.name for t in spark.catalog.listTables() if t.name.startswith("__skiplake_")]


def stat_range(f: AddFile, col: str) -> tuple[Any, Any]:
    st_ = json.loads(f.stats)
    return st_["minValues"][col], st_["maxValues"][col]


# ================================================================ 1. property: pruned read == full read

PROP_SCHEMA = ("i int, b bigint, x double, dec decimal(9,2), s string, d date, ts timestamp, "
               "flag boolean, p string")
LONG_PREFIX = "shared-prefix-longer-than-thirty-two-characters/"  # 48 chars: past the stats' 32-char cut
STRINGS = ["", "a", "ab", "abc", "b", "zz", LONG_PREFIX + "aaa", LONG_PREFIX + "aab", LONG_PREFIX + "zzz",
           LONG_PREFIX[:31], LONG_PREFIX[:33], LONG_PREFIX + "m" * 10, "\u00e9t\u00e9", "~tilde"]
PARTS = ["a", "b", None]
BASE_DAY = dt.date(2020, 1, 1)
BASE_TS = dt.datetime(2020, 1, 1)


def _prop_batch(rnd: random.Random, k: int) -> list[tuple]:
    """Rows of one batch: each batch has its own value ranges, so files differ in min/max."""
    rows = []
    lo = k * 10 - 60
    for _ in range(rnd.randint(8, 30)):
        def maybe(v: Any, p: float = 0.1) -> Any:
            return None if rnd.random() < p else v
        x = rnd.choice([float("nan"), -0.0, 0.0, float(lo + rnd.random() * 15), float(lo), float(lo + 15)]
                       if rnd.random() < 0.35 else [float(lo + rnd.random() * 15)])
        ts = BASE_TS + dt.timedelta(days=k, seconds=rnd.randint(0, 5), microseconds=rnd.choice([0, 1, 500, 999_999]))
        rows.append((
            maybe(lo + rnd.randint(0, 15)),
            maybe((1 << 40) * (k - 6) + rnd.randint(-3, 3)),
            maybe(x),
            maybe(Decimal(lo * 100 + rnd.randint(0, 2000)) / 100),
            maybe(rnd.choice(STRINGS[k % 5: k % 5 + 7])),
            maybe(BASE_DAY + dt.timedelta(days=k * 3 + rnd.randint(0, 4))),
            maybe(ts),
            maybe(rnd.random() < (0.9 if k % 3 == 0 else 0.1 if k % 3 == 1 else 0.5)),
            rnd.choice(PARTS) if k % 4 else PARTS[k % 3],
        ))
    return rows


_rnd = random.Random(20240611)
PROP_BATCHES: list[list[tuple]] = [_prop_batch(_rnd, k) for k in range(12)]
PROP_COLUMNS = ["i", "b", "x", "dec", "s", "d", "ts", "flag", "p"]


@pytest.fixture(scope="module")
def prop_table(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Table:
    """12 small random batches in 3 appends: a few dozen files with distinct value ranges."""
    lake = skiplake.Lake(spark, str(tmp_path_factory.mktemp("prop") / "warehouse"))
    t = lake.create_table("prop", PROP_SCHEMA, partition_by=["p"])
    raw_schema = PROP_SCHEMA.replace("ts timestamp", "ts string") + ", k int"
    # Three appends of four batches; each batch goes to a task of its own (one file per partition).
    for first in range(0, 12, 4):
        rows = [r[:6] + (None if r[6] is None else r[6].isoformat(sep=" "),) + r[7:] + (k - first,)
                for k in range(first, first + 4) for r in PROP_BATCHES[k]]
        df = spark.createDataFrame(rows, raw_schema)
        t.append(df.withColumn("ts", df.ts.cast("timestamp")).repartitionById(4, df.k).drop("k"))
    return lake.table("prop")


@pytest.fixture(scope="module")
def prop_all(spark: SparkSession, prop_table: Table) -> Iterable[DataFrame]:
    # Spark's own skipping of cached batches ignores NaN: its batch bounds leave NaN out, so
    # `1e300 < x` drops a batch holding NaN (which Spark orders above every double). The
    # reference must not skip anything.
    key = "spark.sql.inMemoryColumnarStorage.partitionPruning"
    before = spark.conf.get(key)
    spark.conf.set(key, "false")
    df = all_files_df(spark, prop_table).cache()
    df.count()
    yield df
    df.unpersist()
    spark.conf.set(key, before)


def _edges(col: str) -> list[Any]:
    """The min and max of `col` in each (batch, partition) group: the files' stats bounds, where
    an off-by-one in skipping (truncated strings and timestamps, -0.0, exclusive bounds) shows."""
    j = PROP_COLUMNS.index(col)
    out: set[Any] = set()
    for batch in PROP_BATCHES:
        for part in PARTS:
            vals = [r[j] for r in batch if r[8] == part and r[j] is not None
                    and not (isinstance(r[j], float) and math.isnan(r[j]))]
            if vals:
                out.update((min(vals), max(vals)))
    return sorted(out, key=repr)


def _near(col: str) -> list[str]:
    """SQL literals at and right next to the stats bounds of `col`."""
    out: list[str] = []
    for v in _edges(col):
        if col in ("i", "b"):
            out += [str(v - 1), str(v), str(v + 1)]
        elif col == "x":
            out += [repr(v), repr(math.nextafter(v, -math.inf)), repr(math.nextafter(v, math.inf))]
        elif col == "dec":
            out += [str(v - Decimal("0.01")), str(v), str(v + Decimal("0.01"))]
        elif col == "s":
            out += [f"'{w}'" for w in (v, v[:32], v[:32] + "\U0010ffff", v + " ", v[:-1] if v else v)]
        elif col == "d":
            out += [f"DATE'{v + dt.timedelta(days=n)}'" for n in (-1, 0, 1)]
        elif col == "ts":
            for us in (-1, 0, 1, -v.microsecond % 1000 - 1):
                out.append(f"TIMESTAMP'{(v + dt.timedelta(microseconds=us)).isoformat(sep=' ')}'")
    return sorted(set(out))


def _lit_int(lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.integers(lo, hi).map(str)


GENERIC: dict[str, st.SearchStrategy[str]] = {
    "i": _lit_int(-70, 70),
    "b": st.integers(-7, 7).flatmap(lambda k: st.integers(-4, 4).map(lambda d: str((1 << 40) * k + d))),
    "x": st.one_of(st.sampled_from(["0", "0.0", "-0.0", "-60", "55.5", "1e300", "-1e300"]),
                   st.integers(-70, 70).map(str),
                   st.floats(-70, 70, allow_nan=False).map(lambda f: repr(f))),
    "dec": st.one_of(st.integers(-7000, 7000).map(lambda c: str(Decimal(c) / 100)), _lit_int(-70, 70)),
    "s": st.one_of(st.sampled_from(STRINGS), st.sampled_from([LONG_PREFIX, LONG_PREFIX + "aa", "aa", "c"]))
          .map(lambda s: "'" + s + "'"),
    "d": st.integers(-3, 45).map(lambda n: (BASE_DAY + dt.timedelta(days=n)).isoformat())
          .flatmap(lambda d: st.sampled_from([f"DATE'{d}'", f"'{d}'"])),
    "ts": st.tuples(st.integers(-1, 13), st.integers(0, 6), st.sampled_from([0, 1, 500, 999_999]))
           .map(lambda t: BASE_TS + dt.timedelta(days=t[0], seconds=t[1], microseconds=t[2]))
           .map(lambda v: f"TIMESTAMP'{v.isoformat(sep=' ')}'"),
    "flag": st.sampled_from(["true", "false"]),
    "p": st.sampled_from(["'a'", "'b'", "'c'", "''"]),
}
# Literals next to a file's bounds two times out of three: that is where skipping goes wrong.
LITERALS: dict[str, st.SearchStrategy[str]] = {
    c: (st.one_of(st.sampled_from(_near(c)), st.sampled_from(_near(c)), g) if _near(c) else g)
    for c, g in GENERIC.items()
}
LIKE_PREFIXES = ["", "a", "ab", "b", "z", LONG_PREFIX[:20], LONG_PREFIX, LONG_PREFIX + "a", LONG_PREFIX + "z",
                 LONG_PREFIX[:32], LONG_PREFIX[:31], LONG_PREFIX[:33], "\u00e9"]


# Columns whose stats need care (truncation, NaN, -0.0, scale) come up twice as often.
LEAF_COLUMNS = PROP_COLUMNS + ["x", "dec", "s", "ts"]


@st.composite
def leaf(draw: st.DrawFn) -> str:
    """One comparison, BETWEEN, IN/NOT IN, IS [NOT] NULL, LIKE 'prefix%' or bare boolean."""
    col = draw(st.sampled_from(LEAF_COLUMNS))
    lit = LITERALS[col]
    kind = draw(st.sampled_from(["cmp"] * 5 + ["between", "in", "not in", "null", "like", "bare"]))
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">=", "<=>"]))
        value = draw(st.one_of(lit, st.just("NULL"))) if op == "<=>" else draw(lit)
        return f"{col} {op} {value}" if draw(st.booleans()) else f"{value} {op} {col}"
    if kind == "between":
        return f"{col} BETWEEN {draw(lit)} AND {draw(lit)}"
    if kind in ("in", "not in"):
        items = draw(st.lists(st.one_of(lit, lit, lit, st.just("NULL")), min_size=1, max_size=4))
        return f"{col} {kind.upper()} ({', '.join(items)})"
    if kind == "null":
        return f"{col} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == "like" or col == "s":
        return f"s LIKE '{draw(st.sampled_from(LIKE_PREFIXES))}%'"
    return "flag" if draw(st.booleans()) else "NOT flag"


predicates = st.recursive(leaf(), lambda kids: st.one_of(
    st.tuples(kids, kids).map(lambda t: f"({t[0]}) AND ({t[1]})"),
    st.tuples(kids, kids).map(lambda t: f"({t[0]}) OR ({t[1]})"),
    kids.map(lambda k: f"NOT ({k})")), max_leaves=3)


def test_prop_table_has_files_to_skip(prop_table: Table) -> None:
    """The property test below is only meaningful if the table has many files with distinct
    ranges, a NULL partition, and predicates that do skip files."""
    snap = prop_table.snapshot
    assert 15 <= len(snap.add_files) <= 40
    assert {f.partitionValues.get("p") for f in snap.add_files} == {"a", "b", None}
    for where in ("i < -40", "d >= DATE'2020-01-30'", "p IS NULL", f"s LIKE '{LONG_PREFIX}z%'",
                  "b = 0",
                  # sqlglot reads Spark's TIMESTAMP'...' as a TIMESTAMPTZ cast; the binder must accept it.
                  "ts > TIMESTAMP'2020-01-11 00:00:00'"):
        report = prop_table.scan(where).report
        assert 0 < report.files_selected < report.files_total, where


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=predicates)
def test_pruned_read_equals_full_read(spark: SparkSession, prop_table: Table, prop_all: DataFrame,
                                      where: str) -> None:
    """Skipping may only drop files with no matching row: the rows of read(where) must equal
    Spark's filter over all files, for NaN, -0.0, NULLs, long strings, micros timestamps."""
    plan = prop_table.scan(where)
    report = plan.report
    assert report.files_selected == len(plan.files) <= report.files_total
    assert report.bytes_selected == sum(f.size for f in plan.files)
    got = prop_table.read(where).collect()
    expected = prop_all.filter(where).collect()
    assert canon(got) == canon(expected), where
    assert report.rows_selected is not None and report.rows_selected >= len(got)


SWEEP_OPS = ["=", "<>", "<", "<=", ">", ">=", "<=>", "NOT <", "NOT <=>"]
SPARK_TYPES = {"i": "int", "b": "bigint", "x": "double", "dec": "decimal(9,2)", "s": "string", "d": "date",
               "ts": "timestamp", "flag": "boolean", "p": "string"}


def _sweep_values(col: str) -> list[tuple[str, str]]:
    """(SQL literal, the same value as text for CAST) at the stats bounds of `col`, where an
    off-by-one (exclusive bounds, 32-char strings, millisecond timestamps, -0.0) would show."""
    out: list[tuple[str, str]] = []
    for v in _edges(col) + ([0.0, -0.0] if col == "x" else []):
        if col in ("i", "b", "dec"):
            out.append((str(v), str(v)))
        elif col == "x":
            out.append((repr(v), repr(v)))
        elif col == "s":
            out += [(f"'{w}'", w) for w in {v, v[:32], v[:32] + "\U0010ffff"}]
        elif col == "d":
            out.append((f"DATE'{v}'", str(v)))
        elif col == "ts":
            ms = v.replace(microsecond=v.microsecond // 1000 * 1000)
            for w in {v, ms + dt.timedelta(microseconds=999)}:
                text = w.isoformat(sep=" ")
                out.append((f"TIMESTAMP'{text}'", text))
    if col == "flag":
        out = [("true", "true"), ("false", "false")]
    if col == "p":
        out = [("'a'", "a"), ("'b'", "b"), ("''", "")]
    return sorted(set(out))


def _sweep_leaves() -> list[tuple[str, str, str, str]]:
    """(leaf SQL, column, op, value text) for every op at every bound of every column."""
    leaves = []
    for col in PROP_COLUMNS:
        for lit, text in _sweep_values(col):
            for op in SWEEP_OPS:
                neg, bare = ("NOT ", op[4:]) if op.startswith("NOT ") else ("", op)
                leaves.append((f"{neg}({col} {bare} {lit})", col, op, text))
        for op in ("IS NULL", "IS NOT NULL"):
            leaves.append((f"{col} {op}", col, op, ""))
    for prefix in LIKE_PREFIXES + [v[:n] for v in _edges("s") for n in (1, 31, 32, 33)]:
        leaves.append((f"s LIKE '{prefix}%'", "s", "LIKE", prefix))
    return list(dict.fromkeys(leaves))


def test_every_bound_leaf_skips_soundly(spark: SparkSession, prop_table: Table) -> None:
    """Random predicates rarely hit a file's exact bounds, so every comparison at every bound
    (and next to truncated ones) is checked: no file holding a matching row may be skipped.
    Plain Spark finds the files with matches for all leaves in one cross-join job."""
    snap = prop_table.snapshot
    data = (read_files(spark, prop_table.path, snap.schema, snap.partition_columns, snap.add_files,
                       with_file_info=True).withColumnRenamed("__skiplake_file", "file").cache())
    leaves = _sweep_leaves()
    assert len(leaves) > 1000
    # One row per leaf, its value cast once to its column's type; one cross join evaluates them all.
    typed = [f"CAST(CASE WHEN col = '{c}' AND op NOT IN ('LIKE', 'IS NULL', 'IS NOT NULL') THEN text END "
             f"AS {t}) AS v_{c}" for c, t in SPARK_TYPES.items()]
    table = spark.createDataFrame([(i, c, op, text) for i, (_, c, op, text) in enumerate(leaves)],
                                  "leaf int, col string, op string, text string").selectExpr("*", *typed)
    per_column = []
    for col in PROP_COLUMNS:
        c, v = f"`{col}`", f"v_{col}"
        cases = " ".join(f"WHEN '{op}' THEN {op[:4] if op.startswith('NOT ') else ''}"
                         f"({c} {op.removeprefix('NOT ')} {v})" for op in SWEEP_OPS)
        per_column.append(f"WHEN '{col}' THEN CASE op {cases} WHEN 'IS NULL' THEN {c} IS NULL "
                          f"WHEN 'IS NOT NULL' THEN {c} IS NOT NULL WHEN 'LIKE' THEN {c} LIKE concat(text, '%') END")
    matches = (data.crossJoin(F.broadcast(table)).filter(f"CASE col {' '.join(per_column)} END")
               .select("leaf", "file").distinct().toArrow())
    data.unpersist()
    needed: dict[int, set[str]] = {}
    for leaf_id, file in zip(matches.column("leaf").to_pylist(), matches.column("file").to_pylist()):
        needed.setdefault(leaf_id, set()).add(path_from_spark(file))
    wrong = []
    pruning = 0
    for i, (sql, *_rest) in enumerate(leaves):
        selected = {absolute_path(prop_table.path, f.path) for f in prop_table.scan(sql).files}
        pruning += len(selected) < len(snap.add_files)
        missed = needed.get(i, set()) - selected
        if missed:
            wrong.append(f"{sql}: skipped {len(missed)} file(s) with matching rows")
    assert not wrong, f"{len(wrong)} of {len(leaves)} leaves skip wrongly:\n" + "\n".join(wrong[:15])
    assert pruning > len(leaves) // 2  # and the bounds do prune: most leaves skip some file


SQL_EXTRA_LEAVES = [
    "s = 'it''s'", "s = 'a\\\\b'", "x > 1e10", "x < -1.5E-7", "dec IN (1.5, -2.25)", "s LIKE 'ab%'", "s LIKE 'a_%'",
    "i IN (" + ", ".join(map(str, range(-60, -40))) + ")",  # long lists become InSet in Spark's plan
    "d IN (" + ", ".join(f"DATE'2020-01-{k:02d}'" for k in range(1, 20)) + ")",
    "ts IN (" + ", ".join(f"TIMESTAMP'2020-01-0{k} 00:00:01.000500'" for k in range(1, 9)) + ")",
    "flag", "NOT flag", "flag = false", "b > 1099511627776", "p = 'a'", "p IS NULL", "coalesce(i, 0) > 5",
    "ts > TIMESTAMP'2020-01-11 00:00:00'", "d >= '2020-01-30'",
]


@pytest.mark.both_modes
def test_sql_pushdown_prunes_like_a_direct_scan(spark: SparkSession, prop_table: Table) -> None:
    """A filter that reaches the table through Spark's optimizer (Catalyst literals turned back
    into SQL) must select the same files as the same filter given to Table.scan: a literal
    whose type is lost there would stop pruning (or, worse, prune wrongly)."""
    lake = skiplake.Lake(spark, os.path.dirname(prop_table.path))
    leaves = SQL_EXTRA_LEAVES + [sql for sql, *_ in _sweep_leaves()[::25]]
    differ = []
    for where in leaves:
        [report] = lake.explain(f"SELECT * FROM prop WHERE {where}")
        direct = prop_table.scan(where).report
        if (report.files_selected, report.files_total) != (direct.files_selected, direct.files_total):
            differ.append(f"{where}: sql {report.files_selected}, scan {direct.files_selected} ({report.predicate})")
    assert not differ, "\n".join(differ[:15])
    query = f"SELECT * FROM prop WHERE {SQL_EXTRA_LEAVES[9]} OR ({SQL_EXTRA_LEAVES[8]} AND NOT flag)"
    assert canon(lake.sql(query).collect()) == plain_sql(spark, {"prop": prop_table}, query)


# ================================================================ 2 and 3. Lake.sql / Lake.explain

N_ITEMS = 200
SALES_FILES = 8


def _sales_rows(rnd: random.Random) -> list[tuple[int, int, int | None]]:
    return [(item, rnd.randint(1, 100), rnd.choice([1, 2, 3, None]))
            for item in range(N_ITEMS) for _ in range(15)]


@pytest.fixture(scope="module")
def sql_lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[skiplake.Lake, list[tuple]]:
    """store_sales (3000 rows in 8 files by item range) and item (categories by item range)."""
    lake = skiplake.Lake(spark, str(tmp_path_factory.mktemp("sql") / "warehouse"))
    rows = _sales_rows(random.Random(7))
    ss = lake.create_table("store_sales", "ss_item_sk int, ss_quantity int, ss_store_sk int")
    ss.append(spark.createDataFrame(rows, "ss_item_sk int, ss_quantity int, ss_store_sk int")
              .repartitionByRange(SALES_FILES, "ss_item_sk"))
    item = lake.create_table("item", "i_item_sk int, i_category string")
    # Only even items below 150 exist in `item`: the rest have no match (for the anti join).
    items = [(k, ["Books", "Music", "Sports", "Home"][k // 40]) for k in range(0, 150, 2)]
    item.append(spark.createDataFrame(items, "i_item_sk int, i_category string").repartitionByRange(4, "i_item_sk"))
    return lake, rows


def _tables(lake: skiplake.Lake) -> dict[str, Table]:
    return {name: lake.table(name) for name in lake.tables()}


def check_same(spark: SparkSession, lake: skiplake.Lake, query: str) -> list[str]:
    """lake.sql(query) returns what plain Spark returns over whole tables; no views are left."""
    expected = plain_sql(spark, _tables(lake), query)
    got = canon(lake.sql(query).collect())
    assert got == expected, query
    assert skiplake_views(spark) == []
    return got


@pytest.mark.both_modes
def test_q1_item_in_list(spark: SparkSession, sql_lake: tuple[skiplake.Lake, list[tuple]]) -> None:
    """The seed's Q1: an IN list on the item key reads one file of eight and sums correctly."""
    lake, rows = sql_lake
    query = "SELECT sum(ss_quantity) AS q FROM store_sales WHERE ss_item_sk IN (40, 41, 42)"
    assert lake.sql(query).collect()[0].q == sum(q for k, q, _ in rows if k in (40, 41, 42))
    check_same(spark, lake, query)
    [report] = lake.explain(query)
    assert report.label == "store_sales"
    assert report.files_total == SALES_FILES
    assert 1 <= report.files_selected < report.files_total
    assert report.rows_selected is not None and report.rows_selected < report.rows_total


def test_table_names_are_found_where_they_lie(spark: SparkSession, sql_lake: tuple[skiplake.Lake, list[tuple]],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A query's table names resolve in any case without listing the lake's root (on an object
    store a LIST per table); a name no table has still gets an error that lists the tables."""
    from skiplake.errors import NotATableError
    lake, rows = sql_lake
    listed: list[int] = []
    real = lake.tables
    monkeypatch.setattr(lake, "tables", lambda: listed.append(1) or real())
    assert lake.sql("SELECT count(*) AS n FROM STORE_SALES").collect()[0].n == len(rows)
    assert lake.last_explain is not None and [r.label for r in lake.last_explain] == ["STORE_SALES"]
    assert listed == []
    with pytest.raises(NotATableError, match="the lake has .*store_sales"):
        lake.sql("SELECT * FROM no_such_table")
    assert listed


def test_explain_reads_paths_and_time_travel_as_sql_does(spark: SparkSession,
                                                         sql_lake: tuple[skiplake.Lake, list[tuple]]) -> None:
    lake, _ = sql_lake
    where = "WHERE ss_item_sk < 30"
    version = lake.table("store_sales").version

    def files(query: str) -> list[tuple[int, int]]:
        return [(r.files_selected, r.files_total) for r in lake.explain(query)]
    expected = files(f"SELECT * FROM store_sales {where}")
    assert expected[0][0] < expected[0][1]
    assert files(f"SELECT * FROM delta.`{lake.path_of('store_sales')}` {where}") == expected
    assert files(f"SELECT * FROM store_sales VERSION AS OF {version} {where}") == expected


@pytest.mark.both_modes
def test_inner_join_prunes_both_sides(spark: SparkSession, sql_lake: tuple[skiplake.Lake, list[tuple]]) -> None:
    """Filters on each side of an inner join prune that side's files; labels keep the aliases."""
    lake, _ = sql_lake
    query = ("SELECT i.i_category, count(*) AS n, sum(ss.ss_quantity) AS q FROM store_sales ss "
             "JOIN item i ON ss.ss_item_sk = i.i_item_sk "
             "WHERE ss.ss_item_sk < 60 AND i.i_category = 'Books' GROUP BY i.i_category")
    got = check_same(spark, lake, query)
    assert len(got) == 1 and "Books" in got[0]
    ss, item = lake.explain(query)
    assert (ss.label, item.label) == ("store_sales AS ss", "item AS i")
    assert ss.files_selected < ss.files_total
    assert item.files_selected < item.files_total


def test_left_join_is_null_does_not_prune_right_side(spark: SparkSession,
                                                     sql_lake: tuple[skiplake.Lake, list[tuple]]) -> None:
    """`right.col IS NULL` after a LEFT JOIN tests for missing matches: pushing it into the right
    side's scan would skip every item file and turn the anti join into "all rows"."""
    lake, rows = sql_lake
    query = ("SELECT ss.ss_item_sk, count(*) AS n FROM store_sales ss LEFT JOIN item i "
             "ON ss.ss_item_sk = i.i_item_sk AND i.i_category = 'Books' "
             "WHERE i.i_item_sk IS NULL AND ss.ss_item_sk < 50 GROUP BY ss.ss_item_sk")
    got = check_same(spark, lake, query)
    books = {k for k in range(0, 40, 2)}
    assert len(got) == len({k for k, _, _ in rows if k < 50 and k not in books}) == 30
    ss, item = lake.explain(query)
    assert item.label == "item AS i"
    assert item.files_selected >= 1  # the Books file must be read
    assert ss.files_selected < ss.files_total


@pytest.mark.both_modes
def test_cte_used_twice_reads_union_of_filters(spark: SparkSession,
                                               sql_lake: tuple[skiplake.Lake, list[tuple]]) -> None:
    """A CTE used with two different filters reads the files either filter needs, not fewer."""
    lake, rows = sql_lake
    query = ("WITH s AS (SELECT ss_item_sk, ss_quantity FROM store_sales) "
             "SELECT 'lo' AS k, count(*) AS n, sum(ss_quantity) AS q FROM s WHERE ss_item_sk < 20 "
             "UNION ALL SELECT 'hi', count(*), sum(ss_quantity) FROM s WHERE ss_item_sk >= 185")
    check_same(spark, lake, query)
    got = {r.k: (r.n, r.q) for r in lake.sql(query).collect()}
    assert got["lo"][0] == 20 * 15 and got["hi"][0] == 15 * 15
    assert got["hi"][1] == sum(q for k, q, _ in rows if k >= 185)
    [report] = lake.explain(query)
    assert report.label == "store_sales"
    assert 2 <= report.files_selected < report.files_total


def test_a_cte_naming_a_table_twice_and_used_twice_keeps_every_copys_rows(
        spark: SparkSession, sql_lake: tuple[skiplake.Lake, list[tuple]]) -> None:
    """Each copy of the CTE reads one of two references of the same table, with its own filter:
    Spark's plan text alone cannot say which (under Spark Connect), so both read what either needs."""
    lake, _rows = sql_lake
    query = ("WITH s AS (SELECT ss_item_sk, ss_quantity FROM store_sales a UNION ALL "
             "SELECT ss_item_sk, ss_quantity FROM store_sales b) "
             "SELECT 'lo' AS k, count(*) AS n FROM s WHERE ss_item_sk < 20 "
             "UNION ALL SELECT 'hi', count(*) FROM s WHERE ss_item_sk >= 185")
    check_same(spark, lake, query)
    got = {r.k: r.n for r in lake.sql(query).collect()}
    assert got == {"lo": 2 * 20 * 15, "hi": 2 * 15 * 15}
    for report in lake.explain(query):
        assert 2 <= report.files_selected < report.files_total


@pytest.mark.classic_only
@pytest.mark.parametrize("where", ["ss_item_sk >= 30", "ss_item_sk < 30"])
def test_final_query_reads_exactly_the_planned_files(spark: SparkSession,
                                                     sql_lake: tuple[skiplake.Lake, list[tuple]], where: str) -> None:
    """Most files kept (the final query names the dropped ones, NOT IN) or few (IN): Spark lists
    just the planned files either way."""
    lake, _ = sql_lake
    query = f"SELECT count(*) AS n, sum(ss_quantity) AS q FROM store_sales WHERE {where}"
    check_same(spark, lake, query)
    df = lake.sql(query)
    df.collect()
    [report] = lake.last_explain
    assert 1 <= report.files_selected < report.files_total
    assert scan_metrics(df)[0] == report.files_selected  # numFiles of the executed scan


def _scans_and_reuses(df: Any) -> tuple[int, int]:
    """(file scans, reused exchanges) of a DataFrame's final plan, once it has run."""
    text = df._jdf.queryExecution().executedPlan().toString()
    return text.count("FileScan parquet"), text.count("ReusedExchange")


@pytest.mark.classic_only
@pytest.mark.parametrize("where", ["ss_store_sk >= 0", "ss_item_sk < 60"])
def test_same_table_read_alike_is_scanned_once(spark: SparkSession, sql_lake: tuple[skiplake.Lake, list[tuple]],
                                               where: str) -> None:
    """A table named twice with the same filters is read through one relation, so Spark reuses
    the scan as it does over plain tables (TPC-DS q44 scanned store_sales four times, not twice).
    When nothing is pruned, the two references share it from the analysis pass on: the query is
    that pass's plan, not edited."""
    lake, _ = sql_lake
    side = f"SELECT ss_item_sk, sum(ss_quantity) AS q FROM store_sales WHERE {where} GROUP BY ss_item_sk"
    query = f"SELECT a.ss_item_sk, a.q, b.q AS q2 FROM ({side}) a JOIN ({side}) b ON a.ss_item_sk = b.ss_item_sk"
    check_same(spark, lake, query)
    lake.table("store_sales").read().createOrReplaceTempView("__plain_ss")
    try:
        plain = spark.sql(query.replace("store_sales", "__plain_ss"))
        plain.collect()
        df = lake.sql(query)
        df.collect()
        assert _scans_and_reuses(df) == _scans_and_reuses(plain)
        assert _scans_and_reuses(df)[1] >= 1
        first, second = lake.last_explain
        pruned = first.files_selected < first.files_total
        assert (second.files_selected < second.files_total) == pruned
        assert any("relations swapped" in note for note in lake.last_explain.notes) == pruned, \
            lake.last_explain.text()
    finally:
        spark.catalog.dropTempView("__plain_ss")


@pytest.fixture(scope="module")
def swap_lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> skiplake.Lake:
    """The same 2,000 rows (k, q) in 8 files by k: plain, with deletion vectors on some files, with
    columns mapped (k renamed from kk), partitioned by k's tens; and a dimension `d`."""
    lake = skiplake.Lake(spark, str(tmp_path_factory.mktemp("swap") / "warehouse"))
    rows = spark.range(2000).selectExpr("CAST(id % 400 AS INT) AS k", "CAST(id AS INT) AS q").repartitionByRange(8, "k")
    lake.create_table("plain", "k int, q int").append(rows)
    dv = lake.create_table("dv", "k int, q int", properties={"delta.enableDeletionVectors": "true"})
    dv.append(rows)
    dv.delete("q % 7 = 0 AND (k < 60 OR k >= 300)")  # a deletion vector in some files only
    mapped = lake.create_table("mapped", "kk int, q int", properties={"delta.columnMapping.mode": "name"})
    mapped.append(rows.withColumnRenamed("k", "kk"))
    mapped.rename_column("kk", "k")
    lake.create_table("parted", "k int, q int, tens int", partition_by=["tens"]).append(
        rows.selectExpr("k", "q", "CAST(k / 100 AS INT) AS tens"))
    lake.create_table("d", "k int, name string").append(
        spark.range(0, 400, 5).selectExpr("CAST(id AS INT) AS k", "concat('n', id) AS name").coalesce(1))
    return lake


@pytest.mark.classic_only
@pytest.mark.parametrize("table", ["plain", "dv", "mapped", "parted"])
@pytest.mark.parametrize("where", ["t.k < 45", "t.k >= 350 OR t.k = 100", "t.k < -1"])
def test_final_plan_is_the_analysed_plan_with_relations_swapped(spark: SparkSession, swap_lake: skiplake.Lake,
                                                                table: str, where: str) -> None:
    """The final query is not parsed again: the analysis pass's plan gets, for each pruned
    relation, one over just its planned files (none: an empty filter), with the very same
    columns. Spark lists only those files, reads no file name per row, and the answers are
    plain Spark's, deletion vectors and renamed columns included."""
    lake = swap_lake
    query = (f"SELECT d.name, count(*) AS n, sum(t.q) AS s FROM {table} t JOIN d ON t.k = d.k "
             f"WHERE {where} GROUP BY d.name")
    for name in (table, "d"):
        lake.table(name).read().createOrReplaceTempView(f"__plain_{name}")
    try:
        expected = canon(spark.sql(query.replace(f"FROM {table} t JOIN d ON", f"FROM __plain_{table} t JOIN __plain_d d ON"))
                         .collect())
    finally:
        for name in (table, "d"):
            spark.catalog.dropTempView(f"__plain_{name}")
    df = lake.sql(query)
    assert canon(df.collect()) == expected
    explained = lake.last_explain
    assert any("relations swapped" in note for note in explained.notes), explained.text()
    [report] = [r for r in explained if r.label.startswith(table)]
    assert report.files_selected < report.files_total
    executed = df._jdf.queryExecution().executedPlan().toString()
    assert "file_name" not in executed, executed
    planned = sorted(os.path.basename(f.path) for f in lake.table(table).scan(where.replace("t.", "")).files)
    read = sorted(os.path.basename(path_from_spark(p)) for p in df.inputFiles() if f"/{table}/" in p)
    assert read == planned and len(planned) == report.files_selected


@pytest.mark.classic_only
def test_a_cte_read_twice_swaps_its_one_relation(spark: SparkSession, swap_lake: skiplake.Lake) -> None:
    lake = swap_lake
    query = ("WITH s AS (SELECT k, q FROM plain WHERE k < 45) "
             "SELECT count(*) AS n, sum(a.q + b.q) AS s FROM s a JOIN s b ON a.k = b.k")
    lake.table("plain").read().createOrReplaceTempView("__plain_plain")
    try:
        expected = canon(spark.sql(query.replace("FROM plain", "FROM __plain_plain")).collect())
    finally:
        spark.catalog.dropTempView("__plain_plain")
    df = lake.sql(query)
    assert canon(df.collect()) == expected
    assert any("1 relations swapped" in note for note in lake.last_explain.notes), lake.last_explain.text()
    [report] = lake.last_explain
    assert len(df.inputFiles()) == report.files_selected < report.files_total


@pytest.mark.both_modes
def test_in_subquery(spark: SparkSession, sql_lake: tuple[skiplake.Lake, list[tuple]]) -> None:
    """The table inside an IN (SELECT ...) subquery is pruned by its own filter."""
    lake, rows = sql_lake
    query = ("SELECT sum(ss_quantity) AS q FROM store_sales WHERE ss_store_sk = 2 AND ss_item_sk IN "
             "(SELECT i_item_sk FROM item WHERE i_category = 'Sports')")
    check_same(spark, lake, query)
    sports = set(range(80, 120, 2))
    assert lake.sql(query).collect()[0].q == sum(q for k, q, s in rows if s == 2 and k in sports)
    ss, item = lake.explain(query)
    assert (ss.label, item.label) == ("store_sales", "item")
    assert item.files_selected < item.files_total


def test_union_all_of_one_table_gives_one_report_each(spark: SparkSession,
                                                      sql_lake: tuple[skiplake.Lake, list[tuple]]) -> None:
    """Two references to the same table are planned separately, each with its own filter."""
    lake, _ = sql_lake
    query = ("SELECT ss_item_sk, ss_quantity FROM store_sales WHERE ss_item_sk = 3 "
             "UNION ALL SELECT ss_item_sk, ss_quantity FROM store_sales t WHERE t.ss_item_sk = 197")
    got = check_same(spark, lake, query)
    assert len(got) == 30
    first, second = lake.explain(query)
    assert (first.label, second.label) == ("store_sales", "store_sales AS t")
    assert first.files_selected == second.files_selected == 1
    assert first.data_filters != second.data_filters


@pytest.mark.both_modes
def test_filter_inferred_through_join(spark: SparkSession, sql_lake: tuple[skiplake.Lake, list[tuple]]) -> None:
    """`a.k = b.k AND b.k = 5` lets Spark infer `a.k = 5`: the store_sales side is pruned too."""
    lake, _ = sql_lake
    query = ("SELECT count(*) AS n FROM store_sales a JOIN item b ON a.ss_item_sk = b.i_item_sk "
             "WHERE b.i_item_sk = 6")
    check_same(spark, lake, query)
    assert lake.sql(query).collect()[0].n == 15
    a, b = lake.explain(query)
    assert (a.label, b.label) == ("store_sales AS a", "item AS b")
    assert a.files_selected == 1 < a.files_total
    assert b.files_selected == 1 < b.files_total
    assert skiplake_views(spark) == []


def test_unfiltered_reference_reads_everything(spark: SparkSession,
                                               sql_lake: tuple[skiplake.Lake, list[tuple]]) -> None:
    """No pushed filter, no skipping: explain reports every file selected."""
    lake, _ = sql_lake
    query = "SELECT count(*) FROM store_sales s JOIN item ON s.ss_item_sk = item.i_item_sk"
    check_same(spark, lake, query)
    reports = lake.explain(query)
    assert [r.label for r in reports] == ["store_sales AS s", "item"]
    # The join key is IS NOT NULL-filtered by Spark; no file is all nulls, so nothing is skipped.
    assert all(r.files_selected == r.files_total for r in reports)
    assert skiplake_views(spark) == []


# ================================================================ 4. OPTIMIZE ZORDER BY

Z_ROWS = 50_000
Z_RANGE = 10_000


def _ab(seed: int, n: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, Z_RANGE, n)
    b = rng.integers(0, Z_RANGE, n)
    return list(zip(a.tolist(), b.tolist()))


def _multiset(df: DataFrame) -> list[tuple[int, int]]:
    t = df.select("a", "b").toArrow()
    return sorted(zip(t.column("a").to_pylist(), t.column("b").to_pylist()))


def _mean_width(files: Sequence[AddFile], col: str) -> float:
    return float(np.mean([hi - lo for lo, hi in (stat_range(f, col) for f in files)]))


@pytest.mark.both_modes
def test_zorder_clusters_and_is_incremental(spark: SparkSession, lake: skiplake.Lake) -> None:
    """Z-ordering keeps the rows, tags its files, narrows each file's ranges so point queries
    skip files, leaves its own files alone the second time and later rewrites only new files."""
    t = lake.create_table("z", "a int, b int")
    data = _ab(1, Z_ROWS)
    t.append(spark.createDataFrame(data, "a int, b int").repartition(8))
    t = lake.table("z")
    before = t.snapshot.add_files
    assert len(before) == 8
    probe = "a = 1234"
    files_before = t.scan(probe).report.files_selected
    assert files_before == 8  # randomly spread rows: every file spans the whole range
    width_before = _mean_width(before, "a")
    total = sum(f.size for f in before)

    res = t.optimize(zorder_by=["a", "b"], target_file_size=total // 12)
    t = lake.table("z")
    after = t.snapshot.add_files
    assert res.version == t.version == 2
    assert res.files_removed == 8 and res.bytes_removed == total
    assert res.files_added == len(after) >= 8
    assert res.bytes_added == sum(f.size for f in after)
    assert res.partitions_optimized == 1
    assert {f.path for f in after}.isdisjoint(f.path for f in before)
    assert sum(f.num_records or 0 for f in after) == Z_ROWS
    for f in after:
        assert f.tags is not None and set(ZORDER_TAGS) <= set(f.tags)
        assert json.loads(f.tags["ZCUBE_ZORDER_BY"]) == ["a", "b"]
        assert f.tags["ZCUBE_ZORDER_CURVE"] == "zorder" and f.tags["ZCUBE_ID"]
    assert _multiset(t.read()) == sorted(data)
    probed = t.scan(probe).report
    assert probed.files_selected < files_before
    assert probed.rows_selected is not None and probed.rows_selected < 0.5 * Z_ROWS
    assert _mean_width(after, "a") < 0.5 * width_before
    assert _mean_width(after, "b") < 0.8 * _mean_width(before, "b")
    latest = t.history(1)[0]
    assert latest["operation"] == "OPTIMIZE"
    zorder_param = latest["operationParameters"]["zOrderBy"]
    assert (json.loads(zorder_param) if isinstance(zorder_param, str) else zorder_param) == ["a", "b"]

    # Same columns again: every file is already Z-ordered by them.
    again = t.optimize(zorder_by=["a", "b"], target_file_size=total // 12)
    assert again.version is None and again.files_removed == again.files_added == 0
    assert lake.table("z").version == 2

    # New appends are the only untagged files: only they are rewritten.
    extra = _ab(2, 3000)
    t.append(spark.createDataFrame(extra, "a int, b int").repartition(2))
    t = lake.table("z")
    new_files = [f for f in t.snapshot.add_files if not f.tags]
    assert len(new_files) == 2
    third = t.optimize(zorder_by=["a", "b"], target_file_size=total // 12)
    assert third.version is not None and third.files_removed == len(new_files)
    t = lake.table("z")
    assert {f.path for f in after} <= {f.path for f in t.snapshot.add_files}
    assert all(f.tags and f.tags.get("ZCUBE_ZORDER_BY") for f in t.snapshot.add_files)
    assert _multiset(t.read()) == sorted(data + extra)
    # full=True: every file again, as Delta's ZORDER BY does.
    live = t.snapshot.num_files
    full = t.optimize(zorder_by=["a", "b"], target_file_size=total // 12, full=True)
    assert full.files_removed == live
    assert _multiset(lake.table("z").read()) == sorted(data + extra)


def test_zorder_sort_within_and_row_groups(spark: SparkSession, lake: skiplake.Lake) -> None:
    """sort_within keeps the Z-order's files but sorts each file's rows by another column, in
    row groups of row_group_size bytes: each row group then covers a narrow range of that
    column, narrower than the file's, which is what readers skip row groups by."""
    import pyarrow.parquet as pq
    t = lake.create_table("zs", "a int, b int")
    data = _ab(5, Z_ROWS)
    t.append(spark.createDataFrame(data, "a int, b int").repartition(4))
    t = lake.table("zs")
    total = sum(f.size for f in t.snapshot.add_files)
    t.optimize(zorder_by=["a", "b"], target_file_size=total // 6, sort_within=["b"], row_group_size=16 << 10)
    t = lake.table("zs")
    assert _multiset(t.read()) == sorted(data)
    param = t.history(1)[0]["operationParameters"]["sortWithin"]
    assert (json.loads(param) if isinstance(param, str) else param) == ["b"]
    narrower = 0
    for f in t.snapshot.add_files:
        meta = pq.ParquetFile(absolute_path(t.path, f.path)).metadata
        b = pq.read_table(absolute_path(t.path, f.path), columns=["b"]).column("b").to_pylist()
        assert b == sorted(b)
        assert meta.num_row_groups >= 2
        lo, hi = stat_range(f, "b")
        widths = [meta.row_group(i).column(1).statistics.max - meta.row_group(i).column(1).statistics.min
                  for i in range(meta.num_row_groups)]
        narrower += max(widths) < (hi - lo)
    assert narrower == len(t.snapshot.add_files)
    assert len(t.snapshot.add_files) >= 4
    assert _mean_width(t.snapshot.add_files, "a") < 0.6 * Z_RANGE  # the files are still clustered by a


@pytest.mark.classic_only
def test_zorder_page_rows_lets_spark_skip_pages(spark: SparkSession, lake: skiplake.Lake) -> None:
    """page_rows writes small Parquet pages in the files' one row group: a point filter on the
    sort column makes Spark's reader skip most pages (the column index): it returns a few pages'
    rows out of the row group's."""
    import pyarrow.parquet as pq
    t = lake.create_table("zpg", "a int, b int")
    data = _ab(6, Z_ROWS)
    t.append(spark.createDataFrame(data, "a int, b int").repartition(4))
    t = lake.table("zpg")
    total = sum(f.size for f in t.snapshot.add_files)
    t.optimize(zorder_by=["a", "b"], target_file_size=total // 2, sort_within=["b"], page_rows=200)
    t = lake.table("zpg")
    assert _multiset(t.read()) == sorted(data)
    f = max(t.snapshot.add_files, key=lambda f: f.num_records or 0)
    path = absolute_path(t.path, f.path)
    lo, hi = stat_range(f, "b")
    df = spark.read.parquet(path).where(f"b = {(lo + hi) // 2}")
    df.collect()
    leaves = df._jdf.queryExecution().executedPlan().collectLeaves()
    scanned = sum(int(leaves.apply(i).metrics().apply("numOutputRows").value()) for i in range(leaves.size()))
    assert pq.ParquetFile(path).metadata.num_row_groups == 1  # so the skipping is within a row group
    assert f.num_records is not None and f.num_records > 2000
    assert scanned <= 1000 < f.num_records


def test_zorder_where_touches_one_partition(spark: SparkSession, lake: skiplake.Lake) -> None:
    """optimize(where="p = 1") rewrites partition p=1 only; other partitions keep their files."""
    t = lake.create_table("zp", "a int, b int, p int", partition_by=["p"])
    rows = [(a, b, i % 3) for i, (a, b) in enumerate(_ab(3, 6000))]
    t.append(spark.createDataFrame(rows, "a int, b int, p int").repartition(3))
    t = lake.table("zp")
    before = t.snapshot.add_files
    res = t.optimize(where="p = 1", zorder_by=["a"], target_file_size=4096)
    t = lake.table("zp")
    after = t.snapshot.add_files
    old_paths = {f.path for f in before}
    removed = [f for f in before if f.path not in {g.path for g in after}]
    added = [f for f in after if f.path not in old_paths]
    assert res.partitions_optimized == 1
    assert res.files_removed == len(removed) == 3
    assert res.files_added == len(added) >= 2
    assert all(f.partitionValues == {"p": "1"} for f in removed + added)
    assert all(f.tags and "ZCUBE_ID" in f.tags for f in added)
    assert all(not f.tags for f in after if f.partitionValues != {"p": "1"})
    assert canon(t.read().collect()) == canon(rows)


def test_zorder_bad_arguments(spark: SparkSession, lake: skiplake.Lake) -> None:
    """Bad Z-order requests fail with InvalidArgumentError before anything is written."""
    t = lake.create_table("ze", "a int, b int, p int", partition_by=["p"])
    t.append(spark.createDataFrame([(1, 2, 0), (3, 4, 1)], "a int, b int, p int"))
    t = lake.table("ze")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"zorder_by": ["nope"]}, "unknown column"),
        ({"zorder_by": ["p"]}, "partition column"),
        ({"zorder_by": ["a"], "where": "a > 1"}, "partition columns"),
        ({"zorder_by": []}, "at least one"),
        ({"zorder_by": ["a", "A"]}, "twice"),
        ({"zorder_by": ["b", "b"]}, "twice"),
        ({"sort_within": ["b"]}, "give zorder_by"),
        ({"row_group_size": 1 << 20}, "give zorder_by"),
        ({"zorder_by": ["a"], "sort_within": ["nope"]}, "sort_within: unknown column"),
        ({"zorder_by": ["a"], "row_group_size": 0}, "row_group_size must be a positive"),
        ({"page_rows": 100}, "give zorder_by"),
        ({"zorder_by": ["a"], "page_rows": -1}, "page_rows must be a positive"),
        ({"full": True}, "not clustered"),
        ({"zorder_by": ["a"], "min_cube_size": 1}, "not clustered"),
    ]
    for kwargs, words in cases:
        with pytest.raises(InvalidArgumentError, match=words):
            t.optimize(**kwargs)
    assert lake.table("ze").version == t.version


# ================================================================ 5. CLI


def test_cli_explain_json_matches_scan(sql_lake: tuple[skiplake.Lake, list[tuple]],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`skiplake explain --json` reports the same selection as Table.scan."""
    lake, _ = sql_lake
    t = lake.table("store_sales")
    selected = {}
    for where in ("ss_item_sk IN (40, 41, 42)", "ss_item_sk >= 150 OR ss_item_sk < 10", "ss_quantity > 0"):
        code = cli_main(["explain", t.path, "--where", where, "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        doc = json.loads(out)
        report = t.scan(where).report
        assert (doc["files_selected"], doc["files_total"]) == (report.files_selected, report.files_total)
        assert doc["files_skipped"] == report.files_total - report.files_selected
        assert doc["bytes_selected"] == report.bytes_selected and doc["version"] == t.version
        selected[where] = doc["files_selected"]
    assert selected["ss_item_sk IN (40, 41, 42)"] == 1
    assert 2 <= selected["ss_item_sk >= 150 OR ss_item_sk < 10"] < SALES_FILES
    assert selected["ss_quantity > 0"] == SALES_FILES  # every file holds positive quantities


# ================================================================ regressions found in review


@pytest.mark.both_modes
def test_sql_float_literals_and_pivots_and_self_named_cte(spark: SparkSession, lake: skiplake.Lake) -> None:
    """A FLOAT literal reaching a scan through a join is the float32 value, not the double it
    spells; a WHERE after PIVOT/UNPIVOT filters the pivot's output, not the table; a CTE named
    like its table reads the table inside its own definition."""
    fl = lake.create_table("fl_r", "id int, f float")
    fl.append(spark.createDataFrame([(1, 1.1)], "id int, f float").coalesce(1))
    fl.append(spark.createDataFrame([(2, 9.0)], "id int, f float").coalesce(1))
    pv = lake.create_table("pv_r", "id int, k int, a int, b int")
    pv.append(spark.createDataFrame([(1, 1, 5, 500), (2, 1, 6, 7)], "id int, k int, a int, b int").coalesce(1))
    pv.append(spark.createDataFrame([(3, 2, 200, 1), (4, 2, 300, 2)], "id int, k int, a int, b int").coalesce(1))
    tables = {"fl_r": lake.table("fl_r"), "pv_r": lake.table("pv_r")}
    for query in [
        "SELECT x.id FROM fl_r x JOIN fl_r y ON x.id = y.id WHERE x.f = 1.1F",
        "SELECT id FROM (SELECT * FROM fl_r) WHERE f IN (CAST(1.1 AS FLOAT), CAST(7 AS FLOAT))",
        "SELECT x.id FROM fl_r x JOIN pv_r ON x.id = pv_r.id WHERE x.f <= 1.100000023841858",
        "SELECT * FROM pv_r UNPIVOT (a FOR col IN (a, b)) WHERE a > 100",
        "SELECT * FROM (SELECT id, k, a FROM pv_r) PIVOT (sum(a) FOR k IN (1 AS one)) WHERE one > 100",
        "WITH pv_r AS (SELECT * FROM pv_r WHERE k = 1) SELECT * FROM pv_r",
    ]:
        assert canon(lake.sql(query).collect()) == plain_sql(spark, tables, query), query
    assert canon(lake.sql("SELECT x.id FROM fl_r x JOIN fl_r y ON x.id = y.id WHERE x.f = 1.1F").collect()) \
        == ["(1,)"]
    [inner] = lake.explain("WITH pv_r AS (SELECT * FROM pv_r WHERE k = 1) SELECT * FROM pv_r")
    assert inner.files_selected == 1 < inner.files_total


def test_zorder_of_files_without_stats(spark: SparkSession, lake: skiplake.Lake) -> None:
    """Files another writer left without numRecords: OPTIMIZE counts the rows instead of
    taking them for zero (which planned one file per row)."""
    import dataclasses

    from skiplake.log.snapshot import Snapshot
    from skiplake.txn import commit
    t = lake.create_table("nostats", "a int, s string")
    t.append(spark.createDataFrame([(i, f"s{i % 7}") for i in range(3000)], "a int, s string").repartition(3))
    snap = Snapshot.load(t.path)
    adds = snap.add_files
    stripped = [dataclasses.replace(f, stats=None, dataChange=False) for f in adds]
    commit(snap, [f.remove(data_change=False) for f in adds] + stripped, "OPTIMIZE")
    t = lake.table("nostats")
    assert all(f.num_records is None for f in t.snapshot.add_files)
    res = t.optimize(zorder_by=["a"], target_file_size=64 * 1024)
    assert res.files_added <= 3
    assert lake.table("nostats").read().count() == 3000
