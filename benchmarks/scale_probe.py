"""One measurement of the scale benchmark, in a process of its own (so its peak memory is its own):

    python -m benchmarks.scale_probe skiplake|deltalake|delta-spark <table path> <ticket number>

prints one JSON object: the seconds of each phase and the process's peak RSS (bytes) after it.
skiplake: load the snapshot, plan `ss_ticket_number = <ticket>`, COUNT(*), MIN/MAX of
ss_ticket_number from the stats, an append commit of one file, a checkpoint written to a scratch
file. deltalake (delta-rs): open the table, list its add actions, select the one file whose
ss_ticket_number range holds the ticket.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
from typing import Any, Callable


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # Linux reports KiB


def _phase(out: dict[str, Any], name: str, fn: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    value = fn()
    out[name] = {"seconds": time.perf_counter() - started, "peak_rss": _peak()}
    return value


def skiplake_probe(path: str, ticket: int) -> dict[str, Any]:
    from skiplake.log.actions import AddFile
    from skiplake.log.checkpoint import checkpoint_table
    from skiplake.log.snapshot import Snapshot
    from skiplake.skipping.log_aggregates import COUNT_ALL, MAX, MIN, Aggregate, aggregate_from_log
    from skiplake.skipping.plan import plan_scan
    from skiplake.txn.commit import commit
    from skiplake.txn.read_set import ReadSet

    out: dict[str, Any] = {}
    snapshot = _phase(out, "load", lambda: Snapshot.load(path))
    plan = _phase(out, "plan", lambda: plan_scan(snapshot, f"ss_ticket_number = {ticket}"))
    out["selected"] = plan.selected.num_rows
    counted = _phase(out, "count", lambda: aggregate_from_log(snapshot, [Aggregate(COUNT_ALL)], [], None))
    out["rows"] = counted.groups[()][0]
    _phase(out, "min_max", lambda: aggregate_from_log(
        snapshot, [Aggregate(MIN, "ss_ticket_number"), Aggregate(MAX, "ss_ticket_number")], [], None))
    add = AddFile(path=f"ss_sold_date=1998-01-01/part-new-{time.time_ns()}.snappy.parquet",
                  partitionValues={"ss_sold_date": "1998-01-01"}, size=1000, modificationTime=int(time.time() * 1000),
                  dataChange=True, stats='{"numRecords":1}')
    _phase(out, "append", lambda: commit(snapshot, [add], "WRITE", {"mode": "Append"}, ReadSet(), {}))

    def checkpoint() -> None:
        import pyarrow.parquet as pq
        with tempfile.NamedTemporaryFile(suffix=".parquet") as f:
            pq.write_table(checkpoint_table(snapshot), f.name, compression="snappy")
    _phase(out, "checkpoint", checkpoint)
    return out


def deltalake_probe(path: str, ticket: int) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    out: dict[str, Any] = {}
    table = _phase(out, "load", lambda: DeltaTable(path))

    def plan() -> int:
        actions = pa.table(table.get_add_actions(flatten=True))   # deltalake 1.x hands arro3 tables
        lo, hi = actions.column("min.ss_ticket_number"), actions.column("max.ss_ticket_number")
        return int(pc.sum(pc.and_(pc.less_equal(lo, ticket), pc.greater_equal(hi, ticket))).as_py())
    out["selected"] = _phase(out, "plan", plan)
    return out


def deltaspark_probe(path: str, ticket: int) -> dict[str, Any]:
    """delta-spark 4.4 in this process's own JVM (started before the clock): the snapshot's load
    (DeltaTable.forPath, then its version), the files a filtered read would scan (inputFiles:
    data skipping, no data read), and COUNT(*) (answered from the stats by delta-spark's
    metadata-only query rule). Memory is the JVM's peak (VmHWM) plus this process's."""
    from pyspark.sql import SparkSession

    from testing_support.delta_spark import PACKAGES
    from testing_support.paths import setup_java
    setup_java()
    spark = (SparkSession.builder.master("local[2]").appName("scale-probe-delta-spark")
             .config("spark.jars.packages", PACKAGES)
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.driver.memory", "12g").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    from skiplake.spark.session.gateway import jvm_class
    jvm_pid = int(jvm_class(spark, "java.lang.ProcessHandle").current().pid())
    spark.range(1).count()   # the session's own first job, outside the measurement
    delta = jvm_class(spark, "io.delta.tables.DeltaTable")

    def peak() -> int:
        with open(f"/proc/{jvm_pid}/status") as f:
            hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
        return hwm * 1024 + _peak()

    out: dict[str, Any] = {}

    def phase(name: str, fn: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        value = fn()
        out[name] = {"seconds": time.perf_counter() - started, "peak_rss": peak()}
        return value

    phase("load", lambda: delta.forPath(spark._jsparkSession, path).toDF().schema())
    files = phase("plan", lambda: spark.read.format("delta").load(path)
                  .where(f"ss_ticket_number = {ticket}").inputFiles())
    out["selected"] = len(files)
    out["rows"] = phase("count", lambda: spark.sql(f"SELECT COUNT(*) FROM delta.`{path}`").collect()[0][0])
    return out


def main() -> int:
    who, path, ticket = sys.argv[1], sys.argv[2], int(sys.argv[3])
    probe = {"skiplake": skiplake_probe, "deltalake": deltalake_probe, "delta-spark": deltaspark_probe}[who]
    result = probe(path, ticket)
    result["pid_rss_end"] = _peak()
    print(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)   # no teardown of millions of objects: the measurement is done


if __name__ == "__main__":
    raise SystemExit(main())
