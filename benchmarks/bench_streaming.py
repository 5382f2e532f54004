"""Benchmark 28: Structured Streaming through skiplake's source and sink against delta-spark's.

1. A pipeline: a source table of --commits commits (100) of --rows rows (100,000) each, written
   once; each side streams it through its own source, keeps half the rows (a filter) and three
   of four columns (a projection), and writes them through its own sink into a new table. Each
   micro-batch reads one commit (maxFilesPerTrigger: the files of one commit), commit after
   commit from the first (startingVersion 0: the incremental path; --snapshot streams the table's
   snapshot instead, the path of a query started on a table that already holds data).
   Throughput is the source rows over the wall time to read everything; latency, each
   micro-batch's trigger time.
2. foreachBatch MERGE upserts: a target of --target-rows rows (1,000,000) and an updates table
   of --upsert-commits commits (20) of 10,000 rows (half update existing ids, half are new);
   each side streams the updates, one commit per micro-batch, and MERGEs each batch into its
   copy of the target, idempotently: skiplake with `execute(app_id=..., app_version=batch_id)`,
   delta-spark with its txnAppId/txnVersion settings.

delta-spark 4.4 runs in its own JVM (benchmarks/delta_merge_runner.py), timing its queries
itself; both sides run local[2] with the same settings. Every side gets one warm-up run of each
part on a small table first; the measured runs take turns going first. The checks: both sinks
hold the same rows, both targets end equal.

    .venv/bin/python -m benchmarks.bench_streaming [--quick] [--commits N] [--rows N] [--reps N] [--json] [--out FILE]
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    Progress,
    Report,
    base_parser,
    command_line,
    copies_for,
    finish,
    median,
    rotated,
    workdir,
)
from benchmarks.delta_runner import DELTA_PACKAGE, DeltaRunner

DRIVER_MEMORY = "4g"
WHERE = "kind < 5"
SELECT = ["id", "amount * 2 AS doubled", "note"]
SIDES = ("skiplake", "delta-spark")


def _p95(samples: list[float]) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))] if s else 0.0


def _source(spark: Any, path: Path, commits: int, rows: int, progress: Progress) -> int:
    """The source table: `commits` appends of `rows` rows; the files one commit writes."""
    import skiplake
    t = skiplake.Table.create(spark, str(path), "id long, kind int, amount double, note string")
    for i in range(commits):
        t.append(spark.range(i * rows, (i + 1) * rows, numPartitions=2).selectExpr(
            "id", "cast(id % 10 AS int) AS kind", "cast(id % 1000 AS double) / 10 AS amount",
            "concat('n', cast(id AS string)) AS note"))
        if (i + 1) % 25 == 0:
            progress(f"source: {i + 1} commits")
    return len(t.refresh().snapshot.add_files) // commits


def _ours_pipeline(spark: Any, source: Path, sink: Path, checkpoint: Path, max_files: int,
                   starting_version: int | None) -> dict[str, Any]:
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    reader = spark.readStream.format("skiplake").option("maxFilesPerTrigger", max_files)
    if starting_version is not None:
        reader = reader.option("startingVersion", starting_version)
    query = (reader.load(str(source))
             .filter(WHERE).selectExpr(*SELECT).writeStream.format("skiplake")
             .option("checkpointLocation", str(checkpoint)).trigger(processingTime="0 seconds").start(str(sink)))
    return _drain(query)


def _ours_upserts(spark: Any, updates: Path, target: Path, checkpoint: Path, max_files: int) -> dict[str, Any]:
    import skiplake
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    t = skiplake.Table.open(spark, str(target))

    def upsert(batch: Any, batch_id: int) -> None:
        (t.merge(batch, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all()
         .execute(app_id="bench-upserts", app_version=batch_id))

    query = (spark.readStream.format("skiplake").option("maxFilesPerTrigger", max_files).load(str(updates))
             .writeStream.foreachBatch(upsert).option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="0 seconds").start())
    return _drain(query)


def _drain(query: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    query.processAllAvailable()
    seconds = time.perf_counter() - t0
    progress = query.recentProgress
    query.stop()
    return {"seconds": seconds, "batches_s": [p["durationMs"]["triggerExecution"] / 1000 for p in progress
                                             if p["numInputRows"]],
            "rows": sum(p["numInputRows"] for p in progress)}


def _theirs(delta: DeltaRunner, job: dict[str, Any]) -> dict[str, Any]:
    return delta.request({"stream": job})


def _fingerprint(spark: Any, path: Path) -> tuple:
    """The table's row count and two sums over its rows: equal tables give equal fingerprints."""
    import skiplake
    df = skiplake.Table.open(spark, str(path)).read()
    r = df.selectExpr("count(*)", "sum(id)", "sum(hash(*))").first()
    return tuple(r)


