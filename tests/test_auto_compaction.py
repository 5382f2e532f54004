"""Auto compaction: after a write commits, the partitions it touched that hold enough small files
are bin-packed in a commit of their own (dataChange=false), as delta-spark 3.1+ does."""
from __future__ import annotations

import pytest

from skiplake.spark.optimize.auto_compaction import SESSION_ENABLED, SESSION_MIN_FILES

pytestmark = [pytest.mark.spark]


@pytest.fixture
def few_files(spark):
    spark.conf.set(SESSION_MIN_FILES, "4")
    yield
    spark.conf.unset(SESSION_MIN_FILES)


def _write(t, spark, start):
    df = spark.range(start, start + 40, numPartitions=3).selectExpr("id", "cast(id % 2 as int) as p")
    return t.append(df)


def test_compacts_touched_partitions_after_a_write(lake, spark, few_files):
    t = lake.create_table("auto", "id long, p int", partition_by=["p"],
                          properties={"delta.autoOptimize.autoCompact": "true"})
    _write(t, spark, 0)
    assert t.history()[0]["operation"] == "WRITE"           # 3 files a partition: under 4
    _write(t, spark, 40)                                     # 6 a partition: both compacted
    history = t.history()
    assert [h["operation"] for h in history[:2]] == ["OPTIMIZE", "WRITE"]
    assert {f.partitionValues["p"] for f in t.scan().files} == {"0", "1"} and len(t.scan().files) == 2
    assert sorted(r.id for r in t.read().collect()) == list(range(80))
    t.delete("id = 0")                                       # adds no file: nothing to compact
    assert t.history()[0]["operation"] == "DELETE"


def test_off_by_default_and_on_by_session_setting(lake, spark, few_files):
    t = lake.create_table("auto_off", "id long, p int", partition_by=["p"])
    _write(t, spark, 0)
    _write(t, spark, 40)
    assert t.history()[0]["operation"] == "WRITE" and len(t.scan().files) == 12
    spark.conf.set(SESSION_ENABLED, "true")
    try:
        res = t.merge(spark.range(100, 103).selectExpr("id", "1 as p"), "target.id = source.id") \
            .when_not_matched_insert_all().execute()
        assert res.num_target_rows_inserted == 3
        assert t.history()[0]["operation"] == "OPTIMIZE"
        assert len(t.scan("p = 1").files) == 1 and len(t.scan("p = 0").files) == 6
    finally:
        spark.conf.unset(SESSION_ENABLED)


@pytest.mark.connect
def test_the_data_source_compacts_after_its_commits(lake, spark):
    import skiplake
    t = lake.create_table("auto_ds", "id long, p int", partition_by=["p"],
                          properties={"delta.autoOptimize.autoCompact": "true"})
    for start in (0, 40):
        (spark.range(start, start + 40, numPartitions=3).selectExpr("id", "cast(id % 2 as int) as p")
         .write.format("skiplake").mode("append").option("autoCompactMinNumFiles", 4).save(t.path))
    t = skiplake.Table.open(spark, t.path)
    history = t.history()
    assert history[0]["operation"] == "OPTIMIZE" and history[0]["operationParameters"]["auto"] == "true"
    assert len(t.scan().files) == 2 and sorted(r.id for r in t.read().collect()) == list(range(80))
