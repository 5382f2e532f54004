"""`lake.sql` over a table whose checkpoint holds more files than
spark.skiplake.log.replayJobMinFiles: each reference of it is planned by a Spark job (its static
plan), then pruned further over the files the job kept (dynamic file pruning); aggregates are
answered from the stats by the job. Results and reports are those of the driver's plan, and the
table's files are never read in the driver.

The bound is set to 4 here (tests/test_log_job.py builds the table). Classic Spark in the gate,
Spark Connect in the full tier.
"""
from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

import skiplake
from skiplake.spark.reads import log_job
from tests.pruning_conf import SMALL_TABLES
from tests.test_log_job import job_bound, make_table  # noqa: F401 (job_bound: a fixture)

pytestmark = [pytest.mark.spark, pytest.mark.connect]


def _dimension(spark: SparkSession, root: str) -> None:
    skiplake.Table.create(spark, root, "k long, name string").append(
        spark.createDataFrame([(3, "a"), (77, "b"), (310, "a"), (1004, "c")], "k long, name string"))


QUERIES = [
    "SELECT COUNT(*) FROM t",
    "SELECT p, COUNT(*) AS n, MIN(id), MAX(v), COUNT(v) FROM t GROUP BY p",
    "SELECT COUNT(*), MAX(id) FROM t WHERE p = '1' AND id >= 120",
    "SELECT p, COUNT(*) FROM t VERSION AS OF 7 WHERE id < 100 GROUP BY p",
    "SELECT p, SUM(v) FROM t WHERE id < 40 OR id = 1004 GROUP BY p",
    "SELECT t.id, d.name FROM t JOIN d ON t.id = d.k WHERE d.name = 'a'",
    "SELECT d.name, COUNT(*) FROM t JOIN d ON t.id = d.k AND t.p = '1' GROUP BY d.name",
]


@pytest.mark.usefixtures("job_bound")
def test_lake_sql_plans_a_table_past_the_bound_by_a_spark_job(spark, tmp_path, monkeypatch):
    """lake.sql over a table past the bound: its references are planned by the job (the static
    plan, then dynamic file pruning over the files the job kept) and aggregates answered from the
    stats by the job; the results and the reports' counts are those of the driver's plan."""
    make_table(spark, str(tmp_path / "t"), monkeypatch)
    _dimension(spark, str(tmp_path / "d"))
    monkeypatch.setattr(log_job, "ADDS_PER_TASK", 12)
    for key, value in SMALL_TABLES.items():   # dynamic file pruning applies to tables of kilobytes
        spark.conf.set(key, value)
    try:
        _compare_lakes(spark, str(tmp_path))
    finally:
        for key in SMALL_TABLES:
            spark.conf.unset(key)


def _compare_lakes(spark: SparkSession, root: str) -> None:
    big = skiplake.Lake(spark, root)
    dynamic = 0
    for query in QUERIES:
        rows = sorted(big.sql(query).collect())
        by_job = big.last_explain
        spark.conf.unset(log_job.MIN_FILES_CONF)
        small = skiplake.Lake(spark, root)
        assert rows == sorted(small.sql(query).collect()), query
        in_driver = small.last_explain
        spark.conf.set(log_job.MIN_FILES_CONF, "4")
        assert by_job is not None and in_driver is not None, query   # every query planned (or answered from the log)
        assert (by_job.log_answer is None) == (in_driver.log_answer is None), query
        mine = [r for r in by_job if r.table.rstrip("/").endswith("/t")]
        theirs = [r for r in in_driver if r.table.rstrip("/").endswith("/t")]
        assert mine and len(mine) == len(theirs), query
        for a, b in zip(mine, theirs):
            assert a.replay.startswith("a Spark job of 3 tasks") and b.replay == "", query
            for field in ("files_total", "files_selected", "bytes_total", "bytes_selected", "partitions_total"):
                assert getattr(a, field) == getattr(b, field), (query, field)
            assert [s.files for s in a.stages] == [s.files for s in b.stages], query
        # (Which joins are candidates may differ: Spark sizes a view of columns only as empty.)
        assert all(d.key_count for d in by_job.dynamic if d.applied), query
        dynamic += sum(1 for d in by_job.dynamic if d.applied and d.probe == "t")
    assert dynamic >= 1   # t's files pruned by d's keys, over the files the job kept
    assert big.latest_snapshot(root + "/t").files_pending   # never read in the driver
