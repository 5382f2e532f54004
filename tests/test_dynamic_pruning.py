"""Dynamic file pruning through lake.sql, lake.prune and MERGE, against plain Spark.

The differential property: over random star schemas (fact tables clustered, partitioned or
bucketed by their keys; int, bigint, decimal, date and string keys with NULLs; dimensions with
random filters) and every join shape the rule handles or refuses (inner, IN subqueries, semi,
both outer joins, full outer, anti, chains, unions, CTEs, aggregates as build sides), the answer
with dynamic pruning equals the answer with it switched off, and equals plain Spark's.
"""
from __future__ import annotations

import datetime as dt
import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import skiplake
from skiplake.spark.pruning import pruning_settings as dfp
from tests.pruning_conf import COST_SETTINGS, SMALL_TABLES
from tests.tiers import examples

pytestmark = [pytest.mark.spark, pytest.mark.connect, pytest.mark.both_modes]

N = 3000            # fact rows; keys repeat three times; every 17th row's keys are NULL
FILES = 12          # files per fact table
KEYS = ("k_int", "k_big", "k_dec", "k_date", "k_str")
LAYOUTS = ("clustered", "partitioned", "bucketed")
# Low thresholds so small test tables qualify (the clustering check stays on), and a cost model
# that lets them prune.
TEST_CONF = {**SMALL_TABLES, dfp.MAX_VALUES: "40"}


def _fact_rows(spark: SparkSession):
    base = spark.range(N).select(F.col("id").alias("i"))
    key = F.when(F.col("i") % 17 == 16, F.lit(None)).otherwise(F.floor(F.col("i") / 3))
    return base.select(
        key.cast("int").alias("k_int"),
        (key + F.lit(10 ** 10)).cast("bigint").alias("k_big"),
        (key / F.lit(4)).cast("decimal(9,2)").alias("k_dec"),
        F.date_add(F.lit(dt.date(2000, 1, 1)), key.cast("int")).alias("k_date"),
        F.when(key.isNotNull(), F.format_string("s%05d", key.cast("int"))).alias("k_str"),
        (key % 8).cast("int").alias("k_part"),
        (F.col("i") % 101).cast("bigint").alias("m"),
        F.col("i"))


@pytest.fixture(scope="module")
def star(spark: SparkSession, tmp_path_factory):
    lake = skiplake.Lake(spark, str(tmp_path_factory.mktemp("star")))
    rows = _fact_rows(spark)
    schema = rows.drop("i").schema
    clustered = rows.repartitionByRange(FILES, "i").sortWithinPartitions("i").drop("i")
    lake.create_table("fact_clustered", schema).append(clustered)
    lake.create_table("fact_clustered2", schema).append(clustered)  # a second fact, for unions
    lake.create_table("fact_partitioned", schema, partition_by=["k_part"]).append(
        rows.repartition(3, "k_part").drop("i"))
    bucketed = lake.create_table("fact_bucketed", schema,
                                 bucket_by=skiplake.BucketSpec(FILES, ["k_big"], sort_by=["k_big"]))
    bucketed.append(rows.drop("i"))
    # One dimension: keys 0..1099 step 1 (most in the fact, some beyond), attributes to filter on.
    dim = spark.range(-5, 1100).select(
        F.when(F.col("id") % 23 == 0, F.lit(None)).otherwise(F.col("id")).alias("key"),
        (F.col("id") % 50).cast("int").alias("a"),
        F.format_string("c%d", F.col("id") % 7).alias("b"))
    d = dim.select(F.col("key").cast("int").alias("k_int"), (F.col("key") + 10 ** 10).cast("bigint").alias("k_big"),
                   (F.col("key") / 4).cast("decimal(9,2)").alias("k_dec"),
                   F.date_add(F.lit(dt.date(2000, 1, 1)), F.col("key").cast("int")).alias("k_date"),
                   F.when(F.col("key").isNotNull(), F.format_string("s%05d", F.col("key").cast("int"))).alias("k_str"),
                   (F.col("key") % 8).cast("int").alias("k_part"), "a", "b")
    lake.create_table("dim", d.schema).append(d.coalesce(1))
    # Plain Spark over the same rows: every table read whole, under its own name.
    for name in lake.tables():
        lake.table(name).read().createOrReplaceTempView(f"plain_{name}")
    previous = {k: spark.conf.get(k, None) for k in TEST_CONF}
    for k, v in TEST_CONF.items():
        spark.conf.set(k, v)
    yield lake
    for k, v in previous.items():
        spark.conf.unset(k) if v is None else spark.conf.set(k, v)


def _plain(query: str, lake: skiplake.Lake) -> str:
    for name in sorted(lake.tables(), key=len, reverse=True):
        query = query.replace(f" {name} ", f" plain_{name} ")
    return query


