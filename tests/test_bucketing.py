"""Bucketed tables end to end: the spec, the files' layout, bucket pruning and bucket joins.

Every row-level check compares skiplake with plain Spark over all of a table's files (read
with no bucket spec declared, so Spark cannot rely on the layout), and every layout check
recomputes each row's bucket with Spark's own `pmod(hash(cols), n)`, the expression Spark's
bucketBy writes with.
"""
from __future__ import annotations

import datetime as dt
import itertools
import os
import random
import re
import shutil
from collections import Counter
from decimal import Decimal
from typing import Any, Iterable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import skiplake
from skiplake import BucketSpec
from skiplake.errors import InvalidArgumentError
from skiplake.log.actions import AddFile
from skiplake.log.paths import absolute_path, from_log_path
from skiplake.spark.reads.planned_reads import path_from_spark, read_files
from skiplake.spark.writes.data_files import WriteOptions
from skiplake.table import Table
from tests.modes import CONNECT
from tests.tiers import examples, gate_sample

pytestmark = [pytest.mark.spark, pytest.mark.connect]

# Partition values whose Hive folder name is not the value itself (Spark escapes / = %).
HIVE_FOLDERS = {None: "__HIVE_DEFAULT_PARTITION__", "b c/d=%": "b c%2Fd%3D%25"}
# Spark's name of a bucketed file, as the writer spells it: part-<task>-<uuid>_<bucket>.c000.snappy.parquet
BUCKET_FILE_NAME = re.compile(
    r"part-\d{5}-[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}_(\d{5})\.c\d{3}\.snappy\.parquet")


# ---------------------------------------------------------------- helpers


def plain_df(spark: SparkSession, table: Table, files: Sequence[AddFile] | None = None) -> DataFrame:
    """Plain Spark over every live file of the table: no pruning, no bucket spec declared."""
    snap = table.snapshot
    return read_files(spark, table.path, snap.schema, snap.partition_columns,
                      snap.add_files if files is None else files)


def canon(rows: Iterable[Any]) -> list[str]:
    """Rows as sorted strings: None, dates and decimals compare by their spelling."""
    return sorted(repr(tuple(r)) for r in rows)


def bucket_expr(columns: Sequence[str], n: int) -> str:
    return f"pmod(hash({', '.join(f'`{c}`' for c in columns)}), {n})"


def tag_of(f: AddFile) -> int:
    assert f.tags is not None and "BUCKET_ID" in f.tags, f.path
    return int(f.tags["BUCKET_ID"])


def name_bucket(f: AddFile) -> int:
    m = BUCKET_FILE_NAME.fullmatch(f.path.rsplit("/", 1)[-1])
    assert m, f"{f.path} is not named like a bucket file"
    return int(m.group(1))


def part_key(f: AddFile) -> tuple:
    return tuple(sorted((f.partitionValues or {}).items()))


def sort_key(values: Sequence[Any]) -> tuple:
    """Spark's ascending order, NULLS FIRST."""
    return tuple((v is not None, v) for v in values)


def check_bucket_files(spark: SparkSession, table: Table, files: Sequence[AddFile]) -> int:
    """Every file's tag is the id in its name, every row in it hashes to that bucket by Spark's
    own pmod(hash(...)), the file sits in its partition's Hive folder, and its rows are in
    sort_by order. One Spark job over the files, read straight from disk. Returns the rows seen."""
    spec = table.bucket_spec
    assert spec is not None
    if not files:
        return 0
    by_path = {}
    for f in files:
        assert tag_of(f) == name_bucket(f), f.path
        assert 0 <= tag_of(f) < spec.num_buckets
        folders = from_log_path(f.path).split("/")[:-1]
        assert folders == [f"{c}={HIVE_FOLDERS.get(v, v)}" for c, v in (f.partitionValues or {}).items()], f.path
        by_path[absolute_path(table.path, f.path)] = f
    sort_cols = [F.col(f"`{c}`") for c in spec.sort_by]
    rows = (spark.read.parquet(*by_path)
            .select(F.col("_metadata.file_path").alias("file"), F.col("_metadata.row_index").alias("row"),
                    F.expr(bucket_expr(spec.columns, spec.num_buckets)).alias("bucket"), *sort_cols)
            .collect())
    per_file: dict[str, list] = {}
    for r in rows:
        per_file.setdefault(path_from_spark(r["file"]), []).append(r)
    assert set(per_file) == set(by_path)
    for path, file_rows in per_file.items():
        f = by_path[path]
        assert {r["bucket"] for r in file_rows} == {tag_of(f)}, f"{f.path}: rows of other buckets"
        assert len(file_rows) == f.num_records
        keys = [sort_key(r[3:]) for r in sorted(file_rows, key=lambda r: r["row"])]
        assert keys == sorted(keys), f"{f.path} is not sorted by {list(spec.sort_by)}"
    return len(rows)


def check_one_file_per_bucket(files: Sequence[AddFile]) -> None:
    counts = Counter((part_key(f), tag_of(f)) for f in files)
    assert all(n == 1 for n in counts.values()), [k for k, n in counts.items() if n > 1]


def new_files(before: Table | None, after: Table) -> list[AddFile]:
    old = {f.path for f in before.snapshot.add_files} if before is not None else set()
    return [f for f in after.snapshot.add_files if f.path not in old]


# The plan walk: through AQE's wrappers to the physical plan that actually ran.


def _children(node: Any) -> list[Any]:
    kind = node.getClass().getSimpleName()
    if kind == "AdaptiveSparkPlanExec":
        return [node.executedPlan()]
    if kind.endswith("QueryStageExec"):
        return [node.plan()]
    kids = node.children()
    return [kids.apply(i) for i in range(kids.size())]


def _walk(node: Any) -> Iterable[Any]:
    yield node
    for child in _children(node):
        yield from _walk(child)


def executed_plan(df: DataFrame) -> Any:
    """The physical plan of a DataFrame that has run (AQE's final plan, not its first guess)."""
    plan = df._jdf.queryExecution().executedPlan()
    if plan.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
        assert plan.isFinalPlan(), "collect the DataFrame before reading its plan"
    return plan


def join_nodes(df: DataFrame) -> list[Any]:
    return [n for n in _walk(executed_plan(df)) if n.getClass().getSimpleName().endswith(("JoinExec",
                                                                                           "ProductExec"))]


def plan_string(df: DataFrame) -> str:
    """The physical plan as text: the plan that ran in classic mode; under Spark Connect the plan
    before it runs (AQE may change a join's strategy while it runs, but adds no Exchange)."""
    return df._explain_string(mode="simple") if CONNECT else executed_plan(df).toString()


def assert_shuffle_free_joins(df: DataFrame, joins: int) -> None:
    """Under Spark Connect: `joins` sort-merge joins, each over two bucketed scans, and no Exchange."""
    text = plan_string(df)
    assert text.count("SortMergeJoin") == joins and "Exchange" not in text, text
    assert text.count("Bucketed: true") == joins + 1, text


def assert_no_shuffle_below_join(df: DataFrame) -> None:
    """The DataFrame has run: its one join reads both inputs straight from bucketed scans."""
    if CONNECT:
        assert_shuffle_free_joins(df, 1)
        return
    joins = join_nodes(df)
    assert len(joins) == 1, [j.getClass().getSimpleName() for j in joins]
    join = joins[0]
    assert join.getClass().getSimpleName() == "SortMergeJoinExec", join.toString()
    below = [n for child in _children(join) for n in _walk(child)]
    names = [n.getClass().getSimpleName() for n in below]
    assert not [n for n in names if "Exchange" in n or "QueryStage" in n or "ShuffleRead" in n], join.toString()
    scans = [n for n in below if n.getClass().getSimpleName() == "FileSourceScanExec"]
    assert len(scans) == 2 and all(s.bucketedScan() for s in scans), join.toString()
    assert join.toString().count("Bucketed: true") == 2


# ================================================================ 1. the spec

SPEC_SCHEMA = "Key int, name string, Amount decimal(10,2), day date, tags array<string>, attrs struct<a: int>, p string"


