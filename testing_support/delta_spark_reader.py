"""Run delta-spark (the reference Delta Lake implementation) over tables in its own JVM.

Used by the tests that compare with delta-spark (through testing_support/delta_spark.py), which
run this file as a subprocess because the test suite's one SparkSession has no Delta jars. One
invocation runs lists of jobs, so the JVM starts (and Ivy resolves the package) once:

    python testing_support/delta_spark_reader.py JOBS.json RESULT.json
    python testing_support/delta_spark_reader.py - RESULT.json PACKAGE [IVY_DIR]   # jobs path on stdin

The second form starts the session (and resolves the packages, comma-separated) at once, prints
READY, then reads batches from stdin, one line each: a jobs file and, after a tab, the file its
results go to (RESULT.json without one). A caller prepares tables while the JVM starts, and keeps
the process for as many batches as it likes; a blank line or EOF ends it.

JOBS.json is {"package": "io.delta:delta-spark_4.1_2.13:4.4.0", "ivy": optional dir,
"threads": optional int (jobs run that many at a time: only for jobs on distinct tables),
"hadoop": optional {key: value} set in the Hadoop configuration before the jobs (fs.s3a.*),
"jobs": [...]}, each job one of

    {"id": "...", "op": "read", "path": P, "version": optional int, "columns": optional [names],
     "history": optional bool (default true)}
        -> count, rows (every value cast to STRING by Spark, sorted), schema, version seen and,
           without "version", history (DESCRIBE HISTORY: version, operation, operationParameters,
           operationMetrics; with "history": false only the latest version is asked for)
    {"id": "...", "op": "append", "path": P, "sql": "SELECT ..."}
        -> the rows of the query appended with df.write.format("delta").mode("append").save(P)
    {"id": "...", "op": "sql", "sql": "DELETE FROM delta.`P` WHERE ..."}
        -> the statement's result rows, as strings
    {"id": "...", "op": "sql_read", "sql": "MERGE INTO delta.`P` ...", "path": P[, "read_version_of": ID]}
        -> the statement's result rows, then what "read" gives for P (also when the statement failed);
           with read_version_of, {V} in the statement is the version job ID's read saw
    {"id": "...", "op": "detail", "path": P}
        -> DESCRIBE DETAIL's row as {column: value} (lists and maps as JSON, times as epoch milliseconds)

Each job's result is {"ok": true, ...} or {"ok": false, "error_class": ..., "error": message};
one failing job does not stop the others. RESULT.json also gets "delta_version" and
"spark_version". If the session cannot start (e.g. the package cannot be resolved), the script
exits non-zero with Spark's own error on stderr.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor


def rows_as_strings(df, columns=None):
    """Sorted rows of `df` as tuples of strings (None for NULL), every value cast by Spark.

    Casting in Spark (session time zone UTC) makes timestamps, decimals and doubles compare
    exactly between two processes, with no trip through Python's datetime or JSON floats.
    """
    from pyspark.sql import functions as F
    cols = list(columns or df.columns)
    out = df.select(*[F.col(f"`{c}`").cast("string").alias(c) for c in cols]).collect()
    return sorted((tuple(r) for r in out), key=lambda t: tuple((v is None, v or "") for v in t))


def _session(package: str, ivy: str | None):
    # delta-spark runs in classic PySpark even when the tests' own session is a Spark Connect
    # client, whose process PySpark marks by these variables (inherited by this one).
    for variable in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE"):
        os.environ.pop(variable, None)
    from pyspark.sql import SparkSession
    b = (SparkSession.builder.master("local[2]").appName("delta-spark-interop")
         .config("spark.jars.packages", package)
         .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
         .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.databricks.delta.snapshotPartitions", "2")
         .config("spark.driver.memory", "1g")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS"))
    if ivy:
        b = b.config("spark.jars.ivy", ivy)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _delta_version(spark) -> str | None:
    try:
        return str(spark._jvm.io.delta.package.VERSION())
    except Exception:
        pass
    try:  # the jar's manifest
        cls = spark._jvm.java.lang.Class.forName("org.apache.spark.sql.delta.DeltaLog")
        return str(cls.getPackage().getImplementationVersion())
    except Exception:
        return None


def _quote_path(path: str) -> str:
    return "delta.`" + path.replace("`", "``") + "`"


def _history(spark, path: str) -> list[dict]:
    h = spark.sql(f"DESCRIBE HISTORY {_quote_path(path)}").select(
        "version", "operation", "operationParameters", "operationMetrics").collect()
    return sorted(({"version": int(r["version"]), "operation": r["operation"],
                    "operationParameters": dict(r["operationParameters"] or {}),
                    "operationMetrics": dict(r["operationMetrics"] or {})} for r in h),
                  key=lambda d: d["version"])


def _read(spark, job: dict) -> dict:
    reader = spark.read.format("delta")
    if job.get("version") is not None:
        reader = reader.option("versionAsOf", int(job["version"]))
    df = reader.load(job["path"])
    rows = rows_as_strings(df, job.get("columns"))
    out = {"count": len(rows), "rows": [list(r) for r in rows],
           "schema": json.loads(df.schema.json()), "columns": df.columns}
    if job.get("version") is not None:
        out["version"] = int(job["version"])
    elif job.get("history", True):
        out["history"] = _history(spark, job["path"])
        out["version"] = max(h["version"] for h in out["history"])
    else:
        out["version"] = int(spark.sql(f"DESCRIBE HISTORY {_quote_path(job['path'])} LIMIT 1").first()["version"])
    return out


def _detail(spark, path: str) -> dict:
    # Times as epoch milliseconds, read by Spark: PySpark would turn them into datetimes in this
    # machine's time zone, whatever the session's.
    df = spark.sql(f"DESCRIBE DETAIL {_quote_path(path)}")
    times = [f.name for f in df.schema.fields if f.dataType.typeName() == "timestamp"]
    row = df.selectExpr(*[f"unix_millis(`{c}`) AS `{c}`" if c in times else f"`{c}`" for c in df.columns]).first()
    plain = (type(None), bool, int, float, str, list, dict)
    return {"detail": {k: v if isinstance(v, plain) else str(v) for k, v in row.asDict().items()}}


def _run(spark, job: dict) -> dict:
    op = job["op"]
    if op == "read":
        return _read(spark, job)
    if op == "detail":
        return _detail(spark, job["path"])
    if op == "append":
        df = spark.sql(job["sql"])
        df.write.format("delta").mode("append").save(job["path"])
        return {"version": max(h["version"] for h in _history(spark, job["path"]))}
    if op == "stream":   # delta-spark's streaming source into its sink, everything available
        query = (spark.readStream.format("delta").load(job["source"]).writeStream.format("delta")
                 .option("checkpointLocation", job["checkpoint"]).trigger(availableNow=True).start(job["sink"]))
        query.awaitTermination()
        return {"read": _read(spark, {"path": job["sink"]})}
    if op in ("sql", "sql_read"):
        out = spark.sql(job["sql"]).collect()
        result = {"rows": [[None if v is None else str(v) for v in r] for r in out]}
        if op == "sql_read":
            result["read"] = _read(spark, {"path": job["path"]})
        return result
    raise ValueError(f"unknown op {op!r}")


def _run_batch(spark, spec: dict, startup: float) -> dict:
    # Settings for the file systems this batch opens first (S3A's endpoint and keys of the
    # object store its tables are on); a file system already open keeps its own.
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in (spec.get("hadoop") or {}).items():
        hadoop.set(key, value)
    result: dict = {"delta_version": _delta_version(spark), "spark_version": spark.version,
                    "startup_seconds": round(startup, 1), "jobs": {}}

    versions: dict[str, int] = {}   # job id -> the version its read saw (jobs of one thread run in order)

    def one(job: dict) -> dict:
        t = time.time()
        if job.get("read_version_of") is not None:  # time travel to the version an earlier job left
            job = {**job, "sql": job["sql"].replace("{V}", str(versions[str(job["read_version_of"])]))}
        try:
            out = {"ok": True, **_run(spark, job)}
        except Exception as e:  # recorded, not raised: the caller asserts on it
            java = getattr(e, "java_exception", None)  # Py4JJavaError: the JVM's class and message
            message = str(java.toString()) if java is not None else str(e)
            out = {"ok": False, "error_class": type(e).__name__, "error": message[:4000],
                   "traceback": traceback.format_exc(limit=3)[-4000:]}
        out["seconds"] = round(time.time() - t, 2)
        if job.get("op") == "sql_read" and not out["ok"]:
            out["read"] = _read(spark, {"path": job["path"]})   # what a refused statement left
        if out.get("read", {}).get("version") is not None:
            versions[job["id"]] = out["read"]["version"]
        return out

    # Jobs on distinct tables may run side by side ("threads"): each is mostly driver work.
    threads = int(spec.get("threads") or 1)
    with ThreadPoolExecutor(threads) as pool:
        for job, out in zip(spec["jobs"], pool.map(one, spec["jobs"])):
            result["jobs"][job["id"]] = out
    return result


def _write_result(result: dict, result_file: str) -> None:
    with open(result_file + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(result_file + ".tmp", result_file)


def main(argv: list[str]) -> int:
    jobs_file, result_file = argv[1], argv[2]
    started = time.time()
    if jobs_file != "-":
        with open(jobs_file) as f:
            spec = json.load(f)
        spark = _session(spec["package"], spec.get("ivy"))
        _write_result(_run_batch(spark, spec, time.time() - started), result_file)
        spark.stop()
        return 0
    # Start the session first (resolving the package), then run batches of jobs as the caller
    # sends them: each stdin line names a jobs file and the file its results go to (one line
    # with a jobs file alone: the results go to `result_file`). The caller builds its tables
    # meanwhile, and between batches acts on what delta-spark wrote. A blank line or EOF ends it.
    spark = _session(argv[3], argv[4] if len(argv) > 4 and argv[4] else None)
    startup = time.time() - started
    print("READY", flush=True)
    batches = 0
    while True:
        line = sys.stdin.readline().strip()
        if not line:
            spark.stop()
            return 0 if batches else 3
        names = line.split("\t")
        with open(names[0]) as f:
            spec = json.load(f)
        _write_result(_run_batch(spark, spec, startup), names[1] if len(names) > 1 else result_file)
        batches += 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
