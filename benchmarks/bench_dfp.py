"""Benchmark 9: dynamic file pruning on TPC-DS, all 99 queries and the item star join.

TPC-DS at --sf (default 10; --quick: 1, and only the item star join and queries 1-10) from
DuckDB's dsdgen, as a skiplake lake whose fact tables are Z-ordered by (date key, item key) into
files of one size (store_sales in --files files), each file's rows sorted by item key in small
Parquet pages (testing_support.tpcds_lake). Four contenders, the first three over the very same files:

  spark       plain Spark SQL over each table's folder (which holds exactly its live files)
  static      lake.sql with dynamic file pruning switched off (literal predicates only)
  dynamic     lake.sql with dynamic file pruning (the default)
  spark_dpp   the fact tables as Parquet partitioned by their date key, read by plain Spark with
              its own dynamic partition pruning (dimensions as for `spark`)
  delta_spark delta-spark 4.4 reading the lake's own Delta tables (as delta.`path`) in a JVM of
              its own with the same settings (only with --contenders naming it: it is 2-6x
              plain Spark's time); each statement is timed inside that JVM

Each query runs once per contender to warm up (Spark compiles a plan's code on its first run),
then --reps timed runs, the contenders taking turns going first: every ratio is between runs of
one query minutes apart. Each query's result is appended to a journal under --data as soon as it
is measured, and a later run with the same scale, files and layout picks up where the last one
stopped (--fresh measures the selected queries again; --journal NAME keeps a journal of its own,
for a measurement of other code): all 99 queries at sf=10 take hours on two cores. Every answer
is compared with the others. Per query and contender: wall time (building the DataFrame plus collecting it), and
the files, bytes and rows the scans read (their metrics in the executed plan); for `dynamic`, the
seconds its build sides took and its planning overhead (lake.sql's DataFrame building, build
sides excluded, minus spark.sql's).

The item star join (`item-join` in --queries; TPC-DS's own query 2 is `2`) sums store_sales's
quantity for one item id: a star join whose only filter is on the item dimension.

    .venv/bin/python -m benchmarks.bench_dfp [--quick] [--sf N] [--files N] [--queries 2,3,item-join] [--reps N]
        [--fresh] [--journal NAME] [--contenders spark,dynamic,...] [--json] [--out FILE] [--plot FILE]
"""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from benchmarks.common import Progress, Report, base_parser, command_line, finish, median, plot_path, rotated
from skiplake.errors import InvalidArgumentError
from testing_support.query_tools import renamed, scan_metrics
from testing_support.tpcds_answers import FACTS, canonical, spark_queries
from testing_support.tpcds_lake import FACT_KEYS, LAYOUT_VERSION, add_lake_arguments, lake_scale

CONTENDERS = ("spark", "static", "dynamic", "spark_dpp", "delta_spark")
DEFAULT_CONTENDERS = ("spark", "static", "dynamic", "spark_dpp")
ITEM_JOIN_NAME = "item-join"
ITEM_JOIN = ("SELECT sum(ss_quantity) AS total_quantity FROM store_sales JOIN item ON ss_item_sk = i_item_sk "
           "WHERE i_item_id = 'AAAAAAAAICAAAAAA'")
DFP = "spark.skiplake.optimizer.dynamicFilePruning"


@dataclass
class Run:
    seconds: list[float] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    rows: int = 0

    @property
    def median(self) -> float:
        return median(self.seconds)


@dataclass
class QueryResult:
    name: str
    runs: dict[str, Run] = field(default_factory=dict)
    same: bool = True
    builds_s: float = 0.0               # wall time of the dynamic contender's build sides
    planning_overhead_s: float | None = None
    applied: int = 0                    # joins dynamic pruning applied to
    fact_dim: bool = False              # a fact table joined to a filtered dimension
    date_filtered: bool = False         # ... and the filter (or one of them) is on date_dim
    fact_rows: dict[str, list[int]] = field(default_factory=dict)  # fact -> [rows read, rows] (dynamic)

    def ratio(self, a: str, b: str) -> float:
        return self.runs[a].median / self.runs[b].median

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "QueryResult":
        runs = {c: Run(**r) for c, r in d.pop("runs").items()}
        return QueryResult(runs=runs, **d)


