"""MERGE (an upsert) against delta-spark's MERGE.

One unpartitioned table of --rows rows (10M by default) in --files files (32), ids in ascending
ranges per file as an append-only table has them, written once by skiplake. A source of 1% of
the rows as one Parquet file: half of its rows update existing rows (ids spread over the whole
table, so every file holds some), half are new ids. The MERGE, on both sides:

    MERGE INTO target USING source ON target.id = source.id
    WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *

Contenders: skiplake's builder (`t.merge(source, on).when_matched_update_all()
.when_not_matched_insert_all().execute()`) in this process, and delta-spark 4.4's SQL MERGE in its
own JVM (benchmarks/delta_merge_runner.py, which times each statement itself), with the same
Spark settings: local[2], --partitions shuffle partitions, the same driver memory, UTC. Each run
merges into its own copy of the base table, made before any timing (a MERGE changes the table).
Each contender runs once to warm up, then --reps times, taking turns going first
(common.alternate). With deletion vectors (--dv, on by default) the same again on copies with
`delta.enableDeletionVectors=true`: rows marked, not files rewritten, on both sides.

Checks: both sides leave the same rows (count, ids, sum of v, rows from the source).

    .venv/bin/python -m benchmarks.bench_merge [--quick] [--rows N] [--files N] [--partitions N] [--no-dv]
        [--reps N] [--json] [--out FILE]
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    Progress,
    Report,
    alternate,
    base_parser,
    command_line,
    copies_for,
    finish,
    median,
    workdir,
)
from benchmarks.delta_runner import DELTA_PACKAGE, DeltaRunner, report_against_delta

DV = {"delta.enableDeletionVectors": "true"}
DRIVER_MEMORY = "4g"
MERGE_SQL = ("MERGE INTO delta.`{table}` AS target USING (SELECT * FROM parquet.`{source}`) AS source "
             "ON target.id = source.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="rows of the table (default 10,000,000)")
    parser.add_argument("--files", type=int, default=None, help="files of the table (default 32)")
    parser.add_argument("--partitions", type=int, default=8, help="spark.sql.shuffle.partitions of both sides")
    parser.add_argument("--no-dv", action="store_true", help="skip the run with deletion vectors")
    args = parser.parse_args(argv)
    rows = args.rows or (200_000 if args.quick else 10_000_000)
    files = args.files or (4 if args.quick else 32)
    reps = args.reps if args.reps is not None else (1 if args.quick else 3)
    progress = Progress("bench_merge")
    from testing_support.paths import setup_java
    setup_java()
    import skiplake
    spark = skiplake.local_spark(app_name="bench-merge", shuffle_partitions=args.partitions,
                                 driver_memory=DRIVER_MEMORY)
    report = Report("bench_merge", f"MERGE: an upsert of 1% into {rows:,} rows, against delta-spark",
                    command_line("bench_merge", args, [f"--rows {rows}", f"--files {files}",
                                                       f"--partitions {args.partitions}"]
                                 + (["--no-dv"] if args.no_dv else [])),
                    {"rows": rows, "files": files, "source_rows": rows // 100, "reps": reps,
                     "shuffle_partitions": args.partitions, "driver_memory": DRIVER_MEMORY,
                     "delta_package": DELTA_PACKAGE})
    delta = DeltaRunner(args.partitions, progress, DRIVER_MEMORY)   # its JVM starts while the table is written
    try:
        with workdir("bench_merge", args.workdir, args.keep, progress) as work:
            base, source = work / "base", work / "source.parquet"
            _build(spark, base, source, rows, files, progress)
            _measure(spark, delta, report, work, base, source, rows, reps, False, progress)
            if not args.no_dv:
                dv_base = work / "base_dv"
                shutil.copytree(base, dv_base)
                skiplake.Table.open(spark, str(dv_base)).set_properties(DV)
                _measure(spark, delta, report, work, dv_base, source, rows, reps, True, progress)
            report.extra["delta"] = delta.info
    finally:
        delta.close()
    return finish(report, args)


def _build(spark: Any, base: Path, source: Path, rows: int, files: int, progress: Progress) -> None:
    import skiplake
    t0 = time.perf_counter()
    t = skiplake.Table.create(spark, str(base), "id long, k long, v double, s string")
    t.append(spark.range(0, rows, 1, files).selectExpr(
        "id", "id % 1000 AS k", "CAST(id AS DOUBLE) / 7 AS v", "concat('row-', CAST(id % 100000 AS STRING)) AS s"))
    n = rows // 100
    # Half the source updates rows spread over every file (7919 is prime to the row counts used),
    # half inserts new ids.
    (spark.range(0, n, 1, 2)
     .selectExpr(f"IF(id % 2 = 0, (id * 7919) % {rows}, {rows} + id) AS id", "id % 1000 AS k",
                 "-CAST(id AS DOUBLE) AS v", "concat('src-', CAST(id AS STRING)) AS s")
     .write.parquet(str(source)))
    progress(f"table of {rows:,} rows in {len(t.snapshot.add_files)} files ({t.snapshot.size_bytes / 2 ** 20:.0f} MB), "
             f"source of {n:,} rows, in {time.perf_counter() - t0:.1f} s")


def _measure(spark: Any, delta: DeltaRunner, report: Report, work: Path, base: Path, source: Path, rows: int,
             reps: int, deletion_vectors: bool, progress: Progress) -> None:
    import skiplake
    label = "with deletion vectors" if deletion_vectors else "files rewritten"
    copies = copies_for(["skiplake", "delta-spark"], base, work, reps + 1, "dv" if deletion_vectors else "cow")
    done: dict[str, list[Path]] = {"skiplake": [], "delta-spark": []}
    inner: list[float] = []
    results: list[Any] = []

    def ours() -> float:
        path = copies["skiplake"].pop(0)
        done["skiplake"].append(path)
        t = skiplake.Table.open(spark, str(path))
        result = t.merge(spark.read.parquet(str(source)), "target.id = source.id") \
            .when_matched_update_all().when_not_matched_insert_all().execute()
        results.append(result)
        progress(f"{label}: skiplake merged {result.num_target_rows_updated:,} updated, "
                 f"{result.num_target_rows_inserted:,} inserted, {result.num_target_files_removed} files removed, "
                 f"{result.num_target_deletion_vectors_added} deletion vectors added")
        return 0.0

    def theirs() -> float:
        path = copies["delta-spark"].pop(0)
        done["delta-spark"].append(path)
        seconds = float(delta.sql(MERGE_SQL.format(table=path, source=source))["seconds"])
        progress(f"{label}: delta-spark merged in {seconds:.2f} s (timed in its JVM)")
        return seconds

    def seen(name: str, out: float) -> None:
        if name == "delta-spark":
            inner.append(out)

    samples = alternate({"skiplake": ours, "delta-spark": theirs}, reps, seen)
    section = f"MERGE upsert, {label}"
    ratio = report_against_delta(report, section, "skiplake (builder)", "delta-spark 4.4 (SQL MERGE, timed in its JVM)",
                                 samples["skiplake"], inner, samples["delta-spark"])
    report.goal(f"{section}: skiplake no slower than delta-spark", ratio, 1.0, unit="x", at_least=True)
    report.headline(f"{label}: delta-spark / skiplake", ratio, "x",
                    f"skiplake {median(samples['skiplake']):.1f} s, delta-spark {median(inner):.1f} s")
    last = results[-1]
    report.extra[f"skiplake_metrics_{'dv' if deletion_vectors else 'cow'}"] = last.operation_metrics()
    mine, theirs_table = done["skiplake"][-1], done["delta-spark"][-1]
    facts = {name: _facts(spark, path) for name, path in (("skiplake", mine), ("delta-spark", theirs_table))}
    expected_rows = rows + rows // 100 // 2
    report.check(f"{section}: both leave the same rows", facts["skiplake"] == facts["delta-spark"]
                 and facts["skiplake"][0] == str(expected_rows), json.dumps(facts))
    for paths in done.values():
        for p in paths:
            shutil.rmtree(p, ignore_errors=True)


def _facts(spark: Any, path: Path) -> tuple:
    """(rows, sum of ids, sum of v * 7 as integers, rows from the source) of a table, read by skiplake
    (v * 7 is an integer in every row: a float sum would depend on the order of the rows)."""
    import skiplake
    row = skiplake.Table.open(spark, str(path)).read().selectExpr(
        "count(*)", "sum(id)", "sum(CAST(round(v * 7) AS BIGINT))", "count_if(s LIKE 'src-%')").first()
    return tuple(str(v) for v in row)


if __name__ == "__main__":
    sys.exit(main())
