"""Benchmark 21: the constants of dynamic file pruning's cost model, measured on this machine.

Over the TPC-DS lakes of bench_dfp (fact tables Z-ordered by date key and item key; at sf=1
store_sales in --files files, at sf=10 in 1,024), each measured after a warm-up run, the cases
taking turns:

  scan      the four store_sales columns a star join reads (date key, item key, two measures),
            summed over the first k files (k = 1, 2, 4, ... all) at both scales; a least-squares
            fit of the time to `t0 + (bytes + files * openCostInBytes) / (rate * parallelism)`
            gives scanBytesPerSecond (each file counts as Spark's openCostInBytes more), with R²
  filtered  the same scan of all files through the view lake.sql reads pruned files through
            (a filter on each row's file name keeping every file), against the plain view: what
            reading through it costs, as a share of the scan
  builds    the keys of `date_dim WHERE d_year = 2000`, TPC-DS's most common build side, read in
            the driver and as a Spark job (localBuildThreshold 0), as lake.explain times them;
            buildJobSeconds is the job's time less its bytes at the fitted scan rate
  applying  lake.sql's making of the final query (QueryExplain.planning's final_frame) for
            queries whose pruning applied, against those where none did
  savings   what pruning saves end to end: TPC-DS queries at sf=1 with dynamic pruning (the cost
            model off, so that it applies wherever it can) against without it; the bytes it kept
            out of the scans (each file counting openCostInBytes) over the seconds it saved, per
            task, is the rate scanBytesPerSecond stands for: pruned rows also skip the joins,
            shuffles and aggregates above the scan, so it is lower than the bare scan's

    .venv/bin/python -m benchmarks.bench_dfp_cost [--quick] [--sf N] [--files N] [--reps N] [--json]
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import Progress, Report, base_parser, command_line, finish, median, rotated, timed
from testing_support.tpcds_lake import add_lake_arguments, build_lake, lake_scale

DFP = "spark.skiplake.optimizer.dynamicFilePruning"
SCAN_COLUMNS = ("ss_sold_date_sk", "ss_item_sk", "ss_quantity", "ss_net_paid")
# TPC-DS queries whose date or item builds prune their fact tables at sf=1.
SAVINGS_QUERIES = (3, 19, 25, 40, 42, 43, 52, 55, 98)
BUILD_QUERY = ("SELECT sum(ss_quantity) FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk "
               "WHERE d_year = 2000")
# Queries of TPC-DS's shape whose date or item build prunes store_sales at any scale, and ones
# where nothing is pruned (the final query is the analysis pass's).
APPLIED = (BUILD_QUERY,
           "SELECT i_brand, sum(ss_ext_sales_price) FROM store_sales JOIN item ON ss_item_sk = i_item_sk "
           "JOIN date_dim ON ss_sold_date_sk = d_date_sk WHERE i_manager_id = 28 AND d_moy = 11 AND d_year = 1999 "
           "GROUP BY i_brand")
NOT_APPLIED = ("SELECT sum(ss_quantity) FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk",
               "SELECT d_year, sum(ss_quantity) FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk "
               "GROUP BY d_year")


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    add_lake_arguments(parser, (1, 1), (64, 64), "where the TPC-DS lakes are built (and reused)")
    args = parser.parse_args(argv)
    sf, files = lake_scale(args)
    reps = args.reps or (2 if args.quick else 3)
    progress = Progress("dfp-cost")
    import skiplake
    from skiplake.skipping.plan import plan_scan
    from skiplake.spark.reads.planned_reads import read_planned
    spark = skiplake.local_spark(app_name="bench-dfp-cost", shuffle_partitions=8, driver_memory="4g")
    parallelism = int(spark.sparkContext.defaultParallelism)
    scales = [(sf, files)] if args.quick else [(sf, files), (10.0, 1024)]
    lakes = {s: skiplake.Lake(spark, str(build_lake(spark, Path(args.data), s, n, progress=progress)))
             for s, n in scales}
    report = Report("bench_dfp_cost", "Dynamic file pruning's cost model: its constants on this machine",
                    command_line("bench_dfp_cost", args, [f"--sf {sf:g}", f"--files {files}"]),
                    {"scales": [s for s, _n in scales], "reps": reps, "parallelism": parallelism})

    # 1. scans of k files, both scales
    from pyspark.sql import functions as F
    points: list[tuple[int, int, float]] = []
    for s, lake in lakes.items():
        snap = lake.table("store_sales").snapshot
        ordered = sorted(plan_scan(snap).files, key=lambda f: f.path)
        ks = sorted({min(len(ordered), 2 ** i) for i in range(0, 20) if 2 ** (i - 1) < len(ordered)})
        cases = {k: (lambda k=k: read_planned(spark, snap, ordered[:k]).agg(
            *[F.sum(c) for c in SCAN_COLUMNS]).collect()) for k in ks}
        samples = _alternate(cases, reps)
        for k in ks:
            size = sum(f.size for f in ordered[:k])
            points += [(k, size, t) for t in samples[k]]
            report.timing(f"scan sf={s:g}", f"{k} files, {size / 1e6:.1f} MB", samples[k])
        progress(f"sf={s:g}: scanned 1 to {len(ordered)} files of store_sales")
    open_cost = int(spark.conf.get("spark.sql.files.openCostInBytes", "4194304").rstrip("b") or 4194304)
    t0, per_byte, r2 = _fit(points, open_cost)
    rate = 1 / (per_byte * parallelism) if per_byte > 0 else float("inf")
    report.headline("scanBytesPerSecond (per task)", rate, "/s", f"bytes of files; R² {r2:.3f}")
    report.headline("a query's fixed time (not saved by pruning)", t0, "s")
    report.extra.update(fit={"t0_s": t0, "open_cost_bytes": open_cost, "scan_bytes_per_second": rate, "r2": r2,
                             "points": points})

    # 2. the view lake.sql reads pruned files through, keeping every file, against the plain view
    lake = lakes[sf]
    from skiplake.spark.query.model import FILE_COLUMN
    snap = lake.table("store_sales").snapshot
    view = lake._views.get(snap, 0)  # the slot view lake.sql reads store_sales through
    if view.with_file:
        sums = ", ".join(f"sum({c})" for c in SCAN_COLUMNS)
        plain = f"SELECT {sums} FROM {view.name}"
        filtered = f"SELECT {sums} FROM {view.with_file} WHERE {FILE_COLUMN} NOT IN ('no-such-file.parquet')"
        samples = _alternate({"plain view": lambda: spark.sql(plain).collect(),
                              "file-filtered view": lambda: spark.sql(filtered).collect()}, reps)
        for name, secs in samples.items():
            report.timing("filtered view", name, secs)
        share = median(samples["file-filtered view"]) / median(samples["plain view"]) - 1
        report.headline("filtered_scan_share", share, "%", "reading every file through the file filter, over the plain view")
        report.extra["filtered_share"] = share

    # 3. builds, in the driver and as a Spark job
    builds: dict[str, list[float]] = {"in the driver": [], "a Spark job": []}
    build_bytes = 0
    spark.conf.set(f"{DFP}.costModel", "false")
    for rep in range(reps + 1):
        for how in rotated(list(builds), rep):
            spark.conf.set(f"{DFP}.localBuildThreshold", "64MB" if how == "in the driver" else "0")
            explained = lake.explain(BUILD_QUERY)
            [d] = [d for d in explained.dynamic if d.applied] or [None]
            if d is None or d.build_seconds is None:
                report.check(f"the date build applies ({how})", False, explained.text())
                continue
            if rep:
                builds[how].append(d.build_seconds)
            date = next(r for r in explained if r.table.endswith("date_dim"))
            build_bytes = date.bytes_selected
    spark.conf.unset(f"{DFP}.localBuildThreshold")
    for how, secs in builds.items():
        if secs:
            report.timing("builds", f"date_dim WHERE d_year = 2000, {how}", secs)
    if builds["a Spark job"]:
        job = median(builds["a Spark job"]) - build_bytes / (rate * parallelism)
        report.headline("buildJobSeconds", job, "s", f"date_dim's {build_bytes:,} bytes at the scan rate taken off")
        report.extra["build_job_seconds"] = job

    # 4. the final query's making, where pruning applied and where not
    making: dict[str, list[float]] = {"applied": [], "not applied": []}
    for rep in range(reps + 1):
        for query in rotated([*APPLIED, *NOT_APPLIED], rep):
            lake.sql(query)
            explained = lake.last_explain
            if rep and explained is not None and "final_frame" in explained.planning:
                key = "applied" if any(d.applied for d in explained.dynamic) else "not applied"
                making[key].append(explained.planning["final_frame"])
    spark.conf.unset(f"{DFP}.costModel")
    for key, secs in making.items():
        if secs:
            report.timing("final query", key, secs)
    if making["applied"] and making["not applied"]:
        apply_s = median(making["applied"]) - median(making["not applied"])
        report.headline("applying (the final query made again)", apply_s, "s")
        report.extra["apply_seconds"] = apply_s
    _savings(spark, lake, report, reps, open_cost, parallelism, progress)
    report.check("the scan fit explains the times (R² >= 0.9)", r2 >= 0.9, f"R² {r2:.3f}")
    spark.stop()
    return finish(report, args)


def _savings(spark: Any, lake: Any, report: Report, reps: int, open_cost: int, parallelism: int,
             progress: Progress) -> None:
    from benchmarks.bench_dfp import query_texts
    texts = query_texts([str(q) for q in SAVINGS_QUERIES])
    bytes_kept_out, seconds_saved = 0, 0.0
    for name, text in texts.items():
        def run(on: bool, text: str = text) -> Any:
            spark.conf.set(DFP, "true" if on else "false")
            spark.conf.set(f"{DFP}.costModel", "false")
            try:
                lake.sql(text).collect()
                return lake.last_explain
            finally:
                spark.conf.unset(DFP)
                spark.conf.unset(f"{DFP}.costModel")
        explained: list[Any] = []
        samples = _alternate({"with": lambda: explained.append(run(True)), "without": lambda: run(False)}, reps)
        saved = median(samples["without"]) - median(samples["with"])
        kept_out = 0
        for r in explained[-1] or []:
            stages = {s.stage: s for s in r.stages}
            if "dynamic" in stages and "static" in stages:
                st, dy = stages["static"], stages["dynamic"]
                kept_out += (st.bytes - dy.bytes) + (st.files - dy.files) * open_cost
        report.timing("savings", f"q{name} with dynamic pruning", samples["with"],
                      f"{kept_out / 1e6:,.0f} MB kept out (files counted at openCostInBytes)")
        report.timing("savings", f"q{name} without", samples["without"])
        bytes_kept_out += kept_out
        seconds_saved += saved
        progress(f"q{name}: saved {saved:.3f} s, {kept_out / 1e6:,.0f} MB kept out of the scans")
    if seconds_saved > 0:
        rate = bytes_kept_out / seconds_saved / parallelism
        report.headline("scanBytesPerSecond, end to end (per task)", rate, "/s",
                        f"{len(texts)} TPC-DS queries at sf=1: {bytes_kept_out / 1e6:,.0f} MB kept out, "
                        f"{seconds_saved:.2f} s saved")
        report.extra["end_to_end_bytes_per_second"] = rate


def _alternate(cases: dict[Any, Any], reps: int) -> dict[Any, list[float]]:
    for fn in cases.values():
        fn()
    samples: dict[Any, list[float]] = {k: [] for k in cases}
    for rep in range(reps):
        for k in rotated(list(cases), rep):
            samples[k].append(timed(cases[k])[0])
    return samples


def _fit(points: list[tuple[int, int, float]], open_cost: int) -> tuple[float, float, float]:
    """Least squares of t = t0 + (bytes + files * open_cost) * b: (t0, b, R²)."""
    x = np.array([[1.0, b + f * open_cost] for f, b, _t in points])
    y = np.array([t for _f, _b, t in points])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    predicted = x @ coef
    r2 = 1 - float(((y - predicted) ** 2).sum()) / max(1e-12, float(((y - y.mean()) ** 2).sum()))
    return float(coef[0]), float(coef[1]), r2


if __name__ == "__main__":
    sys.exit(main())
