"""TPC-DS through lake.sql with dynamic file pruning, checked against DuckDB, at sf=0.1.

A subset of the 99 queries that between them exercise every join shape the rule handles (star
joins, a build side that is a join or an aggregate or holds a scalar subquery, UNION ALL probes
fed by one build, CTEs used several times, IN subqueries as left semi joins, outer joins): each
answer must equal DuckDB's over the same generated data, and dynamic pruning must have applied.
`python -m benchmarks.tpcds_answers` runs all 99 at a larger scale.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import skiplake
from benchmarks.tpcds_answers import check
from benchmarks.tpcds_lake import build_lake, raw_root
from skiplake.spark import settings as dfp
from tests.pruning_conf import SMALL_TABLES

pytestmark = pytest.mark.spark

# query -> a join type dynamic pruning must apply to in it
QUERIES = {
    3: "Inner",          # star join, two filtered dimensions
    5: "Inner",          # UNION ALL of sales and returns probed by one date_dim build
    6: "Inner",          # a build side whose filter holds a scalar subquery
    10: "Inner",         # EXISTS subqueries: the semi joins probe customer (one file); date builds prune sales
    14: "LeftSemi",      # ss_item_sk IN (a CTE of an INTERSECT of three channels), twice over
    17: "Inner",         # three fact tables in a chain of date builds
    42: "Inner",
    56: "Inner",         # item IN (subquery) under three channels (the semi join probes one-file item)
    74: "Inner",         # a CTE referenced four times
    80: "Inner",         # outer joins of sales to returns under date and item builds
    83: "Inner",         # date IN (subquery with a subquery) as the build of the returns' date join
}


@pytest.fixture(scope="module")
def tpcds(spark, tmp_path_factory):
    base = Path(tmp_path_factory.mktemp("tpcds"))
    root = build_lake(spark, base, 0.1, 16, progress=lambda _m: None)
    # At this scale the tables are small and have few files, whose ranges overlap: thresholds
    # that let every eligible join prune, so that every shape is exercised.
    wide = {**SMALL_TABLES, dfp.MAX_FILE_OVERLAP: "1.0", dfp.BUILD_SIZE_THRESHOLD: str(1 << 30)}
    previous = {k: spark.conf.get(k, None) for k in wide}
    for k, v in wide.items():
        spark.conf.set(k, v)
    yield skiplake.Lake(spark, str(root)), raw_root(base, 0.1)
    for k, v in previous.items():
        spark.conf.unset(k) if v is None else spark.conf.set(k, v)


def test_answers_equal_duckdbs_with_dynamic_pruning(spark, tpcds):
    lake, raw = tpcds
    answers = check(spark, lake, raw, sorted(QUERIES))
    wrong = [(a.query, a.error or "different rows") for a in answers if not a.same]
    assert not wrong
    # Every join shape is a candidate; the cost model may still decline one (these tables are
    # small: a build reading three sales tables to prune one-file item does not pay), and says so.
    missing = [(a.query, QUERIES[a.query], a.candidates) for a in answers if QUERIES[a.query] not in a.candidates]
    assert not missing, "dynamic pruning did not apply where it should"
    pruned = [a.query for a in answers if any(read < total for read, total in a.fact_files.values())]
    assert len(pruned) >= len(QUERIES) - 2, pruned


def test_null_test_filters_bind_as_sparks_own_sql(spark, tpcds):
    """lake.sql reads a filter of null tests only from the plan's text (sparing three round trips
    per filter): bound to its table, it is what Spark's own SQL of that filter binds to."""
    from benchmarks.bench_dfp import renamed
    from benchmarks.tpcds_answers import spark_queries
    from skiplake.expr.parse import bind_conjuncts
    from skiplake.spark.query.catalyst import condition_sql, optimized_plan, tree_text
    from skiplake.spark.query.plan_text import null_tests_sql, parse_plan
    from skiplake.tpcds import TPCDS_TABLES

    lake, _ = tpcds
    schemas = {}
    for name in TPCDS_TABLES:
        table = lake.table(name)
        table.read().createOrReplaceTempView(f"nt_{name}")
        schema = table.snapshot.schema
        schemas[frozenset(schema.names)] = schema
    read = 0
    for text in spark_queries(sorted(QUERIES)).values():
        optimized = optimized_plan(spark.sql(renamed(text, "nt_", set(TPCDS_TABLES))))
        for node in parse_plan(tree_text(optimized)).walk():
            if node.kind != "Relation" or not node.output:
                continue
            schema = schemas[frozenset(a.name for a in node.output)]
            child, above = node, node.parent
            while above is not None and above.kind == "Filter" and above.children[0] is child:
                sql = null_tests_sql(above.text.strip())
                if sql is not None:
                    read += 1
                    assert bind_conjuncts(sql, schema) == bind_conjuncts(condition_sql(optimized, above.number), schema)
                child, above = above, above.parent
    assert read >= 20
