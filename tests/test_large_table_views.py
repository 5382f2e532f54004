"""`lake.sql` over tables too large for a whole-table view: each reference reads a view of its
planned files only, so Spark is never handed a relation over files pruning has not decided on.

The bound (spark.skiplake.sql.wholeTableViewMaxFiles) is set to 2 here, so tables of a few files
take the path tables of hundreds of thousands take.
"""
from __future__ import annotations

import os
import random
from typing import Iterator

import pytest
from pyspark.sql import SparkSession

import skiplake
from skiplake.spark.pruning import pruning_settings as dfp
from skiplake.spark.query.views import WHOLE_VIEW_MAX_FILES_CONF
from testing_support.query_tools import scan_metrics
from tests.pruning_conf import SMALL_TABLES
from tests.test_skipping import canon, plain_sql, skiplake_views

pytestmark = [pytest.mark.spark, pytest.mark.connect]

QUERIES = [
    "SELECT sum(ss_quantity) AS q FROM store_sales WHERE ss_item_sk IN (40, 41, 42)",
    "SELECT i.i_category, count(*) AS n, sum(ss.ss_quantity) AS q FROM store_sales ss "
    "JOIN item i ON ss.ss_item_sk = i.i_item_sk WHERE ss.ss_item_sk < 60 AND i.i_category = 'Books' "
    "GROUP BY i.i_category",
    "SELECT ss.ss_item_sk, count(*) AS n FROM store_sales ss LEFT JOIN item i "
    "ON ss.ss_item_sk = i.i_item_sk AND i.i_category = 'Books' "
    "WHERE i.i_item_sk IS NULL AND ss.ss_item_sk < 50 GROUP BY ss.ss_item_sk",
    "WITH s AS (SELECT ss_item_sk, ss_quantity FROM store_sales) "
    "SELECT 'lo' AS k, count(*) AS n, sum(ss_quantity) AS q FROM s WHERE ss_item_sk < 20 "
    "UNION ALL SELECT 'hi', count(*), sum(ss_quantity) FROM s WHERE ss_item_sk >= 185",
    "SELECT count(*) AS n FROM store_sales WHERE ss_item_sk IN (SELECT i_item_sk FROM item WHERE i_category = 'Music')",
    "SELECT * FROM store_sales WHERE ss_item_sk BETWEEN 100 AND 103",
    "SELECT i_category, sum(ss_quantity) AS q FROM store_sales JOIN item ON ss_item_sk = i_item_sk "
    "WHERE i_category = 'Sports' GROUP BY i_category",   # the dynamic pruning of store_sales by item
    "SELECT ss_store_sk, count(*) AS n FROM store_sales GROUP BY ss_store_sk",   # nothing pruned
]


