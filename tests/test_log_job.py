"""A table whose checkpoint holds more files than spark.skiplake.log.replayJobMinFiles is opened
without them, and its scans (and counts) are planned by a Spark job over the checkpoint's row groups:
the same files and rows as the driver's plan, the report saying how the log was replayed.

The bound is set to 4 here, so that a table of a few dozen files takes the path of tables of
tens of millions.
"""
from __future__ import annotations

from typing import Iterator

import pytest
from pyspark.sql import SparkSession

import skiplake
from skiplake.log import checkpoint
from skiplake.spark.reads import log_job
from tests.tiers import gate_sample

# Spark Connect: the gate's pass plans and writes past the bound (the last test); the full
# tier's compares every plan too.
pytestmark = [pytest.mark.spark, pytest.mark.connect]

WHERES = [None, "id < 40", "p = '1'", "p = '2' AND v >= 150", "id IN (3, 77, 310)", "v IS NULL", "id > 10000"]


@pytest.fixture
def job_bound(spark: SparkSession) -> Iterator[None]:
    spark.conf.set(log_job.MIN_FILES_CONF, "4")
    try:
        yield
    finally:
        spark.conf.unset(log_job.MIN_FILES_CONF)


def make_table(spark: SparkSession, root: str, monkeypatch: pytest.MonkeyPatch, typed: bool = True) -> None:
    """36 files in 3 partitions; a checkpoint at version 6 of 36 adds in 3 row groups (with typed
    stats, or JSON stats only); then a delete with deletion vectors and an append after it."""
    monkeypatch.setattr(checkpoint, "ADD_CHUNK", 12)
    t = skiplake.Table.create(spark, root, "id long, p string, v int", partition_by=["p"],
                              properties={"delta.checkpointInterval": "6", "delta.enableDeletionVectors": "true",
                                          "delta.checkpoint.writeStatsAsStruct": str(typed).lower()})
    for i in range(6):
        t.append(spark.range(i * 60, i * 60 + 60).selectExpr("id", "cast(id % 3 as string) AS p",
                                                            "if(id % 7 = 0, null, cast(id as int)) AS v").repartition(2))
    t.delete("id % 5 = 0 AND id < 200")
    t.append(spark.range(1000, 1010).selectExpr("id", "'1' AS p", "cast(id as int) AS v"))


# JSON-only checkpoints in the full tier (the gate's time): the job and its plans are the same,
# only where a task reads the stats from differs.
@pytest.mark.parametrize("typed", gate_sample([(True,), (False,)], lambda case: case[0]),
                         ids=["typed-stats", "json-stats"])
def test_scans_past_the_bound_are_planned_by_a_spark_job(spark, tmp_path, monkeypatch, job_bound, typed):
    root = str(tmp_path / "t")
    make_table(spark, root, monkeypatch, typed)
    monkeypatch.setattr(log_job, "ADDS_PER_TASK", 12)   # a task per row group
    big = skiplake.Table.open(spark, root)
    assert big.snapshot.files_pending
    spark.conf.unset(log_job.MIN_FILES_CONF)
    small = skiplake.Table.open(spark, root)
    assert not small.snapshot.files_pending
    for where in WHERES:
        by_job, in_driver = big.scan(where), small.scan(where)
        assert by_job.report.replay.startswith("a Spark job of 3 tasks"), where
        assert in_driver.report.replay == ""
        assert sorted(f.path for f in by_job.files) == sorted(f.path for f in in_driver.files), where
        assert sorted(by_job.files, key=lambda f: f.path) == sorted(in_driver.files, key=lambda f: f.path)
        for field in ("files_total", "files_selected", "bytes_total", "bytes_selected", "rows_total",
                      "rows_selected", "partitions_total", "partitions_selected", "partition_filters", "data_filters"):
            assert getattr(by_job.report, field) == getattr(in_driver.report, field), (where, field)
        rows = big.read(where).collect()
        assert sorted(rows) == sorted(small.read(where).collect()), where
        assert big.count(where) == small.count(where) == len(rows), where   # the stats' counts, by the job too
    assert "LogReplay: a Spark job of 3 tasks over the checkpoint's 36 adds" in big.scan("id < 40").report.text()
    assert big.snapshot.files_pending   # nothing above read the checkpoint's files in the driver


@pytest.mark.both_modes
def test_a_table_past_the_bound_takes_writes(spark, tmp_path, monkeypatch, job_bound):
    root = str(tmp_path / "t")
    make_table(spark, root, monkeypatch)
    t = skiplake.Table.open(spark, root)
    t.append(spark.range(2000, 2003).selectExpr("id", "'0' AS p", "cast(id as int) AS v").coalesce(1))
    assert t.snapshot.files_pending   # an append needs none of the table's files
    assert t.scan("id >= 2000").report.files_selected == 1
    t.delete("id = 2001")             # a delete reads them, in the driver
    assert sorted(r.id for r in t.read("id >= 2000").collect()) == [2000, 2002]
    assert t.count() == 360 - 40 + 10 + 3 - 1   # the first delete took ids 0, 5, ..., 195