def test_spec_is_stored_and_reloaded_with_schema_spelling(spark: SparkSession, lake: skiplake.Lake) -> None:
    """The spec survives a reload; column names given in any case come back spelled as in the
    schema; the configuration holds it under skiplake.bucketing.* as Delta readers see it."""
    t = lake.create_table("spec", SPEC_SCHEMA, partition_by=["p"],
                          bucket_by=BucketSpec(16, ["KEY", "Name"], ["amount", "DAY"]))
    want = BucketSpec(16, ("Key", "name"), ("Amount", "day"))
    assert t.bucket_spec == want
    assert Table.open(spark, t.path).bucket_spec == want
    assert lake.table("spec").bucket_spec == want
    props = Table.open(spark, t.path).properties
    assert props["skiplake.bucketing.numBuckets"] == "16"
    assert "Key" in props["skiplake.bucketing.columns"] and "name" in props["skiplake.bucketing.columns"]
    assert "Amount" in props["skiplake.bucketing.sortColumns"]
    # A string for one column, no sort columns; an unbucketed table has no spec.
    one = lake.create_table("one", "k long, v string", bucket_by=BucketSpec(3, "K"))
    assert Table.open(spark, one.path).bucket_spec == BucketSpec(3, ("k",), ())
    assert "skiplake.bucketing.sortColumns" not in one.properties
    assert lake.create_table("plain", "k long").bucket_spec is None


@pytest.mark.parametrize("spec, words", [
    (BucketSpec(0, ["Key"]), "num_buckets"),
    (BucketSpec(-4, ["Key"]), "num_buckets"),
    (BucketSpec(100_001, ["Key"]), "num_buckets"),
    (BucketSpec(True, ["Key"]), "num_buckets"),
    (BucketSpec(2.0, ["Key"]), "num_buckets"),  # type: ignore[arg-type]
    (BucketSpec(4, []), "at least one"),
    (BucketSpec(4, ["nope"]), "not in the schema"),
    (BucketSpec(4, ["p"]), "partition column"),
    (BucketSpec(4, ["P"]), "partition column"),
    (BucketSpec(4, ["tags"]), "type"),
    (BucketSpec(4, ["attrs"]), "type"),
    (BucketSpec(4, ["Key", "key"]), "twice"),
    (BucketSpec(4, ["name", "name"]), "twice"),
    (BucketSpec(4, ["Key"], ["nope"]), "not in the schema"),
    (BucketSpec(4, ["Key"], ["p"]), "partition column"),
    (BucketSpec(4, ["Key"], ["day", "DAY"]), "twice"),
])
def test_bad_specs_are_refused_before_anything_is_written(lake: skiplake.Lake, spec: BucketSpec, words: str) -> None:
    with pytest.raises(InvalidArgumentError, match=words):
        lake.create_table("bad", SPEC_SCHEMA, partition_by=["p"], bucket_by=spec)
    assert lake.tables() == []


def test_bucketing_properties_and_non_specs_are_refused(lake: skiplake.Lake) -> None:
    for props, spec in [({"skiplake.bucketing.numBuckets": "4", "skiplake.bucketing.columns": '["k"]'}, None),
                        ({"skiplake.bucketing.numBuckets": "4"}, BucketSpec(4, ["k"])),
                        ({"skiplake.bucketing.sortColumns": '["v"]'}, BucketSpec(4, ["k"]))]:
        with pytest.raises(InvalidArgumentError, match="BucketSpec"):
            lake.create_table("bad", "k int, v int", bucket_by=spec, properties=props)
    with pytest.raises(InvalidArgumentError, match="BucketSpec"):
        lake.create_table("bad", "k int, v int", bucket_by={"num_buckets": 4, "columns": ["k"]})  # type: ignore
    assert lake.tables() == []
    # Other properties pass through next to a spec.
    t = lake.create_table("ok", "k int, v int", bucket_by=BucketSpec(4, ["k"]), properties={"team": "x"})
    assert t.properties["team"] == "x" and t.bucket_spec == BucketSpec(4, ("k",))


# ================================================================ 2. layout of the files

LAYOUT_SCHEMA = "id long, k int, s string, v long, p string"
LAYOUT_SPEC = BucketSpec(5, ["k", "s"], ["v", "id"])
LAYOUT_PARTS = ["a", "b c/d=%", None]


def _layout_rows(rnd: random.Random, first_id: int, n: int) -> list[tuple]:
    rows = []
    for i in range(first_id, first_id + n):
        k = None if rnd.random() < 0.1 else rnd.randint(-20, 40)
        s = None if rnd.random() < 0.1 else rnd.choice(["x", "y", "zz", "", "\u00e9"])
        v = None if rnd.random() < 0.1 else rnd.randint(-5, 5)  # many ties: id breaks them
        rows.append((i, k, s, v, rnd.choice(LAYOUT_PARTS)))
    return rows


def _pairs_written(spark: SparkSession, rows: list[tuple], spec: BucketSpec) -> int:
    """How many (partition, bucket) pairs the rows fall into, by Spark's hash."""
    df = spark.createDataFrame(rows, LAYOUT_SCHEMA)
    return df.select("p", F.expr(bucket_expr(spec.columns, spec.num_buckets))).distinct().count()


@pytest.fixture(scope="module")
def layout_table(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
                 ) -> tuple[Table, list[tuple[list[tuple], list[AddFile]]]]:
    """A partitioned table bucketed by (k, s) sorted by (v, id), after two appends; with each
    append's rows and the files it added."""
    lake = skiplake.Lake(spark, str(tmp_path_factory.mktemp("layout") / "warehouse"))
    t = lake.create_table("layout", LAYOUT_SCHEMA, partition_by=["p"], bucket_by=LAYOUT_SPEC)
    rnd = random.Random(11)
    writes = []
    for first, n in ((0, 900), (900, 250)):
        rows = _layout_rows(rnd, first, n)
        before = lake.table("layout")
        # Spread over many input tasks, so one (partition, bucket) arrives from several of them.
        t.append(spark.createDataFrame(rows, LAYOUT_SCHEMA).repartition(7))
        writes.append((rows, new_files(before, lake.table("layout"))))
    return lake.table("layout"), writes


def test_each_write_has_one_sorted_file_per_partition_and_bucket(
        spark: SparkSession, layout_table: tuple[Table, list[tuple[list[tuple], list[AddFile]]]]) -> None:
    t, writes = layout_table
    assert len(writes) == 2
    for rows, files in writes:
        check_one_file_per_bucket(files)
        assert len(files) == _pairs_written(spark, rows, LAYOUT_SPEC)
        assert check_bucket_files(spark, t, files) == len(rows)
        assert {f.partitionValues.get("p") for f in files} == set(LAYOUT_PARTS)
    # The second write added files next to the first's, so some pairs now have two files.
    live = t.snapshot.add_files
    assert len(live) == sum(len(files) for _, files in writes)
    assert max(Counter((part_key(f), tag_of(f)) for f in live).values()) == 2
    assert canon(t.read().collect()) == canon(writes[0][0] + writes[1][0])


def test_optimize_compacts_each_bucket_of_each_partition(
        spark: SparkSession, layout_table: tuple[Table, list[tuple[list[tuple], list[AddFile]]]],
        tmp_path: Any) -> None:
    src, writes = layout_table
    shutil.copytree(src.path, tmp_path / "copy")
    t = Table.open(spark, str(tmp_path / "copy"))
    before = canon(plain_df(spark, t).collect())
    files_before = t.snapshot.add_files
    res = t.optimize()
    t = Table.open(spark, t.path)
    after = t.snapshot.add_files
    check_one_file_per_bucket(after)
    pairs = {(part_key(f), tag_of(f)) for f in files_before}
    assert {(part_key(f), tag_of(f)) for f in after} == pairs
    assert res.version == t.version and res.files_removed == len(files_before) - (len(after) - res.files_added)
    assert 0 < res.files_added < res.files_removed
    assert check_bucket_files(spark, t, after) == len(before)
    assert canon(plain_df(spark, t).collect()) == before
    assert t.history(1)[0]["operation"] == "OPTIMIZE"
    # Nothing left to compact; Z-ordering a bucketed table is refused.
    assert t.optimize().version is None
    with pytest.raises(InvalidArgumentError, match="bucketed"):
        t.optimize(zorder_by=["v"])
    assert Table.open(spark, t.path).version == t.version


DML_SCHEMA = LAYOUT_SCHEMA


