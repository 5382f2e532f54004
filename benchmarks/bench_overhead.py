"""Benchmark 11: lake.sql's planning overhead on the 99 TPC-DS queries (goal: median <= 30 ms).

What the goal measures: the time to build a query's DataFrame through
`lake.sql` against `spark.sql` over the same files, on warm views, excluding dynamic pruning's
build-side jobs. Nothing is collected: `spark.sql` parses and analyses the query, `lake.sql`
plans it (analysis pass, Spark's optimizer, static and dynamic pruning, the final query's
analysis). Three contenders per query, over the lake of benchmark 9 (--sf 1 and 64 store_sales
files by default, the scale the goal names):

  spark       spark.sql over each table's folder (the same files)
  static      lake.sql with dynamic file pruning switched off
  dynamic     lake.sql with dynamic file pruning, minus the wall time of its build sides
              (QueryExplain.build_seconds: they run concurrently)

Each query is built once per contender to warm up, then --reps times, the contenders taking
turns going first. Overhead = median(contender) - median(spark), per query. A second figure
also counts Spark's optimizer, run on each DataFrame right after it is built: `spark.sql`
leaves that to the first action, while `lake.sql` has already optimized its analysis pass (and,
when nothing was pruned, returns that very DataFrame, whose action then skips it). The goal is
on the first figure; the second is what `lake.sql` adds before a query runs.

    .venv/bin/python -m benchmarks.bench_overhead [--quick] [--sf N] [--files N] [--queries 3,7] [--reps N]
        [--json] [--out FILE] [--plot FILE]
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import Progress, Report, base_parser, command_line, finish, median, plot_path, rotated
from testing_support.tpcds_answers import spark_queries
from testing_support.tpcds_lake import add_lake_arguments, lake_scale

CONTENDERS = ("spark", "static", "dynamic")
DFP = "spark.skiplake.optimizer.dynamicFilePruning"


@dataclass
class Overhead:
    name: str
    seconds: dict[str, list[float]] = field(default_factory=dict)    # building, builds excluded
    optimized: dict[str, list[float]] = field(default_factory=dict)  # the same to an optimized plan
    builds: list[float] = field(default_factory=list)                # the dynamic runs' build wall times

    def over_spark(self, contender: str, optimized: bool = False) -> float:
        runs = self.optimized if optimized else self.seconds
        return median(runs[contender]) - median(runs["spark"])


def measure(spark: Any, lake: Any, name: str, text: str, plain: str, reps: int) -> Overhead:
    result = Overhead(name, {c: [] for c in CONTENDERS}, {c: [] for c in CONTENDERS})

    def once(contender: str) -> tuple[float, float, float]:
        builds = 0.0
        t0 = time.perf_counter()
        if contender == "spark":
            df = spark.sql(plain)
        else:
            spark.conf.set(DFP, "true" if contender == "dynamic" else "false")
            t0 = time.perf_counter()
            df = lake.sql(text)
            explained = lake.last_explain
            builds = explained.build_seconds if explained is not None else 0.0
        built = time.perf_counter() - t0
        df._jdf.queryExecution().optimizedPlan()
        return built, time.perf_counter() - t0, builds

    for rep in range(reps + 1):
        for contender in rotated(CONTENDERS, rep + sum(map(ord, name))):
            built, optimized, builds = once(contender)
            if rep == 0:
                continue  # the warm-up
            result.seconds[contender].append(built - builds)
            result.optimized[contender].append(optimized - builds)
            if contender == "dynamic":
                result.builds.append(builds)
    return result


def plot(results: list[Overhead], path: Path, sf: float) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ordered = sorted(results, key=lambda r: r.over_spark("dynamic"), reverse=True)
    fig, ax = plt.subplots(figsize=(16, 5))
    xs = range(len(ordered))
    ax.bar([x - 0.2 for x in xs], [1000 * r.over_spark("dynamic") for r in ordered], width=0.4,
           label="dynamic pruning on (build sides excluded)")
    ax.bar([x + 0.2 for x in xs], [1000 * r.over_spark("static") for r in ordered], width=0.4,
           label="dynamic pruning off")
    ax.axhline(30, color="red", linewidth=0.8, label="goal: median 30 ms")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r.name for r in ordered], rotation=90, fontsize=6)
    ax.set_ylabel("lake.sql - spark.sql, ms")
    ax.legend()
    fig.suptitle(f"skiplake lake.sql planning overhead per TPC-DS query at sf={sf:g} (DataFrame building, median of runs)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    add_lake_arguments(parser, sf=(1.0, 0.1), files=(64, 16), data_help="where the lake of benchmark 9 is kept")
    parser.add_argument("--queries", default=None, help="comma-separated query numbers (default all 99)")
    parser.add_argument("--plot", default=None, help="PNG of per-query overheads (default: beside --out, else "
                        "under the working-data folder)")
    args = parser.parse_args(argv)
    args.sf, args.files = lake_scale(args)
    reps = args.reps if args.reps is not None else (1 if args.quick else 5)
    progress = Progress("bench_overhead")
    from testing_support.paths import setup_java
    setup_java()
    import skiplake
    from skiplake.tpcds import TPCDS_TABLES
    from testing_support.query_tools import renamed
    from testing_support.tpcds_lake import build_lake
    spark = skiplake.local_spark(app_name="bench-overhead", shuffle_partitions=8, driver_memory="4g")
    root = build_lake(spark, Path(args.data), args.sf, args.files, progress=progress)
    for t in TPCDS_TABLES:
        spark.read.parquet(str(root / t)).createOrReplaceTempView(f"p_{t}")
    lake = skiplake.Lake(spark, str(root))
    numbers = [int(q) for q in args.queries.split(",")] if args.queries else list(range(1, 100))
    if args.quick and not args.queries:
        numbers = numbers[:10]
    results = []
    for n, text in spark_queries(numbers).items():
        r = measure(spark, lake, f"q{n}", text, renamed(text, "p_", set(TPCDS_TABLES)), reps)
        results.append(r)
        progress(f"{r.name:>4s} spark {1000 * median(r.seconds['spark']):6.1f} ms  overhead: static "
                 f"{1000 * r.over_spark('static'):6.1f} ms, dynamic {1000 * r.over_spark('dynamic'):6.1f} ms "
                 f"(builds {1000 * median(r.builds):.0f} ms); to an optimized plan: static "
                 f"{1000 * r.over_spark('static', True):6.1f} ms, dynamic {1000 * r.over_spark('dynamic', True):6.1f} ms")

    report = Report("bench_overhead", f"lake.sql planning overhead on {len(results)} TPC-DS queries, sf={args.sf:g}",
                    command_line("bench_overhead", args, [f"--sf {args.sf:g}", f"--files {args.files}"] +
                                 ([f"--queries {args.queries}"] if args.queries else [])),
                    {"sf": args.sf, "store_sales_files": args.files, "reps": reps, "queries": len(results)})
    for contender in CONTENDERS:
        report.timing("median over queries", f"{contender}: DataFrame building",
                      [median(r.seconds[contender]) for r in results],
                      "build sides excluded" if contender == "dynamic" else "")
    for optimized in (False, True):
        for contender in ("static", "dynamic"):
            overheads = [r.over_spark(contender, optimized) for r in results]
            worst = max(results, key=lambda r: r.over_spark(contender, optimized))
            report.timing("overhead, to an optimized plan" if optimized else "overhead (building)",
                          f"{contender} - spark", overheads, f"worst: {worst.name}")
    dynamic = sorted(r.over_spark("dynamic") for r in results)
    p90 = dynamic[int(0.9 * (len(dynamic) - 1))]
    report.goal("median planning overhead, dynamic pruning on, build sides excluded", median(dynamic), 0.03,
                note=f"p90 {1000 * p90:.0f} ms over {len(dynamic)} queries")
    worst = max(results, key=lambda r: r.over_spark("dynamic"))
    report.headline("median overhead, dynamic pruning on", median(dynamic),
                    note=f"p90 {1000 * p90:.0f} ms, worst {worst.name} {worst.over_spark('dynamic'):.2f} s; "
                    f"off: {1000 * median([r.over_spark('static') for r in results]):.1f} ms; spark.sql building "
                    f"{1000 * median([median(r.seconds['spark']) for r in results]):.1f} ms")
    chart = plot_path(args, f"bench_overhead_sf{args.sf:g}.png")
    plot(results, chart, args.sf)
    report.extra["plot"] = str(chart)
    report.extra["queries"] = [asdict(r) for r in results]
    return finish(report, args)


if __name__ == "__main__":
    raise SystemExit(main())