def load_journal(path: Path) -> dict[str, QueryResult]:
    """The queries an earlier run already measured (the last line of each wins)."""
    done: dict[str, QueryResult] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                r = QueryResult.from_dict(json.loads(line))
            except (ValueError, TypeError):  # blank, or cut short by a run that was stopped
                continue
            done[r.name] = r
    return done


def _last_byte(path: Path) -> bytes:
    with path.open("rb") as f:
        f.seek(-1, 2)
        return f.read(1)


@dataclass
class Race:
    """Each contender's timed runs of one query, its answer, and what its last run read."""
    times: dict[str, list[float]]
    answers: dict[str, list[tuple]]
    reads: dict[str, tuple[int, int, int]]


def race(queries: dict[str, Callable[[], Any]], reps: int) -> Race:
    """Each contender's query (a function giving its DataFrame) run once untimed, its answer kept,
    then `reps` times timed (the DataFrame built and collected), contenders taking turns going first."""
    out = Race({c: [] for c in queries}, {}, {})
    for rep in range(reps + 1):
        for c in rotated(list(queries), rep):
            t0 = time.perf_counter()
            df = queries[c]()
            rows = df.collect()
            seconds = time.perf_counter() - t0
            if rep == 0:
                out.answers[c] = canonical(rows)
                continue
            out.times[c].append(seconds)
            out.reads[c] = scan_metrics(df)
    return out


def _texts(rows: Any) -> list[list[str]]:
    """Rows as delta-spark's runner sends them: each value as Python's str of it."""
    return [[str(v) for v in r] for r in rows]


def _numbers(rows: list[list[str]]) -> list[tuple]:
    """Text rows with their numbers as numbers, so that canonical() rounds them alike."""
    def value(v: str) -> Any:
        try:
            return float(v) if any(ch in v for ch in ".eE") else v
        except ValueError:
            return v
    return [tuple(value(v) for v in r) for r in rows]


def _classify(result: QueryResult, explained: Any) -> None:
    """Which class a query is in, from the dynamic contender's report of its joins."""
    for d in explained.dynamic:
        probe_fact = any(f in d.probe for f in FACTS)
        selective = "no selective filter" not in d.reason
        if probe_fact and (d.applied or selective):
            result.fact_dim = True
            if "date_dim" in d.build and "WHERE" in d.build:
                result.date_filtered = True
    result.fact_rows = {}  # each timed run plans alike: its last run's
    for r in explained:
        name = r.table.rstrip("/").rsplit("/", 1)[-1]
        if name in FACTS and r.rows_total is not None and r.rows_selected is not None:
            read, total = result.fact_rows.get(name, [0, 0])
            result.fact_rows[name] = [read + r.rows_selected, total + r.rows_total]


def run_query(spark: Any, lake: Any, name: str, text: str, tables: set[str], reps: int,
              progress: Callable[[str], None], contenders: tuple[str, ...] = DEFAULT_CONTENDERS,
              delta: Any = None) -> QueryResult:
    plain, dpp = renamed(text, "p_", tables), renamed(text, "d_", tables)
    result = QueryResult(name)
    answers: dict[str, Any] = {}

    def once(contender: str) -> tuple[float, float, Any, Any]:
        if contender == "delta_spark":
            reply = delta.sql(renamed(text, "", tables, lambda t: f"delta.`{lake.root}/{t}`"))
            return reply["seconds"], 0.0, None, reply["rows"]
        spark.conf.set(DFP, "false" if contender == "static" else "true")
        t0 = time.perf_counter()
        df = {"spark": lambda: spark.sql(plain), "spark_dpp": lambda: spark.sql(dpp)}.get(
            contender, lambda: lake.sql(text))()
        built = time.perf_counter() - t0
        rows = df.collect()
        return time.perf_counter() - t0, built, df, rows

    planning: dict[str, list[float]] = {"spark": [], "dynamic": []}
    for rep in range(reps + 1):
        for contender in rotated(contenders, rep + hash(name) % len(contenders)):
            seconds, built, df, rows = once(contender)
            if rep == 0:
                # The warm-up: not timed, but checked (delta-spark's rows come as text).
                answers[contender] = canonical(_numbers(_texts(rows) if df is not None else rows))
                continue
            run = result.runs.setdefault(contender, Run())
            run.seconds.append(seconds)
            if df is not None:
                run.files, run.bytes, run.rows = scan_metrics(df)
            if contender in planning:
                planning[contender].append(built)
            if contender == "dynamic":
                explained = lake.last_explain
                # Wall time of the build sides: distinct builds run concurrently.
                result.builds_s = explained.build_seconds
                result.applied = sum(d.joins for d in explained.dynamic if d.applied)
                planning["dynamic"][-1] -= result.builds_s
                _classify(result, explained)
    result.same = all(a == answers["spark"] for a in answers.values())
    result.planning_overhead_s = median(planning["dynamic"]) - median(planning["spark"])
    progress(_line(result))
    return result