def _rows(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def _answers(spark: SparkSession, lake: skiplake.Lake, query: str) -> tuple[list, list, list]:
    spark.conf.set(dfp.ENABLED, "true")
    with_dfp = _rows(lake.sql(query))
    spark.conf.set(dfp.ENABLED, "false")
    without = _rows(lake.sql(query))
    spark.conf.set(dfp.ENABLED, "true")
    return with_dfp, without, _rows(spark.sql(_plain(query, lake)))


# ---------------------------------------------------------------- query shapes

AGG = "count(*) AS n, sum(f.m) AS s, count(f.m) AS fm"


def _shape(kind: str, fact: str, key: str, cond: str, key2: str) -> str:
    dim_sel = f"(SELECT * FROM dim WHERE {cond})"
    if kind == "inner":
        return f"SELECT {AGG} FROM {fact} f JOIN dim d ON f.{key} = d.{key} WHERE {cond.replace('a', 'd.a').replace('b', 'd.b')} "
    if kind == "in":
        return f"SELECT {AGG} FROM {fact} f WHERE f.{key} IN (SELECT {key} FROM dim WHERE {cond}) "
    if kind == "semi":
        return f"SELECT {AGG} FROM {fact} f LEFT SEMI JOIN {dim_sel} d ON f.{key} = d.{key} "
    if kind == "left_outer":     # the fact is the side the join does not preserve
        return f"SELECT {AGG}, count(d.a) AS da FROM {dim_sel} d LEFT JOIN {fact} f ON f.{key} = d.{key} "
    if kind == "right_outer":
        return f"SELECT {AGG}, count(d.a) AS da FROM {fact} f RIGHT JOIN {dim_sel} d ON f.{key} = d.{key} "
    if kind == "full_outer":
        return f"SELECT {AGG}, count(d.a) AS da FROM {fact} f FULL JOIN {dim_sel} d ON f.{key} = d.{key} "
    if kind == "anti":
        return f"SELECT {AGG} FROM {fact} f LEFT ANTI JOIN {dim_sel} d ON f.{key} = d.{key} "
    if kind == "chain":
        return (f"SELECT {AGG} FROM {fact} f JOIN {dim_sel} d ON f.{key} = d.{key} "
                f"JOIN dim d2 ON f.{key2} = d2.{key2} WHERE d2.b <> 'c3' ")
    if kind == "aggregate_build":
        return (f"SELECT {AGG} FROM {fact} f WHERE f.{key} IN "
                f"(SELECT {key} FROM dim WHERE {cond} GROUP BY {key} HAVING count(*) > 0) ")
    if kind == "union":
        return (f"SELECT count(*) AS n, sum(u.m) AS s FROM (SELECT {key}, m FROM {fact} UNION ALL "
                f"SELECT {key}, m FROM fact_clustered2 ) u JOIN {dim_sel} d ON u.{key} = d.{key} ")
    if kind == "cte":
        return (f"WITH sel AS (SELECT {key} FROM dim WHERE {cond}) SELECT {AGG} FROM {fact} f "
                f"JOIN sel ON f.{key} = sel.{key} JOIN sel s2 ON f.{key} = s2.{key} ")
    raise AssertionError(kind)


SHAPES = ("inner", "in", "semi", "left_outer", "right_outer", "full_outer", "anti", "chain", "aggregate_build",
          "union", "cte")
conditions = st.one_of(
    st.integers(0, 49).map(lambda x: f"a = {x}"),
    st.integers(0, 49).map(lambda x: f"a < {x}"),
    st.tuples(st.integers(0, 49), st.integers(0, 6)).map(lambda t: f"a >= {t[0]} AND b = 'c{t[1]}'"),
    st.just("a IS NULL"),
    st.just("a > 100"),          # an empty build side
)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(shape=st.sampled_from(SHAPES), layout=st.sampled_from(LAYOUTS), key=st.sampled_from(KEYS),
       key2=st.sampled_from(KEYS), cond=conditions)
def test_dynamic_pruning_never_changes_an_answer(spark, star, shape, layout, key, key2, cond):
    fact = f"fact_{layout}"
    if layout == "partitioned" and shape not in ("union",):
        key = "k_part" if key == "k_int" else key  # also join on the partition column itself
    query = _shape(shape, fact, key, cond, key2)
    with_dfp, without, plain = _answers(spark, star, query)
    assert with_dfp == without == plain, query


# ---------------------------------------------------------------- it prunes, and says why not


@pytest.mark.parametrize("layout, key", [("clustered", "k_int"), ("clustered", "k_dec"), ("clustered", "k_date"),
                                         ("clustered", "k_str"), ("partitioned", "k_part"),
                                         ("bucketed", "k_big")])
def test_each_layout_and_key_type_prunes_the_fact(spark, star, layout, key):
    query = f"SELECT {AGG} FROM fact_{layout} f JOIN dim d ON f.{key} = d.{key} WHERE d.a = 7"
    explained = star.explain(query)
    [fact] = [r for r in explained if r.label.startswith("fact")]
    assert fact.dynamic_filters and fact.files_selected < fact.files_total, explained.text()
    [applied] = [d for d in explained.dynamic if d.applied]
    assert applied.key_count and applied.build_seconds is not None
    # One build here: the wall time of the build phase holds it.
    assert applied.build_seconds <= explained.build_seconds
    assert f"Build sides: {explained.build_seconds:.3f} s" in explained.text()
    if layout == "bucketed":
        assert fact.buckets_selected < fact.buckets_total
    assert _rows(star.sql(query)) == _rows(spark.sql(_plain(query, star)))
    assert star.last_explain is not None and star.last_explain.dynamic
    # Where the planning time went: each stage in order, then the final query's making.
    stages = list(star.last_explain.to_dict()["planning"])
    assert stages == ["find_references", "push_filters", "prune_dynamically", "plan_bucket_joins", "final_frame"]
    assert all(s >= 0 for s in star.last_explain.planning.values())


def test_joins_it_must_not_prune_say_why(spark, star):
    cases = {
        "FROM fact_clustered f FULL JOIN (SELECT * FROM dim WHERE a = 7) d ON f.k_int = d.k_int": "FULL OUTER",
        "FROM fact_clustered f LEFT ANTI JOIN (SELECT * FROM dim WHERE a = 7) d ON f.k_int = d.k_int": "ANTI",
        # Spark casts the fact's string key to a number: its string stats do not apply.
        "FROM fact_clustered f JOIN dim d ON f.k_str = d.k_int WHERE d.a = 7": "cast(",
        # Decimals of different scales: Spark compares the fact's key cast to the wider scale.
        "FROM fact_clustered f JOIN dim d ON f.k_dec = CAST(d.k_dec AS DECIMAL(10,3)) WHERE d.a = 7": "cast(",
        "FROM fact_clustered f JOIN dim d ON f.k_int = d.k_int": "no selective filter",
        "FROM fact_clustered f JOIN dim d ON f.m = d.k_big WHERE d.a = 7": "not clustered",
        "FROM fact_clustered f JOIN dim d ON f.k_int + 1 = d.k_int WHERE d.a = 7": "computed values",
    }
    # A join without an equality has nothing to explain.
    assert star.explain("SELECT count(*) FROM fact_clustered f JOIN dim d ON f.k_int < d.k_int WHERE d.a = 7").dynamic == []
    for tail, why in cases.items():
        explained = star.explain(f"SELECT count(*) {tail}")
        reasons = [d.reason for d in explained.dynamic if not d.applied]
        assert any(why in r for r in reasons), (tail, explained.text())
        assert not any(d.applied for d in explained.dynamic), tail


@pytest.mark.classic_only
def test_a_cast_on_the_build_side_still_prunes(spark, star):
    # The build's keys are computed as Spark compares them (strings), as the fact's stats are.
    query = "SELECT count(*) FROM fact_clustered f JOIN dim d ON f.k_str = CAST(d.k_int AS STRING) WHERE d.a = 7"
    assert any(d.applied for d in star.explain(query).dynamic)
    with_dfp, without, plain = _answers(spark, star, query)
    assert with_dfp == without == plain


def test_floating_point_keys_are_not_pruned(spark, star):
    query = ("SELECT count(*) FROM fact_clustered f JOIN dim d ON CAST(f.k_int AS DOUBLE) = CAST(d.k_int AS DOUBLE) "
             "WHERE d.a = 7")
    explained = star.explain(query)
    assert not any(d.applied for d in explained.dynamic)
    assert any("floating-point" in d.reason for d in explained.dynamic), explained.text()
    assert _rows(star.sql(query)) == _rows(spark.sql(_plain(query, star)))
    # A floating-point key column itself (no cast) is refused for its type.
    from skiplake.spark.query.dynamic_pruning import _type_problem
    assert "floating-point" in _type_problem("x", "double", None)
    assert "floating-point" in _type_problem("x", "float", None) and _type_problem("x", "long", None) == ""
    # Keys of a type the stats comparison does not know are refused, never turned into "no key".
    assert "not compared" in _type_problem("x", "binary", None)
    assert all(_type_problem("x", t, None) == "" for t in ("integer", "decimal(9,2)", "string", "date", "timestamp",
                                                           "timestamp_ntz", "boolean"))


@pytest.mark.parametrize("join", ["LEFT", "RIGHT"])
def test_outer_joins_prune_the_side_they_do_not_preserve(spark, star, join):
    """The fact on the side an outer join does not preserve is pruned by the preserved side's keys."""
    dim = "(SELECT * FROM dim WHERE a = 7) d"
    tail = (f"FROM {dim} LEFT JOIN fact_clustered f ON f.k_int = d.k_int" if join == "LEFT"
            else f"FROM fact_clustered f RIGHT JOIN {dim} ON f.k_int = d.k_int")
    query = f"SELECT d.k_int, count(f.m) AS n, sum(f.m) AS s {tail} GROUP BY d.k_int"
    explained = star.explain(query)
    [d] = [d for d in explained.dynamic if "fact_clustered" in d.probe]
    assert d.applied and d.join_type == f"{join.title()}Outer", explained.text()
    [scan] = [r for r in explained if r.label.startswith("fact_clustered")]
    assert scan.files_selected < scan.files_total
    with_dfp, without, plain = _answers(spark, star, query)
    assert with_dfp == without == plain and any(row[1] == 0 for row in with_dfp)  # unmatched rows kept


@pytest.mark.classic_only
def test_one_build_feeds_every_probe_once(spark, star, monkeypatch):
    """Two joins with the same build side (as TPC-DS repeats `date_dim WHERE ...` per channel):
    the build is evaluated once (here as a Spark job) and prunes both probes; the report shows
    its time and key count for each join."""
    from skiplake.spark.query import dynamic_pruning as dynamic
    calls = []
    real = dynamic._keys_of
    monkeypatch.setattr(dynamic, "_keys_of", lambda *a: calls.append(a[2].build_label) or real(*a))
    spark.conf.set(dfp.LOCAL_BUILD_THRESHOLD, "0")
    try:
        query = ("SELECT count(*) AS n, sum(x.m) AS s FROM ("
                 "SELECT f.m FROM fact_clustered f JOIN (SELECT * FROM dim WHERE a = 7) d ON f.k_int = d.k_int "
                 "UNION ALL "
                 "SELECT g.m FROM fact_clustered2 g JOIN (SELECT * FROM dim WHERE a = 7) e ON g.k_int = e.k_int ) x")
        explained = star.explain(query)
    finally:
        spark.conf.unset(dfp.LOCAL_BUILD_THRESHOLD)
    assert len(calls) == 1, calls
    applied = [d for d in explained.dynamic if d.applied]
    assert sorted(d.probe for d in applied) == ["fact_clustered AS f", "fact_clustered2 AS g"], explained.text()
    assert len({(d.build_seconds, d.key_count) for d in applied}) == 1 and applied[0].key_count
    assert not applied[0].build_local and explained.build_seconds > 0
    scans = [r for r in explained if r.label.startswith("fact_clustered")]
    assert len(scans) == 2 and all(r.files_selected < r.files_total for r in scans)
    assert _rows(star.sql(query)) == _rows(spark.sql(_plain(query, star)))


def _scans_of(spark, path: str, run) -> int:
    """How many file scans over `path` the Spark SQL executions that `run()` starts hold."""
    store = spark._jsparkSession.sharedState().statusStore()
    before = {e.executionId() for e in _seq(store.executionsList())}
    run()
    plans = [e.physicalPlanDescription() for e in _seq(store.executionsList()) if e.executionId() not in before]
    # The description lists each scan's details once, its files on a `Location:` line.
    return sum(1 for p in plans for line in p.splitlines() if line.startswith("Location:") and path in line)


def _seq(scala_seq) -> list:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


@pytest.mark.parametrize("build", ["SELECT * FROM dim WHERE a = 7",
                                   "SELECT * FROM dim WHERE a < 20 AND k_int > 100 ORDER BY k_int LIMIT 9"])
@pytest.mark.classic_only
def test_a_build_is_evaluated_once(spark, star, build):
    """A build side evaluated by a Spark job for its keys is not evaluated again by the query: its
    rows take its place in the final plan. The dimension's files are scanned once in all, not
    twice (materializeBuilds off), and the answer is plain Spark's."""
    query = (f"SELECT count(*) AS n, sum(f.m) AS s, max(d.b) AS b FROM fact_clustered f "
             f"JOIN ({build}) d ON f.k_int = d.k_int")
    dim_path = os.path.basename(star.table("dim").path)
    spark.conf.set(dfp.LOCAL_BUILD_THRESHOLD, "0")
    scans, answers, notes = {}, {}, {}
    try:
        for materialize in ("true", "false"):
            spark.conf.set(dfp.MATERIALIZE_BUILDS, materialize)
            out: list = []
            scans[materialize] = _scans_of(spark, f"/{dim_path}/", lambda: out.append(_rows(star.sql(query))))
            answers[materialize] = out[0]
            notes[materialize] = star.last_explain.notes
            [d] = [d for d in star.last_explain.dynamic if "fact_clustered" in d.probe]
            assert d.applied and not d.build_local, star.last_explain.text()
    finally:
        spark.conf.unset(dfp.LOCAL_BUILD_THRESHOLD)
        spark.conf.unset(dfp.MATERIALIZE_BUILDS)
    assert scans == {"true": 1, "false": 2}, (scans, notes)
    assert any("1 build sides evaluated once" in n for n in notes["true"]), notes
    assert answers["true"] == answers["false"] == _rows(spark.sql(_plain(query, star)))
    assert answers["true"][0][0] > 0


@pytest.mark.classic_only
def test_a_query_pruning_nothing_runs_as_its_analysis_pass(spark, star):
    """The guard: when no file and no row is pruned, lake.sql returns the analysis pass's own
    DataFrame (its optimized plan already made), having started no Spark job; it reads what plain
    Spark reads."""
    query = f"SELECT {AGG} FROM fact_clustered f JOIN dim d ON f.k_int = d.k_int WHERE d.a >= 0"
    tracker = spark.sparkContext.statusTracker()
    jobs = set(tracker.getJobIdsForGroup(None))
    df = star.sql(query)
    assert set(tracker.getJobIdsForGroup(None)) == jobs
    explained = star.last_explain
    assert all(r.files_selected == r.files_total for r in explained), explained.text()
    assert not any(n.startswith("final") for n in explained.notes), explained.notes
    assert df._jdf.queryExecution().optimizedPlan() is not None
    assert _rows(df) == _rows(spark.sql(_plain(query, star)))


def test_cli_explains_a_query_over_a_lake_root(spark, star, capsys):
    import json

    from skiplake.cli import main
    query = f"SELECT {AGG} FROM fact_clustered f JOIN dim d ON f.k_int = d.k_int WHERE d.a = 7"
    assert main(["explain", star.root, "--sql", query, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    [fact] = [s for s in doc["scans"] if s["label"].startswith("fact_clustered")]
    assert fact["files_selected"] < fact["files_total"] and fact["dynamic_filters"]
    [d] = [d for d in doc["dynamic"] if "fact_clustered" in d["probe"]]
    assert d["applied"] and d["key_count"] > 0 and d["build_seconds"] is not None
    assert main(["explain", star.root, "--sql", query]) == 0
    assert "DynamicFilters: [k_int IN" in capsys.readouterr().out


def test_switched_off_and_thresholds(spark, star):
    query = f"SELECT {AGG} FROM fact_clustered f JOIN dim d ON f.k_int = d.k_int WHERE d.a = 7"
    spark.conf.set(dfp.ENABLED, "false")
    try:
        assert star.explain(query).dynamic == []
    finally:
        spark.conf.set(dfp.ENABLED, "true")
    spark.conf.set(dfp.FILES_THRESHOLD, "1000")
    try:
        [d] = [d for d in star.explain(query).dynamic if "fact_clustered" in d.probe]
        assert not d.applied and "deltaTableFilesThreshold" in d.reason
    finally:
        spark.conf.set(dfp.FILES_THRESHOLD, TEST_CONF[dfp.FILES_THRESHOLD])


@pytest.mark.classic_only
def test_tiny_tables_skip_dynamic_pruning_by_cost(spark, star):
    """With the cost model's own figures, a build over tables of kilobytes saves milliseconds at
    most and costs more: it is not evaluated (no Spark job runs while lake.sql plans), and the
    report says so with the figures."""
    query = f"SELECT {AGG} FROM fact_clustered f JOIN dim d ON f.k_int = d.k_int WHERE d.a = 7"
    tracker = spark.sparkContext.statusTracker()
    for k in COST_SETTINGS:
        spark.conf.unset(k)
    spark.conf.set(dfp.LOCAL_BUILD_THRESHOLD, "0")  # a Spark job, were it built
    try:
        before = set(tracker.getJobIdsForGroup())
        df = star.sql(query)
        jobs = set(tracker.getJobIdsForGroup()) - before
        explained = star.last_explain
    finally:
        spark.conf.unset(dfp.LOCAL_BUILD_THRESHOLD)
        for k in COST_SETTINGS:
            spark.conf.set(k, TEST_CONF[k])
    assert explained is not None
    [d] = [d for d in explained.dynamic if "fact_clustered" in d.probe]
    assert not d.applied and d.reason.startswith("by cost"), explained.text()
    assert d.cost is not None and d.cost.build_s + d.cost.apply_s > d.cost.best_saving_s > 0
    assert not d.cost.build_local and d.build_seconds is None
    assert "cost: probe" in explained.text() and explained.to_dict()["dynamic"][0]["cost"]["scan_s"] > 0
    assert jobs == set(), jobs
    [scan] = [r for r in explained if r.label.startswith("fact_clustered")]
    assert scan.files_selected == scan.files_total
    assert _rows(df) == _rows(spark.sql(_plain(query, star)))


def test_the_analysis_pass_is_skipped_when_no_file_can_be_skipped(spark, star):
    """No filter and no join: nothing to prune, so the query is analysed once, as written. Tables
    of a file each, priced by the cost model's own figures, are not worth the pass either."""
    explained = star.explain("SELECT count(*) AS n, sum(m) AS s FROM fact_clustered")
    assert explained.notes == ["analysis pass skipped: no filter or join can skip a file"], explained.text()
    assert "Planning: analysis pass skipped" in explained.text() and explained.to_dict()["notes"]
    [scan] = explained
    assert scan.files_selected == scan.files_total
    query = "SELECT count(*) AS n FROM dim d1 JOIN dim d2 ON d1.k_int = d2.k_int WHERE d1.a = 7"
    for k in COST_SETTINGS:
        spark.conf.unset(k)
    try:
        explained = star.explain(query)
        got = _rows(star.sql(query))
    finally:
        for k in COST_SETTINGS:
            spark.conf.set(k, TEST_CONF[k])
    [note] = explained.notes
    assert note.startswith("analysis pass skipped: its tables are a file each, and reading them all (2 files"), note
    assert got == _rows(spark.sql(_plain(query, star)))
    # Priced as the other tests price them, the same tables are analysed (and pruned).
    assert star.explain(query).notes == []


def test_keys_that_rule_out_no_file_are_not_applied(spark, star):
    """A build worth evaluating whose keys turn out to span the fact: the files they keep are
    planned exactly, and pruning nothing is not worth a changed final query."""
    query = f"SELECT {AGG} FROM fact_clustered f JOIN dim d ON f.k_int = d.k_int WHERE d.a < 49"
    explained = star.explain(query)
    [d] = [d for d in explained.dynamic if "fact_clustered" in d.probe]
    assert not d.applied and d.reason.startswith("by cost after the build: its keys keep 12 of 12 files"), d.reason
    assert d.key_count and d.key_count > 100
    [scan] = [r for r in explained if r.label.startswith("fact_clustered")]
    assert scan.files_selected == scan.files_total and not scan.dynamic_filters
    assert _rows(star.sql(query)) == _rows(spark.sql(_plain(query, star)))


def test_settings_are_read_from_the_session_conf(spark):
    """Every setting, read in one pass over the conf, as `spark.conf.get` would give it."""
    given = {dfp.SIZE_THRESHOLD: "3GB", dfp.FILES_THRESHOLD: "77", dfp.MAX_VALUES: "123",
             dfp.MAX_RANGES: "9", dfp.JOIN_TYPES: "inner, left_semi", dfp.BUILD_SIZE_THRESHOLD: "5m",
             dfp.MAX_FILE_OVERLAP: "0.25", dfp.LOCAL_BUILD_THRESHOLD: "0", dfp.UNCLUSTERED_ROW_FILTER: "false",
             dfp.COST_MODEL: "false", dfp.SCAN_BYTES_PER_SECOND: "50MB", dfp.BUILD_JOB_SECONDS: "0.5",
             dfp.SPECULATIVE_BUILD_SHARE: "0.2", dfp.FILTERED_SCAN_SHARE: "0.3", "spark.skiplake.unrelated": "a=b\u0002, c"}
    previous = {k: spark.conf.get(k, None) for k in given}
    for k, v in given.items():
        spark.conf.set(k, v)
    try:
        got = dfp.DynamicPruningSettings.of(spark)
        assert got == dfp.DynamicPruningSettings(
            enabled=True, size_threshold=3 << 30, files_threshold=77, max_values=123, max_ranges=9,
            join_types=("Inner", "LeftSemi"), build_size_threshold=5 << 20, max_file_overlap=0.25,
            local_build_threshold=0, unclustered_row_filter=False, cost_model=False,
            scan_bytes_per_second=50 << 20, build_job_seconds=0.5, speculative_build_share=0.2, filtered_scan_share=0.3)
        spark.conf.set(dfp.ENABLED, "off")
        assert dfp.DynamicPruningSettings.of(spark) == dfp.DynamicPruningSettings(enabled=False)
    finally:
        spark.conf.set(dfp.ENABLED, "true")
        for k, v in previous.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)


@pytest.mark.classic_only
def test_unclustered_files_take_few_keys_as_a_row_filter(spark, star):
    """Files not clustered by the key prune no file; a build read in the driver with at most 10
    keys still filters the probe's rows, above the scan (Spark cannot push array_contains into
    Parquet, whose dictionary checks cost more than they save on such files); more keys, or
    unclusteredRowFilter off, and the join says why not."""
    few = f"SELECT {AGG} FROM fact_clustered f JOIN dim d ON f.m = d.k_int WHERE d.a = 7 AND d.k_int < 120"
    explained = star.explain(few)
    [d] = [d for d in explained.dynamic if "fact_clustered" in d.probe]
    assert d.applied and d.build_local and "row filter" in d.reason and d.key_count == 3, explained.text()
    [scan] = [r for r in explained if r.label.startswith("fact_clustered")]
    assert any(f.endswith("on rows only") for f in scan.dynamic_filters), explained.text()
    assert scan.files_selected == scan.files_total  # no file pruned by it
    df = star.sql(few)
    plan = df._jdf.queryExecution().executedPlan().toString()
    fact_scan = next(line for line in plan.splitlines() if "FileScan" in line and "m#" in line and "k_int" not in line)
    assert "array_contains" in plan and "In(m" not in fact_scan, plan
    with_dfp, without, plain = _answers(spark, star, few)
    assert with_dfp == without == plain and with_dfp[0][0] > 0
    spark.conf.set(dfp.UNCLUSTERED_ROW_FILTER, "false")
    try:
        [off] = [d for d in star.explain(few).dynamic if "fact_clustered" in d.probe]
        assert not off.applied and "not clustered" in off.reason
    finally:
        spark.conf.unset(dfp.UNCLUSTERED_ROW_FILTER)
    many = f"SELECT {AGG} FROM fact_clustered f JOIN dim d ON f.m = d.k_int WHERE d.a = 7"
    [d] = [d for d in star.explain(many).dynamic if "fact_clustered" in d.probe]
    assert not d.applied and "not clustered" in d.reason and "more than a row filter takes" in d.reason
    # lake.prune swaps file lists only: there the keys would filter nothing, and it says so.
    fact, dim = star.table("fact_clustered").read(), star.table("dim").read()
    df = fact.join(dim.where("a = 7 AND k_int < 120"), fact.m == dim.k_int).agg(F.count("*").alias("n"))
    assert _rows(star.prune(df)) == _rows(df)
    [d] = [d for d in star.last_explain.dynamic if "fact_clustered" in d.probe]
    assert not d.applied and "not clustered" in d.reason


def test_many_keys_are_sent_as_ranges(spark, star):
    query = f"SELECT {AGG} FROM fact_clustered f JOIN dim d ON f.k_int = d.k_int WHERE d.a < 45 AND d.k_int < 300"
    # The ranges keep every file static pruning left: the cost model does not apply them ...
    [d] = [d for d in star.explain(query).dynamic if "fact_clustered" in d.probe]
    assert not d.applied and d.reason.startswith("by cost after the build"), d.reason
    spark.conf.set(dfp.COST_MODEL, "false")  # ... and without it they are sent as ranges
    try:
        explained = star.explain(query)
        [fact] = [r for r in explained if r.label.startswith("fact")]
        assert any("RANGES" in f for f in fact.dynamic_filters), explained.text()
        assert _rows(star.sql(query)) == _rows(spark.sql(_plain(query, star)))
    finally:
        spark.conf.unset(dfp.COST_MODEL)


def _pruned_star_join(star, dim_filter: str):
    """lake.prune of the fact-dimension join under a dimension filter, checked against the
    unpruned DataFrame's rows: (the pruned DataFrame, the fact table's report)."""
    fact, dim = star.table("fact_clustered").read(), star.table("dim").read()
    df = fact.join(dim.where(dim_filter), "k_int").agg(F.count("*").alias("n"), F.sum("m").alias("s"))
    pruned = star.prune(df)
    assert _rows(pruned) == _rows(df)
    [report] = [r for r in star.last_explain if r.label == "fact_clustered"]
    return pruned, report


@pytest.mark.classic_only
def test_dataframes_get_the_same_pruning(spark, star):
    _, report = _pruned_star_join(star, "a = 7")
    assert report.files_selected < report.files_total and report.dynamic_filters
    # A plan with nothing to prune comes back unchanged: the very DataFrame.
    unfiltered = star.table("fact_clustered").read().limit(3)
    assert star.prune(unfiltered) is unfiltered


@pytest.mark.classic_only
def test_a_dataframe_pruned_to_no_file_reads_none(spark, star):
    pruned, report = _pruned_star_join(star, "a = -1")
    assert report.files_selected == 0 < report.files_total
    assert not [f for f in pruned.inputFiles() if "fact_clustered" in f]


def test_decimal_and_date_keys_compare_exactly(spark, star):
    query = (f"SELECT {AGG} FROM fact_clustered f JOIN dim d ON f.k_dec = d.k_dec AND f.k_date = d.k_date "
             "WHERE d.a IN (3, 4) AND d.k_int < 200")
    with_dfp, without, plain = _answers(spark, star, query)
    assert with_dfp == without == plain
    [fact] = [r for r in star.explain(query) if r.label.startswith("fact")]
    assert len(fact.dynamic_filters) == 2 and fact.files_selected < fact.files_total


# Filters on the dimension's columns of every kind the driver evaluates (and a few it refuses).
DIM_LEAVES = st.one_of(
    st.tuples(st.sampled_from(["a", "k_int", "k_big"]), st.sampled_from(["=", "<>", "<", ">=", "<=>"]),
              st.integers(-3, 60)).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
    st.tuples(st.sampled_from(["=", "<", ">"]), st.sampled_from(["0.25", "1.50", "3.00", "7.75"])).map(
        lambda t: f"k_dec {t[0]} {t[1]}"),
    st.tuples(st.sampled_from(["=", "<=", ">"]), st.integers(0, 40)).map(
        lambda t: f"k_date {t[0]} DATE'{(dt.date(2000, 1, 1) + dt.timedelta(days=t[1])).isoformat()}'"),
    st.sampled_from(["b = 'c3'", "b < 'c2'", "b IN ('c1', 'c5')", "b LIKE 'c%'", "k_str LIKE 's0001%'",
                     "k_str IN ('s00010', 's00011', NULL)", "k_int IS NULL", "a IN (1, 2, 3)",
                     "k_int BETWEEN 5 AND 30", "abs(a) = 4", "length(b) = 2"]),
)
DIM_CONDITIONS = st.one_of(DIM_LEAVES, st.tuples(DIM_LEAVES, DIM_LEAVES, st.sampled_from(["AND", "OR"])).map(
    lambda t: f"({t[0]}) {t[2]} ({t[1]})"), DIM_LEAVES.map(lambda k: f"NOT ({k})"),
    st.tuples(DIM_LEAVES, DIM_LEAVES).map(lambda t: f"NOT (({t[0]}) OR ({t[1]})) AND a < 20"))


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@pytest.mark.classic_only
@given(cond=DIM_CONDITIONS, key=st.sampled_from(("k_int", "k_dec", "k_date", "k_str")))
@example(cond="abs(a) = 4 AND b = 'c1'", key="k_int")      # Spark evaluates what the driver cannot
@example(cond="(length(b) = 2) OR (a = 3)", key="k_str")
@example(cond="NOT (k_str IN ('s00010', 's00011', NULL)) OR a = 5", key="k_date")
@example(cond="k_str LIKE 's0001%' AND k_dec <=> 2.50", key="k_dec")
def test_build_keys_read_in_the_driver_are_sparks(spark, star, cond, key):
    """A one-table build side is read in the driver (no Spark job) when its filter is one the
    driver evaluates exactly; its keys are the ones Spark computes for the same filter (and with
    the local read switched off, the build is Spark's and gives the same keys and files)."""
    query = f"SELECT {AGG} FROM fact_clustered f JOIN (SELECT * FROM dim WHERE {cond}) d ON f.{key} = d.{key}"
    expected = sorted(r[0] for r in spark.sql(
        f"SELECT DISTINCT {key} FROM plain_dim WHERE ({cond}) AND {key} IS NOT NULL").collect())
    spark.conf.set(dfp.LOCAL_BUILD_THRESHOLD, "0")
    try:
        by_spark = star.explain(query)
    finally:
        spark.conf.unset(dfp.LOCAL_BUILD_THRESHOLD)
    local = star.explain(query)
    applied = [d for d in local.dynamic if d.applied]
    if not applied:  # not selective enough, or nothing to prune: then neither way applied
        assert not any(d.applied for d in by_spark.dynamic), cond
        return
    [d] = applied
    [s] = [x for x in by_spark.dynamic if x.applied]
    assert not s.build_local
    assert d.build_local == ("abs(" not in cond and "length(" not in cond), (cond, local.text())
    assert d.key_count == s.key_count == len(expected), (cond, expected, local.text())
    assert [r.files_selected for r in local] == [r.files_selected for r in by_spark]
    if d.build_local:
        assert "(read in the driver)" in d.text()
    with_dfp, without, plain = _answers(spark, star, query)
    assert with_dfp == without == plain, query


def test_row_filter_only_from_short_in_lists() -> None:
    """The dynamic filters reach the probe's rows only as IN lists of at most 10 values (what
    Spark hands Parquet as exact equalities); longer lists and ranges prune files only, and a
    reference one of whose occurrences has no such filter gets no row filter at all."""
    from skiplake.expr.tree import And, Cmp, Col, InList
    from skiplake.spark.query.model import Occurrence, TableReference
    col = Col("k", "long")
    short, long_ = InList(col, tuple(range(10))), InList(col, tuple(range(11)))
    ranges = And((Cmp(">=", col, 5), Cmp("<=", col, 9)))

    def ref(*dynamic: list) -> TableReference:
        return TableReference(source=None, name="t", label="t",  # type: ignore[arg-type]
                              occurrences=[Occurrence(node=None, dynamic=list(d)) for d in dynamic])  # type: ignore[arg-type]

    text = ref([short]).row_filter()
    assert text is not None and "IN" in text and "9" in text
    assert ref([long_]).row_filter() is None
    assert ref([ranges]).row_filter() is None
    assert ref([long_, short]).row_filter() == text          # the long list is left to file pruning
    assert ref([short], [long_]).row_filter() is None        # one occurrence would be cut short
    both = ref([short], [InList(col, (42,))]).row_filter()
    assert both is not None and " OR " in both


@pytest.mark.parametrize("key, value", [(dfp.FILES_THRESHOLD, "many"), (dfp.MAX_VALUES, "-3"),
                                        (dfp.MAX_RANGES, "1.5"), (dfp.MAX_FILE_OVERLAP, "most")])
def test_a_setting_that_does_not_parse_is_a_typed_error_naming_it(spark, key: str, value: str) -> None:
    from skiplake.errors import InvalidArgumentError
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        with pytest.raises(InvalidArgumentError, match=key.rsplit(".", 1)[-1]):
            dfp.DynamicPruningSettings.of(spark)
    finally:
        spark.conf.unset(key) if previous is None else spark.conf.set(key, previous)
