"""Benchmark 17: build keys as a row filter on files not clustered by the key, on and off.

Dynamic pruning used to leave a probe alone when its files are not clustered by the join key (a
key value falls in most of its files, so no file can be skipped). Now, when the build is read in
the driver and gives at most 10 keys, they filter the probe's rows above its scan, before the
joins (`spark.skiplake.optimizer.dynamicFilePruning.unclusteredRowFilter`, default true). This
measures what that buys and costs, with the setting on and off in one process:

  1. Over benchmark 9's lake (store_sales Z-ordered by date and item keys), every query of the
     100 (the item star join and the 99) where the filter applies, found by lake.explain.
  2. Over benchmark 14's date-major store_sales (files of about two days, rows sorted by item),
     the item star join: item keys do not cluster those files, so its keys become a row filter there.

With --quick (sf=0.1) the size thresholds are lowered so that the small tables qualify.
Each query runs once per setting to warm up, then --reps times, the settings taking turns going
first; the answers must be equal (a check). Rows are what the file scans returned.

    .venv/bin/python -m benchmarks.bench_row_filter [--quick] [--sf N] [--files N] [--reps N] [--json] [--out FILE]
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from benchmarks.common import Progress, Report, alternate, base_parser, command_line, finish, median
from testing_support.tpcds_lake import add_lake_arguments, lake_scale

SETTINGS = ("on", "off")


def row_filters(lake: Any, text: str) -> list[str]:
    """The filters some scan of the query takes as a row filter only (none: it does not apply)."""
    return sorted({f for r in lake.explain(text) for f in r.dynamic_filters if f.endswith("on rows only")})


def measure(spark: Any, lake: Any, text: str, reps: int) -> dict[str, Any]:
    from skiplake.spark.pruning.pruning_settings import UNCLUSTERED_ROW_FILTER
    from testing_support.query_tools import scan_metrics
    from testing_support.tpcds_answers import canonical
    rows: dict[str, int] = {}
    answers: dict[str, Any] = {}

    def run(setting: str) -> Callable[[], Any]:
        def once() -> Any:
            spark.conf.set(UNCLUSTERED_ROW_FILTER, "true" if setting == "on" else "false")
            df = lake.sql(text)
            return df, df.collect()
        return once

    def seen(setting: str, out: Any) -> None:
        rows[setting] = scan_metrics(out[0])[2]
        answers[setting] = canonical(out[1])

    seconds = alternate({s: run(s) for s in SETTINGS}, reps, seen)
    spark.conf.unset(UNCLUSTERED_ROW_FILTER)
    return {"seconds": seconds, "rows": rows, "same": answers["on"] == answers["off"]}


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    add_lake_arguments(parser, sf=(10.0, 0.1), files=(1024, 16), data_help="where the lake of benchmark 9 is kept")
    parser.add_argument("--queries", default=None,
                        help="comma-separated query numbers and/or item-join (default: every query where it applies)")
    args = parser.parse_args(argv)
    args.sf, args.files = lake_scale(args)
    reps = args.reps if args.reps is not None else (1 if args.quick else 3)
    progress = Progress("bench_row_filter")
    from testing_support.paths import setup_java
    setup_java()
    import skiplake
    from benchmarks.bench_dfp import ITEM_JOIN, ITEM_JOIN_NAME, query_texts
    from benchmarks.bench_dfp_layout import build_datemajor
    from testing_support.tpcds_lake import build_lake
    spark = skiplake.local_spark(app_name="bench-row-filter", shuffle_partitions=8, driver_memory="4g")
    root = build_lake(spark, Path(args.data), args.sf, args.files, progress=progress)
    datemajor = build_datemajor(spark, root, progress)
    lake, by_date = skiplake.Lake(spark, str(root)), skiplake.Lake(spark, str(datemajor))
    if args.quick:  # the small lake's tables are under the default size thresholds
        from skiplake.spark.pruning.pruning_settings import FILES_THRESHOLD, SIZE_THRESHOLD
        spark.conf.set(SIZE_THRESHOLD, "0")
        spark.conf.set(FILES_THRESHOLD, "2")
    texts = query_texts(args.queries.split(",") if args.queries else [ITEM_JOIN_NAME] + list(map(str, range(1, 100))))
    cases = [(f"{name if name == ITEM_JOIN_NAME else 'q' + name} (Z-order)", lake, text, filters)
             for name, text in texts.items() if (filters := row_filters(lake, text))]
    progress(f"the row filter applies to {len(cases)} of {len(texts)} queries over the Z-ordered lake")
    if filters := row_filters(by_date, ITEM_JOIN):
        cases.append((f"{ITEM_JOIN_NAME} (date-major)", by_date, ITEM_JOIN, filters))
    report = Report("bench_row_filter",
                    f"Build keys as a row filter on unclustered files, on and off, TPC-DS sf={args.sf:g}",
                    command_line("bench_row_filter", args, [f"--sf {args.sf:g}", f"--files {args.files}"] +
                                 ([f"--queries {args.queries}"] if args.queries else [])),
                    {"sf": args.sf, "store_sales_files": args.files, "reps": reps, "queries": len(cases)})
    results = []
    for label, on_lake, text, filters in cases:
        r = {"name": label, **measure(spark, on_lake, text, reps), "filters": filters}
        results.append(r)
        on, off = median(r["seconds"]["on"]), median(r["seconds"]["off"])
        progress(f"{label}: on {on:.2f} s, off {off:.2f} s ({off / on:.2f}x); {'; '.join(r['filters'])}")
        for setting in SETTINGS:
            report.timing(label, setting, r["seconds"][setting], "; ".join(r["filters"]) if setting == "on" else "")
        report.ratio(f"{label}: off / on", off / on)
        report.check(f"{label}: the same answer", r["same"])
    total_on = sum(median(r["seconds"]["on"]) for r in results)
    total_off = sum(median(r["seconds"]["off"]) for r in results)
    if results:
        report.ratio("total, off / on", total_off / total_on, f"{total_off:.1f} s against {total_on:.1f} s")
        best = max(results, key=lambda r: median(r["seconds"]["off"]) / median(r["seconds"]["on"]))
        worst = min(results, key=lambda r: median(r["seconds"]["off"]) / median(r["seconds"]["on"]))
        report.headline(f"the {len(results)} queries where it applies, off / on (total)", total_off / total_on, "x",
                        f"on {total_on:.1f} s, off {total_off:.1f} s")
        for label, r in (("fastest", best), ("slowest", worst)):
            report.headline(f"{label}: {r['name']}, off / on", median(r["seconds"]["off"]) / median(r["seconds"]["on"]),
                            "x", f"on {median(r['seconds']['on']):.2f} s, off {median(r['seconds']['off']):.2f} s")
    report.extra["queries"] = results
    return finish(report, args)


if __name__ == "__main__":
    raise SystemExit(main())