def _expected(spark: SparkSession, rows: list, query: str, **views: list) -> list:
    """Plain Spark SQL over `rows` as view `ref` (and other row lists as views)."""
    spark.createDataFrame(rows, DML_SCHEMA).createOrReplaceTempView("ref")
    for name, vrows in views.items():
        spark.createDataFrame(vrows, DML_SCHEMA).createOrReplaceTempView(name)
    try:
        return spark.sql(query).collect()
    finally:
        for name in ["ref", *views]:
            spark.catalog.dropTempView(name)


def test_delete_update_merge_keep_rows_in_their_buckets(spark: SparkSession, lake: skiplake.Lake) -> None:
    """Each DML rewrite goes through the bucketed writer: after it every file's rows are in its
    tagged bucket (also when UPDATE and MERGE change the bucket column), each commit adds one
    file per (partition, bucket), and the rows are what plain Spark computes."""
    spec = BucketSpec(4, ["k"], ["v"])
    t = lake.create_table("dml", DML_SCHEMA, partition_by=["p"], bucket_by=spec)
    ref = _layout_rows(random.Random(5), 0, 700)
    t.append(spark.createDataFrame(ref, DML_SCHEMA).repartition(3))

    def check(before: Table, expected: list) -> list:
        after = lake.table("dml")
        added = new_files(before, after)
        assert added, "the operation rewrote nothing"
        check_one_file_per_bucket(added)
        assert check_bucket_files(spark, after, after.snapshot.add_files) == len(expected)
        assert canon(after.read().collect()) == canon(expected)
        return [tuple(r) for r in expected]

    before = lake.table("dml")
    t.delete("v % 3 = 0 OR k IS NULL")
    ref = check(before, _expected(spark, ref, "SELECT * FROM ref WHERE NOT coalesce(v % 3 = 0 OR k IS NULL, false)"))

    # A DELETE pinned to two keys reads and rewrites only files of their buckets.
    before = lake.table("dml")
    assert before.scan("k IN (3, 4) AND v > 0").report.buckets_selected <= 2
    t.delete("k IN (3, 4) AND v > 0")
    ref = check(before, _expected(spark, ref, "SELECT * FROM ref WHERE NOT coalesce(k IN (3, 4) AND v > 0, false)"))
    pinned = set(spark.sql("SELECT pmod(hash(3), 4), pmod(hash(4), 4)").first())
    live = {f.path for f in lake.table("dml").snapshot.add_files}
    removed = [f for f in before.snapshot.add_files if f.path not in live]
    assert removed and {tag_of(f) for f in removed} <= pinned

    before = lake.table("dml")
    t.update("s = 'x' OR id % 10 = 1", {"k": "k + 1000", "v": "-v", "p": "CASE WHEN v > 2 THEN 'a' ELSE p END"})
    cond = "coalesce(s = 'x' OR id % 10 = 1, false)"
    ref = check(before, _expected(spark, ref, f"SELECT id, CASE WHEN {cond} THEN k + 1000 ELSE k END, s, "
                                             f"CASE WHEN {cond} THEN -v ELSE v END, "
                                             f"CASE WHEN {cond} AND v > 2 THEN 'a' ELSE p END FROM ref"))
    moved = next(r[1] for r in ref if r[1] is not None and r[1] >= 1000)
    assert canon(t.read(f"k = {moved}").collect()) == canon(r for r in ref if r[1] == moved)
    assert t.scan(f"k = {moved}").report.buckets_selected == 1

    rnd = random.Random(6)
    existing = [r[0] for r in ref]
    source = [(i, rnd.choice([None, 7, 2000 + i % 5]), "m", rnd.randint(-3, 9), rnd.choice(LAYOUT_PARTS))
              for i in rnd.sample(existing, 120) + list(range(5000, 5060))]
    before = lake.table("dml")
    t.merge(spark.createDataFrame(source, DML_SCHEMA), on="target.id = source.id",
            when_matched_update={"k": "source.k", "v": "source.v"}, when_matched_delete="source.v < 0",
            when_not_matched_insert="*")
    merged = _expected(spark, ref, """
        SELECT t.id, CASE WHEN s.id IS NULL THEN t.k ELSE s.k END, t.s,
               CASE WHEN s.id IS NULL THEN t.v ELSE s.v END, t.p
        FROM ref t LEFT JOIN src s ON t.id = s.id WHERE NOT (s.id IS NOT NULL AND coalesce(s.v < 0, false))
        UNION ALL SELECT * FROM src s WHERE s.id NOT IN (SELECT id FROM ref)""", src=source)
    ref = check(before, merged)
    assert len(ref) > 0 and any(r[0] >= 5000 for r in ref)

    # A read declared bucketed aggregates on the bucket column without a shuffle, and rightly.
    agg = lake.table("dml").read().groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("v"))
    assert canon(agg.collect()) == canon(plain_df(spark, lake.table("dml")).groupBy("k").agg(
        F.count("*").alias("n"), F.sum("v").alias("v")).collect())
    if not CONNECT:  # a Connect session declares bucketed reads only for bucket joins
        assert not [n for n in _walk(executed_plan(agg)) if "Exchange" in n.getClass().getSimpleName()]


# ================================================================ 3. bucket pruning

PRUNE_SCHEMA = "i int, b bigint, s string, d date, dec decimal(9,2), x int, p string"
PRUNE_TYPES = {"i": "int", "b": "bigint", "s": "string", "d": "date", "dec": "decimal(9,2)", "x": "int"}
BASE_DAY = dt.date(2020, 1, 1)
VALUES: dict[str, list[Any]] = {
    "i": list(range(-3, 15)) + [-2_147_483_648, 2_147_483_647],
    "b": [(1 << 40) * k + d for k in (-2, 0, 3) for d in (-1, 0, 7)] + [-(1 << 63), (1 << 63) - 1],
    "s": ["", "a", "b", "ab", "abc", "zz", "\u00e9t\u00e9", "x y", "long-" * 9],
    "d": [BASE_DAY + dt.timedelta(days=n) for n in range(12)] + [dt.date(1969, 12, 31), dt.date(2100, 2, 28)],
    "dec": [Decimal(v) for v in ("0.00", "-3.50", "1.23", "10.05", "99999.99", "-1234567.89", "0.01")],
    "x": list(range(0, 10)),
}
ABSENT: dict[str, list[Any]] = {
    "i": [100, -100], "b": [5, (1 << 40) * 9], "s": ["nope", "A"], "d": [dt.date(2030, 1, 1)],
    "dec": [Decimal("7.77")], "x": [42],
}
PRUNE_SPECS: dict[str, BucketSpec] = {
    "by_i": BucketSpec(8, ["i"]),
    "by_b": BucketSpec(5, ["b"]),
    "by_s": BucketSpec(7, ["s"]),
    "by_d": BucketSpec(4, ["d"]),
    "by_dec": BucketSpec(6, ["dec"]),
    "by_i_s": BucketSpec(8, ["i", "s"]),
    "by_dec_d": BucketSpec(6, ["dec", "d"]),
}


def _prune_rows(rnd: random.Random, n: int) -> list[tuple]:
    def pick(col: str) -> Any:
        return None if rnd.random() < 0.08 else rnd.choice(VALUES[col])
    return [tuple(pick(c) for c in PRUNE_TYPES) + (rnd.choice(["u", "v", None]),) for _ in range(n)]


PRUNE_ROWS = _prune_rows(random.Random(2024), 700)


@pytest.fixture(scope="module")
def prune_lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
               ) -> tuple[dict[str, Table], DataFrame]:
    """The same rows in one table per spec (partitioned by p), and a cached plain DataFrame of them."""
    lake = skiplake.Lake(spark, str(tmp_path_factory.mktemp("prune") / "warehouse"))
    df = spark.createDataFrame(PRUNE_ROWS, PRUNE_SCHEMA)
    tables = {}
    for name, spec in PRUNE_SPECS.items():
        t = lake.create_table(name, PRUNE_SCHEMA, partition_by=["p"], bucket_by=spec)
        t.append(df)
        tables[name] = lake.table(name)
    everything = plain_df(spark, tables["by_i"]).cache()
    assert everything.count() == len(PRUNE_ROWS)
    yield tables, everything
    everything.unpersist()