def _line(r: QueryResult) -> str:
    times = " ".join(f"{c} {r.runs[c].median:6.2f}s" for c in CONTENDERS if c in r.runs)
    files = f"files {r.runs['spark'].files}->{r.runs['dynamic'].files}"
    dpp = f", x{r.ratio('spark_dpp', 'dynamic'):5.2f} vs dpp" if "spark_dpp" in r.runs else ""
    return (f"{r.name:>5s} {times}  x{r.ratio('spark', 'dynamic'):5.2f} vs spark{dpp}  {files} builds {r.builds_s:.2f}s overhead {1000 * (r.planning_overhead_s or 0):.0f}ms"
            f"{'' if r.same else '  ANSWERS DIFFER'}")


def register_views(spark: Any, lake_root: Path, by_date: Path | None, tables: list[str]) -> None:
    for t in tables:
        plain = spark.read.parquet(str(lake_root / t))
        plain.createOrReplaceTempView(f"p_{t}")
        if by_date is None:
            continue
        # The table's own schema: the session infers no partition column types, and a date key
        # read back as a string breaks arithmetic on it (q50: sr_returned_date_sk - ss_sold_date_sk).
        copy = spark.read.schema(plain.schema).parquet(str(by_date / t)) if t in FACT_KEYS else plain
        copy.createOrReplaceTempView(f"d_{t}")


