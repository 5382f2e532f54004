"""lake.sql's answers from the log on a synthetic log of benchmark 29 (bench_scale writes them):

    .venv/bin/python -m benchmarks.scale_sql [--files 1000000] [--data DIR]

runs three aggregate queries twice each (the first pays the snapshot load) and prints their wall
time, their answer and what the log answered; then plans (lake.explain: the data files are absent)
a query the log cannot answer, which prunes to one file: its planning builds no relation over the
table's other files. Not part of the suite: a check of the end-to-end cost that bench_scale's
pure-Python figures leave out (Spark's analysis, the result's relation).
"""
from __future__ import annotations

import argparse
import time

from testing_support.paths import DEFAULT_BASE, setup_java


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--data", default=str(DEFAULT_BASE))
    args = parser.parse_args()
    setup_java()
    import skiplake
    spark = skiplake.local_spark(app_name="scale-sql", shuffle_partitions=2, driver_memory="4g")
    lake = skiplake.Lake(spark, args.data)
    path = f"{args.data}/scale-{args.files}"
    queries = [f"SELECT COUNT(*) FROM delta.`{path}`",
               f"SELECT COUNT(*), MIN(ss_ticket_number), MAX(ss_ticket_number) FROM delta.`{path}` "
               "WHERE ss_sold_date = DATE'1999-03-04'",
               f"SELECT ss_sold_date, COUNT(*) FROM delta.`{path}` GROUP BY ss_sold_date"]
    for query in queries:
        for run in ("cold", "warm"):
            started = time.perf_counter()
            rows = lake.sql(query).collect()
            seconds = time.perf_counter() - started
            log = lake.last_explain.log_answer if lake.last_explain is not None else None
            print(f"{seconds:7.2f} s  {run}  {len(rows)} row(s), first {tuple(rows[0])}  {log.text() if log else 'scanned'}")
    ticket = (args.files // 2) * 1000
    planned = (f"SELECT SUM(ss_sales_price) FROM delta.`{path}` "
               f"WHERE ss_ticket_number BETWEEN {ticket} AND {ticket + 9}")
    for run in ("cold", "warm"):
        started = time.perf_counter()
        [report] = lake.explain(planned)
        seconds = time.perf_counter() - started
        print(f"{seconds:7.2f} s  {run}  planned: {report.files_selected:,} of {report.files_total:,} files")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
