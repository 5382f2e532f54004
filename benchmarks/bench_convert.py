"""Benchmark 18: adopting a Parquet lake, converted in place vs rewritten into a new table (goal: converting at least 10x faster).

TPC-DS store_sales (sf=10: 28.8M rows; --quick: sf=1) from DuckDB's dsdgen, written by Spark as
a user's lake holds it, in two layouts:
  flat      spark.read.parquet(generated).write.parquet(dir): one file per Spark task
  by date   the same rows repartitioned and partitionBy(ss_sold_date_sk): one folder and file per
            day (about 1,800), as a daily-partitioned lake

For each layout three contenders, each turning the directory into a skiplake table:
  convert, footers in the driver     Table.convert(spark, dir[, partition_by]): only _delta_log/ is
                                     written, stats from the files' footers read by driver threads
  convert, footers by a Spark job    the same with footer_job_threshold=0 (the path taken past
                                     spark.skiplake.convert.footerJobThreshold files, 5,000 by default)
  rewrite                            lake.create_table(name, schema, partition_by) +
                                     table.append(spark.read.parquet(dir)): every byte read and written
A conversion's run starts by removing the `_delta_log/` the run before it wrote (a few files,
inside the timing); each rewrite goes to a new table, all removed at the end. Each contender runs
once untimed, then --reps times, taking turns going first (common.alternate).

Checks: the converted table has the generated rows, and the same answer as the rewritten table to
a point query (sum of ss_quantity over ss_item_sk IN (40, 41, 42)); no file of the directory
changed (only `_delta_log/` was added); the by-date table's date filter selects one partition.

The layouts are kept under --data (default bench-data/convert-sf<N>) and reused.

    .venv/bin/python -m benchmarks.bench_convert [--quick] [--sf N] [--reps N] [--layouts flat,by_date] [--json]
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Callable

from benchmarks.common import Progress, Report, alternate, base_parser, command_line, finish, median
from testing_support.paths import DEFAULT_BASE, setup_java
from testing_support.tpcds_lake import generated

LAYOUTS = {"flat": [], "by_date": ["ss_sold_date_sk"]}
QUERY_WHERE = "ss_item_sk IN (40, 41, 42)"
DATE_WHERE = "ss_sold_date_sk = 2451545"
GOAL = 10.0


def tree(path: Path) -> dict[str, tuple[int, int]]:
    """Every file below `path` but the log, with its size and modification time."""
    out = {}
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != "_delta_log"]
        for f in files:
            st = os.stat(os.path.join(root, f))
            out[os.path.relpath(os.path.join(root, f), path)] = (st.st_size, st.st_mtime_ns)
    return out


def lay_out(spark: Any, data: Path, source: str, progress: Progress) -> dict[str, dict[str, Any]]:
    """The two layouts of store_sales under `data`, written by Spark once and reused."""
    marker = data / "_layouts.json"
    if marker.exists():
        progress(f"reusing the Parquet layouts under {data}")
        return json.loads(marker.read_text())
    shutil.rmtree(data, ignore_errors=True)
    df = spark.read.parquet(source)
    info = {}
    for name, parts in LAYOUTS.items():
        target = data / name
        progress(f"Spark writes store_sales as {name} Parquet ...")
        if parts:
            df.repartition(*parts).write.partitionBy(*parts).parquet(str(target))
        else:
            df.write.parquet(str(target))
        files = [f for f in tree(target) if f.endswith(".parquet")]
        info[name] = {"files": len(files), "bytes": sum(os.path.getsize(target / f) for f in files)}
        progress(f"{name}: {info[name]['files']:,} files, {info[name]['bytes']:,} bytes")
    marker.write_text(json.dumps(info))
    return info


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=None, help="TPC-DS scale factor (default 10, --quick 1)")
    parser.add_argument("--layouts", default="flat,by_date", help="comma-separated: flat, by_date (default both)")
    parser.add_argument("--data", default=None, help="where the Parquet layouts are kept")
    args = parser.parse_args(argv)
    sf = args.sf if args.sf is not None else (1.0 if args.quick else 10.0)
    reps = args.reps or 2
    layouts = [x.strip() for x in args.layouts.split(",") if x.strip()]
    unknown = [x for x in layouts if x not in LAYOUTS]
    if unknown:
        parser.error(f"unknown layouts {unknown}; choose from {list(LAYOUTS)}")
    progress = Progress("convert")
    setup_java()
    gen = generated(sf, progress)   # the suite's one dsdgen output per scale
    rows = gen.rows["store_sales"]
    data = Path(args.data or Path(DEFAULT_BASE) / f"convert-sf{sf:g}")

    import skiplake
    from skiplake.spark.convert.in_place import convert
    spark = skiplake.local_spark("bench_convert", driver_memory="6g", shuffle_partitions=8)
    info = lay_out(spark, data, str(gen.files["store_sales"]), progress)

    extra = [f"--sf {sf:g}"] if args.sf is not None else []
    if args.layouts != "flat,by_date":
        extra.append(f"--layouts {args.layouts}")
    report = Report("bench_convert", f"Converting a Parquet lake in place vs rewriting it: TPC-DS store_sales sf={sf:g}",
                    command_line("bench_convert", args, extra),
                    {"sf": sf, "rows": rows, "reps": reps, "layouts": {k: info[k] for k in layouts},
                     "footer_job_threshold_default": 5000})
    lake = skiplake.Lake(spark, str(data / "rewrites"))
    answers: dict[str, Any] = {}
    for layout in layouts:
        folder = data / layout
        parts = LAYOUTS[layout]
        before = tree(folder)
        reports: dict[str, Any] = {}

        def converter(threshold: int | None, key: str) -> Callable[[], Any]:
            def run() -> Any:
                shutil.rmtree(folder / "_delta_log", ignore_errors=True)
                done = convert(spark, str(folder), partition_by=parts or None, footer_job_threshold=threshold)
                reports[key] = done.report
                return done
            return run

        def rewrite() -> Any:
            name = f"{layout}_{uuid.uuid4().hex[:8]}"
            df = spark.read.parquet(str(folder))
            t = lake.create_table(name, df.schema, partition_by=parts or None)
            t.append(df)
            return t

        contenders = {
            "convert, footers in the driver": converter(10**9, "driver"),
            "convert, footers by a Spark job": converter(0, "job"),
            "rewrite (create_table + append)": rewrite,
        }
        progress(f"{layout}: {info[layout]['files']:,} files; warm-up, then {reps} runs of each")
        samples = alternate(contenders, reps)
        for name, s in samples.items():
            report.timing(layout, name, s)
        rewrite_s = median(samples["rewrite (create_table + append)"])
        default = "job" if info[layout]["files"] >= 5000 else "driver"
        for key, name in (("driver", "convert, footers in the driver"), ("job", "convert, footers by a Spark job")):
            ratio = rewrite_s / median(samples[name])
            used = " (the default path at this size)" if key == default else ""
            report.ratio(f"{layout}: rewrite / {name}", ratio, used.strip(" ()"))
            if key == default:
                report.goal(f"{layout}: converting at least {GOAL:g}x faster than rewriting{used}", ratio, GOAL,
                            unit="x", at_least=True)
                report.headline(f"{layout} ({info[layout]['files']:,} files): rewrite / convert", ratio, "x",
                                f"convert {median(samples[name]):.2f} s, rewrite {rewrite_s:.1f} s")
            report.check(f"{layout}: {key} conversion read every footer the way it said",
                         reports[key].footers_read_by == ("driver" if key == "driver" else "spark job"),
                         reports[key].footers_read_by)
        # The last conversion stands (the job's or the driver's, whichever ran last); check it.
        converted = skiplake.Table.open(spark, str(folder))
        rewritten = [t for t in lake.tables() if t.startswith(layout + "_")]
        t_rw = lake.table(rewritten[0])
        got = converted.read(QUERY_WHERE).selectExpr("sum(ss_quantity)").collect()[0][0]
        want = t_rw.read(QUERY_WHERE).selectExpr("sum(ss_quantity)").collect()[0][0]
        answers[layout] = got
        rows_converted = reports["driver"].rows
        report.check(f"{layout}: converted table has the generated rows", rows_converted == rows,
                     f"{rows_converted:,} of {rows:,}")
        report.check(f"{layout}: converted and rewritten tables answer the point query alike", got == want,
                     f"sum(ss_quantity) {got} vs {want}")
        report.check(f"{layout}: only _delta_log/ was written", tree(folder) == before,
                     f"{len(before):,} files unchanged")
        if parts:
            plan = converted.scan(DATE_WHERE).report
            report.check(f"{layout}: a date filter selects one partition of the converted table",
                         plan.partitions_selected == 1, f"{plan.partitions_selected} of {plan.partitions_total}")
        for name in rewritten:
            shutil.rmtree(lake.path_of(name), ignore_errors=True)
        shutil.rmtree(folder / "_delta_log", ignore_errors=True)
    report.extra["answers"] = answers
    spark.stop()
    return finish(report, args)


if __name__ == "__main__":
    raise SystemExit(main())