def sql_lit(col: str, v: Any, variant: int = 0) -> str:
    """A SQL literal for value `v` of column `col`, in one of several exact spellings."""
    if v is None:
        return "NULL"
    if col in ("i", "b", "x"):
        return str(v)
    if col == "s":
        return f"'{v}'"
    if col == "d":
        return f"DATE'{v}'" if variant % 2 == 0 else f"'{v}'"
    assert col == "dec"
    text = str(v)
    if variant % 3 == 1:
        return text + "0"  # same value at a larger scale: 1.230
    if variant % 3 == 2 and v == v.to_integral_value():
        return str(int(v))  # an integer literal
    return text


def typed_sql(col: str, v: Any) -> str:
    """The value as Spark SQL of exactly the column's type."""
    if v is None:
        return f"CAST(NULL AS {PRUNE_TYPES[col]})"
    if col == "s":
        return f"'{v}'"
    return f"CAST('{v}' AS {PRUNE_TYPES[col]})"


def spark_buckets_sql(spark: SparkSession, *exprs: str) -> frozenset[int]:
    return frozenset(r[0] for r in spark.sql(f"SELECT explode(array({', '.join(exprs)}))").collect())


def spark_buckets(spark: SparkSession, columns: Sequence[str], combos: Iterable[tuple], n: int) -> set[int]:
    """The buckets Spark's pmod(hash(...)) gives each combination of typed column values."""
    combos = list(combos)
    if not combos:
        return set()
    items = [f"pmod(hash({', '.join(typed_sql(c, v) for c, v in zip(columns, combo))}), {n})" for combo in combos]
    return {r[0] for r in spark.sql(f"SELECT explode(array({', '.join(items)}))").collect()}


@st.composite
def value_of(draw: st.DrawFn, col: str) -> Any:
    return draw(st.sampled_from(VALUES[col] if draw(st.integers(0, 5)) else ABSENT[col]))


@st.composite
def pin(draw: st.DrawFn, col: str) -> tuple[str, set]:
    """A predicate that fixes `col` to a finite set of values (None for NULL): (SQL, the set)."""
    kind = draw(st.sampled_from(["=", "=", "in", "in", "null", "<=>", "or", "or null", "<=> null"]))
    variant = draw(st.integers(0, 5))
    a, b = draw(value_of(col)), draw(value_of(col))
    if kind == "=":
        return (f"{col} = {sql_lit(col, a, variant)}" if variant < 4 else f"{sql_lit(col, a, variant)} = {col}"), {a}
    if kind == "<=>":
        return f"{col} <=> {sql_lit(col, a, variant)}", {a}
    if kind == "in":
        items = draw(st.lists(value_of(col), min_size=1, max_size=4))
        null = draw(st.booleans())
        text = ", ".join([sql_lit(col, v, variant + j) for j, v in enumerate(items)] + (["NULL"] if null else []))
        return f"{col} IN ({text})", set(items)  # a NULL in the list matches nothing
    if kind in ("null", "<=> null"):
        return (f"{col} IS NULL" if kind == "null" else f"{col} <=> NULL"), {None}
    if kind == "or":
        return f"({col} = {sql_lit(col, a, variant)} OR {col} = {sql_lit(col, b, variant + 1)})", {a, b}
    return f"({col} = {sql_lit(col, a, variant)} OR {col} IS NULL)", {a, None}


@st.composite
def leaf(draw: st.DrawFn, columns: Sequence[str], odd_literals: bool) -> str:
    """One comparison over a bucket column (twice as likely) or another column."""
    col = draw(st.sampled_from(list(columns) * 2 + ["x", "i", "s", "d", "dec", "b", "p"]))
    if col == "p":
        return draw(st.sampled_from(["p = 'u'", "p IS NULL", "p IN ('v', 'w')", "p <> 'u'"]))
    lit = lambda: sql_lit(col, draw(value_of(col)), draw(st.integers(0, 5)))  # noqa: E731
    kind = draw(st.sampled_from(["=", "=", "<=>", "<", "in", "not in", "null", "not null", "<>"]
                                + (["odd"] if odd_literals else [])))
    if kind in ("=", "<=>", "<", "<>"):
        return f"{col} {kind} {lit()}" if draw(st.booleans()) else f"{lit()} {kind} {col}"
    if kind in ("in", "not in"):
        items = [lit() for _ in range(draw(st.integers(1, 4)))] + (["NULL"] if draw(st.booleans()) else [])
        return f"{col} {kind.upper()} ({', '.join(items)})"
    if kind in ("null", "not null"):
        return f"{col} IS {'NOT ' if kind == 'not null' else ''}NULL"
    # Literals of another type than the column's: Spark casts them, skiplake must not prune on them.
    return draw(st.sampled_from({
        "i": ["i = '5'", "i = 5.0", "i IN (2, 3000000000)", "i = 1e0", "i = 3000000000"],
        "x": ["x = '5'", "x = 5.0"],
        "b": ["b = 5.0", "b = '5'", "b = 1099511627776.0"],
        "s": ["s = 'a '", "s IN ('a', 'A')"],
        "d": ["d = '2020-1-3'", "d = TIMESTAMP'2020-01-03 00:00:00'", "d = '2020-01-03 '"],
        "dec": ["dec = 1.23e0", "dec = 1.234", "dec = 1.2300", "dec IN (10.05, 1e1)", "dec = 12345678901.5"],
    }[col]))


def predicates(columns: Sequence[str], odd_literals: bool) -> st.SearchStrategy[str]:
    return st.recursive(leaf(columns, odd_literals), lambda kids: st.one_of(
        st.tuples(kids, kids).map(lambda t: f"({t[0]}) AND ({t[1]})"),
        st.tuples(kids, kids).map(lambda t: f"({t[0]}) OR ({t[1]})"),
        kids.map(lambda k: f"NOT ({k})")), max_leaves=4)


@st.composite
def prune_case(draw: st.DrawFn) -> tuple[str, str, list[set] | None, bool]:
    """(table, WHERE, the value set pinned for each bucket column or None, whether anything else is ANDed)."""
    name = draw(st.sampled_from(sorted(PRUNE_SPECS)))
    columns = list(PRUNE_SPECS[name].columns)
    if not draw(st.booleans()):
        return name, draw(predicates(columns, odd_literals=True)), None, False
    pins = [draw(pin(c)) for c in columns]
    order = draw(st.permutations(range(len(pins))))
    parts = [pins[i][0] for i in order]
    rest = draw(st.one_of(st.none(), predicates(columns, odd_literals=False)))
    if rest is not None:
        parts.insert(draw(st.integers(0, len(parts))), f"({rest})")
    return name, " AND ".join(parts), [p[1] for p in pins], rest is not None


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=prune_case())
def test_bucket_pruning_never_drops_a_matching_row(spark: SparkSession,
                                                   prune_lake: tuple[dict[str, Table], DataFrame],
                                                   case: tuple[str, str, list[set] | None, bool]) -> None:
    """read(where) equals Spark's filter over all rows; the selected files are all in selected
    buckets, which hold every matching row's bucket; a predicate pinning every bucket column
    selects exactly (or, with more conjuncts, at most) the buckets Spark hashes its values to."""
    name, where, pinned, more = case
    tables, everything = prune_lake
    t = tables[name]
    spec = t.bucket_spec
    assert spec is not None
    plan = t.scan(where)
    report = plan.report
    assert report.buckets_total == spec.num_buckets
    if plan.buckets is None:
        assert report.buckets_selected == spec.num_buckets
    else:
        assert report.buckets_selected == len(plan.buckets)
        assert all(tag_of(f) in plan.buckets for f in plan.files)
        assert f"SelectedBucketsCount: {len(plan.buckets)} out of {spec.num_buckets}" in report.text()
    got = canon(t.read(where).collect())
    matching = everything.filter(where).withColumn("__bucket", F.expr(bucket_expr(spec.columns, spec.num_buckets)))
    rows = matching.collect()
    assert got == canon(r[:-1] for r in rows), where
    if plan.buckets is not None:
        assert {r["__bucket"] for r in rows} <= plan.buckets, where
    if pinned is not None:
        wanted = spark_buckets(spark, spec.columns, itertools.product(*pinned), spec.num_buckets)
        assert plan.buckets is not None, where
        if more:
            assert plan.buckets <= wanted, where
        else:
            assert plan.buckets == wanted, where
        if len(wanted) < spec.num_buckets:
            assert report.buckets_selected < report.buckets_total


