"""What is particular to a Spark Connect session: the pruning lake.sql plans from the plan's
text, the operations that refuse or fall back (and say so), and what the client sends the
server. Tests of the other suites marked `both_modes` run against the Connect server too in
`make test`, and those marked `connect` in `make test-full` (docs/testing.md)."""
from __future__ import annotations

import pytest
from pyspark.sql import functions as F

import skiplake
from skiplake.errors import InvalidArgumentError, SparkConnectUnsupportedError
from skiplake.spark.pruning import pruning_settings as dfp
from tests.pruning_conf import SMALL_TABLES

pytestmark = [pytest.mark.spark, pytest.mark.connect, pytest.mark.both_modes]

connect = pytest.mark.connect_only


@pytest.fixture
def star(spark, lake):
    """A fact table clustered by its item key in 8 files, and an item dimension of one file."""
    fact = lake.create_table("sales", "item_sk bigint, qty int")
    fact.append(spark.range(8000).selectExpr("id % 400 AS item_sk", "CAST(id % 7 AS INT) AS qty")
                .repartitionByRange(8, "item_sk"))
    item = lake.create_table("item", "i_item_sk bigint, i_item_id string, i_category string")
    item.append(spark.range(400).selectExpr(
        "id AS i_item_sk", "concat('AAAAAAAA', lpad(CAST(id AS STRING), 8, '0')) AS i_item_id",
        "CASE WHEN id % 2 = 0 THEN 'Books' ELSE 'Music' END AS i_category").coalesce(1))
    for k, v in SMALL_TABLES.items():
        spark.conf.set(k, v)
    spark.conf.set(dfp.MAX_FILE_OVERLAP, "1.0")
    yield lake
    for k in [*SMALL_TABLES, dfp.MAX_FILE_OVERLAP]:
        spark.conf.unset(k)


@connect
def test_the_star_join_on_one_item_id_skips_as_its_literal_key_does(spark, star):
    query = ("SELECT sum(qty) AS q, count(*) AS n FROM sales JOIN item ON item_sk = i_item_sk "
             "WHERE i_item_id = 'AAAAAAAA00000123'")
    explained = star.explain(query)
    [applied] = [d for d in explained.dynamic if d.applied]
    assert applied.build_local and applied.key_count == 1, explained.text()
    sales = next(r for r in explained if r.table.endswith("/sales"))
    literal = next(r for r in star.explain("SELECT * FROM sales WHERE item_sk = 123")
                   if r.table.endswith("/sales"))
    assert sales.files_selected == literal.files_selected == 1, explained.text()
    assert sales.rows_selected == literal.rows_selected
    # Not read in the driver (as for a partitioned or bigger dimension): a query of its own.
    spark.conf.set(dfp.LOCAL_BUILD_THRESHOLD, "0")
    try:
        by_query = star.explain(query)
    finally:
        spark.conf.unset(dfp.LOCAL_BUILD_THRESHOLD)
    [applied] = [d for d in by_query.dynamic if d.applied]
    assert not applied.build_local and applied.key_count == 1, by_query.text()
    assert [r.files_selected for r in by_query] == [r.files_selected for r in explained]
    got = star.sql(query).collect()[0]
    rows = star.table("sales").read(where="item_sk = 123").collect()
    assert (got.q, got.n) == (sum(r.qty for r in rows), len(rows))


@connect
def test_literals_prune_from_the_plan_text(spark, star):
    explained = star.explain("SELECT count(*) FROM sales s WHERE s.item_sk BETWEEN 10 AND 40 AND qty >= 0")
    [sales] = list(explained)
    assert sales.files_selected == 1 < sales.files_total
    # A join: each table's filters come from the plan's text. A string literal the plan cannot
    # print unambiguously turns the reading of strings off (the category filter is not used),
    # numbers are still read, and the answer is right.
    join = "SELECT count(*) AS n FROM sales JOIN item ON item_sk = i_item_sk WHERE i_category = 'Books' AND i_item_sk < 10"
    risky = join + " AND i_item_id <> 'x, (y) AND z'"
    for query, strings_read in ((join, True), (risky, False)):
        item = next(r for r in star.explain(query) if r.table.endswith("/item"))
        assert item.predicate is not None and "i_item_sk < 10" in item.predicate, item.predicate
        assert ("'Books'" in item.predicate) == strings_read, item.predicate
        assert star.sql(query).collect()[0].n == 100


@connect
def test_builds_needing_a_spark_job_say_why_they_do_not_prune(spark, star):
    # The build side is a join of two tables: no query of its own can be made from the plan text.
    query = ("SELECT count(*) FROM sales JOIN (SELECT a.i_item_sk FROM item a JOIN item b "
             "ON a.i_item_sk = b.i_item_sk WHERE b.i_category = 'Books') x ON item_sk = x.i_item_sk")
    explained = star.explain(query)
    reasons = [d.reason for d in explained.dynamic if not d.applied]
    assert any("Spark Connect" in r for r in reasons), explained.text()
    assert star.sql(query).collect()[0][0] == 4000


@connect
def test_prune_of_a_dataframe_refuses_with_what_to_use(spark, star):
    df = star.table("sales").read().join(star.table("item").read(), on=F.col("item_sk") == F.col("i_item_sk"))
    with pytest.raises(SparkConnectUnsupportedError, match="lake.sql"):
        star.prune(df)


def _bucketed_catalog_tables(spark) -> set[str]:
    return {t.name for t in spark.catalog.listTables("default") if t.name.startswith("skiplake_bucketed_")}