@pytest.fixture(scope="module")
def tables(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    """store_sales (3,000 rows in 8 files by item range) and item (4 files), in a lake root."""
    root = str(tmp_path_factory.mktemp("large") / "warehouse")
    lake = skiplake.Lake(spark, root)
    rnd = random.Random(11)
    rows = [(item, rnd.randint(1, 100), rnd.choice([1, 2, 3, None])) for item in range(200) for _ in range(15)]
    lake.create_table("store_sales", "ss_item_sk int, ss_quantity int, ss_store_sk int").append(
        spark.createDataFrame(rows, "ss_item_sk int, ss_quantity int, ss_store_sk int").repartitionByRange(8, "ss_item_sk"))
    items = [(k, ["Books", "Music", "Sports", "Home"][k // 40]) for k in range(0, 150, 2)]
    lake.create_table("item", "i_item_sk int, i_category string").append(
        spark.createDataFrame(items, "i_item_sk int, i_category string").repartitionByRange(4, "i_item_sk"))
    return root


@pytest.fixture
def small_bound(spark: SparkSession) -> Iterator[None]:
    spark.conf.set(WHOLE_VIEW_MAX_FILES_CONF, "2")
    try:
        yield
    finally:
        spark.conf.unset(WHOLE_VIEW_MAX_FILES_CONF)


def _reports(lake: skiplake.Lake, query: str) -> list[tuple[str, int, int]]:
    return [(r.label, r.files_selected, r.files_total) for r in lake.explain(query)]


@pytest.mark.both_modes
def test_answers_and_pruning_equal_the_whole_table_views(spark: SparkSession, tables: str, small_bound: None) -> None:
    spark.conf.unset(WHOLE_VIEW_MAX_FILES_CONF)
    whole = skiplake.Lake(spark, tables)
    expected = {q: _reports(whole, q) for q in QUERIES}

    spark.conf.set(WHOLE_VIEW_MAX_FILES_CONF, "2")
    lake = skiplake.Lake(spark, tables)
    plain = {name: lake.table(name) for name in ("store_sales", "item")}
    for query in QUERIES:
        assert canon(lake.sql(query).collect()) == plain_sql(spark, plain, query), query
        assert _reports(lake, query) == expected[query], query
    assert any(sel < total for q in QUERIES for _, sel, total in expected[q])

    assert skiplake_views(spark) == []


JOINS = [QUERIES[1], QUERIES[4], QUERIES[6]]


def test_build_sides_over_such_tables_give_their_keys(spark: SparkSession, tables: str, small_bound: None) -> None:
    # The analysis pass reads such a table through a view of its columns only: a build side
    # over it (item, filtered) is run as a query of its own over its planned files. Were it run
    # from the analysis pass, it would give no keys, and the probe side no rows. (Builds are
    # not read in the driver here: that path reads the planned files itself.)
    settings = {**SMALL_TABLES, dfp.LOCAL_BUILD_THRESHOLD: "0"}
    for key, value in settings.items():   # dynamic file pruning applies to tables of kilobytes
        spark.conf.set(key, value)
    try:
        lake = skiplake.Lake(spark, tables)
        plain = {name: lake.table(name) for name in ("store_sales", "item")}
        for query in JOINS:
            assert canon(lake.sql(query).collect()) == plain_sql(spark, plain, query), query
            applied = [d for d in lake.last_explain.dynamic if d.applied]
            assert applied and all(d.key_count for d in applied), query
    finally:
        for key in settings:
            spark.conf.unset(key)


@pytest.mark.classic_only
def test_the_final_query_reads_exactly_the_planned_files(spark: SparkSession, tables: str, small_bound: None) -> None:
    lake = skiplake.Lake(spark, tables)
    df = lake.sql("SELECT count(*) AS n FROM store_sales WHERE ss_item_sk < 30")
    df.collect()
    [report] = lake.last_explain
    assert 1 <= report.files_selected < report.files_total
    assert scan_metrics(df)[0] == report.files_selected


@pytest.mark.both_modes
def test_files_pruning_rules_out_are_never_touched(spark: SparkSession, tmp_path, small_bound: None) -> None:
    # The files of every item range but the queried one are deleted from storage: any relation
    # over the whole table would fail to list them. With the whole-table views (the bound off) it does.
    root = str(tmp_path / "warehouse")
    lake = skiplake.Lake(spark, root)
    t = lake.create_table("sales", "k int, v int")
    t.append(spark.createDataFrame([(k, k * 2) for k in range(400)], "k int, v int").repartitionByRange(4, "k"))
    query = "SELECT sum(v) AS s FROM sales WHERE k < 50"
    [report] = lake.explain(query)
    kept = {f.path for f in t.scan("k < 50").files}
    assert report.files_selected == len(kept) == 1
    for f in t.snapshot.add_files:
        if f.path not in kept:
            os.unlink(os.path.join(t.path, f.path))
    assert lake.sql(query).collect()[0].s == sum(k * 2 for k in range(50))

    spark.conf.unset(WHOLE_VIEW_MAX_FILES_CONF)
    whole = skiplake.Lake(spark, root)
    with pytest.raises(Exception, match="(?i)not exist|FileNotFound|PATH_NOT_FOUND"):
        whole.sql(query).collect()



def test_a_bound_that_is_not_a_whole_number_is_a_typed_error_naming_it(spark: SparkSession, tables: str) -> None:
    from skiplake.errors import InvalidArgumentError
    spark.conf.set(WHOLE_VIEW_MAX_FILES_CONF, "many")
    try:
        with pytest.raises(InvalidArgumentError, match="wholeTableViewMaxFiles"):
            skiplake.Lake(spark, tables).sql("SELECT count(*) AS n FROM store_sales WHERE ss_item_sk < 30")
    finally:
        spark.conf.unset(WHOLE_VIEW_MAX_FILES_CONF)