def test_pruning_examples(spark: SparkSession, prune_lake: tuple[dict[str, Table], DataFrame]) -> None:
    """Fixed cases: what prunes, what must not, and what selects no bucket at all."""
    tables, everything = prune_lake
    cases = [
        ("by_i", "i = 3", 1), ("by_i", "i IN (3, 4) OR i IS NULL", 3), ("by_i", "NOT (i <> 3)", 8),
        ("by_i", "i <> 3", 8), ("by_i", "i < 3", 8), ("by_i", "i IS NOT NULL", 8), ("by_i", "i = 3 OR x = 1", 8),
        ("by_i", "i = 3 AND i = 4", 0), ("by_i", "i IN (NULL)", 0), ("by_i", "i = 3 AND x = 1", 1),
        ("by_s", "s = 'a' OR s = 'b'", 2), ("by_d", "d = '2020-01-03'", 1), ("by_dec", "dec = 1.230", 1),
        ("by_b", "b = 1099511627776", 1), ("by_i_s", "i = 3", 8), ("by_i_s", "i = 3 AND s IS NULL", 1),
        ("by_i_s", "(i = 3 AND s = 'a') OR (i = 4 AND s = 'b')", 2),
        ("by_dec_d", "d = DATE'2020-01-02' AND dec IN (1.23, 10.05, 0.01)", 3),
    ]
    for name, where, most in cases:
        t = tables[name]
        report = t.scan(where).report
        assert report.buckets_selected <= most, (name, where, report.buckets_selected)
        if most == 8 and t.bucket_spec.num_buckets == 8:  # type: ignore[union-attr]
            assert report.buckets_selected == 8, (name, where)
        if name != "by_i":  # rows of the others too (the property test covers by_i's kind at length)
            assert canon(t.read(where).collect()) == canon(everything.filter(where).collect()), where
    assert tables["by_i"].scan("i = 3 AND i = 4").files == []


@pytest.mark.classic_only
def test_two_column_spec_prunes_where_spark_does_not(spark: SparkSession,
                                                     prune_lake: tuple[dict[str, Table], DataFrame]) -> None:
    """Spark prunes single-column bucket specs only; skiplake prunes `i = 1 AND s IN ('a', 'b')`
    on a spec of (i, s) to the two buckets of (1, 'a') and (1, 'b')."""
    tables, everything = prune_lake
    t = tables["by_i_s"]
    spec = t.bucket_spec
    assert spec is not None
    where = "i = 1 AND s IN ('a', 'b')"
    plan = t.scan(where)
    want = spark_buckets(spark, ["i", "s"], [(1, "a"), (1, "b")], 8)
    assert plan.buckets == want and 1 <= plan.report.buckets_selected <= 2
    assert plan.report.files_selected < plan.report.files_total
    assert {tag_of(f) for f in plan.files} <= want
    expected = everything.filter(where).collect()
    assert expected and canon(t.read(where).collect()) == canon(expected)
    # Spark's own bucketed scan of all files, same filter: every bucket selected.
    key = "spark.sql.sources.bucketing.autoBucketedScan.enabled"
    spark.conf.set(key, "false")
    try:
        snap = t.snapshot
        df = read_files(spark, t.path, snap.schema, snap.partition_columns, snap.add_files,
                        bucket_spec=spec).filter(where)
        df.collect()
        assert "SelectedBucketsCount: 8 out of 8" in executed_plan(df).toString()
    finally:
        spark.conf.unset(key)


def test_more_conjuncts_never_widen_the_bucket_selection_basic(
        prune_lake: tuple[dict[str, Table], DataFrame]) -> None:
    """Adding a conjunct can only narrow the selection (exact-type literals)."""
    t = prune_lake[0]["by_i"]
    for base, extra in [("i IN (1, 2)", "i = 1"), ("i IN (1, 2)", "i IN (2, 5)"), ("i = 1", "x = 3"),
                        ("i IN (1, 2)", "i = 1 OR i = 7")]:
        narrow = t.scan(f"{base} AND {extra}").buckets
        wide = t.scan(base).buckets
        assert wide is not None and narrow is not None and narrow <= wide, (base, extra)


def test_more_conjuncts_never_widen_the_bucket_selection_mixed_literals(
        prune_lake: tuple[dict[str, Table], DataFrame]) -> None:
    t = prune_lake[0]["by_i"]
    for base, extra in [("i IN (1, 2)", "i = 1.0"), ("i = 1", "i = 1.0")]:
        wide = t.scan(base).buckets
        assert wide is not None
        for where in (f"{base} AND {extra}", f"{extra} AND {base}"):
            narrow = t.scan(where).buckets
            assert narrow is not None and narrow <= wide, where


# ================================================================ 4. bucket joins

LEFT_SCHEMA = "k int, s string, v long, p string"
RIGHT_SCHEMA = "k int, s string, w long"
HOT = 7


def _join_rows(rnd: random.Random, n: int, with_p: bool) -> list[tuple]:
    """~30% of rows on one hot key, ~10% NULL keys, the rest spread; s a second key with NULLs."""
    rows = []
    for i in range(n):
        r = rnd.random()
        k = HOT if r < 0.3 else None if r < 0.4 else rnd.randint(0, 80)
        s = rnd.choice(["a", "b", "c", None])
        rows.append((k, s, i) + ((rnd.choice(["1", "2", None]),) if with_p else ()))
    return rows


LEFT_ROWS = _join_rows(random.Random(1), 320, True)
RIGHT_ROWS = _join_rows(random.Random(2), 200, False)
JOIN_TABLES: dict[str, tuple[str, BucketSpec | None, list[str]]] = {
    # name: (schema, spec, partition_by)
    "l8": (LEFT_SCHEMA, BucketSpec(8, ["k"], ["v"]), ["p"]),
    "l4": (LEFT_SCHEMA, BucketSpec(4, ["k"]), ["p"]),
    "r8": (RIGHT_SCHEMA, BucketSpec(8, ["k"], ["w"]), []),
    "r4": (RIGHT_SCHEMA, BucketSpec(4, ["k"]), []),
    "l8ks": (LEFT_SCHEMA, BucketSpec(8, ["k", "s"]), ["p"]),
    "l4ks": (LEFT_SCHEMA, BucketSpec(4, ["k", "s"]), []),
    "r8ks": (RIGHT_SCHEMA, BucketSpec(8, ["k", "s"]), []),
    "r4ks": (RIGHT_SCHEMA, BucketSpec(4, ["k", "s"], ["w"]), []),
    "r6": (RIGHT_SCHEMA, BucketSpec(6, ["k"]), []),
    "rlong": ("k long, s string, w long", BucketSpec(8, ["k"]), []),
    "rplain": (RIGHT_SCHEMA, None, []),
    "rkey8": ("key int, s string, w long", BucketSpec(8, ["key"]), []),
    "r1": (RIGHT_SCHEMA, BucketSpec(1, ["k"]), []),
}


@pytest.fixture(scope="module")
def join_lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> skiplake.Lake:
    """Left tables hold LEFT_ROWS and right tables RIGHT_ROWS, bucketed in different ways."""
    lake = skiplake.Lake(spark, str(tmp_path_factory.mktemp("join") / "warehouse"))
    for name, (schema, spec, parts) in JOIN_TABLES.items():
        t = lake.create_table(name, schema, partition_by=parts, bucket_by=spec)
        rows = LEFT_ROWS if name.startswith("l") else RIGHT_ROWS
        # l8 in two appends: two files in some (partition, bucket) pairs.
        for part in ([rows[:200], rows[200:]] if name == "l8" else [rows]):
            t.append(spark.createDataFrame(part, schema).repartition(3))
    return lake


def plain_join(spark: SparkSession, lake: skiplake.Lake, left: str, right: str, on: Any, how: str,
               left_where: str | None = None, right_where: str | None = None) -> list[str]:
    ldf, rdf = plain_df(spark, lake.table(left)), plain_df(spark, lake.table(right))
    ldf = ldf.filter(left_where) if left_where else ldf
    rdf = rdf.filter(right_where) if right_where else rdf
    if isinstance(on, list) and on and isinstance(on[0], tuple):
        cond = [ldf[f"`{a}`"] == rdf[f"`{b}`"] for a, b in on]
        return canon(ldf.join(rdf, cond, how).collect())
    return canon(ldf.join(rdf, on, how).collect())


