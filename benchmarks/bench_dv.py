"""Benchmark 13: deletion vectors and row-level concurrency.

One unpartitioned table of --rows rows (20M by default) in --files files (64), written once and
copied for every contender and run, so each one starts from the very same files:

  delete   DELETE of 0.1% of the rows scattered over every file (id % 1000 = 7): with deletion
           vectors (rows marked) against without (the files rewritten)
  scan     a full scan (count and sums over three columns) of the table with 10% of its rows
           deleted through deletion vectors, against the same table with those rows rewritten
           away
           (and, for the reading, the floor of any filter by row index: the DV table's files read
           by Spark with `_metadata.row_index` and no row dropped)
  optimize OPTIMIZE (bin-packing to 64 MB files) of the table with 10% deleted through deletion
           vectors: the ordered write that lets DML run meanwhile (delta.enableDeletionVectors
           on: each output written from known inputs in row order) against the plain
           repartition (the property switched off, same files and vectors)
  writers  --writers threads (4), each updating its own random rows (ids = w mod writers) of the
           same files --updates times; a conflict is retried on a fresh snapshot. File-level
           (copy-on-write) against row-level (deletion vectors): commits/s, retries, aborts

Each measurement runs once per contender to warm up, then --reps times (the writers once), the
contenders taking turns going first. Checks: both contenders leave the same rows.

--layers runs only a breakdown of the scan with 10% deleted instead: what each layer of the read
through deletion vectors adds over the rewritten table, the layers taking turns going first:

  same_files the rows left, each of the DV table's files rewritten to one of its own (Table.read):
            its layout without the deleted rows, where `rewrite` (the rewriting DELETE's table)
            has as many files as the DELETE's job had tasks
  plain     the DV table's files by `spark.read.schema(...).parquet`, nothing dropped
  row_index + `_metadata.row_index` (a filter on it that keeps every row)
  reader_index the same index as a column of the read's schema that Spark's Parquet reader fills
            itself (`_tmp_metadata_row_index`, how Spark makes `_metadata.row_index`), no struct
  path_hash + xxhash64 of `_metadata.file_path` per row (the key of the reader's join)
  join      + that key's broadcast join to the bitmaps, no row dropped
  reader    the table's read (`Table.read`), deleted rows dropped: by the files' sizes, no join
  by_join   the same read made to take the join it falls back to (deleted rows dropped)
  delta     (with --delta-spark) the table's read over a byte copy of the same files whose
            deletion vectors delta-spark wrote (its DELETE in a JVM of its own, testing_support/delta_spark.py)

and the driver's share of `Table.read` (decoding the DVs, building the bitmaps, the Spark job that
hashes the paths for the join; the whole of `Table.read`, and the same made to take the join).
Besides wall clock, each layer's tasks' CPU time (Spark's task metrics): on a shared machine it
varies far less than the wall clock.

    .venv/bin/python -m benchmarks.bench_dv [--quick] [--rows N] [--files N] [--reps N] [--json] [--out FILE]
    .venv/bin/python -m benchmarks.bench_dv --layers [--delta-spark] --rows 8000000 --files 32 --reps 3
"""
from __future__ import annotations

import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    Progress,
    Report,
    base_parser,
    command_line,
    executor_cpu_seconds,
    finish,
    median,
    rotated,
    workdir,
)

