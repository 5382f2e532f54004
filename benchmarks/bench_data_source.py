"""Benchmark 27: reading a table through the `skiplake` data source against `t.read()`.

The data source (spark.read.format("skiplake")) reads data files in Python workers and hands Spark
Arrow batches; `t.read()` reads the same planned files with Spark's native Parquet reader. On
TPC-DS store_sales (sf=1: 2.9M rows; --quick: sf=0.1), laid out in --files files, both run:

  1. a full scan: every row and column, written to Spark's `noop` sink;
  2. a selective filter: `ss_item_sk IN (40, 41, 42)` after a Z-order by ss_item_sk, counted (both
     prune files by stats, the data source through Spark's pushed filters);
  3. where the full scan's time goes: the same scan over copies of store_sales holding only its
     integer columns, only its decimal columns, and those decimals cast to double.

Each query runs once per contender to warm up, then --reps times, the contenders taking turns
going first; the answers must be equal (a check). The ratio is data source / t.read().

    .venv/bin/python -m benchmarks.bench_data_source [--quick] [--sf N] [--files N] [--reps N] [--json] [--out FILE]
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from benchmarks.common import Progress, Report, alternate, base_parser, command_line, finish, median
from testing_support.tpcds_lake import add_lake_arguments, generated, lake_scale

CONTENDERS = ("data source", "t.read()")
WHERE = "ss_item_sk IN (40, 41, 42)"


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    add_lake_arguments(parser, sf=(1.0, 0.1), files=(32, 8), data_help="where TPC-DS data and the table are kept")
    args = parser.parse_args(argv)
    args.sf, args.files = lake_scale(args)
    reps = args.reps if args.reps is not None else (2 if args.quick else 5)
    progress = Progress("bench_data_source")
    from testing_support.paths import setup_java
    setup_java()
    import skiplake
    spark = skiplake.local_spark(app_name="bench-data-source", shuffle_partitions=8, driver_memory="4g")
    data = Path(args.data)
    tables = generated(args.sf, progress, data)
    root = data / f"data-source-sf{args.sf:g}-{args.files}"
    lake = skiplake.Lake(spark, str(root))
    if "store_sales" not in lake.tables():
        base = spark.read.parquet(str(tables.files["store_sales"]))
        t = lake.create_table("store_sales", base.schema)
        t.append(base)
        total = sum(f.size for f in t.snapshot.add_files)
        t.optimize(zorder_by=["ss_item_sk"], target_file_size=max(1, total // args.files))
        t.vacuum(retention_hours=0, force=True)
        progress(f"wrote store_sales under {root}")
    t = lake.table("store_sales")
    path = t.path

    def scans(where: str | None) -> dict[str, Callable[[], Any]]:
        def source() -> Any:
            df = spark.read.format("skiplake").load(path)
            return df.filter(where).count() if where else df.write.format("noop").mode("overwrite").save()

        def native() -> Any:
            df = t.read(where)
            return df.count() if where else df.write.format("noop").mode("overwrite").save()
        return {"data source": source, "t.read()": native}

    report = Report("bench_data_source", f"A read through the skiplake data source against t.read(), TPC-DS sf={args.sf:g} "
                    "store_sales", command_line("bench_data_source", args),
                    {"sf": args.sf, "files": len(t.scan().files), "rows": t.read().count(), "reps": reps})
    for label, where in (("full scan", None), ("selective filter", WHERE)):
        progress(f"{label} ...")
        answers: dict[str, Any] = {}
        seconds = alternate(scans(where), reps, lambda name, out: answers.__setitem__(name, out))
        for name in CONTENDERS:
            report.timing(label, name, seconds[name])
        ratio = median(seconds["data source"]) / median(seconds["t.read()"])
        report.ratio(f"{label}: data source / t.read()", ratio)
        if where is None:
            report.goal("full scan: data source / t.read()", ratio, 1.5, unit="x")
        else:
            report.check("the same count", answers["data source"] == answers["t.read()"],
                         f"{answers['data source']} and {answers['t.read()']}")
        report.headline(f"{label}: data source / t.read()", ratio, unit="x")
    by_type(spark, lake, t, reps, report, progress)
    spark.stop()
    return finish(report, args)


def by_type(spark: Any, lake: Any, t: Any, reps: int, report: Report, progress: Progress) -> None:
    """The full scan over store_sales's integer columns, its decimal columns, and the decimals as
    doubles: what each kind of column costs the data source against t.read()."""
    fields = t.read().schema.fields
    integers = [f.name for f in fields if f.dataType.typeName() in ("integer", "long")]
    decimals = [f.name for f in fields if f.dataType.typeName() == "decimal"]
    copies = {"integer columns": ("store_sales_integers", [f"`{c}`" for c in integers]),
              "decimal columns": ("store_sales_decimals", [f"`{c}`" for c in decimals]),
              "decimals as double": ("store_sales_doubles", [f"CAST(`{c}` AS double) AS `{c}`" for c in decimals])}
    for label, (name, columns) in copies.items():
        if name not in lake.tables():
            copy = lake.create_table(name, t.read().selectExpr(*columns).schema)
            copy.append(t.read().selectExpr(*columns))
            progress(f"wrote {name}")
        table = lake.table(name)

        def source(path: str = table.path) -> Any:
            return spark.read.format("skiplake").load(path).write.format("noop").mode("overwrite").save()

        def native(copy: Any = table) -> Any:
            return copy.read().write.format("noop").mode("overwrite").save()
        progress(f"full scan of the {label} ...")
        seconds = alternate({"data source": source, "t.read()": native}, reps, lambda name, out: None)
        for who in CONTENDERS:
            report.timing(f"full scan, {label} ({len(columns)})", who, seconds[who])
        report.ratio(f"full scan, {label}: data source / t.read()",
                     median(seconds["data source"]) / median(seconds["t.read()"]))


if __name__ == "__main__":
    raise SystemExit(main())