PAIRS = {"same": ("l8", "r8", 8), "left more": ("l8", "r4", 4), "right more": ("l4", "r8", 4)}


JOIN_HOWS, JOIN_KEYS = ["inner", "left", "left_semi"], ["k", "k,s"]


# The gate joins each pair of tables in each way once, with one of the two keys; the full tier both.
@pytest.mark.parametrize("how, pair, keys", gate_sample(
    itertools.product(JOIN_HOWS, sorted(PAIRS), JOIN_KEYS),
    lambda c: (JOIN_HOWS.index(c[0]) + sorted(PAIRS).index(c[1]) + JOIN_KEYS.index(c[2])) % 2 == 0))
def test_bucket_join_equals_spark_join_without_shuffle(spark: SparkSession, join_lake: skiplake.Lake,
                                                      how: str, pair: str, keys: str) -> None:
    left, right, buckets = PAIRS[pair]
    on: Any = "k"
    if keys == "k,s":
        left, right = left + "ks", right + "ks"
        on = ["k", "s"] if how != "left" else [("k", "k"), ("s", "s")]
    report = join_lake.explain_join(left, right, on, how=how)
    assert report.bucketed, report.reason
    assert report.buckets == buckets
    left_spec = JOIN_TABLES[left][1]
    assert left_spec is not None and report.left_scan is not None
    assert report.left_scan.buckets_total == left_spec.num_buckets
    df = join_lake.bucket_join(left, right, on, how=how)
    got = canon(df.collect())
    assert got == plain_join(spark, join_lake, left, right, on, how)
    assert len(got) > (0 if how == "left_semi" else len(LEFT_ROWS) // 2)
    assert_no_shuffle_below_join(df)


def test_bucket_join_key_names_and_files_per_bucket(spark: SparkSession, join_lake: skiplake.Lake) -> None:
    """Keys paired across different names, a key spelled in another case, several files in a
    bucket (two appends; files split by max_records_per_file): still one shuffle-free join."""
    l8 = join_lake.table("l8")
    assert max(Counter((part_key(f), tag_of(f)) for f in l8.snapshot.add_files).values()) >= 2
    for how in ("inner", "left", "left_semi"):
        report = join_lake.explain_join("l8", "rkey8", [("K", "key")], how=how)
        assert report.bucketed and report.keys == [("k", "key")], report.reason
        df = join_lake.bucket_join("l8", "rkey8", [("K", "key")], how=how)
        assert canon(df.collect()) == plain_join(spark, join_lake, "l8", "rkey8", [("k", "key")], how)
        assert_no_shuffle_below_join(df)
    df = join_lake.bucket_join(l8, join_lake.table("r8"), "K")
    assert canon(df.collect()) == plain_join(spark, join_lake, "l8", "r8", "k", "inner")
    assert_no_shuffle_below_join(df)
    # Keys listed in another order than the spec's columns; a ratio of 8 (past Spark's default 4).
    for left, right, on, buckets in [("l8ks", "r4ks", ["s", "k"], 4), ("l8", "r1", "k", 1)]:
        report = join_lake.explain_join(left, right, on)
        assert report.bucketed and report.buckets == buckets, report.reason
        df = join_lake.bucket_join(left, right, on)
        assert canon(df.collect()) == plain_join(spark, join_lake, left, right, on, "inner")
        assert_no_shuffle_below_join(df)

    split = join_lake.create_table("split", LEFT_SCHEMA, partition_by=["p"], bucket_by=BucketSpec(4, ["k"], ["v"]))
    split.append(spark.createDataFrame(LEFT_ROWS, LEFT_SCHEMA), options=WriteOptions(max_records_per_file=15))
    split = join_lake.table("split")
    files = split.snapshot.add_files
    assert max(Counter((part_key(f), tag_of(f)) for f in files).values()) >= 3
    assert check_bucket_files(spark, split, files) == len(LEFT_ROWS)
    assert all((f.num_records or 0) <= 15 for f in files)
    for how in ("inner", "left"):
        df = join_lake.bucket_join("split", "r8", "k", how=how)
        assert canon(df.collect()) == plain_join(spark, join_lake, "split", "r8", "k", how)
        assert_no_shuffle_below_join(df)


@pytest.mark.both_modes
def test_bucket_join_prunes_both_sides(spark: SparkSession, join_lake: skiplake.Lake) -> None:
    lw, rw = "k IN (1, 2)", "k IN (2, 3) OR w < 50"
    report = join_lake.explain_join("l8", "r4", "k", how="left", left_where=lw, right_where=rw)
    assert report.bucketed, report.reason
    assert report.left_scan is not None and report.right_scan is not None
    assert report.left_scan.buckets_selected <= 2 < report.left_scan.buckets_total
    assert report.left_scan.files_selected < report.left_scan.files_total
    assert report.right_scan.buckets_selected == 4  # an OR with a non-bucket column prunes nothing
    for how in ("inner", "left", "left_semi"):
        df = join_lake.bucket_join("l8", "r4", "k", how=how, left_where=lw, right_where=rw)
        got = canon(df.collect())
        assert got == plain_join(spark, join_lake, "l8", "r4", "k", how, lw, rw), how
        assert_no_shuffle_below_join(df)
    both = join_lake.explain_join("l8", "r8", "k", left_where="k = 3", right_where="k IN (3, 4)")
    assert both.left_scan.buckets_selected == 1 and both.right_scan.buckets_selected <= 2  # type: ignore[union-attr]
    assert canon(join_lake.bucket_join("l8", "r8", "k", left_where="k = 3", right_where="k IN (3, 4)").collect()) \
        == plain_join(spark, join_lake, "l8", "r8", "k", "inner", "k = 3", "k IN (3, 4)")
    # A side pruned to nothing.
    for how in ("inner", "left"):
        df = join_lake.bucket_join("l8", "r8", "k", how=how, left_where="k = 9999")
        assert canon(df.collect()) == [] == plain_join(spark, join_lake, "l8", "r8", "k", how, "k = 9999")
        df = join_lake.bucket_join("l8", "r8", "k", how=how, right_where="k = 9999")
        assert canon(df.collect()) == plain_join(spark, join_lake, "l8", "r8", "k", how, None, "k = 9999")


def plain_sql(spark: SparkSession, lake: skiplake.Lake, query: str, names: Sequence[str]) -> list[str]:
    for name in names:
        plain_df(spark, lake.table(name)).createOrReplaceTempView(name)
    try:
        return canon(spark.sql(query).collect())
    finally:
        for name in names:
            spark.catalog.dropTempView(name)


SQL_JOINS = [
    ("SELECT a.k, a.v, b.w FROM l8 a JOIN r8 b ON a.k = b.k WHERE a.v > 20", ["l8", "r8"], 8),
    ("SELECT a.*, b.w FROM l8 a LEFT JOIN r4 b ON a.k = b.k AND b.w > 50 WHERE a.p = '1' OR a.p IS NULL",
     ["l8", "r4"], 4),
    ("SELECT * FROM l8 JOIN r8 USING (k) WHERE l8.s = 'a'", ["l8", "r8"], 8),
    ("SELECT * FROM l4 LEFT SEMI JOIN r8 ON l4.k = r8.k WHERE l4.s <> 'c'", ["l4", "r8"], 4),
    ("SELECT a.k, a.s, count(*) AS n, sum(b.w) AS w FROM l8ks a JOIN r4ks b ON a.k = b.k AND b.s = a.s "
     "GROUP BY a.k, a.s", ["l8ks", "r4ks"], 4),
    ("SELECT x.k, x.v, y.w FROM l4ks x LEFT OUTER JOIN r8ks y ON x.s = y.s AND x.k = y.k", ["l4ks", "r8ks"], 4),
    ("SELECT a.v, b.w FROM l8 a, r8 b WHERE a.k = b.k AND b.w < 100", ["l8", "r8"], 8),
]


# Under Spark Connect the gate runs two of the joins (one key, two keys), the full tier all of them.
@pytest.mark.parametrize("query, names, buckets", [
    pytest.param(*case, marks=pytest.mark.both_modes) if i in (0, 4) else case for i, case in enumerate(SQL_JOINS)])
def test_sql_join_of_two_bucketed_tables(spark: SparkSession, join_lake: skiplake.Lake, query: str,
                                         names: list[str], buckets: int) -> None:
    explained = join_lake.explain(query)
    assert len(explained) == 2
    [join] = explained.joins
    assert join.bucketed, join.reason
    assert join.buckets == buckets
    assert "BucketJoin" in explained.text()
    df = join_lake.sql(query)
    assert canon(df.collect()) == plain_sql(spark, join_lake, query, names)
    assert_no_shuffle_below_join(df)


def test_sql_self_join_and_join_chain(spark: SparkSession, join_lake: skiplake.Lake) -> None:
    """A table joined with itself, and three tables joined on the bucket key: right rows, and
    the explain says which joins run bucketed."""
    self_join = "SELECT a.k, a.v, b.v AS v2 FROM l8 a JOIN l8 b ON a.k = b.k WHERE a.v < 40 AND b.s = 'a'"
    [join] = join_lake.explain(self_join).joins
    assert join.bucketed, join.reason
    df = join_lake.sql(self_join)
    assert canon(df.collect()) == plain_sql(spark, join_lake, self_join, ["l8"])
    assert_no_shuffle_below_join(df)
    chain = ("SELECT a.k, a.v, b.w, c.w AS w2 FROM l8 a JOIN r8 b ON a.k = b.k LEFT JOIN rkey8 c ON b.k = c.key "
             "WHERE a.v < 100")
    joins = join_lake.explain(chain).joins
    assert [j.bucketed for j in joins] == [True, True], [j.reason for j in joins]
    df = join_lake.sql(chain)
    assert canon(df.collect()) == plain_sql(spark, join_lake, chain, ["l8", "r8", "rkey8"])
    if CONNECT:
        assert_shuffle_free_joins(df, 2)
        return
    assert len(join_nodes(df)) == 2
    assert not [n for n in _walk(executed_plan(df)) if "Exchange" in n.getClass().getSimpleName()]


@pytest.mark.classic_only
def test_sql_join_chain_report_matches_the_plan(spark: SparkSession, join_lake: skiplake.Lake) -> None:
    chain = "SELECT a.k, a.v, b.w, c.w AS w2 FROM l8 a JOIN r8 b ON a.k = b.k LEFT JOIN r4 c ON b.k = c.k"
    joins = join_lake.explain(chain).joins
    df = join_lake.sql(chain)
    df.collect()
    top = [j for j in join_nodes(df) if "LeftOuter" in j.toString().splitlines()[0]]
    assert len(top) == 1 and len(joins) == 2
    shuffled = [n for child in _children(top[0]) for n in _walk(child) if "Exchange" in n.getClass().getSimpleName()]
    assert not (joins[1].bucketed and shuffled), (joins[1].reason, top[0].toString())


@pytest.mark.both_modes
def test_sql_bucket_join_prunes_both_sides(spark: SparkSession, join_lake: skiplake.Lake) -> None:
    """A literal IN on one side's key reaches the other side through Spark's inferred filters."""
    query = "SELECT a.k, a.v, b.w FROM l8 a JOIN r4 b ON a.k = b.k WHERE a.k IN (1, 2)"
    explained = join_lake.explain(query)
    assert explained.joins[0].bucketed
    left, right = explained
    assert left.buckets_selected <= 2 < left.buckets_total
    assert right.buckets_selected <= 2 < right.buckets_total
    df = join_lake.sql(query)
    assert canon(df.collect()) == plain_sql(spark, join_lake, query, ["l8", "r4"])
    assert_no_shuffle_below_join(df)


# ================================================================ 5. fallbacks to Spark's own join


@pytest.mark.parametrize("left, right, on, how, words", [
    ("l8", "r8", "s", "inner", "do not pair the bucket columns"),
    ("l8", "r8", "v", "inner", "not a column"),  # error, not fallback: checked separately below
    ("l8", "r6", "k", "inner", "neither count is a multiple"),
    ("l8", "rlong", "k", "inner", "different types"),
    ("l8", "rplain", "k", "left", "rplain is not bucketed"),
    ("l8", "r8", "k", "full", "bucket joins run inner, left outer and left semi"),
    ("l8", "r8", "k", "right", "bucket joins run inner, left outer and left semi"),
    ("l8", "r8", ["k", "s"], "inner", "keys beyond the bucket columns"),
    ("l8ks", "r8ks", "k", "inner", "do not pair the bucket columns"),
    ("l8", "r8ks", "k", "inner", "different numbers of bucket columns"),
])
def test_fallback_join_says_why_and_is_still_right(spark: SparkSession, join_lake: skiplake.Lake, left: str,
                                                  right: str, on: Any, how: str, words: str) -> None:
    if on == "v":
        with pytest.raises(InvalidArgumentError, match=words):
            join_lake.bucket_join(left, right, on, how=how)
        return
    report = join_lake.explain_join(left, right, on, how=how)
    assert not report.bucketed
    assert words in report.reason, report.reason
    assert report.buckets == 0
    df = join_lake.bucket_join(left, right, on, how=how)
    assert canon(df.collect()) == plain_join(spark, join_lake, left, right, on, how)
    assert "Bucketed: true" not in plan_string(df)


@pytest.mark.parametrize("query, names, words", [
    pytest.param("SELECT a.k, b.w FROM l8 a FULL OUTER JOIN r8 b ON a.k = b.k", ["l8", "r8"], "full outer",
                 marks=pytest.mark.both_modes),
    ("SELECT a.k, b.w FROM l8 a RIGHT JOIN r8 b ON a.k = b.k", ["l8", "r8"], "right outer"),
    ("SELECT a.k, b.w FROM l8 a JOIN r6 b ON a.k = b.k", ["l8", "r6"], "neither count is a multiple"),
    ("SELECT a.k, b.w FROM l8 a JOIN r8 b ON a.k = b.k AND a.s = b.s", ["l8", "r8"], "keys beyond"),
    ("SELECT a.k, b.w FROM l8 a JOIN rplain b ON a.k = b.k", ["l8", "rplain"], "not bucketed"),
    ("SELECT a.k, a.v, b.v FROM l8 a JOIN l4 b ON a.k = b.k AND a.p = b.p", ["l8", "l4"], "keys beyond"),
])
def test_sql_fallback_join(spark: SparkSession, join_lake: skiplake.Lake, query: str, names: list[str],
                           words: str) -> None:
    [join] = join_lake.explain(query).joins
    assert not join.bucketed and words in join.reason, join.reason
    assert canon(join_lake.sql(query).collect()) == plain_sql(spark, join_lake, query, names)


ODD_SCHEMA = "`my col` int, `a.b` string, v long"
ODD_ROWS = [(None if i % 9 == 0 else i % 7, f"s{i % 3}", i) for i in range(240)]


@pytest.fixture(scope="module")
def odd_lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> skiplake.Lake:
    """Two tables bucketed by columns whose names need quoting: a space and a dot."""
    lake = skiplake.Lake(spark, str(tmp_path_factory.mktemp("odd") / "warehouse"))
    for name, n in (("odd8", 8), ("odd4", 4)):
        t = lake.create_table(name, ODD_SCHEMA, bucket_by=BucketSpec(n, ["my col", "a.b"], ["v"]))
        t.append(spark.createDataFrame(ODD_ROWS, ODD_SCHEMA))
    return lake


def test_bucket_columns_named_with_a_space_and_a_dot(spark: SparkSession, odd_lake: skiplake.Lake) -> None:
    t = odd_lake.table("odd8")
    assert check_bucket_files(spark, t, t.snapshot.add_files) == len(ODD_ROWS)
    plan = t.scan("`my col` = 3 AND `a.b` = 's1'")
    assert plan.report.buckets_selected == 1
    assert plan.buckets == spark_buckets_sql(spark, "pmod(hash(CAST(3 AS INT), 's1'), 8)")
    for how, on in [("inner", ["my col", "a.b"]), ("left", [("my col", "my col"), ("a.b", "a.b")])]:
        report = odd_lake.explain_join("odd8", "odd4", on, how=how)
        assert report.bucketed, report.reason
        df = odd_lake.bucket_join("odd8", "odd4", on, how=how)
        assert canon(df.collect()) == plain_join(spark, odd_lake, "odd8", "odd4", on, how)
        assert_no_shuffle_below_join(df)


def test_reads_filtered_on_a_dotted_bucket_column(spark: SparkSession, odd_lake: skiplake.Lake) -> None:
    t = odd_lake.table("odd8")
    everything = plain_df(spark, t)
    for where in ("`my col` = 3 AND `a.b` = 's1'", "`a.b` IS NOT NULL"):
        expected = everything.filter(where).collect()
        assert expected
        assert canon(t.read(where).collect()) == canon(expected), where
    query = "SELECT x.v, y.v AS v2 FROM odd8 x JOIN odd4 y ON x.`my col` = y.`my col` AND x.`a.b` = y.`a.b`"
    assert canon(odd_lake.sql(query).collect()) == plain_sql(spark, odd_lake, query, ["odd8", "odd4"])


# ================================================================ 6. other Delta readers and writers


def test_delta_rs_reads_and_writes_a_bucketed_table(spark: SparkSession, lake: skiplake.Lake) -> None:
    """delta-rs reads a bucketed table skiplake wrote (the spec is just configuration to it);
    a file delta-rs appends carries no bucket id: skiplake still reads and prunes correctly,
    bucket joins fall back until OPTIMIZE re-buckets the file."""
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa

    def rs_rows(path: str) -> list[str]:
        data = deltalake.DeltaTable(path).to_pyarrow_table()
        return canon(tuple(r[c] for c in ("k", "s", "v", "p")) for r in data.to_pylist())

    # A checkpoint every two commits: the spec and the files' tags must survive it.
    t = lake.create_table("rs", LEFT_SCHEMA, partition_by=["p"], bucket_by=BucketSpec(4, ["k"], ["v"]),
                          properties={"delta.checkpointInterval": "2"})
    t.append(spark.createDataFrame(LEFT_ROWS, LEFT_SCHEMA))
    t.append(spark.createDataFrame(LEFT_ROWS[:50], LEFT_SCHEMA))
    t.delete("v % 5 = 0")
    t.optimize()
    t = lake.table("rs")
    assert t.version == 4 and os.path.exists(os.path.join(t.path, "_delta_log", f"{4:020d}.checkpoint.parquet"))
    assert t.bucket_spec == BucketSpec(4, ("k",), ("v",))
    assert all((f.tags or {}).get("BUCKET_ID") for f in t.snapshot.add_files)
    assert rs_rows(t.path) == canon(t.read().select("k", "s", "v", "p").collect())
    rs = deltalake.DeltaTable(t.path)
    assert rs.version() == t.version
    assert rs.metadata().configuration["skiplake.bucketing.numBuckets"] == "4"
    assert pa.table(rs.get_add_actions(flatten=True)).num_rows == len(t.snapshot.add_files)

    other = lake.create_table("other", RIGHT_SCHEMA, bucket_by=BucketSpec(4, ["k"]))
    other.append(spark.createDataFrame(RIGHT_ROWS, RIGHT_SCHEMA))
    assert lake.explain_join("rs", "other", "k").bucketed
    deltalake.write_deltalake(t.path, pa.table({
        "k": pa.array([HOT, 1, None, 3], pa.int32()), "s": ["rs", "rs", "rs", "rs"],
        "v": pa.array([10_001, 10_002, 10_003, 10_004], pa.int64()), "p": ["1", "2", None, "1"]}), mode="append")
    t = lake.table("rs")
    foreign = [f for f in t.snapshot.add_files if not (f.tags or {}).get("BUCKET_ID")]
    assert foreign
    assert rs_rows(t.path) == canon(t.read().select("k", "s", "v", "p").collect())
    assert canon(t.read("k = 1").collect()) == canon(plain_df(spark, t).filter("k = 1").collect())
    assert any(r.s == "rs" for r in t.read("k = 1").collect())
    report = lake.explain_join("rs", "other", "k")
    assert not report.bucketed and "carry no bucket id" in report.reason
    assert canon(lake.bucket_join("rs", "other", "k").collect()) == plain_join(spark, lake, "rs", "other", "k",
                                                                              "inner")
    t.optimize()
    t = lake.table("rs")
    assert all((f.tags or {}).get("BUCKET_ID") for f in t.snapshot.add_files)
    check_bucket_files(spark, t, t.snapshot.add_files)
    assert lake.explain_join("rs", "other", "k").bucketed
    df = lake.bucket_join("rs", "other", "k")
    assert canon(df.collect()) == plain_join(spark, lake, "rs", "other", "k", "inner")
    assert_no_shuffle_below_join(df)
    assert rs_rows(t.path) == canon(t.read().select("k", "s", "v", "p").collect())


# ================================================================ review regressions


def test_spec_argument_and_reserved_name_errors(lake: skiplake.Lake) -> None:
    for bad in (lambda: BucketSpec(4, None), lambda: BucketSpec(4, ["k"], None),  # type: ignore[arg-type]
                lambda: BucketSpec(4, 5)):  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="column name or a list"):
            bad()
    with pytest.raises(InvalidArgumentError, match="sort column 'm' has type map"):
        lake.create_table("badsort", "k int, m map<string,int>", bucket_by=BucketSpec(4, ["k"], ["m"]))
    with pytest.raises(InvalidArgumentError, match="__skiplake_bucket"):
        lake.create_table("badname", "k int, __skiplake_bucket int", bucket_by=BucketSpec(4, ["k"]))
    assert "badsort" not in lake.tables() and "badname" not in lake.tables()