CONTENDERS = ("dv", "rewrite")
DV = {"delta.enableDeletionVectors": "true"}
SCHEMA = "id long, k long, v double, s string"


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="rows of the table (default 20,000,000)")
    parser.add_argument("--files", type=int, default=None, help="files of the table (default 64)")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--updates", type=int, default=None, help="updates per writer (default 5)")
    parser.add_argument("--layers", action="store_true", help="only the scan's breakdown by layer")
    parser.add_argument("--delta-spark", action="store_true",
                        help="with --layers: also a copy whose deletion vectors delta-spark wrote")
    args = parser.parse_args(argv)
    rows = args.rows or (400_000 if args.quick else 20_000_000)
    files = args.files or (8 if args.quick else 64)
    updates = args.updates or (2 if args.quick else 5)
    reps = args.reps if args.reps is not None else (1 if args.quick else 3)
    progress = Progress("bench_dv")
    from testing_support.paths import setup_java
    setup_java()
    import skiplake
    spark = skiplake.local_spark(app_name="bench-dv", shuffle_partitions=8, driver_memory="6g")
    report = Report("bench_dv", f"Deletion vectors and row-level concurrency, {rows:,} rows in {files} files",
                    command_line("bench_dv", args, [f"--rows {rows}", f"--files {files}"]
                                 + ["--layers"] * args.layers + ["--delta-spark"] * args.delta_spark),
                    {"rows": rows, "files": files, "reps": reps, "writers": args.writers, "updates": updates})
    with workdir("bench_dv", args.workdir, args.keep, progress) as work:
        base = work / "base"
        _build(spark, base, rows, files, progress)
        if args.layers:
            _layers(spark, report, work, base, rows, reps, args.delta_spark, progress)
            return finish(report, args)
        _delete(spark, report, work, base, rows, reps, progress)
        _scan(spark, report, work, base, rows, reps, progress)
        _optimize(spark, report, work, base, reps, progress)
        _writers(spark, report, work, base, args.writers, updates, progress)
    return finish(report, args)


def _build(spark: Any, base: Path, rows: int, files: int, progress: Progress) -> None:
    import skiplake
    t0 = time.perf_counter()
    t = skiplake.Table.create(spark, str(base), SCHEMA)
    # Ids spread over the files at random (not ranges): a scattered DELETE touches every file.
    df = spark.range(rows).selectExpr("id", "id % 1000 AS k", "CAST(id AS DOUBLE) / 7 AS v",
                                      "concat('row-', CAST(id % 100000 AS STRING)) AS s")
    t.append(df.repartition(files))
    progress(f"table of {rows:,} rows in {len(t.snapshot.add_files)} files "
             f"({t.snapshot.size_bytes / 2 ** 20:.0f} MB) in {time.perf_counter() - t0:.1f} s")


def _copy(spark: Any, base: Path, to: Path, deletion_vectors: bool) -> Any:
    import skiplake
    shutil.rmtree(to, ignore_errors=True)
    shutil.copytree(base, to)
    t = skiplake.Table.open(spark, str(to))
    if deletion_vectors:
        t.set_properties(DV)
    return t


def _rewritten_file_by_file(spark: Any, base: Path, to: Path, where: str) -> Any:
    """The base table's rows without those `where` matches, each of its files rewritten to one of
    its own: the deletion-vector table's layout without the deleted rows. (A rewriting DELETE
    writes fewer, bigger files: benchmark 13's `rewrite` has as many as the job had tasks.)"""
    import skiplake
    shutil.rmtree(to, ignore_errors=True)
    source = skiplake.Table.open(spark, str(base))
    t = skiplake.Table.create(spark, str(to), SCHEMA)
    for f in source.snapshot.add_files:
        t.append(spark.read.parquet(str(base / f.path)).filter(f"NOT ({where})").coalesce(1))
    return t


def _delete(spark: Any, report: Report, work: Path, base: Path, rows: int, reps: int, progress: Progress) -> None:
    times: dict[str, list[float]] = {c: [] for c in CONTENDERS}
    left: dict[str, int] = {}
    for rep in range(reps + 1):
        for c in rotated(CONTENDERS, rep):
            t = _copy(spark, base, work / f"delete-{c}", c == "dv")
            t0 = time.perf_counter()
            t.delete("id % 1000 = 7")
            seconds = time.perf_counter() - t0
            left[c] = t.read().count()
            progress(f"delete 0.1%, {c}{' (warm-up)' if not rep else ''}: {seconds:.2f} s")
            if rep:
                times[c].append(seconds)
    for c in CONTENDERS:
        report.timing("DELETE 0.1% scattered", c, times[c])
    ratio = median(times["rewrite"]) / median(times["dv"])
    report.ratio("DELETE: rewrite / deletion vectors", ratio)
    report.goal("DELETE with deletion vectors, times faster than rewriting", ratio, 5.0, unit="x", at_least=True)
    report.headline("DELETE of 0.1% scattered, rewriting / deletion vectors", ratio, "x",
                    f"deletion vectors {median(times['dv']):.2f} s, rewriting {median(times['rewrite']):.2f} s")
    report.check("DELETE: the same rows left", left["dv"] == left["rewrite"] == rows - rows // 1000,
                 f"{left}")


