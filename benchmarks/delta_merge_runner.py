"""delta-spark in its own JVM, timing the SQL statements a benchmark sends it, one at a time.

    python -m benchmarks.delta_merge_runner PACKAGE SHUFFLE_PARTITIONS DRIVER_MEMORY [IVY_DIR]

Starts a local[2] SparkSession with the Delta package and the same settings skiplake's
local_spark uses (shuffle partitions, driver memory, UTC, no UI), prints one JSON line
{"ready": true, "delta": ..., "spark": ...}, then for each JSON line {"sql": ...} on stdin runs
the statement, collects its result, and prints {"seconds": ..., "rows": [...]} (or {"error": ...}):
the time of the statement alone, measured here, so the pipe costs nothing. Logs go to stderr.
"""
from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> int:
    package, partitions, memory = argv[1], argv[2], argv[3]
    ivy = argv[4] if len(argv) > 4 and argv[4] else None
    from pyspark.sql import SparkSession
    b = (SparkSession.builder.master("local[2]").appName("bench-merge-delta")
         .config("spark.jars.packages", package)
         .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
         .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", partitions)
         .config("spark.driver.memory", memory)
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
         .config("spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs", "false"))
    if ivy:
        b = b.config("spark.jars.ivy", ivy)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    version = str(spark._jvm.io.delta.package.VERSION())  # type: ignore[attr-defined]
    print(json.dumps({"ready": True, "delta": version, "spark": spark.version}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        t0 = time.perf_counter()
        try:
            if "stream" in request:
                out: dict = stream(spark, request["stream"])
            else:
                rows = spark.sql(request["sql"]).collect()
                out = {"seconds": time.perf_counter() - t0, "rows": [[str(v) for v in r] for r in rows]}
        except Exception as e:  # reported to the benchmark, which fails its check
            out = {"error": str(e)[:4000]}
        print(json.dumps(out), flush=True)
    spark.stop()
    return 0


def stream(spark, job: dict) -> dict:
    """One streaming query over Delta tables until it has read everything available: the filter
    and projection pipeline (`select`), or with `merge_on` a foreachBatch MERGE into `sink` made
    idempotent by txnAppId/txnVersion. Its wall time and each micro-batch's trigger time."""
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    reader = spark.readStream.format("delta").option("maxFilesPerTrigger", job["max_files"])
    if job.get("starting_version") is not None:
        reader = reader.option("startingVersion", job["starting_version"])
    df = reader.load(job["source"])
    if job.get("where"):
        df = df.filter(job["where"])
    if job.get("select"):
        df = df.selectExpr(*job["select"])
    writer = df.writeStream.option("checkpointLocation", job["checkpoint"]).trigger(processingTime="0 seconds")
    if job.get("merge_on"):
        from delta.tables import DeltaTable
        target = DeltaTable.forPath(spark, job["sink"])

        def upsert(batch, batch_id):
            batch.sparkSession.conf.set("spark.databricks.delta.write.txnAppId", "bench-upserts")
            batch.sparkSession.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
            (target.alias("target").merge(batch.alias("source"), job["merge_on"])
             .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        query = writer.foreachBatch(upsert).start()
    else:
        query = writer.format("delta").start(job["sink"])
    t0 = time.perf_counter()
    query.processAllAvailable()
    seconds = time.perf_counter() - t0
    batches = [p["durationMs"]["triggerExecution"] / 1000 for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    query.stop()
    return {"seconds": seconds, "batches_s": batches, "rows": rows}


if __name__ == "__main__":
    sys.exit(main(sys.argv))