def _updates(spark: Any, path: Path, commits: int, target_rows: int) -> None:
    import skiplake
    t = skiplake.Table.create(spark, str(path), "id long, kind int, amount double, note string")
    for i in range(commits):
        # 5,000 existing ids (spread over the target) and 5,000 new ones, per commit
        old = spark.range(5000).selectExpr(f"(id * 197 + {i}) % {target_rows} AS id")
        new = spark.range(5000).selectExpr(f"{target_rows} + {i} * 5000 + id AS id")
        t.append(old.unionByName(new).repartition(1).selectExpr(
            "id", f"cast({i} AS int) AS kind", f"cast(id AS double) + {i} AS amount", f"'u{i}' AS note"))


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=None, help="source commits (default 100, --quick 10)")
    parser.add_argument("--rows", type=int, default=None, help="rows per source commit (default 100,000, --quick 10,000)")
    parser.add_argument("--target-rows", type=int, default=None, help="MERGE target rows (default 1,000,000)")
    parser.add_argument("--upsert-commits", type=int, default=None, help="commits of upserts (default 20)")
    parser.add_argument("--snapshot", action="store_true", help="stream the source's snapshot, not its commits")
    args = parser.parse_args(argv)
    commits = args.commits or (10 if args.quick else 100)
    rows = args.rows or (10_000 if args.quick else 100_000)
    target_rows = args.target_rows or (100_000 if args.quick else 1_000_000)
    upsert_commits = args.upsert_commits or (4 if args.quick else 20)
    reps = args.reps if args.reps is not None else 1
    progress = Progress("bench_streaming")
    from testing_support.paths import setup_java
    setup_java()
    import skiplake
    spark = skiplake.local_spark(app_name="bench-streaming", shuffle_partitions=8, driver_memory=DRIVER_MEMORY)
    skiplake.register(spark)
    report = Report("bench_streaming", "Structured Streaming: skiplake's source and sink against delta-spark's",
                    command_line("bench_streaming", args, [f"--commits {commits}", f"--rows {rows}"]
                                 + (["--snapshot"] if args.snapshot else [])),
                    {"commits": commits, "rows_per_commit": rows, "target_rows": target_rows,
                     "upsert_commits": upsert_commits, "reps": reps, "delta_package": DELTA_PACKAGE,
                     "source_read": "snapshot" if args.snapshot else "commits from version 0"})
    delta = DeltaRunner(8, progress, DRIVER_MEMORY)
    try:
        with workdir("bench_streaming", args.workdir, args.keep, progress) as work:
            _pipeline(spark, delta, report, work, commits, rows, reps, None if args.snapshot else 0, progress)
            _upserts(spark, delta, report, work, target_rows, upsert_commits, reps, progress)
            report.extra["delta"] = delta.info
    finally:
        delta.close()
    spark.stop()
    return finish(report, args)