def _scan(spark: Any, report: Report, work: Path, base: Path, rows: int, reps: int, progress: Progress) -> None:
    from pyspark.sql import functions as F
    tables = {}
    for c in CONTENDERS:
        t = _copy(spark, base, work / f"scan-{c}", c == "dv")
        t.delete("id % 10 = 3")
        tables[c] = t
    dv_files = sum(1 for f in tables["dv"].snapshot.add_files if f.deletionVector)
    progress(f"scan tables ready: {dv_files} files with deletion vectors")
    paths = [str(Path(tables["dv"].path) / f.path) for f in tables["dv"].snapshot.add_files]

    def floor() -> Any:
        # Every physical row with its index, nothing dropped: what any filter by row index starts from.
        return spark.read.parquet(*paths).filter(F.col("_metadata.row_index") >= 0)

    frames = {"dv": lambda: tables["dv"].read(), "rewrite": lambda: tables["rewrite"].read(), "floor": floor}
    times, cpu, answers = _timed_scans(spark, frames, reps, "scan", progress)
    notes = {"dv": f"{dv_files} files with DVs", "rewrite": "",
             "floor": "the DV table's files with row indexes, no row dropped"}
    for c in frames:
        report.timing("full scan, 10% deleted", c, times[c], notes[c])
        report.timing("full scan, 10% deleted: tasks' CPU", c, cpu[c], notes[c])
    ratio = median(times["dv"]) / median(times["rewrite"])
    floor_ratio = median(times["floor"]) / median(times["rewrite"])

    def cpu_ratio(c: str) -> str:
        return f"tasks' CPU {median(cpu[c]) / median(cpu['rewrite']):.2f}x"

    report.ratio("scan: deletion vectors / rewritten", ratio, cpu_ratio("dv"))
    report.ratio("scan: floor (row indexes, nothing dropped) / rewritten", floor_ratio, cpu_ratio("floor"))
    # The rewritten table has 10% fewer rows, in fewer and bigger files: the floor is above 1.
    report.goal("scan through deletion vectors, times the rewritten table's", ratio, 1.15, unit="x",
                note=f"the floor: {floor_ratio:.2f}x")
    report.headline("full scan with 10% deleted, deletion vectors / rewritten", ratio, "x",
                    f"Spark reading those files with row indexes, dropping nothing: {floor_ratio:.2f}x; "
                    f"{cpu_ratio('dv')}, floor {cpu_ratio('floor')}")
    a, b = answers["dv"], answers["rewrite"]
    # The sum of doubles depends on the order rows are added in: equal to 1e-12, not bit for bit.
    report.check("scan: the same answer", a[0] == b[0] == rows - rows // 10 and a[1] == b[1] and a[3] == b[3]
                 and abs(a[2] - b[2]) <= 1e-12 * abs(b[2]), f"{answers}")


