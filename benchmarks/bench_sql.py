"""A TPC-DS ETL script in SQL through lake.sql_script, against delta-spark's spark.sql.

The script, on TPC-DS store_sales and store_returns at --sf (1 by default), each statement as both
sides run it (a table named by its name on skiplake's side, by ``delta.`path` `` on delta-spark's):

    MERGE INTO store_sales AS t USING (SELECT * FROM parquet.`changes`) AS s      -- 1% changed rows
      ON t.ss_item_sk = s.ss_item_sk AND t.ss_ticket_number = s.ss_ticket_number   -- (and 0.1% new)
      WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *
    MERGE INTO store_sales AS t USING (SELECT DISTINCT sr_item_sk, sr_ticket_number FROM store_returns
      WHERE sr_return_quantity > 80) AS r ON ... WHEN MATCHED THEN DELETE            -- returned sales
    DELETE FROM store_sales WHERE ss_sold_date_sk IS NULL
    UPDATE store_sales SET ss_ext_discount_amt = 0 WHERE ss_store_sk = 1 AND ss_quantity > 95
    OPTIMIZE store_sales ZORDER BY (ss_item_sk)
    VACUUM store_sales DRY RUN
    DESCRIBE HISTORY store_sales

The returned sales are deleted by a MERGE on both sides: delta-spark refuses a subquery in
DELETE's condition. Contenders: `lake.sql_script(script)` in this process, every result
collected; delta-spark 4.4 in its own JVM (benchmarks/delta_merge_runner.py), each statement
timed there and collected, the script's time their sum. Same Spark settings (local[2], the shuffle
partitions, driver memory, UTC). Each run starts from its own copy of the same two Delta tables,
written once by skiplake; one warm-up each, then --reps runs taking turns.

A second part measures what a statement costs over the same API call on a 200,000-row table:
`lake.sql("UPDATE ...")` against `t.update(...)`, `lake.sql("DELETE ...")` against `t.delete(...)`,
taking turns; the overhead is the difference of the medians. lake.sql has run the statement when
it returns, its result built (not collected: collecting any DataFrame costs Spark's own ~50 ms).

Checks: both sides leave the same store_sales (rows, and sums of keys, quantities, amounts).

    .venv/bin/python -m benchmarks.bench_sql [--quick] [--sf SF] [--partitions N] [--reps N] [--json] [--out FILE]
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

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
from benchmarks.delta_runner import DELTA_PACKAGE, DeltaRunner
from skiplake.lake import Lake

DRIVER_MEMORY = "4g"
TABLES = ("store_sales", "store_returns")
SCRIPT = [
    ("MERGE of 1% changed rows",
     "MERGE INTO {store_sales} AS t USING (SELECT * FROM parquet.`{changes}`) AS s "
     "ON t.ss_item_sk = s.ss_item_sk AND t.ss_ticket_number = s.ss_ticket_number "
     "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"),
    ("MERGE deleting returned sales",
     "MERGE INTO {store_sales} AS t USING (SELECT DISTINCT sr_item_sk, sr_ticket_number FROM {store_returns} "
     "WHERE sr_return_quantity > 80) AS r ON t.ss_item_sk = r.sr_item_sk AND t.ss_ticket_number = r.sr_ticket_number "
     "WHEN MATCHED THEN DELETE"),
    ("DELETE", "DELETE FROM {store_sales} WHERE ss_sold_date_sk IS NULL"),
    ("UPDATE", "UPDATE {store_sales} SET ss_ext_discount_amt = 0 WHERE ss_store_sk = 1 AND ss_quantity > 95"),
    ("OPTIMIZE ZORDER BY", "OPTIMIZE {store_sales} ZORDER BY (ss_item_sk)"),
    ("VACUUM DRY RUN", "VACUUM {store_sales} DRY RUN"),
    ("DESCRIBE HISTORY", "DESCRIBE HISTORY {store_sales}"),
]


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=None, help="TPC-DS scale factor (default 1)")
    parser.add_argument("--partitions", type=int, default=8, help="spark.sql.shuffle.partitions of both sides")
    args = parser.parse_args(argv)
    sf = args.sf if args.sf is not None else (0.1 if args.quick else 1.0)
    reps = args.reps if args.reps is not None else (1 if args.quick else 3)
    progress = Progress("bench_sql")
    from testing_support.paths import setup_java
    setup_java()
    import skiplake
    spark = skiplake.local_spark(app_name="bench-sql", shuffle_partitions=args.partitions, driver_memory=DRIVER_MEMORY)
    report = Report("bench_sql", f"A TPC-DS ETL script in SQL, sf={sf:g}: lake.sql_script against delta-spark",
                    command_line("bench_sql", args, [f"--sf {sf:g}", f"--partitions {args.partitions}"]),
                    {"sf": sf, "reps": reps, "shuffle_partitions": args.partitions, "driver_memory": DRIVER_MEMORY,
                     "delta_package": DELTA_PACKAGE, "statements": [text for _, text in SCRIPT]})
    delta = DeltaRunner(args.partitions, progress, DRIVER_MEMORY)   # its JVM starts while the tables are written
    try:
        with workdir("bench_sql", args.workdir, args.keep, progress) as work:
            base, changes = _build(spark, work, sf, progress)
            _script(spark, delta, report, work, base, changes, reps, progress)
            report.extra["delta"] = delta.info
        with workdir("bench_sql_overhead", args.workdir, args.keep, progress) as work:
            _overhead(spark, report, work, 5 if args.quick else 15, progress)
    finally:
        delta.close()
    return finish(report, args)


def _build(spark: Any, work: Path, sf: float, progress: Progress) -> tuple[Path, Path]:
    """The two tables as Delta tables under work/base, and the changes as one Parquet file."""
    import skiplake
    from testing_support.tpcds_lake import generated
    raw = generated(sf, progress)
    base = work / "base"
    lake = skiplake.Lake(spark, str(base))
    for name in TABLES:
        df = spark.read.parquet(str(raw.files[name]))
        t = lake.create_table(name, df.schema)
        t.append(df)
        progress(f"{name}: {raw.rows[name]:,} rows in {t.refresh().snapshot.num_files} files")
    sales = spark.read.parquet(str(raw.files["store_sales"]))
    changes = work / "changes.parquet"
    # 1% of the rows changed (quantity and amounts), and 0.1% new ones (ticket numbers past the last).
    changed = sales.filter("ss_ticket_number % 100 = 7").selectExpr(
        *[c if c not in ("ss_quantity", "ss_net_paid") else f"{c} + 1 AS {c}" for c in sales.columns])
    new = sales.filter("ss_ticket_number % 1000 = 3").selectExpr(
        *[c if c != "ss_ticket_number" else "ss_ticket_number + 1000000000 AS ss_ticket_number" for c in sales.columns])
    changed.unionByName(new).coalesce(1).write.parquet(str(changes))
    progress(f"changes: {spark.read.parquet(str(changes)).count():,} rows")
    return base, changes


def _script(spark: Any, delta: DeltaRunner, report: Report, work: Path, base: Path, changes: Path, reps: int,
            progress: Progress) -> None:
    copies = copies_for(["skiplake", "delta-spark"], base, work, reps + 1)
    done: dict[str, list[Path]] = {"skiplake": [], "delta-spark": []}
    steps: dict[str, list[list[float]]] = {"skiplake": [], "delta-spark": []}
    inner: list[float] = []

    def ours() -> None:
        root = copies["skiplake"].pop(0)
        done["skiplake"].append(root)
        times: list[float] = []
        lake = TimedLake(spark, str(root), times)
        script = ";\n".join(text.format(store_sales="store_sales", store_returns="store_returns", changes=changes)
                            for _, text in SCRIPT)
        for result in lake.sql_script(script):
            result.collect()
        steps["skiplake"].append(times)
        progress(f"skiplake: {sum(times):.1f} s ({', '.join(f'{t:.1f}' for t in times)})")

    def theirs() -> float:
        root = copies["delta-spark"].pop(0)
        done["delta-spark"].append(root)
        names = {t: f"delta.`{root / t}`" for t in TABLES}
        times = [float(delta.sql(text.format(changes=changes, **names))["seconds"]) for _, text in SCRIPT]
        steps["delta-spark"].append(times)
        progress(f"delta-spark: {sum(times):.1f} s, timed in its JVM ({', '.join(f'{t:.1f}' for t in times)})")
        return sum(times)

    def seen(name: str, out: Any) -> None:
        if name == "delta-spark":
            inner.append(out)

    samples = alternate({"skiplake": ours, "delta-spark": theirs}, reps, seen)
    section = "the ETL script"
    report.timing(section, "skiplake: lake.sql_script", samples["skiplake"])
    report.timing(section, "delta-spark 4.4: spark.sql, statement by statement (timed in its JVM)", inner,
                  note=f"wall clock from this process, pipe included: {median(samples['delta-spark']):.2f} s")
    for i, (label, _) in enumerate(SCRIPT):
        for name in ("skiplake", "delta-spark"):
            report.timing(f"statement by statement: {label}", name, [run[i] for run in steps[name][1:]])
    ratio = median(samples["skiplake"]) / median(inner)
    report.ratio(f"{section}: skiplake / delta-spark", ratio)
    report.goal(f"{section}: skiplake / delta-spark", ratio, 0.7, unit="x")
    report.headline("the ETL script, skiplake / delta-spark", ratio, "x",
                    f"lake.sql_script {median(samples['skiplake']):.1f} s, delta-spark {median(inner):.1f} s")
    facts = {name: _facts(spark, paths[-1] / "store_sales") for name, paths in done.items()}
    report.check(f"{section}: both leave the same store_sales", facts["skiplake"] == facts["delta-spark"],
                 json.dumps(facts))
    for paths in done.values():
        for p in paths:
            shutil.rmtree(p, ignore_errors=True)


def _facts(spark: Any, path: Path) -> tuple:
    import skiplake
    row = skiplake.Table.open(spark, str(path)).read().selectExpr(
        "count(*)", "sum(ss_ticket_number)", "sum(ss_item_sk)", "sum(ss_quantity)",
        "sum(CAST(ss_net_paid * 100 AS BIGINT))", "sum(CAST(ss_ext_discount_amt * 100 AS BIGINT))").first()
    return tuple(str(v) for v in row)


class TimedLake(Lake):
    """A Lake that times each statement lake.sql_script hands to sql(), its result collected (not
    the queries a statement runs through sql() itself, such as a MERGE's source)."""

    def __init__(self, spark: Any, root: str, times: list[float]) -> None:
        super().__init__(spark, root)
        self.times = times
        self.depth = 0

    def sql(self, query: str) -> Any:
        t0 = time.perf_counter()
        self.depth += 1
        try:
            out = super().sql(query)
        finally:
            self.depth -= 1
        if self.depth == 0:
            out.collect()
            self.times.append(time.perf_counter() - t0)
        return out


def _overhead(spark: Any, report: Report, work: Path, reps: int, progress: Progress) -> None:
    """A statement against the API call it becomes, on a small table: the difference of medians."""
    import skiplake
    lake = skiplake.Lake(spark, str(work / "lake"))
    t = lake.create_table("t", "id BIGINT, v BIGINT, s STRING")
    t.append(spark.range(0, 200_000, 1, 4).selectExpr("id", "id % 97 AS v", "CAST(id AS STRING) AS s"))
    counter = iter(range(10 ** 9))
    pairs: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "UPDATE": (lambda: lake.sql(f"UPDATE t SET v = v + 1 WHERE id = {next(counter) % 200_000}"),
                   lambda: t.update(f"id = {next(counter) % 200_000}", {"v": "v + 1"})),
        "DELETE": (lambda: lake.sql(f"DELETE FROM t WHERE id = {next(counter) % 200_000}"),
                   lambda: t.delete(f"id = {next(counter) % 200_000}")),
    }
    overheads = []
    for label, (statement, api) in pairs.items():
        samples = alternate({"statement": statement, "api": api}, reps)
        section = f"statement against API call: {label}"
        report.timing(section, f"lake.sql(\"{label} ...\")", samples["statement"])
        report.timing(section, f"the API call (t.{label.lower()}(...))", samples["api"])
        overhead = median(samples["statement"]) - median(samples["api"])
        overheads.append(overhead)
        report.ratio(f"{section}: overhead, ms", overhead * 1000)
        progress(f"{label}: statement {median(samples['statement']) * 1000:.0f} ms, "
                 f"API {median(samples['api']) * 1000:.0f} ms")
    worst = max(overheads)
    report.goal("a statement's overhead over the same API call (median, the larger of UPDATE and DELETE)",
                worst, 0.05, unit="s")
    report.headline("a statement's overhead over its API call", worst, "s",
                    ", ".join(f"{label} {o * 1000:.0f} ms" for label, o in zip(pairs, overheads)))


if __name__ == "__main__":
    sys.exit(main())