def _pipeline(spark: Any, delta: DeltaRunner, report: Report, work: Path, commits: int, rows: int, reps: int,
              starting_version: int | None, progress: Progress) -> None:
    warm = work / "warm-source"
    per_commit = _source(spark, warm, 3, 1000, progress)
    source = work / "source"
    per_commit = _source(spark, source, commits, rows, progress)
    progress(f"source: {commits} commits of {rows:,} rows, {per_commit} files each")
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SIDES}
    sinks: dict[str, Path] = {}

    def run(side: str, src: Path, tag: str) -> dict[str, Any]:
        sink, ckpt = work / f"sink-{side}-{tag}", work / f"ckpt-{side}-{tag}"
        sinks[side] = sink
        if side == "skiplake":
            return _ours_pipeline(spark, src, sink, ckpt, per_commit, starting_version)
        return _theirs(delta, {"source": str(src), "sink": str(sink), "checkpoint": str(ckpt),
                               "max_files": per_commit, "where": WHERE, "select": SELECT,
                               "starting_version": starting_version})

    for side in SIDES:
        run(side, warm, "warm")
    for rep in range(reps):
        for side in rotated(list(SIDES), rep):
            progress(f"pipeline, {side}, run {rep + 1} ...")
            runs[side].append(run(side, source, str(rep)))
    total = commits * rows
    for side in SIDES:
        seconds = [r["seconds"] for r in runs[side]]
        batches = [b for r in runs[side] for b in r["batches_s"]]
        report.timing("pipeline: wall time", side, seconds, note=f"{len(batches) // reps} micro-batches a run")
        report.timing("pipeline: micro-batch trigger time", side, batches)
        report.extra[f"pipeline {side} p95_s"] = _p95(batches)
    ours_rate, theirs_rate = (total / median([r["seconds"] for r in runs[s]]) for s in SIDES)
    ours_b = [b for r in runs["skiplake"] for b in r["batches_s"]]
    theirs_b = [b for r in runs["delta-spark"] for b in r["batches_s"]]
    report.goal("pipeline throughput: skiplake / delta-spark", ours_rate / theirs_rate, 1.0, unit="x", at_least=True,
                note=f"{ours_rate:,.0f} and {theirs_rate:,.0f} rows/s")
    report.goal("median micro-batch: skiplake / delta-spark", statistics.median(ours_b) / statistics.median(theirs_b),
                1.0, unit="x")
    report.goal("p95 micro-batch: skiplake / delta-spark", _p95(ours_b) / _p95(theirs_b), 1.0, unit="x")
    report.headline("pipeline throughput, skiplake", ours_rate, unit="/s")
    same = _fingerprint(spark, sinks["skiplake"]) == _fingerprint(spark, sinks["delta-spark"])
    report.check("both sinks hold the same rows", same)


def _upserts(spark: Any, delta: DeltaRunner, report: Report, work: Path, target_rows: int, commits: int, reps: int,
             progress: Progress) -> None:
    import skiplake
    base = work / "target"
    t = skiplake.Table.create(spark, str(base), "id long, kind int, amount double, note string")
    t.append(spark.range(target_rows, numPartitions=4).selectExpr(
        "id", "cast(id % 10 AS int) AS kind", "cast(id AS double) AS amount", "'t' AS note"))
    updates, warm = work / "updates", work / "warm-updates"
    _updates(spark, updates, commits, target_rows)
    _updates(spark, warm, 2, target_rows)
    progress(f"target: {target_rows:,} rows; updates: {commits} commits of 10,000 rows")
    copies = copies_for(list(SIDES), base, work, reps + 1, "target")
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SIDES}

    def run(side: str, src: Path, target: Path, tag: str) -> dict[str, Any]:
        ckpt = work / f"ckpt-upserts-{side}-{tag}"
        if side == "skiplake":
            return _ours_upserts(spark, src, target, ckpt, 1)
        return _theirs(delta, {"source": str(src), "sink": str(target), "checkpoint": str(ckpt), "max_files": 1,
                               "merge_on": "target.id = source.id"})

    for side in SIDES:
        run(side, warm, copies[side][reps], "warm")
    for rep in range(reps):
        for side in rotated(list(SIDES), rep):
            progress(f"foreachBatch MERGE, {side}, run {rep + 1} ...")
            runs[side].append(run(side, updates, copies[side][rep], str(rep)))
    for side in SIDES:
        report.timing("foreachBatch MERGE: wall time", side, [r["seconds"] for r in runs[side]])
        report.timing("foreachBatch MERGE: micro-batch", side, [b for r in runs[side] for b in r["batches_s"]])
    ratio = median([r["seconds"] for r in runs["skiplake"]]) / median([r["seconds"] for r in runs["delta-spark"]])
    report.goal("foreachBatch MERGE: skiplake / delta-spark", ratio, 1.0, unit="x")
    report.headline("foreachBatch MERGE: skiplake / delta-spark", ratio, unit="x")
    report.check("both targets end equal", _fingerprint(spark, copies["skiplake"][0]) ==
                 _fingerprint(spark, copies["delta-spark"][0]))


if __name__ == "__main__":
    raise SystemExit(main())