def _delta_spark_delete(work: Path, path: str, where: str, progress: Progress) -> None:
    """DELETE through delta-spark (its own JVM), deletion vectors on in the table already."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from testing_support.delta_spark import DeltaSpark
    root = work / "delta-spark"
    root.mkdir(exist_ok=True)
    ds = DeltaSpark(root)
    try:
        out = ds.run_batch([{"id": "delete", "op": "sql", "sql": f"DELETE FROM delta.`{path}` WHERE {where}"}])
    finally:
        ds.close()
    if not out["jobs"]["delete"]["ok"]:
        raise RuntimeError(f"delta-spark's DELETE failed: {out['jobs']['delete']}")
    progress(f"delta-spark {out.get('delta_version')} deleted: {out['jobs']['delete']}")


def _layers(spark: Any, report: Report, work: Path, base: Path, rows: int, reps: int, delta_spark: bool,
            progress: Progress) -> None:
    """The scan over deletion vectors taken apart layer by layer (see the module docstring)."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    from skiplake.log.deletion_vectors import marked_rows
    from skiplake.log.location import resolve
    from skiplake.log.paths import file_key
    from skiplake.spark.reads import deleted_rows as deletions
    from skiplake.spark.reads.planned_reads import spark_file_key
    from skiplake.spark.session.spark_types import to_spark
    where = "id % 10 = 3"
    tables = {}
    for c in ("dv", "rewrite") + (("delta",) if delta_spark else ()):
        t = _copy(spark, base, work / f"layers-{c}", c != "rewrite")
        if c == "delta":
            _delta_spark_delete(work, t.path, where, progress)
            t.refresh()
        else:
            t.delete(where)
        tables[c] = t
    same_files = _rewritten_file_by_file(spark, base, work / "layers-rewrite-same-files", where)
    dv = tables["dv"]
    with_dv = [f for f in dv.snapshot.add_files if f.deletionVector]
    progress(f"layers: {len(with_dv)} of {len(dv.snapshot.add_files)} files with deletion vectors")
    for c, t in tables.items():
        if c != "rewrite":
            cards = sum(f.deletionVector["cardinality"] for f in t.snapshot.add_files if f.deletionVector)
            sizes = {f.deletionVector["sizeInBytes"] for f in t.snapshot.add_files if f.deletionVector}
            progress(f"{c}: {cards:,} rows marked, DV sizes {min(sizes)}..{max(sizes)} bytes, "
                     f"{len({f.deletionVector.get('pathOrInlineDv') for f in t.snapshot.add_files if f.deletionVector})}"
                     f" DV files")
    if delta_spark:
        # The same data files (a byte copy), and the same rows marked in each.
        mine = {f.path: f for f in dv.snapshot.add_files}
        theirs = {f.path: f for f in tables["delta"].snapshot.add_files}
        same = mine.keys() == theirs.keys() and all(
            mine[p].size == theirs[p].size and np.array_equal(marked_rows(dv.path, mine[p].deletionVector),
                                                              marked_rows(tables["delta"].path, theirs[p].deletionVector))
            for p in mine)
        report.check("layers: delta-spark marked the same rows of the same files", same, "")
    paths = [str(Path(dv.path) / f.path) for f in dv.snapshot.add_files]
    row, path = F.col("_metadata.row_index"), F.col("_metadata.file_path")

    def by_join() -> Any:
        # The read's fallback, chosen by a bound no read is within.
        bound = deletions.MAX_FILES
        deletions.MAX_FILES = 0
        try:
            return dv.read()
        finally:
            deletions.MAX_FILES = bound

    # Driver: what Table.read does before Spark runs anything, step by step.
    driver: dict[str, list[float]] = {k: [] for k in ("decode", "bitmaps", "hash job", "Table.read",
                                                      "Table.read by join")}
    for rep in range(reps + 1):
        t0 = time.perf_counter()
        deleted = [marked_rows(dv.path, f.deletionVector) for f in with_dv]
        t1 = time.perf_counter()
        ordinals, blocks, bits = deletions._bitmaps(deleted)
        t2 = time.perf_counter()
        names = spark.read.parquet(*[str(Path(dv.path) / f.path) for f in with_dv]).inputFiles()
        metadata_paths = [deletions.as_metadata_path(p) for p in names]
        hashes = dict(spark.createDataFrame(pa.table({"p": pa.array(metadata_paths)}))
                      .select("p", F.xxhash64("p")).collect())
        t3 = time.perf_counter()
        dv.read()
        t4 = time.perf_counter()
        by_join()
        t5 = time.perf_counter()
        if rep:
            for k, v in zip(driver, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                driver[k].append(v)
    for k, v in driver.items():
        report.timing("driver side of the read", k, v)
    progress("driver: " + ", ".join(f"{k} {median(v) * 1000:.0f} ms" for k, v in driver.items()))

    # The old reader's bitmap table, keyed by the high bits of the path's hash plus the block.
    by_ordinal = [hashes[p] & deletions._HIGH for p in metadata_paths]
    by_key = {file_key(resolve(dv.path), f.path): f for f in with_dv}
    deleted_by_name = [marked_rows(dv.path, by_key[spark_file_key(p)].deletionVector) for p in names]
    ordinals, blocks, bits = deletions._bitmaps(deleted_by_name)
    keys = pa.array([by_ordinal[o] + b for o, b in zip(ordinals.tolist(), blocks.tolist())], pa.int64())
    bitmaps = spark.createDataFrame(pa.table({"k": keys, "bits": bits}))
    key = F.xxhash64(path).bitwiseAND(F.lit(deletions._HIGH)) + F.shiftright(row, deletions.BLOCK_BITS)

    schema = to_spark(dv.snapshot.schema)

    def plain() -> Any:
        return spark.read.schema(schema).parquet(*paths)

    index_name = "_tmp_metadata_row_index"
    with_index = StructType([*schema.fields, StructField(index_name, LongType(), True)])

    frames = {
        "rewrite": lambda: tables["rewrite"].read(),
        "same_files": lambda: same_files.read(),
        "plain": plain,
        "row_index": lambda: plain().filter(row >= 0),
        "reader_index": lambda: spark.read.schema(with_index).parquet(*paths).filter(F.col(index_name) >= 0),
        "path_hash": lambda: plain().filter(key != F.lit(-1)),
        # A column of the bitmaps' side is used, so that the optimizer keeps the join.
        "join": lambda: plain().withColumn("k", key).join(F.broadcast(bitmaps), "k", "left")
        .filter(F.col("bits").isNull() | (F.size("bits") > 0)),
        "reader": lambda: dv.read(),
        "by_join": by_join,
    }
    if delta_spark:
        frames["delta"] = lambda: tables["delta"].read()
    times, cpu, answers = _timed_scans(spark, frames, reps, "layers", progress)
    for c in frames:
        report.timing("full scan, 10% deleted, by layer", c, times[c])
        report.timing("full scan, 10% deleted, by layer: tasks' CPU", c, cpu[c])
        if c != "rewrite":
            report.ratio(f"layers: {c} / rewritten", median(times[c]) / median(times["rewrite"]),
                         f"tasks' CPU {median(cpu[c]) / median(cpu['rewrite']):.2f}x")
    report.ratio("layers: reader / rewritten in the same files", median(times["reader"]) / median(times["same_files"]),
                 f"tasks' CPU {median(cpu['reader']) / median(cpu['same_files']):.2f}x")
    kept = [c for c in ("same_files", "reader", "by_join", "delta") if c in answers]
    report.check("layers: the readers' answers are the rewritten table's",
                 all(answers[c][0] == answers["rewrite"][0] == rows - rows // 10 and answers[c][1] == answers["rewrite"][1]
                     for c in kept), f"{answers}")
    report.check("layers: the layers without a filter see every row",
                 all(answers[c][0] == rows for c in ("plain", "row_index", "reader_index", "path_hash", "join")), f"{answers}")


def _optimize(spark: Any, report: Report, work: Path, base: Path, reps: int, progress: Progress) -> None:
    """OPTIMIZE of the same files and vectors, ordered (DV property on) against plain (off)."""
    from pyspark.sql import functions as F
    contenders = ("ordered", "plain")
    times: dict[str, list[float]] = {c: [] for c in contenders}
    answers: dict[str, tuple] = {}
    outputs: dict[str, int] = {}
    for rep in range(reps + 1):
        for c in rotated(contenders, rep):
            t = _copy(spark, base, work / f"optimize-{c}", True)
            t.delete("id % 10 = 3")
            if c == "plain":
                t.set_properties({"delta.enableDeletionVectors": "false"})
            t0 = time.perf_counter()
            result = t.optimize(target_file_size=64 * 2 ** 20)
            seconds = time.perf_counter() - t0
            outputs[c] = result.files_added
            answers[c] = tuple(t.read().agg(F.count("*"), F.sum("id")).collect()[0])
            progress(f"optimize, {c}{' (warm-up)' if not rep else ''}: {seconds:.2f} s, "
                     f"{result.files_removed} -> {result.files_added} files")
            if rep:
                times[c].append(seconds)
    for c in contenders:
        report.timing("OPTIMIZE to 64 MB files, 10% deleted", c, times[c], f"{outputs[c]} files written")
    report.ratio("OPTIMIZE: ordered (DML may run meanwhile) / plain", median(times["ordered"]) / median(times["plain"]))
    report.check("OPTIMIZE: the same rows", answers["ordered"] == answers["plain"], f"{answers}")


def _writers(spark: Any, report: Report, work: Path, base: Path, writers: int, updates: int,
             progress: Progress) -> None:
    from skiplake.errors import ConcurrentModificationError
    results = {}
    for c in ("rewrite", "dv"):  # once each: the row-level run second, on a warmed JVM
        t = _copy(spark, base, work / f"writers-{c}", c == "dv")
        n_rows = t.read().count()
        stats = {"commits": 0, "retries": 0, "aborts": 0}
        lock = threading.Lock()

        def writer(w: int) -> None:
            import skiplake
            rnd = random.Random(w)
            table = skiplake.Table.open(spark, t.path)
            for _ in range(updates):
                ids = sorted({rnd.randrange(n_rows // writers) * writers + w for _ in range(20)})
                for attempt in range(10):
                    try:
                        table.refresh().update(f"id IN ({', '.join(map(str, ids))})", {"s": f"'w{w}'"})
                        with lock:
                            stats["commits"] += 1
                        break
                    except ConcurrentModificationError:
                        with lock:
                            stats["retries"] += 1
                else:
                    with lock:
                        stats["aborts"] += 1

        t0 = time.perf_counter()
        threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        seconds = time.perf_counter() - t0
        stats["seconds"] = seconds
        results[c] = stats
        progress(f"{writers} writers, {c}: {stats['commits']} commits in {seconds:.1f} s "
                 f"({stats['commits'] / seconds:.2f}/s), {stats['retries']} retries, {stats['aborts']} aborts")
        report.timing(f"{writers} writers x {updates} updates", c, [seconds],
                      f"{stats['commits']} commits ({stats['commits'] / seconds:.2f}/s), "
                      f"{stats['retries']} conflicts retried, {stats['aborts']} aborts")
    report.ratio("writers: commits/s row-level / file-level",
                 (results["dv"]["commits"] / results["dv"]["seconds"]) /
                 max(1e-9, results["rewrite"]["commits"] / results["rewrite"]["seconds"]))
    report.goal("row-level writers: conflicts", results["dv"]["retries"] + results["dv"]["aborts"], 0, unit="n")
    row, file = results["dv"], results["rewrite"]
    report.headline(f"{writers} writers on the same files, row level", row["commits"] / row["seconds"], "/s",
                    f"{row['commits']} commits, {row['retries']} conflicts, {row['aborts']} aborts; file level "
                    f"{file['commits'] / file['seconds']:.2f}/s, {file['retries']} conflicts, {file['aborts']} aborts")
    report.check("every update committed at row level", results["dv"]["commits"] == writers * updates,
                 f"{results['dv']}")
    report.extra["writers"] = results


def _timed_scans(spark: Any, frames: dict[str, Any], reps: int, label: str,
                 progress: Progress) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, tuple]]:
    """Each frame's full-scan aggregate after a warm-up, `reps` times, taking turns: (wall seconds,
    tasks' CPU seconds, the last answer) per frame."""
    from pyspark.sql import functions as F
    times: dict[str, list[float]] = {c: [] for c in frames}
    cpu: dict[str, list[float]] = {c: [] for c in frames}
    answers: dict[str, tuple] = {}
    for rep in range(reps + 1):
        for c in rotated(tuple(frames), rep):
            cpu0 = executor_cpu_seconds(spark)
            t0 = time.perf_counter()
            r = frames[c]().agg(F.count("*"), F.sum("id"), F.sum("v"), F.max("s")).collect()[0]
            seconds = time.perf_counter() - t0
            used = executor_cpu_seconds(spark) - cpu0
            answers[c] = tuple(r)
            progress(f"{label}, {c}{' (warm-up)' if not rep else ''}: {seconds:.2f} s, tasks' CPU {used:.2f} s")
            if rep:
                times[c].append(seconds)
                cpu[c].append(used)
    return times, cpu, answers


if __name__ == "__main__":
    raise SystemExit(main())
