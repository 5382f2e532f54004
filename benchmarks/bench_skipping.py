"""Benchmark 5: static data skipping on TPC-DS store_sales, a point query on ss_item_sk.

    SELECT sum(ss_quantity) FROM store_sales WHERE ss_item_sk IN (40, 41, 42)

store_sales at sf=10 (28.8M rows; --quick: sf=1) from DuckDB's dsdgen, laid out four ways,
each in at least --files files:

  spark, unclustered      plain Parquet as generated (every file spans every item)
  spark, Z-ordered files  plain Spark over the very files of skiplake's Z-ordered table
  skiplake, unclustered   a skiplake table with the unclustered layout
  skiplake, Z-ordered     the same after optimize(zorder_by=["ss_item_sk"])

and, for partition pruning, store_sales partitioned by ss_sold_date_sk with a one-month
predicate, plain Spark (its own partition discovery and pruning) next to skiplake.

Every query is timed end to end as a user runs it: plain Spark reads the folder
(`spark.read.parquet(dir)`, listing included) and runs the SQL; skiplake opens the lake, loads
the snapshot, plans the scan and runs `lake.sql`. Files, bytes and rows scanned come from the
scan node's metrics of Spark's executed plan (numFiles, filesSize, numOutputRows), the same
counters for every contender. For reference, skiplake's planning alone (`lake.explain`) and
plain Spark over just the file(s) skiplake selects (Spark's own floor for this query: a
two-stage job over one file) are timed too.

The laid-out data is kept under --data (default bench-data/skipping-sf<N>) and reused; delete
the folder (or pass --rebuild) to lay it out again.

    .venv/bin/python -m benchmarks.bench_skipping [--quick] [--sf N] [--reps N] [--json]
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

from benchmarks.common import Progress, Report, base_parser, command_line, finish, median, rotated, timed
from testing_support.paths import DEFAULT_BASE, setup_java

POINT = "SELECT sum(ss_quantity) AS q FROM {t} WHERE ss_item_sk IN (40, 41, 42)"
POINT_SECTION = "point query ss_item_sk IN (40, 41, 42)"
FLOOR = "(ref) spark over the selected file(s) only"
QDATE = "SELECT sum(ss_quantity) AS q FROM {t} WHERE ss_sold_date_sk BETWEEN 2451180 AND 2451210"


def scan_metrics(df) -> dict[str, int]:
    """Sum of numFiles / filesSize / numOutputRows over the file scans of an executed query."""
    totals = {"files": 0, "bytes": 0, "rows": 0}
    plan = df._jdf.queryExecution().executedPlan()

    def visit(node: Any) -> None:
        name = node.getClass().getSimpleName()
        if name == "AdaptiveSparkPlanExec":
            visit(node.executedPlan())
            return
        if name.endswith("QueryStageExec"):
            visit(node.plan())
            return
        if name == "FileSourceScanExec":
            metrics = node.metrics()
            for key, out in (("numFiles", "files"), ("filesSize", "bytes"), ("numOutputRows", "rows")):
                if metrics.contains(key):
                    totals[out] += int(metrics.apply(key).value())
        children = node.children()
        for i in range(children.size()):
            visit(children.apply(i))

    visit(plan)
    return totals


def lay_out(spark, data: Path, source: str, files: int, progress: Progress) -> dict[str, Any]:
    """Write the four layouts (and the partitioned pair) under `data`, once."""
    import skiplake
    from skiplake.spark.writes.data_files import WriteOptions
    marker = data / "_layout.json"
    if marker.exists():
        progress(f"reusing the layouts in {data}")
        return json.loads(marker.read_text())
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    df = spark.read.parquet(source)
    rows = df.count()
    per_file = math.ceil(rows / files)
    progress(f"store_sales: {rows:,} rows -> files of at most {per_file:,} rows")
    plain = data / "plain"
    df.write.option("maxRecordsPerFile", per_file).parquet(str(plain))
    progress("wrote plain Parquet (unclustered)")
    lake = skiplake.Lake(spark, str(data / "lake"))
    base = spark.read.parquet(str(plain))
    t = lake.create_table("store_sales_unclustered", base.schema)
    t.append(base, options=WriteOptions(max_records_per_file=per_file))
    progress("wrote skiplake store_sales_unclustered")
    z = lake.create_table("store_sales", base.schema)
    z.append(base, options=WriteOptions(max_records_per_file=per_file))
    total = sum(f.size for f in lake.table("store_sales").snapshot.add_files)
    progress(f"appended store_sales ({total:,} bytes); Z-ordering by ss_item_sk ...")
    result = lake.table("store_sales").optimize(zorder_by=["ss_item_sk"], target_file_size=max(1, total // files),
                                                progress=progress)
    progress(f"Z-ordered: {result.files_removed} files -> {result.files_added} files")
    lake.table("store_sales").vacuum(retention_hours=0, force=True)
    progress("vacuumed the unclustered files out of the Z-ordered table's folder")
    by_date = data / "plain_by_date"
    # One task per date: without it every task writes a file into every partition folder.
    dated = base.repartition("ss_sold_date_sk")
    dated.write.partitionBy("ss_sold_date_sk").parquet(str(by_date))
    progress("wrote plain Parquet partitioned by ss_sold_date_sk")
    p = lake.create_table("store_sales_by_date", base.schema, partition_by=["ss_sold_date_sk"])
    p.append(dated)
    progress("wrote skiplake store_sales_by_date")
    info = {"rows": rows, "files_target": files, "zorder_files_added": result.files_added}
    marker.write_text(json.dumps(info))
    return info


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=None, help="TPC-DS scale factor (default 10, --quick 1)")
    parser.add_argument("--files", type=int, default=256, help="files per layout (default %(default)s)")
    parser.add_argument("--data", default=None, help="where the laid-out tables are kept")
    parser.add_argument("--rebuild", action="store_true", help="lay the data out again")
    args = parser.parse_args(argv)
    sf = args.sf if args.sf is not None else (1.0 if args.quick else 10.0)
    reps = args.reps or (5 if args.quick else 7)
    progress = Progress("skipping")
    setup_java()
    from testing_support.tpcds_lake import generated
    gen = generated(sf, progress)
    data = Path(args.data or Path(DEFAULT_BASE) / f"skipping-sf{sf:g}")
    if args.rebuild:
        shutil.rmtree(data, ignore_errors=True)

    import skiplake
    spark = skiplake.local_spark("bench_skipping", driver_memory="8g", shuffle_partitions=8)
    layout = lay_out(spark, data, str(gen.files["store_sales"]), args.files, progress)

    extra = [f"--sf {sf:g}"] if args.sf is not None else []
    report = Report("bench_skipping", f"Static data skipping: a point query on ss_item_sk over TPC-DS store_sales, "
                    f"sf={sf:g}",
                    command_line("bench_skipping", args, extra),
                    {"sf": sf, "rows": layout["rows"], "files_per_layout": args.files, "reps": reps,
                     "point_query": POINT.format(t="store_sales"), "partitioned_query": QDATE.format(t="store_sales")})

    lake_root = str(data / "lake")

    def spark_query(folder: Path, template: str) -> Callable[[], tuple[Any, dict]]:
        def run() -> tuple[Any, dict]:
            view = "ss_plain"
            spark.read.parquet(str(folder)).createOrReplaceTempView(view)
            df = spark.sql(template.format(t=view))
            value = df.collect()[0][0]
            return value, scan_metrics(df)
        return run

    def lake_query(table: str, template: str) -> Callable[[], tuple[Any, dict]]:
        def run() -> tuple[Any, dict]:
            df = skiplake.Lake(spark, lake_root).sql(template.format(t=table))
            value = df.collect()[0][0]
            return value, scan_metrics(df)
        return run

    def lake_plan(table: str, template: str) -> Callable[[], tuple[Any, dict]]:
        def run() -> tuple[Any, dict]:
            reports = skiplake.Lake(spark, lake_root).explain(template.format(t=table))
            return None, {"files": reports[0].files_selected, "bytes": reports[0].bytes_selected, "rows": -1}
        return run

    # Spark's own floor: the same query over exactly the one file skiplake selects, no listing.
    selected = skiplake.Lake(spark, lake_root).table("store_sales").scan("ss_item_sk IN (40, 41, 42)")
    one_file = [os.path.join(lake_root, "store_sales", f.path) for f in selected.files]

    def spark_files(paths: list[str], template: str) -> Callable[[], tuple[Any, dict]]:
        def run() -> tuple[Any, dict]:
            spark.read.parquet(*paths).createOrReplaceTempView("ss_files")
            df = spark.sql(template.format(t="ss_files"))
            return df.collect()[0][0], scan_metrics(df)
        return run

    groups = {
        POINT_SECTION: {
            "spark, unclustered": spark_query(data / "plain", POINT),
            "spark, Z-ordered files": spark_query(Path(lake_root) / "store_sales", POINT),
            "skiplake, unclustered": lake_query("store_sales_unclustered", POINT),
            "skiplake, Z-ordered": lake_query("store_sales", POINT),
            "(ref) skiplake planning only, Z-ordered": lake_plan("store_sales", POINT),
            FLOOR: spark_files(one_file, POINT),
        },
        "partitioned by ss_sold_date_sk, one month": {
            "spark, partitioned": spark_query(data / "plain_by_date", QDATE),
            "skiplake, partitioned": lake_query("store_sales_by_date", QDATE),
        },
    }
    totals = {}
    for section, contenders in groups.items():
        progress(f"{section}: warm-up")
        for fn in contenders.values():
            fn()
        samples: dict[str, list[float]] = {name: [] for name in contenders}
        seen: dict[str, tuple[Any, dict]] = {}
        for rep in range(reps):
            for name in rotated(list(contenders), rep):
                secs, out = timed(contenders[name])
                samples[name].append(secs)
                seen[name] = out
            progress(f"{section}: rep {rep + 1}/{reps}: " + ", ".join(
                f"{n} {samples[n][-1] * 1000:.0f} ms" for n in contenders))
        answers = {n: v for n, (v, _) in seen.items() if v is not None}
        report.check(f"{section}: same answer from every contender", len(set(map(str, answers.values()))) == 1,
                     json.dumps({k: str(v) for k, v in answers.items()}))
        for name, secs in samples.items():
            m = seen[name][1]
            scanned = f"files {m['files']:,}, bytes {m['bytes']:,}" + (f", rows {m['rows']:,}" if m["rows"] >= 0 else "")
            report.timing(section, name, secs, scanned)
            totals[(section, name)] = (median(secs), m)

    point = POINT_SECTION
    z = totals[(point, "skiplake, Z-ordered")]
    z_spark = totals[(point, "spark, Z-ordered files")]
    unclustered = totals[(point, "spark, unclustered")]
    all_files = unclustered[1]["files"]
    z_files_total = z_spark[1]["files"]
    skipped = 1 - z[1]["files"] / max(1, z_files_total)
    report.ratio("spark same Z-ordered files / skiplake Z-ordered", z_spark[0] / z[0], "time")
    report.ratio("spark unclustered / skiplake Z-ordered", unclustered[0] / z[0], "time")
    report.ratio("skiplake unclustered / spark unclustered", totals[(point, "skiplake, unclustered")][0] / unclustered[0],
                 "time: the cost of skiplake when nothing can be skipped")
    part = "partitioned by ss_sold_date_sk, one month"
    report.ratio("spark partitioned / skiplake partitioned",
                 totals[(part, "spark, partitioned")][0] / totals[(part, "skiplake, partitioned")][0], "time")
    report.goal("files skipped by skiplake, Z-ordered", skipped, 0.98, unit="%", at_least=True,
                note=f"{z[1]['files']} of {z_files_total} files read; the unclustered layout has {all_files}")
    report.goal("speedup vs spark on the same Z-ordered files", z_spark[0] / z[0], 3.0, unit="x", at_least=True)
    report.goal("speedup vs spark on unclustered files", unclustered[0] / z[0], 10.0, unit="x", at_least=True)
    report.headline("files skipped, Z-ordered", skipped, "%", f"{z[1]['files']} of {z_files_total} files read")
    report.headline("the point query, Z-ordered", z[0], note=f"plain Spark {z_spark[0]:.2f} s on the same files, "
                    f"{unclustered[0]:.2f} s on unclustered files")
    report.headline("plain Spark over the one selected file alone", totals[(point, FLOOR)][0],
                    note="Spark's own floor for this query")
    spark.stop()
    return finish(report, args)


if __name__ == "__main__":
    sys.exit(main())