@connect
def test_a_bucket_join_reads_bucketed_catalog_tables_that_follow_the_table(spark, lake):
    """Each side reads through one external catalog table per layout, refreshed per read: new
    files are seen, removed ones are not, and files with deletion vectors fall back with a reason."""
    before = _bucketed_catalog_tables(spark)
    spec = skiplake.BucketSpec(4, "k")
    tables = {}
    schema = "k bigint, v string, st struct<a: int, `b c`: array<string>>"  # the catalog table spells it too
    for name, props in (("l", {}), ("r", {"delta.enableDeletionVectors": "true"})):
        tables[name] = lake.create_table(name, schema, bucket_by=spec, properties=props)
        tables[name].append(spark.range(200).selectExpr(
            "id AS k", "CAST(id AS STRING) AS v", "named_struct('a', CAST(id AS INT), 'b c', array('x')) AS st"))
    report = lake.explain_join("l", "r", on="k")
    assert report.bucketed, report.reason
    df = lake.bucket_join("l", "r", on="k")
    text = df._explain_string(mode="simple")
    assert "Exchange" not in text and text.count("Bucketed: true") == 2, text
    rows = df.collect()
    assert len(rows) == 200 and all(r[2]["a"] == r[0] and r[2]["b c"] == ["x"] for r in rows)
    assert len(_bucketed_catalog_tables(spark) - before) == 2
    tables["l"].append(spark.range(150, 300).selectExpr("id AS k", "'new' AS v", "CAST(NULL AS struct<a: int, `b c`: array<string>>) AS st"))
    tables["l"].delete("k < 20")
    assert lake.explain_join("l", "r", on="k").bucketed
    assert lake.bucket_join("l", "r", on="k").count() == 180 + 50
    assert len(_bucketed_catalog_tables(spark) - before) == 2  # the same tables, refreshed
    tables["r"].delete("k % 7 = 0")  # a deletion vector on some of r's files
    report = lake.explain_join("l", "r", on="k")
    assert not report.bucketed and "deletion vectors" in report.reason
    expected = sum(1 for k in list(range(20, 200)) + list(range(150, 200)) if k % 7)
    assert lake.bucket_join("l", "r", on="k").count() == expected


@connect
def test_zorder_ships_skiplake_to_the_servers_workers(spark, lake):
    from skiplake.spark.session import artifacts
    t = lake.create_table("z", "a bigint, b bigint")
    for i in range(3):
        t.append(spark.range(i * 300, (i + 1) * 300).selectExpr("id AS a", "id % 17 AS b"))
    result = t.optimize(zorder_by=["a", "b"])
    assert result.files_added >= 1
    assert id(spark) in artifacts._sent
    assert sorted(r.a for r in t.read().collect()) == list(range(900))


@connect
def test_the_session_has_skiplakes_settings(spark):
    conf = spark.conf.getAll
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.sql.debug.maxToStringFields"] == "1000000"


def test_local_spark_names_what_remote_takes():
    with pytest.raises(InvalidArgumentError, match="sc://host:port"):
        skiplake.local_spark(remote="http://example:15002")


def test_change_feed_and_constraints_over_either_session(spark, lake):
    """The change data feed and the column rules run on a Connect client as on classic Spark:
    change files written and read, a rule broken inside the write job reported by name."""
    from skiplake.errors import ConstraintViolationError
    t = lake.create_table("cdf", "id long, qty int", properties={"delta.enableChangeDataFeed": "true",
                                                               "delta.enableDeletionVectors": "true"})
    t.append(spark.range(10).selectExpr("id", "CAST(id AS INT) AS qty"))
    t.update("id < 3", {"qty": "qty + 100"})
    t.delete("id = 9")
    src = spark.range(8, 12).selectExpr("id", "CAST(0 AS INT) AS qty")
    t.merge(src, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
    kinds = {(r._commit_version, r._change_type): r.n for r in
             t.changes(2).groupBy("_commit_version", "_change_type").agg(F.count("*").alias("n")).collect()}
    assert kinds == {(2, "update_preimage"): 3, (2, "update_postimage"): 3, (3, "delete"): 1,
                     (4, "update_preimage"): 1, (4, "update_postimage"): 1, (4, "insert"): 3}
    t.add_constraint("small", "qty < 1000")
    with pytest.raises(ConstraintViolationError, match="CHECK constraint small.*qty = 5000"):
        t.append(spark.range(1).selectExpr("id", "5000 AS qty"))


def test_clustering_over_either_session(spark, lake):
    """A clustered table's OPTIMIZE places rows on the Hilbert curve in the server's workers
    (skiplake shipped to them) and tags its cube as on classic Spark."""
    t = lake.create_table("clustered", "a bigint, b bigint", cluster_by=["a", "b"])
    for i in range(3):
        t.append(spark.range(i * 300, (i + 1) * 300).selectExpr("id AS a", "id % 17 AS b"))
    result = t.optimize(target_file_size=4096)
    assert result.files_removed == 6 and result.files_added >= 1
    assert {f.clusteringProvider for f in t.snapshot.add_files} == {"liquid"}
    assert sorted(r.a for r in t.read().collect()) == list(range(900))


def test_row_ids_over_either_session(spark, lake):
    """Row ids are assigned at commit and read back on a Connect client as on classic Spark."""
    t = lake.create_table("tracked", "id long", properties={"delta.enableRowTracking": "true"})
    t.append(spark.range(0, 50))
    t.append(spark.range(50, 60))
    rows = t.read(with_row_ids=True).collect()
    assert sorted(r._row_id for r in rows) == list(range(60))
    assert {r._row_commit_version for r in rows} == {1, 2}
