"""Benchmark 14: the fact layout decides which star joins dynamic pruning beats Spark's DPP on.

Benchmark 9 clusters store_sales by (date key, item key) with Z-order, so both an item filter
(the item star join) and a date filter prune files; but a file then spans about 1/32 of the dates, and
Spark's dynamic partition pruning over a copy partitioned by day read fewer rows for the date
filters that pick scattered days (q68: days 1-2 of every month of three years). This benchmark
lays the same rows out a second way, date-major (Z-order by the date key alone: each file holds
about two days, rows sorted by item key in the same small pages), and measures both layouts on
the item star join and on the store_sales queries where DPP led benchmark 9 most. Contenders, for
each layout over that layout's very files: plain Spark (`spark`) and lake.sql with dynamic
pruning (`dynamic`); and Spark's DPP on the day-partitioned copy (`spark_dpp`, one for both).

Each query runs once per contender to warm up, then --reps timed runs, contenders taking turns.
The date-major table is built next to benchmark 9's lake (its other tables linked, not copied).

    .venv/bin/python -m benchmarks.bench_dfp_layout [--sf N] [--files N] [--queries item-join,68,...] [--reps N]
        [--json] [--out FILE]
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

from benchmarks.bench_dfp import ITEM_JOIN_NAME, query_texts, race
from benchmarks.common import Progress, Report, base_parser, command_line, finish, median
from testing_support.query_tools import renamed
from testing_support.tpcds_lake import PAGE_ROWS, add_lake_arguments, build_lake, lake_scale, partitioned_root

LAYOUTS = ("zorder", "datemajor")
# The item star join (item filter) and the store_sales-only queries of benchmark 9 where Spark's
# DPP was fastest against dynamic pruning (68, 79, 73, 34, 46, 3, 52, 55, 98: 0.18x-0.52x).
DEFAULT_QUERIES = f"{ITEM_JOIN_NAME},68,79,73,34,46,3,52,55,98"


def build_datemajor(spark: Any, lake: Path, progress: Callable[[str], None]) -> Path:
    """A lake like `lake` whose store_sales is Z-ordered by its date key alone (date-major)."""
    import skiplake
    root = lake.parent / (lake.name + "-datemajor")
    marker = root / "_datemajor.json"
    source = skiplake.Table.open(spark, str(lake / "store_sales"))
    if marker.exists() and json.loads(marker.read_text()).get("from_version") == source.version:
        progress(f"reusing the date-major lake {root}")
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for child in lake.iterdir():
        if child.is_dir() and child.name != "store_sales":
            os.symlink(child, root / child.name)
    snap = source.snapshot
    t = skiplake.Table.create(spark, str(root / "store_sales"), source.schema)
    t.append(source.read())
    t.optimize(zorder_by=["ss_sold_date_sk"], target_file_size=snap.size_bytes // snap.num_files,
               sort_within=["ss_item_sk"], page_rows=PAGE_ROWS, progress=progress)
    t.vacuum(retention_hours=0, force=True)
    marker.write_text(json.dumps({"from_version": source.version, "files": t.refresh().snapshot.num_files}))
    progress(f"date-major store_sales: {t.snapshot.num_files} files")
    return root


def build_store_sales_by_date(spark: Any, base: Path, sf: float, lake: Path, progress: Callable[[str], None]) -> Path:
    """store_sales as Parquet partitioned by its date key (benchmark 9's copy, this table only)."""
    root = partitioned_root(base, sf)
    target = root / "store_sales"
    done = target / "_SUCCESS"
    if not done.exists():
        shutil.rmtree(target, ignore_errors=True)
        df = spark.read.parquet(str(lake / "store_sales"))
        df.repartition("ss_sold_date_sk").write.partitionBy("ss_sold_date_sk").parquet(str(target))
        progress("store_sales: partitioned by ss_sold_date_sk")
    return root


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    add_lake_arguments(parser, sf=(10.0, 1.0), files=(1024, 64), data_help="where benchmark 9's data is kept")
    parser.add_argument("--queries", default=DEFAULT_QUERIES,
                        help=f"comma-separated query numbers and/or {ITEM_JOIN_NAME} (default %(default)s)")
    args = parser.parse_args(argv)
    sf, files = lake_scale(args)
    reps = args.reps if args.reps is not None else 3
    progress = Progress("bench_dfp_layout")
    from testing_support.paths import setup_java
    setup_java()
    import skiplake
    from skiplake.tpcds import TPCDS_TABLES
    spark = skiplake.local_spark(app_name="bench-dfp-layout", shuffle_partitions=8, driver_memory="8g")
    base = Path(args.data)
    roots = {"zorder": build_lake(spark, base, sf, files, progress=progress)}
    roots["datemajor"] = build_datemajor(spark, roots["zorder"], progress)
    by_date = build_store_sales_by_date(spark, base, sf, roots["zorder"], progress)
    tables = set(TPCDS_TABLES)
    schema = spark.read.parquet(str(roots["zorder"] / "store_sales")).schema
    for t in TPCDS_TABLES:
        for layout, root in roots.items():
            spark.read.parquet(str(root / t)).createOrReplaceTempView(f"{layout}_{t}")
        copy = spark.read.schema(schema).parquet(str(by_date / t)) if t == "store_sales" else spark.table(f"zorder_{t}")
        copy.createOrReplaceTempView(f"dpp_{t}")
    lakes = {layout: skiplake.Lake(spark, str(root)) for layout, root in roots.items()}
    texts = query_texts(args.queries.split(","))
    report = Report("bench_dfp_layout", f"The fact layout against Spark's DPP: store_sales Z-ordered by date and "
                    f"item or date-major, TPC-DS sf={sf:g}",
                    command_line("bench_dfp_layout", args,
                                 [f"--sf {sf:g}", f"--files {files}", f"--queries {args.queries}"]),
                    {"sf": sf, "store_sales_files": files, "reps": reps, "queries": len(texts)})
    contenders = [f"{layout}:{c}" for layout in LAYOUTS for c in ("spark", "dynamic")] + ["spark_dpp"]
    results: dict[str, dict[str, Any]] = {}
    for name, text in texts.items():
        sql = {c: renamed(text, c.split(":")[0] + "_" if c != "spark_dpp" else "dpp_", tables)
               for c in contenders if not c.endswith("dynamic")}
        ran = race({c: (lambda c=c: lakes[c.split(":")[0]].sql(text) if c.endswith("dynamic") else spark.sql(sql[c]))
                    for c in contenders}, reps)
        times, answers, reads = ran.times, ran.answers, ran.reads
        same = all(a == answers[contenders[0]] for a in answers.values())
        report.check(f"{name}: same answer from every contender", same)
        med = {c: median(v) for c, v in times.items()}
        results[name] = {"seconds": times, "median": med, "reads": reads}
        for c in contenders:
            report.timing(name, c, times[c], f"files {reads[c][0]:,}, rows {reads[c][2]:,}")
        progress(f"{name:>4s} " + "  ".join(f"{c} {med[c]:.2f}s" for c in contenders))
    for layout in LAYOUTS:
        dyn = f"{layout}:dynamic"
        if ITEM_JOIN_NAME in results:
            item = results[ITEM_JOIN_NAME]["median"]
            report.ratio(f"{layout}: item star join, plain Spark / dynamic", item[f"{layout}:spark"] / item[dyn])
            report.headline(f"{layout}: item star join, plain Spark / dynamic", item[f"{layout}:spark"] / item[dyn],
                            "x", f"dynamic {item[dyn]:.2f} s, plain Spark {item[f'{layout}:spark']:.2f} s")
        dated = [n for n in results if n != ITEM_JOIN_NAME]
        if dated:
            won = sum(1 for n in dated if results[n]["median"][dyn] <= results[n]["median"]["spark_dpp"])
            total = sum(results[n]["median"][dyn] for n in dated) / sum(results[n]["median"]["spark_dpp"] for n in dated)
            report.goal(f"{layout}: date-filtered queries at least as fast as DPP", won, len(dated), unit="n",
                        at_least=True, note=f"of {len(dated)}")
            report.ratio(f"{layout}: date-filtered total, dynamic / DPP", total)
            report.headline(f"{layout}: the {len(dated)} date-filtered queries, dynamic / DPP (total)", total, "x",
                            f"dynamic at least as fast on {won} of {len(dated)}")
    report.extra["by_query"] = results  # (not "queries": render_md reads that as benchmark 9's list)
    return finish(report, args)


if __name__ == "__main__":
    raise SystemExit(main())
