"""Streams between skiplake and delta-spark, both ways (the slow tier): delta-spark's streaming
source reads the table skiplake's sink wrote, its sink writes another, and skiplake's streaming
source reads that one."""
from __future__ import annotations

import pytest

import skiplake
from testing_support.delta_spark import DeltaSpark

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.delta_spark]


def test_streams_both_ways(spark, delta_spark: DeltaSpark, lake, tmp_path):
    source = lake.create_table("events", "id long, kind string")
    for i in range(3):
        source.append(spark.range(i * 40, (i + 1) * 40).selectExpr("id", "if(id % 2 = 0, 'a', 'b') AS kind"))
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    q = (spark.readStream.format("skiplake").option("maxFilesPerTrigger", 2).load(source.path)
         .filter("kind = 'a'").writeStream.format("skiplake")
         .option("checkpointLocation", str(tmp_path / "ck-ours")).start(ours))
    q.processAllAvailable()
    q.stop()
    delta_spark.check()
    job = delta_spark.run_batch([{"id": "stream", "op": "stream", "source": ours, "sink": theirs,
                                  "checkpoint": str(tmp_path / "ck-theirs")}])["jobs"]["stream"]
    assert job["ok"], job.get("error")
    assert sorted(int(r[0]) for r in job["read"]["rows"]) == list(range(0, 120, 2))
    # delta-spark's sink recorded its own txn; skiplake's source streams what it wrote.
    written = skiplake.Table.open(spark, theirs)
    assert any(h["operation"] == "STREAMING UPDATE" for h in written.history())
    back = (spark.readStream.format("skiplake").load(theirs).writeStream.format("memory")
            .queryName("from_delta_spark").start())
    back.processAllAvailable()
    back.stop()
    assert sorted(r.id for r in spark.table("from_delta_spark").collect()) == list(range(0, 120, 2))