def plot(results: list[QueryResult], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ordered = sorted(results, key=lambda r: r.ratio("spark", "dynamic"), reverse=True)
    panels = [("spark", "plain Spark, same files")] + (
        [("spark_dpp", "Spark DPP, fact tables partitioned by date")] if _measured(results, "spark_dpp") else []) + (
        [("delta_spark", "delta-spark 4.4, same tables")] if _measured(results, "delta_spark") else [])
    fig, axes = plt.subplots(len(panels), 1, figsize=(16, 4 * len(panels)), sharex=True, squeeze=False)
    axes = axes[:, 0]
    names = [r.name for r in ordered]
    for ax, (other, title) in zip(axes, panels):
        values = [r.ratio(other, "dynamic") for r in ordered]
        colors = ["tab:green" if v >= 2 else "tab:blue" if v >= 1 else "tab:red" for v in values]
        ax.bar(range(len(values)), values, color=colors)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_ylabel(f"speedup over\n{title}")
    axes[-1].set_xticks(range(len(names)))
    axes[-1].set_xticklabels(names, rotation=90, fontsize=6)
    fig.suptitle("skiplake dynamic file pruning: per-query speedup (time of the other / time of lake.sql), "
                 "green >= 2x, red < 1x")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    add_lake_arguments(parser, sf=(10.0, 1.0), files=(1024, 64), data_help="where data, lake and copies are kept")
    parser.add_argument("--queries", default=None,
                        help=f"comma-separated: query numbers and/or {ITEM_JOIN_NAME} (default all)")
    parser.add_argument("--plot", default=None, help="PNG of per-query speedups (default benchmarks/results/)")
    parser.add_argument("--fresh", action="store_true", help="measure the selected queries again (their journal entries are superseded)")
    parser.add_argument("--contenders", default=",".join(DEFAULT_CONTENDERS),
                        help="comma-separated subset of the contenders, spark and dynamic always among them "
                             f"({','.join(CONTENDERS)}; default {','.join(DEFAULT_CONTENDERS)})")
    parser.add_argument("--journal", default="", help="a name for a journal of its own (e.g. the code measured): "
                        "a run with the same name continues it")
    args = parser.parse_args(argv)
    sf, files = lake_scale(args)
    reps = args.reps if args.reps is not None else 1
    contenders = tuple(c for c in CONTENDERS if c in args.contenders.split(","))
    if "spark" not in contenders or "dynamic" not in contenders or set(args.contenders.split(",")) - set(CONTENDERS):
        parser.error(f"--contenders: a subset of {','.join(CONTENDERS)} with spark and dynamic among them")
    progress = Progress("bench_dfp")
    from testing_support.paths import setup_java
    setup_java()
    import skiplake
    from skiplake.tpcds import TPCDS_TABLES
    from testing_support.tpcds_lake import build_lake, build_partitioned
    delta = None
    if "delta_spark" in contenders:  # its JVM starts while the lake is built or opened
        from benchmarks.delta_runner import DeltaRunner
        delta = DeltaRunner(8, progress, "8g")
    spark = skiplake.local_spark(app_name="bench-dfp", shuffle_partitions=8, driver_memory="8g")
    base = Path(args.data)
    root = build_lake(spark, base, sf, files, progress=progress)
    by_date = build_partitioned(spark, base, sf, root, progress=progress) if "spark_dpp" in contenders else None
    register_views(spark, root, by_date, list(TPCDS_TABLES))
    lake = skiplake.Lake(spark, str(root))
    every = [ITEM_JOIN_NAME] + [str(n) for n in range(1, 11 if args.quick else 100)]
    texts = query_texts(args.queries.split(",") if args.queries else every)
    tables = set(TPCDS_TABLES)
    tag = f"-{args.journal}" if args.journal else ""
    journal = base / f"bench_dfp-sf{sf:g}-{files}-v{LAYOUT_VERSION}-reps{reps}{tag}.jsonl"
    done = load_journal(journal)
    if journal.exists() and journal.stat().st_size and _last_byte(journal) != b"\n":
        with journal.open("a") as out:  # a line cut short by a stopped run: start a new one
            out.write("\n")
    if args.fresh:
        for name in texts:
            done.pop(name, None)
    if done:
        progress(f"{sum(1 for n in texts if n in done)} of {len(texts)} queries already measured in {journal}")
    results = []
    for name in texts:
        if name not in done:
            done[name] = run_query(spark, lake, name, texts[name], tables, reps, progress, contenders, delta)
            with journal.open("a") as out:
                out.write(json.dumps(asdict(done[name])) + "\n")
        results.append(done[name])

    report = Report("bench_dfp", f"Dynamic file pruning on TPC-DS sf={sf:g}: "
                    + ("the item star join and the 99 queries" if len(results) == 100 else f"{len(results)} queries"),
                    command_line("bench_dfp", args, [f"--sf {sf:g}", f"--files {files}"] +
                                 ([f"--queries {args.queries}"] if args.queries else []) +
                                 ([f"--journal {args.journal}"] if args.journal else []) +
                                 ([f"--contenders {','.join(contenders)}"] if contenders != DEFAULT_CONTENDERS else [])),
                    {"sf": sf, "store_sales_files": files, "reps": reps, "queries": len(results),
                     "journal": str(journal)})
    item = next((r for r in results if r.name == ITEM_JOIN_NAME), None)
    literal = literal_keys_rows(spark, lake) if item is not None else None
    evaluate(report, results, sf, literal)
    # A run of some queries does not overwrite the plot of all of them unless told to.
    chart = plot_path(args, "bench_dfp_quick.png" if args.quick else "bench_dfp_some.png" if args.queries
                      else "bench_dfp.png")
    plot(results, chart)
    report.extra["plot"] = str(chart)
    report.extra["queries"] = [asdict(r) for r in results]
    progress(f"plot: {chart}")
    if delta is not None:
        report.extra["delta"] = delta.info
        delta.close()
    return finish(report, args)


def literal_keys_rows(spark: Any, lake: Any) -> tuple[str, int, int]:
    """The item star join with its keys given as literals (the same sum over store_sales WHERE
    ss_item_sk IN (the item keys of that item id)): (its text, the store_sales rows its planned
    files hold, all store_sales rows), from `lake.explain`."""
    where = ITEM_JOIN.split(" WHERE ", 1)[1]
    keys = sorted(r[0] for r in spark.sql(f"SELECT i_item_sk FROM p_item WHERE {where}").collect())
    text = f"SELECT sum(ss_quantity) AS total_quantity FROM store_sales WHERE ss_item_sk IN ({', '.join(map(str, keys))})"
    [report] = [r for r in lake.explain(text) if r.table.rstrip("/").endswith("store_sales")]
    return text, int(report.rows_selected), int(report.rows_total)


def query_texts(wanted: list[str]) -> dict[str, str]:
    """Query name -> Spark SQL text: the item star join by its name, TPC-DS queries by number."""
    unknown = [w for w in wanted if w != ITEM_JOIN_NAME and not (w.isdigit() and 1 <= int(w) <= 99)]
    if unknown:
        raise InvalidArgumentError(f"unknown queries {unknown}: name TPC-DS queries by number (1-99) and the item "
                                   f"star join {ITEM_JOIN_NAME}, e.g. --queries {ITEM_JOIN_NAME},3,42")
    texts = {ITEM_JOIN_NAME: ITEM_JOIN} if ITEM_JOIN_NAME in wanted else {}
    numbers = [int(w) for w in wanted if w != ITEM_JOIN_NAME]
    if numbers:  # (an empty list would ask spark_queries for all 99)
        texts.update({str(n): t for n, t in spark_queries(numbers).items()})
    return texts


def _label(name: str) -> str:
    """How the text names a query: `q25`, or the item star join's name."""
    return name if name == ITEM_JOIN_NAME else f"q{name}"


def _measured(results: list[QueryResult], contender: str) -> bool:
    return bool(results) and all(contender in r.runs for r in results)


def evaluate(report: Report, results: list[QueryResult], sf: float = 10.0,
             literal: tuple[str, int, int] | None = None) -> None:
    """The goals, as ratios in this one run (lake.sql's total at most 0.9x plain Spark's at sf=1,
    0.6x at sf=10: the larger the data, the more pruning saves against its fixed costs).
    `literal` is literal_keys_rows's answer: the item star join's keys as literals."""
    for r in results:
        report.check(f"{r.name}: same answer from every contender", r.same)
    fd = [r for r in results if r.fact_dim and r.name != ITEM_JOIN_NAME]
    fast = [r for r in fd if r.ratio("spark", "dynamic") >= 2]
    if fd:
        report.goal("queries joining a fact table to a filtered dimension >= 2x faster than plain Spark",
                    len(fast) / len(fd), 1 / 3, unit="%", at_least=True, note=f"{len(fast)} of {len(fd)}")
        report.headline("fact-dimension queries >= 2x faster than plain Spark", len(fast) / len(fd), "%",
                        f"{len(fast)} of {len(fd)}")
    best = max(results, key=lambda r: r.ratio("spark", "dynamic"))
    report.goal("fastest query vs plain Spark", best.ratio("spark", "dynamic"), 8, unit="x", at_least=True,
                note=best.name)
    report.headline("fastest query vs plain Spark", best.ratio("spark", "dynamic"), "x", _label(best.name))
    item = next((r for r in results if r.name == ITEM_JOIN_NAME), None)
    if item is not None:
        planned, total = item.fact_rows.get("store_sales", [0, 1])
        # Rows the scans returned (Spark's metrics, after row groups and pages were skipped), item's
        # included: an upper bound of store_sales's. The plan's count is files only.
        read = min(planned, item.runs["dynamic"].rows)
        report.goal("item star join: store_sales rows skipped", 1 - read / total, 0.99, unit="%", at_least=True,
                    note=f"at most {read:,} of {total:,} rows read (files selected hold {planned:,})")
        report.goal("item star join vs plain Spark", item.ratio("spark", "dynamic"), 5, unit="x", at_least=True)
        if literal is not None:
            text, literal_rows, _ = literal
            report.check("item star join: its build's keys skip as many store_sales rows as the same keys as literals",
                         planned <= literal_rows,
                         f"rows in the files planned: {planned:,} by the join, {literal_rows:,} by `{text}`")
        report.headline("item star join vs plain Spark", item.ratio("spark", "dynamic"), "x",
                        f"lake.sql {item.runs['dynamic'].median:.2f} s, plain Spark {item.runs['spark'].median:.2f} s; "
                        f"{1 - read / total:.2%} of store_sales's rows skipped")
    present = [c for c in CONTENDERS if _measured(results, c)]
    tot = {c: sum(r.runs[c].median for r in results) for c in present}
    report.goal("total time, dynamic / plain Spark", tot["dynamic"] / tot["spark"], 0.6 if sf >= 10 else 0.9, unit="x",
                note=f"{tot['dynamic']:.1f} s vs {tot['spark']:.1f} s")
    report.headline(f"total time of the {len(results)} queries, dynamic / plain Spark", tot["dynamic"] / tot["spark"],
                    "x", f"lake.sql {tot['dynamic']:,.0f} s, plain Spark {tot['spark']:,.0f} s")
    slower = [r.name for r in results if r.runs["dynamic"].median > 1.1 * r.runs["spark"].median + 0.05]
    report.goal("queries slower than plain Spark by more than 10% + 50 ms", len(slower), 0, unit="n",
                note=", ".join(slower))
    report.headline("queries slower than plain Spark by more than 10% + 50 ms", len(slower), "n",
                    ", ".join(_label(n) for n in slower))
    if "delta_spark" in present:
        behind = [r.name for r in results if r.runs["dynamic"].median >= r.runs["delta_spark"].median]
        report.goal("queries where lake.sql is not faster than delta-spark", len(behind), 0, unit="n",
                    note=", ".join(behind))
        report.headline("total time, lake.sql / delta-spark", tot["dynamic"] / tot["delta_spark"], "x",
                        f"lake.sql {tot['dynamic']:,.0f} s, delta-spark {tot['delta_spark']:,.0f} s; "
                        f"not faster on {len(behind)} queries")
    for label, group in (("date-filtered", [r for r in fd if r.date_filtered]),
                         ("filtered on other dimensions", [r for r in fd if not r.date_filtered])):
        if group and "spark_dpp" in present:
            mine, theirs = sum(r.runs["dynamic"].median for r in group), sum(r.runs["spark_dpp"].median for r in group)
            wins = sum(1 for r in group if r.runs["dynamic"].median <= r.runs["spark_dpp"].median)
            report.goal(f"{label} queries: total time, dynamic / Spark DPP on the partitioned copy", mine / theirs,
                        1.0, unit="x", note=f"{len(group)} queries; dynamic at least as fast in {wins}")
    overheads = [r.planning_overhead_s for r in results if r.planning_overhead_s is not None]
    if overheads:
        # Benchmark 11 (bench_overhead) holds the goal: it measures only this, several times per query.
        report.timing("planning", "lake.sql overhead per query (build sides excluded)", overheads,
                      "one run each; the goal is benchmark 11's")
    for c in present:
        report.timing("total", c, [tot[c]])
    for c, label in (("spark", "plain Spark"), ("spark_dpp", "Spark DPP"), ("static", "static"),
                     ("delta_spark", "delta-spark")):
        if c in tot:
            report.ratio(f"{label} / dynamic, total", tot[c] / tot["dynamic"])
    report.extra["geomean_speedup_vs_spark"] = math.exp(
        sum(math.log(r.ratio("spark", "dynamic")) for r in results) / len(results))


if __name__ == "__main__":
    sys.exit(main())
