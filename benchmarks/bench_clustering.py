"""Liquid clustering on TPC-DS store_sales: incremental OPTIMIZE after a 5% append, against a full
Z-order and delta-spark's OPTIMIZE, then queries on the clustered and the Z-ordered table.

Two tables of the same store_sales rows, each first laid out whole and then given the same 5%
of new rows (the tickets whose number is a multiple of 20) as an append:
- `clustered`: clustered by (date key, item key), clustered by an OPTIMIZE, then appended to;
- `zorder`: Z-ordered by the same keys, then appended to.

OPTIMIZE contenders, each run on a fresh copy of its table, all with files of the same target size:
- skiplake's incremental OPTIMIZE of `clustered` (the new rows become a cube of their own);
- skiplake's full Z-order of `zorder` (`optimize(zorder_by=..., full=True)`: every file
  rewritten, as Delta's OPTIMIZE ZORDER BY does);
- delta-spark 4.4's OPTIMIZE of `clustered` in its own JVM, timed there: with its defaults (it
  merges new rows into every cube under 100 GB) and with skiplake's minimum cube size.
One warm-up of each on a small table built the same way, then --reps rounds on copies of the
full tables, contenders taking turns going first. Each run reports the bytes it rewrote.

Queries, over the tables as the last round left them (`clustered` after its incremental
OPTIMIZE, `zorder` after its full Z-order), through lake.sql: the point query on three item keys,
the item star join, and benchmark 14's nine date-filtered store_sales queries. One warm-up, then
--query-reps runs each, the layouts taking turns. Every answer is compared.

    .venv/bin/python -m benchmarks.bench_clustering [--sf N] [--files N] [--reps N] [--query-reps N]
        [--queries point,item-join,68,...] [--json] [--out FILE]
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks.bench_dfp import ITEM_JOIN_NAME, query_texts, race
from benchmarks.common import Progress, Report, base_parser, command_line, finish, median, rotated
from benchmarks.delta_runner import DELTA_PACKAGE, DeltaRunner
from testing_support.tpcds_lake import raw_root

KEYS = ["ss_sold_date_sk", "ss_item_sk"]
NEW_ROWS = "ss_ticket_number % 20 = 0"      # the 5% appended after the layout
DIMENSIONS = ("item", "date_dim", "store", "household_demographics", "customer", "customer_address",
              "customer_demographics", "promotion", "time_dim")
POINT = "point"
POINT_QUERY = "SELECT sum(ss_quantity) AS q FROM store_sales WHERE ss_item_sk IN (40, 41, 42)"
DEFAULT_QUERIES = f"{POINT},{ITEM_JOIN_NAME},68,79,73,34,46,3,52,55,98"
MIN_CUBE_FILES = 8        # skiplake's default minimum cube size, in target-sized files
DELTA_MIN_CUBE = "spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.threshold"
DELTA_TARGET_CUBE = "spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.targetCubeSize"
DELTA_MAX_FILE = "spark.databricks.delta.optimize.maxFileSize"
DELTA_DEFAULT_MIN_CUBE = 100 * (1 << 30)
LAYOUT_VERSION = 1
CONTENDERS = ("skiplake incremental", "skiplake full Z-order", "delta-spark", "delta-spark, same cube size")


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=None, help="TPC-DS scale factor (default 10, --quick 1)")
    parser.add_argument("--files", type=int, default=None, help="store_sales files (default 512, --quick 32)")
    parser.add_argument("--data", default=None, help="where the TPC-DS data and the built tables are kept")
    parser.add_argument("--queries", default=DEFAULT_QUERIES, help="comma-separated (default %(default)s)")
    parser.add_argument("--query-reps", type=int, default=3, help="timed runs of each query and layout")
    args = parser.parse_args(argv)
    sf = args.sf if args.sf is not None else (1.0 if args.quick else 10.0)
    files = args.files if args.files is not None else (32 if args.quick else 512)
    reps = args.reps if args.reps is not None else (1 if args.quick else 2)
    progress = Progress("bench_clustering")
    from testing_support.paths import DEFAULT_BASE, setup_java
    setup_java()
    import skiplake
    spark = skiplake.local_spark(app_name="bench-clustering", shuffle_partitions=8, driver_memory="8g")
    base = Path(args.data) if args.data else DEFAULT_BASE
    delta = DeltaRunner(8, progress, "8g")    # its JVM starts while the tables are built
    report = Report("bench_clustering", f"Liquid clustering: incremental OPTIMIZE after a 5% append, TPC-DS "
                    f"sf={sf:g} store_sales, against a full Z-order and delta-spark",
                    command_line("bench_clustering", args, [f"--sf {sf:g}", f"--files {files}",
                                                            f"--reps {reps}", f"--query-reps {args.query_reps}",
                                                            f"--queries {args.queries}"]),
                    {"sf": sf, "store_sales_files": files, "reps": reps, "query_reps": args.query_reps,
                     "new_rows": NEW_ROWS, "min_cube_files": MIN_CUBE_FILES, "delta_package": DELTA_PACKAGE})
    try:
        built = build_tables(spark, base, sf, files, progress)
        small = build_tables(spark, base, sf, 0, progress)
        target = built["target_file_size"]
        report.extra["tables"] = built
        work = base / "bench_clustering-work"
        shutil.rmtree(work, ignore_errors=True)
        runs = _contenders(spark, delta, target)
        progress("warm-up on the small tables")
        for name in CONTENDERS:
            runs[name](_copy(Path(small["root"]), work / "warmup", name))
        results: dict[str, list[dict[str, Any]]] = {c: [] for c in CONTENDERS}
        for rep in range(reps):
            for name in rotated(list(CONTENDERS), rep):
                out = runs[name](_copy(Path(built["root"]), work / f"round-{rep}", name))
                results[name].append(out)
                progress(f"round {rep + 1}: {name}: {out['seconds']:.1f} s, {out['bytes_removed'] / 1e6:,.0f} MB "
                         f"rewritten in {out['files_removed']:,} files")
        _report_optimize(report, results, built)
        roots = {"clustered": work / f"round-{reps - 1}" / "skiplake incremental",
                 "zorder": work / f"round-{reps - 1}" / "skiplake full Z-order"}
        _queries(spark, report, roots, Path(built["root"]), args.queries, args.query_reps, progress)
        report.extra["delta"] = delta.info
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    finally:
        delta.close()
    return finish(report, args)


# ---------------------------------------------------------------- the tables


def build_tables(spark: Any, base: Path, sf: float, files: int, progress: Callable[[str], None]) -> dict[str, Any]:
    """The clustered and Z-ordered store_sales (5% appended after the layout) and the dimensions,
    under `base`, built once; files=0 builds the small warm-up pair from the first tickets."""
    import skiplake
    from skiplake.tpcds import generate
    raw = generate(raw_root(base, sf), sf=sf, tables=("store_sales", *DIMENSIONS), progress=progress)
    root = base / (f"clustering-sf{sf:g}-{files}" if files else f"clustering-sf{sf:g}-warmup")
    marker = root / "_built.json"
    wanted = {"version": LAYOUT_VERSION, "sf": sf, "files": files}
    if marker.exists() and json.loads(marker.read_text()).get("wanted") == wanted:
        progress(f"reusing the tables under {root}")
        return json.loads(marker.read_text())
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    sales = spark.read.parquet(str(raw.files["store_sales"]))
    if not files:
        sales = sales.where("ss_ticket_number < 30000")
    # Files of the size that gives store_sales about `files` files (Spark's files are about 1.3x
    # DuckDB's); the warm-up pair's few rows in files of 1 MiB.
    target = max(1 << 20, os.path.getsize(raw.files["store_sales"]) * 13 // (10 * files)) if files else 1 << 20
    info: dict[str, Any] = {"wanted": wanted, "root": str(root), "target_file_size": target}
    for layout in ("clustered", "zorder"):
        t0 = time.perf_counter()
        path = str(root / layout / "store_sales")
        t = skiplake.Table.create(spark, path, sales.schema, cluster_by=KEYS if layout == "clustered" else None)
        t.append(sales.where(f"NOT ({NEW_ROWS}) OR ss_ticket_number IS NULL"))
        if layout == "clustered":
            t.optimize(target_file_size=target, progress=progress)
        else:
            t.optimize(zorder_by=KEYS, target_file_size=target, progress=progress)
        t.append(sales.where(NEW_ROWS))
        snap = t.refresh().snapshot
        info[layout] = {"files": snap.num_files, "bytes": snap.size_bytes, "seconds": time.perf_counter() - t0}
        progress(f"{layout}: {snap.num_files} files, {snap.size_bytes:,} bytes")
        if files:
            for name in DIMENSIONS:
                dim = skiplake.Table.create(spark, str(root / layout / name), spark.read.parquet(str(raw.files[name])).schema)
                dim.append(spark.read.parquet(str(raw.files[name])).coalesce(1))
    marker.write_text(json.dumps(info, indent=2))
    return info


def _copy(source: Path, round_dir: Path, name: str) -> Path:
    """A fresh copy of the table the contender rewrites (the dimensions linked, not copied)."""
    layout = "zorder" if "Z-order" in name else "clustered"
    dest = round_dir / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    shutil.copytree(source / layout / "store_sales", dest / "store_sales")
    for child in (source / layout).iterdir():
        if child.name != "store_sales":
            os.symlink(child, dest / child.name)
    return dest


# ---------------------------------------------------------------- OPTIMIZE


def _contenders(spark: Any, delta: DeltaRunner, target: int) -> dict[str, Callable[[Path], dict[str, Any]]]:
    import skiplake

    def result(path: Path, seconds: float) -> dict[str, Any]:
        t = skiplake.Table.open(spark, str(path / "store_sales"))
        last = t.history(1)[0]
        metrics = last.get("operationMetrics") or {}
        rows = sum(f.num_records or 0 for f in t.snapshot.add_files)
        return {"seconds": seconds, "bytes_removed": int(metrics.get("numRemovedBytes", 0)),
                "files_removed": int(metrics.get("numRemovedFiles", 0)),
                "files_added": int(metrics.get("numAddedFiles", 0)), "rows": rows, "operation": last["operation"]}

    def incremental(path: Path) -> dict[str, Any]:
        t0 = time.perf_counter()
        skiplake.Table.open(spark, str(path / "store_sales")).optimize(target_file_size=target)
        return result(path, time.perf_counter() - t0)

    def full_zorder(path: Path) -> dict[str, Any]:
        t0 = time.perf_counter()
        skiplake.Table.open(spark, str(path / "store_sales")).optimize(zorder_by=KEYS, target_file_size=target,
                                                                       full=True)
        return result(path, time.perf_counter() - t0)

    def delta_spark(min_cube: int) -> Callable[[Path], dict[str, Any]]:
        def run(path: Path) -> dict[str, Any]:
            delta.sql(f"SET {DELTA_MAX_FILE} = {target}")
            delta.sql(f"SET {DELTA_MIN_CUBE} = {min_cube}")
            delta.sql(f"SET {DELTA_TARGET_CUBE} = {min_cube * 3 // 2}")
            reply = delta.sql(f"OPTIMIZE delta.`{path / 'store_sales'}`")
            return result(path, float(reply["seconds"]))
        return run

    return {"skiplake incremental": incremental, "skiplake full Z-order": full_zorder,
            "delta-spark": delta_spark(DELTA_DEFAULT_MIN_CUBE),
            "delta-spark, same cube size": delta_spark(MIN_CUBE_FILES * target)}


def _report_optimize(report: Report, results: dict[str, list[dict[str, Any]]], built: dict[str, Any]) -> None:
    section = "OPTIMIZE after a 5% append"
    rows = {r["rows"] for runs in results.values() for r in runs}
    report.check("every OPTIMIZE kept every row", len(rows) == 1, f"row counts {sorted(rows)}")
    ops = {r["operation"] for runs in results.values() for r in runs}
    report.check("every contender committed an OPTIMIZE", ops == {"OPTIMIZE"}, f"last operations {sorted(ops)}")
    med = {c: median([r["seconds"] for r in runs]) for c, runs in results.items()}
    rewritten = {c: median([r["bytes_removed"] for r in runs]) for c, runs in results.items()}
    for c, runs in results.items():
        report.timing(section, c, [r["seconds"] for r in runs],
                      f"{rewritten[c] / 1e6:,.0f} MB rewritten in {runs[-1]['files_removed']:,} files, "
                      f"{runs[-1]['files_added']:,} written")
    inc = "skiplake incremental"
    less = rewritten["skiplake full Z-order"] / max(1, rewritten[inc])
    faster = med["skiplake full Z-order"] / med[inc]
    report.goal("full Z-order / incremental: bytes rewritten", less, 5.0, unit="x", at_least=True)
    report.goal("full Z-order / incremental: time", faster, 3.0, unit="x", at_least=True)
    report.headline("incremental OPTIMIZE against a full Z-order (time)", faster, "x",
                    f"{rewritten[inc] / 1e6:,.0f} MB rewritten against {rewritten['skiplake full Z-order'] / 1e6:,.0f} MB")
    for theirs in ("delta-spark", "delta-spark, same cube size"):
        ratio = med[theirs] / med[inc]
        report.goal(f"{theirs} / skiplake incremental: time", ratio, 1.0, unit="x", at_least=True,
                    note=f"delta-spark rewrote {rewritten[theirs] / 1e6:,.0f} MB")
        report.headline(f"{theirs} OPTIMIZE / skiplake's", ratio, "x",
                        f"delta-spark {med[theirs]:.1f} s, skiplake {med[inc]:.1f} s")
    report.extra["optimize"] = results


# ---------------------------------------------------------------- queries


def _queries(spark: Any, report: Report, roots: dict[str, Path], built_root: Path, wanted: str, reps: int,
             progress: Callable[[str], None]) -> None:
    import skiplake
    lakes = {layout: skiplake.Lake(spark, str(root)) for layout, root in roots.items()}
    names = wanted.split(",")
    texts = {POINT: POINT_QUERY} if POINT in names else {}
    texts.update(query_texts([n for n in names if n != POINT]))
    layouts = list(lakes)
    totals = {layout: 0.0 for layout in layouts}
    by_query: dict[str, Any] = {}
    for name, text in texts.items():
        ran = race({layout: (lambda layout=layout: lakes[layout].sql(text)) for layout in layouts}, reps)
        times, answers, reads = ran.times, ran.answers, ran.reads
        report.check(f"{name}: the same answer on both layouts", answers["clustered"] == answers["zorder"])
        for layout in layouts:
            report.timing(f"query {name}", layout, times[layout],
                          f"files {reads[layout][0]:,}, rows {reads[layout][2]:,}")
            totals[layout] += median(times[layout])
        by_query[name] = {"median": {k: median(v) for k, v in times.items()}, "reads": reads}
        progress(f"{name:>9s} " + "  ".join(f"{k} {median(v):.2f}s" for k, v in times.items()))
    ratio = totals["clustered"] / totals["zorder"]
    report.ratio("queries, total: clustered (incremental) / Z-ordered (full)", ratio)
    report.headline(f"the {len(texts)} queries on the clustered table / on the Z-ordered one (total)", ratio, "x",
                    f"clustered {totals['clustered']:.1f} s, Z-ordered {totals['zorder']:.1f} s")
    report.extra["by_query"] = by_query


if __name__ == "__main__":
    raise SystemExit(main())