def test_floating_point_keys_fall_back_with_the_reason(spark: SparkSession, lake: skiplake.Lake) -> None:
    """Spark joins float/double keys on normalize(k) and shuffles anyway: skiplake says so."""
    rows = [(0.0, 1), (-0.0, 2), (float("nan"), 3), (1.5, 4), (None, 5)]
    for name in ("fa", "fb"):
        t = lake.create_table(name, "k double, v int", bucket_by=BucketSpec(4, ["k"]))
        t.append(spark.createDataFrame(rows, "k double, v int"))
    report = lake.explain_join("fa", "fb", "k")
    assert not report.bucketed and "floating-point" in report.reason
    got = canon(lake.bucket_join("fa", "fb", "k").collect())
    assert got == plain_join(spark, lake, "fa", "fb", "k", "inner")
    [join] = lake.explain("SELECT * FROM fa JOIN fb ON fa.k = fb.k").joins
    assert not join.bucketed and "floating-point" in join.reason


def test_bad_join_keys_and_natural_joins(spark: SparkSession, join_lake: skiplake.Lake) -> None:
    for on in ([("k",)], [1], [("k", 2)]):
        with pytest.raises(InvalidArgumentError, match="join key"):
            join_lake.bucket_join("l8", "r8", on)  # type: ignore[arg-type]
    query = "SELECT count(*) AS n FROM l8 NATURAL JOIN r8"
    assert join_lake.explain(query).joins == []
    plain_df(spark, join_lake.table("l8")).createOrReplaceTempView("plain_l8")
    plain_df(spark, join_lake.table("r8")).createOrReplaceTempView("plain_r8")
    want = spark.sql("SELECT count(*) AS n FROM plain_l8 NATURAL JOIN plain_r8").collect()
    assert join_lake.sql(query).collect() == want


def test_a_non_numeric_bucket_tag_counts_as_none(spark: SparkSession, lake: skiplake.Lake) -> None:
    """Another tool's BUCKET_ID tag that is not a number: the file is read like an untagged one."""
    from skiplake.log.actions import AddFile
    t = lake.create_table("oddtag", "k int, v int", bucket_by=BucketSpec(4, ["k"]))
    t.append(spark.createDataFrame([(i, i) for i in range(40)], "k int, v int"))
    f = t.snapshot.add_files[0]
    txn = t.begin()
    txn.remove([f], data_change=False)
    txn.actions.append(AddFile(f.path, f.partitionValues, f.size, f.modificationTime, False, f.stats,
                               {"BUCKET_ID": "x7"}))
    txn.commit("OPTIMIZE")
    t = lake.table("oddtag")
    for k in range(40):
        assert [r.v for r in t.read(f"k = {k}").collect()] == [k]
    assert not lake.explain_join("oddtag", "oddtag", "k").bucketed
