"""Reading the change data feed of 10 versions, against delta-spark's table_changes.

One table of --rows rows (5M by default) in 10 partitions, with `delta.enableChangeDataFeed`,
written by skiplake, then 10 versions of changes by skiplake: 4 UPDATEs, 3 DELETEs and 3 MERGE
upserts, each of about 0.5% of the rows spread over every partition. With --dv (on by default)
the same again on a table with deletion vectors too, whose DELETEs record no change files (the
feed reads the rows their new deletion vectors mark).

The read, on both sides, is the 10 versions' changes aggregated over every column, so each side
reads every change row and column:

    SELECT count(*), sum(hash(id, part, v, s, _change_type, _commit_version)) FROM changes

skiplake: `t.changes(first, last)` in this process; delta-spark 4.4: `table_changes_by_path` in
its own JVM (benchmarks/delta_merge_runner.py times each statement itself), with the same Spark
settings. Each contender runs once to warm up, then --reps times, taking turns going first.

Checks: both sides give the same count and hash.

    .venv/bin/python -m benchmarks.bench_changes [--quick] [--rows N] [--partitions N] [--no-dv]
        [--reps N] [--json] [--out FILE]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Progress, Report, alternate, base_parser, command_line, finish, median, workdir
from benchmarks.delta_runner import DELTA_PACKAGE, DeltaRunner, report_against_delta

CDF = {"delta.enableChangeDataFeed": "true"}
DV = {**CDF, "delta.enableDeletionVectors": "true"}
DRIVER_MEMORY = "4g"
AGG = ("count(*) AS n", "sum(hash(id, part, v, s, _change_type, _commit_version)) AS h")
THEIRS = "SELECT " + ", ".join(AGG) + " FROM table_changes_by_path('{path}', {first}, {last})"


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="rows of the table (default 5,000,000)")
    parser.add_argument("--partitions", type=int, default=8, help="spark.sql.shuffle.partitions of both sides")
    parser.add_argument("--no-dv", action="store_true", help="skip the table with deletion vectors")
    args = parser.parse_args(argv)
    rows = args.rows or (100_000 if args.quick else 5_000_000)
    reps = args.reps if args.reps is not None else (1 if args.quick else 5)
    progress = Progress("bench_changes")
    from testing_support.paths import setup_java
    setup_java()
    import skiplake
    spark = skiplake.local_spark(app_name="bench-changes", shuffle_partitions=args.partitions,
                                 driver_memory=DRIVER_MEMORY)
    report = Report("bench_changes", f"Change data feed: 10 versions of changes to {rows:,} rows, against delta-spark",
                    command_line("bench_changes", args, [f"--rows {rows}", f"--partitions {args.partitions}"]
                                 + (["--no-dv"] if args.no_dv else [])),
                    {"rows": rows, "reps": reps, "shuffle_partitions": args.partitions,
                     "driver_memory": DRIVER_MEMORY, "delta_package": DELTA_PACKAGE})
    delta = DeltaRunner(args.partitions, progress, DRIVER_MEMORY)   # its JVM starts while the tables are written
    try:
        with workdir("bench_changes", args.workdir, args.keep, progress) as work:
            variants = [("files rewritten", CDF)] + ([] if args.no_dv else [("with deletion vectors", DV)])
            for label, properties in variants:
                path = work / ("dv" if properties is DV else "cow")
                first, last = _build(spark, path, rows, properties, progress, label)
                _measure(spark, delta, report, path, first, last, reps, label, progress)
            report.extra["delta"] = delta.info
    finally:
        delta.close()
    return finish(report, args)


def _build(spark: Any, path: Path, rows: int, properties: dict[str, str], progress: Progress,
           label: str) -> tuple[int, int]:
    """The table and its 10 versions of changes: (first, last) of those versions."""
    import skiplake
    t0 = time.perf_counter()
    t = skiplake.Table.create(spark, str(path), "id long, part int, v double, s string", partition_by=["part"],
                              properties=properties)
    t.append(spark.range(0, rows, 1, 8).selectExpr(
        "id", "CAST(id % 10 AS INT) AS part", "CAST(id AS DOUBLE) / 7 AS v", "concat('row-', CAST(id AS STRING)) AS s"))
    first = t.version + 1
    n = rows // 200
    for i in range(10):
        kind = ("update", "delete", "merge")[i % 3] if i < 9 else "update"
        if kind == "update":
            t.update(f"id % 200 = {i}", {"v": "v + 1", "s": f"concat(s, '-u{i}')"})
        elif kind == "delete":
            t.delete(f"id % 200 = {i}")
        else:
            # Half update rows spread over every partition (7919 is prime to the row counts used),
            # half insert new ids.
            src = spark.range(0, n, 1, 2).selectExpr(
                f"IF(id % 2 = 0, (id * 7919 + {i}) % {rows}, {rows} + {i} * {n} + id) AS id",
                "CAST(id % 10 AS INT) AS part", "-CAST(id AS DOUBLE) AS v", f"concat('m{i}-', CAST(id AS STRING)) AS s")
            t.merge(src, "target.id = source.id AND target.part = source.part") \
                .when_matched_update_all().when_not_matched_insert_all().execute()
    progress(f"{label}: {rows:,} rows and 10 versions of changes written in {time.perf_counter() - t0:.1f} s")
    return first, t.version


def _measure(spark: Any, delta: DeltaRunner, report: Report, path: Path, first: int, last: int, reps: int,
             label: str, progress: Progress) -> None:
    import skiplake
    inner: list[float] = []
    answers: dict[str, tuple] = {}

    def ours() -> float:
        t = skiplake.Table.open(spark, str(path))
        row = t.changes(first, last).selectExpr(*AGG).collect()[0]
        answers["skiplake"] = (str(row["n"]), str(row["h"]))
        return 0.0

    def theirs() -> float:
        reply = delta.sql(THEIRS.format(path=path, first=first, last=last))
        answers["delta-spark"] = tuple(reply["rows"][0])
        return float(reply["seconds"])

    def seen(name: str, out: float) -> None:
        if name == "delta-spark":
            inner.append(out)

    samples = alternate({"skiplake": ours, "delta-spark": theirs}, reps, seen)
    section = f"change feed of 10 versions, {label}"
    ratio = report_against_delta(report, section, "skiplake t.changes()",
                                 "delta-spark 4.4 table_changes_by_path (timed in its JVM)",
                                 samples["skiplake"], inner, samples["delta-spark"])
    report.headline(f"{label}: delta-spark / skiplake", ratio, "x",
                    f"skiplake {median(samples['skiplake']):.2f} s, delta-spark {median(inner):.2f} s, "
                    f"{answers['skiplake'][0]} change rows")
    report.check(f"{section}: both read the same changes", answers["skiplake"] == answers["delta-spark"],
                 f"{answers}")
    progress(f"{label}: skiplake {median(samples['skiplake']):.2f} s, delta-spark {median(inner):.2f} s")


if __name__ == "__main__":
    sys.exit(main())
