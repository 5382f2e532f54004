"""Benchmark 12: a dynamic pruning build side read in the driver against a Spark job.

The build sides of TPC-DS star joins are mostly one dimension table under a literal filter. Each
case here is one such build (a filter and the join key), taken from the TPC-DS queries, over the
dimension tables of benchmark 9's lake (sf=10 by default). Two contenders compute the same
distinct keys:

  driver   skiplake.skipping.local_build: pyarrow reads the statically selected files' columns,
           skiplake.skipping.rows applies the filter, pyarrow makes the keys distinct
  spark    skiplake.spark.pruning.build_keys.distinct_keys over the table's DataFrame with the filter:
           the Spark job dynamic pruning ran for every build before

Each case runs once per contender to warm up, then --reps times, the contenders taking turns
going first. The keys of both must be equal (a check). The table gives the dimension's bytes and
rows, so the localBuildThreshold default (the largest build read in the driver) can be read off.

    .venv/bin/python -m benchmarks.bench_local_build [--quick] [--sf N] [--reps N] [--json] [--out FILE]
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.common import Progress, Report, base_parser, command_line, finish, median, rotated
from testing_support.tpcds_lake import add_lake_arguments, lake_scale

# (table, filter, key): build sides of TPC-DS queries (the item star join, q3, q98, q13, q48, q6, q34),
# then two larger ones.
CASES = [
    ("date_dim", "d_year = 2000 AND d_moy = 11", "d_date_sk"),
    ("item", "i_item_id = 'AAAAAAAAICAAAAAA'", "i_item_sk"),
    ("item", "i_category IN ('Sports', 'Books', 'Home')", "i_item_sk"),
    ("store", "s_state = 'TN'", "s_store_sk"),
    ("customer_address", "ca_state IN ('TX', 'OH', 'KY')", "ca_address_sk"),
    ("customer_demographics", "cd_marital_status = 'M' AND cd_education_status = 'Advanced Degree'",
     "cd_demo_sk"),
    ("customer", "c_birth_month = 12", "c_customer_sk"),
    # Past the default threshold: fact tables as build sides, to see where Spark's two cores win.
    ("web_returns", "wr_return_quantity = 5", "wr_item_sk"),
    ("store_returns", "sr_return_quantity = 5", "sr_item_sk"),
]
CONTENDERS = ("driver", "spark")
FACT_BUILDS = ("web_returns", "store_returns")


def measure(spark: Any, lake: Any, table: str, where: str, key: str, reps: int) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from skiplake.expr.parse import bind
    from skiplake.skipping.local_build import local_keys
    from skiplake.skipping.plan import plan_scan
    from skiplake.spark.pruning.build_keys import distinct_keys

    t = lake.table(table)
    snap = t.snapshot
    predicate = bind(where, snap.schema)
    selected = plan_scan(snap, predicate).selected
    times: dict[str, list[float]] = {c: [] for c in CONTENDERS}
    keys: dict[str, list[Any]] = {}

    def once(contender: str) -> tuple[float, list[Any]]:
        t0 = time.perf_counter()
        if contender == "driver":
            got = local_keys(snap.table_path, selected, snap.schema, predicate, [key])
        else:
            got = distinct_keys(t.read().where(where), [F.col(key)])
        return time.perf_counter() - t0, sorted(got.columns[0])

    for rep in range(reps + 1):
        for contender in rotated(CONTENDERS, rep):
            seconds, values = once(contender)
            keys[contender] = values
            if rep:
                times[contender].append(seconds)
    return {"table": table, "where": where, "key": key, "bytes": int(selected.column("size").to_numpy().sum()),
            "rows": _rows(snap),
            "keys": len(keys["driver"]), "same": keys["driver"] == keys["spark"], "seconds": times}


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    add_lake_arguments(parser, sf=(10.0, 0.1), files=(1024, 16), data_help="where the lake of benchmark 9 is kept")
    args = parser.parse_args(argv)
    args.sf, args.files = lake_scale(args)
    reps = args.reps if args.reps is not None else (2 if args.quick else 5)
    progress = Progress("bench_local_build")
    from testing_support.paths import setup_java
    setup_java()
    import skiplake
    from testing_support.tpcds_lake import build_lake
    spark = skiplake.local_spark(app_name="bench-local-build", shuffle_partitions=8, driver_memory="4g")
    root = build_lake(spark, Path(args.data), args.sf, args.files, progress=progress)
    lake = skiplake.Lake(spark, str(root))
    report = Report("bench_local_build", f"Build sides read in the driver against a Spark job, TPC-DS sf={args.sf:g}",
                    command_line("bench_local_build", args, [f"--sf {args.sf:g}"]),
                    {"sf": args.sf, "reps": reps, "cases": len(CASES)})
    results = []
    for table, where, key in CASES:
        r = measure(spark, lake, table, where, key, reps)
        results.append(r)
        d, s = median(r["seconds"]["driver"]), median(r["seconds"]["spark"])
        label = f"{table} WHERE {where}"
        progress(f"{label}: {r['rows']:,} rows, {r['bytes'] / 2 ** 20:.1f} MB, {r['keys']:,} keys: "
                 f"driver {1000 * d:.1f} ms, spark {1000 * s:.1f} ms ({s / d:.1f}x)")
        for contender in CONTENDERS:
            report.timing(label, contender, r["seconds"][contender],
                          f"{r['rows']:,} rows, {r['bytes'] / 2 ** 20:.1f} MB, {r['keys']:,} keys" if contender == "driver"
                          else "")
        report.ratio(f"{label}: spark / driver", s / d)
        report.check(f"{label}: the same keys", r["same"])
    report.extra["cases"] = results
    ratios = [(median(r["seconds"]["spark"]) / median(r["seconds"]["driver"]), r) for r in results]
    dims = [x for x in ratios if x[1]["table"] not in FACT_BUILDS]
    for label, group in (("dimension builds", dims), ("fact tables as builds", [x for x in ratios if x not in dims])):
        if group:
            low, high = min(group, key=lambda x: x[0]), max(group, key=lambda x: x[0])
            report.headline(f"{label}: a Spark job / the driver", low[0], "x",
                            f"the lowest, {low[1]['table']}; the highest {high[0]:.1f}x, {high[1]['table']}")
    return finish(report, args)


def _rows(snapshot: Any) -> int:
    import json
    return sum(json.loads(s)["numRecords"] for s in snapshot.files.column("stats").to_pylist() if s)


if __name__ == "__main__":
    raise SystemExit(main())
