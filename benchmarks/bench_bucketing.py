"""Benchmark 8: bucketed tables: point queries on the bucket column, and bucket joins.

Two tables made with Spark (spark.range + rand with fixed seeds), --rows rows each (default
20M; --quick: 2M), keys drawn uniformly from 0 .. rows/2 (so every key appears about twice per
table):

    a (k bigint, v bigint, s string)      b (k bigint, w bigint)

laid out four ways, each from the same plain Parquet copy:

  plain Parquet         --buckets files per table (maxRecordsPerFile), what spark.read.parquet reads
  skiplake bucketed     BucketSpec(--buckets, ["k"], sort_by=["k"]): one file per bucket
  skiplake unbucketed   table a only, files of about the same count and size (maxRecordsPerFile)
  Spark bucketed        df.write.bucketBy(--buckets, "k").sortBy("k").saveAsTable(...): one file
                        per bucket per write task, registered in the session's in-memory catalog
                        (CREATE TABLE ... CLUSTERED BY (k) INTO n BUCKETS LOCATION ... on reruns)

A. Point queries on table a, `SELECT sum(v) FROM t WHERE k = <key>` and `... k IN (<3 keys>)`,
   over each layout.
B. The join `SELECT count(*), sum(a.v + b.w) FROM a JOIN b ON a.k = b.k`: skiplake's bucket
   join (lake.sql over the bucketed tables), Spark's sort-merge join with a shuffle over the
   plain Parquet copies, and Spark's own bucket join over its bucketBy tables. Broadcast joins
   are off for everyone (spark.sql.autoBroadcastJoinThreshold=-1). skiplake's buckets are one
   file each, sorted by k, so its bucket join turns on
   spark.sql.legacy.bucketedTableScan.outputOrdering and Spark reads them as sorted (no Sort in
   the join). For reference, Spark's bucket join once more with that setting on: its bucketBy
   tables hold several files per bucket, so Spark cannot use it.

Every query is timed end to end as a user runs it, medians of --reps after one untimed warm-up
round, contenders taking turns going first: plain Spark reads the folder and runs the SQL;
skiplake opens the lake, plans the scan and runs `lake.sql`; Spark's bucketed tables are
queried by name (the catalog keeps their file listing between queries). Measured per query,
outside the timed part:

  files, bytes   the file scan nodes' numFiles / filesSize metrics in Spark's executed plan (the
                 same counters for everyone): files listed for the scan and the sum of their
                 sizes, not bytes read (Parquet reads only the needed column chunks). For a
                 Spark bucketBy table they count the files before Spark's bucket pruning, so
                 the files of the buckets it keeps are counted from their names as well
  read bytes     what the Spark JVM read through read(2) during the query (rchar in
                 /proc/<pid>/io, page-cache hits included): the bytes really read
  Exchange, Sort whether the executed plan (AQE's final plan) has an Exchange / a Sort under the join
  ScanReport     for skiplake, lake.explain's files and bytes selected

The one-time preparation of each layout (write times) is timed when the data is laid out and
kept with it. The data stays under --data (default bench-data/bucketing-<rows>) for reruns;
delete it or pass --rebuild to lay it out again.

    .venv/bin/python -m benchmarks.bench_bucketing [--quick] [--rows N] [--reps N] [--json]
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks.common import Progress, Report, base_parser, command_line, finish, fmt_s, median, rotated, timed
from testing_support.paths import DEFAULT_BASE, setup_java

A_SCHEMA = "k BIGINT, v BIGINT, s STRING"
B_SCHEMA = "k BIGINT, w BIGINT"
POINT = "SELECT sum(v) AS v FROM {a} WHERE k = {key}"
POINT_IN = "SELECT sum(v) AS v FROM {a} WHERE k IN ({keys})"
JOIN = "SELECT count(*) AS n, sum(a.v + b.w) AS total FROM {a} a JOIN {b} b ON a.k = b.k"
SEED_A, SEED_B = 20261122, 20261123
# With it, a bucketed scan whose buckets hold one file each reports its sort columns as its output
# ordering, so the sort-merge join needs no Sort; skiplake's layout has one file per bucket.
ORDERING_CONF = "spark.sql.legacy.bucketedTableScan.outputOrdering"
SORTED_REF = f"(ref) spark bucket join, bucketBy tables, {ORDERING_CONF.rsplit('.', 1)[-1]}=true"


def with_conf(fn: Callable[[], Any], conf: dict[str, str]) -> Callable[[], Any]:
    """`fn`, to be run (planned and collected) with these session settings."""
    def run() -> Any:
        return fn()
    run.conf = conf  # type: ignore[attr-defined]
    return run


# ------------------------------------------------------------------------------------- the data

def generate(spark, rows: int, seed: int, with_payload: bool):
    """`rows` rows with k uniform in 0 .. rows/2 - 1 and a bigint payload (plus a string for a)."""
    from pyspark.sql import functions as F
    half = max(1, rows // 2)
    cols = [(F.rand(seed) * half).cast("long").alias("k"),
            (F.rand(seed + 1000) * 1000).cast("long").alias("v" if with_payload else "w")]
    if with_payload:
        cols.append(F.concat(F.lit("row-"), F.col("id").cast("string")).alias("s"))
    # A fixed partition count keeps rand's sequence, and so the data, the same on every machine.
    return spark.range(0, rows, 1, 8).select(*cols)


def parquet_files(folder: Path) -> tuple[int, int]:
    """(number, total bytes) of the Parquet files under `folder` (hidden and _ folders skipped)."""
    n = size = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for f in files:
            if f.endswith(".parquet") and not f.startswith((".", "_")):
                n += 1
                size += os.path.getsize(os.path.join(root, f))
    return n, size


def lake_files(table) -> tuple[int, int]:
    files = table.snapshot.add_files
    return len(files), sum(f.size for f in files)


def files_of_buckets(folder: Path, buckets: set[int]) -> tuple[int, int]:
    """(number, total bytes) of the bucketed files under `folder` whose name carries one of `buckets`."""
    from skiplake.layout.bucket_spec import bucket_id_from_name
    n = size = 0
    for f in folder.iterdir():
        if f.name.endswith(".parquet") and bucket_id_from_name(f.name) in buckets:
            n += 1
            size += f.stat().st_size
    return n, size


def register_spark_tables(spark, data: Path, buckets: int) -> None:
    """Spark's bucketed tables in this session's catalog, over the folders bucketBy wrote."""
    for name, schema in (("a_sb", A_SCHEMA), ("b_sb", B_SCHEMA)):
        if spark.catalog.tableExists(name):
            continue
        spark.sql(f"CREATE TABLE {name} ({schema}) USING parquet CLUSTERED BY (k) SORTED BY (k) "
                  f"INTO {buckets} BUCKETS LOCATION '{data / 'spark_bucketed' / name}'")


def lay_out(spark, data: Path, rows: int, buckets: int, progress: Progress) -> dict[str, Any]:
    """Write every layout under `data` once, timing each write; reuse them when they are there."""
    import skiplake
    from skiplake import BucketSpec
    from skiplake.spark.writes.data_files import WriteOptions
    marker = data / "_layout.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        if info.get("rows") == rows and info.get("buckets") == buckets:
            progress(f"reusing the layouts in {data} (laid out {info['made_utc']})")
            return info
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    # A first small job, so the first timed write does not also pay for warming the JVM up.
    generate(spark, 100_000, 1, True).write.mode("overwrite").parquet(str(data / "_warmup"))
    shutil.rmtree(data / "_warmup", ignore_errors=True)
    per_file = math.ceil(rows / buckets)
    prep: dict[str, float] = {}

    def step(name: str, fn: Callable[[], Any]) -> None:
        secs, _ = timed(fn)
        prep[name] = secs
        progress(f"prepared {name} in {fmt_s(secs)}")

    plain = data / "plain"
    for t, seed, payload in (("a", SEED_A, True), ("b", SEED_B, False)):
        step(f"plain Parquet {t}",
             lambda t=t, seed=seed, payload=payload: generate(spark, rows, seed, payload).write
             .option("maxRecordsPerFile", per_file).parquet(str(plain / t)))
    lake = skiplake.Lake(spark, str(data / "lake"))
    spec = BucketSpec(buckets, ["k"], ["k"])
    for t, schema in (("a", A_SCHEMA), ("b", B_SCHEMA)):
        step(f"skiplake bucketed {t}_bkt",
             lambda t=t, schema=schema: lake.create_table(f"{t}_bkt", schema, bucket_by=spec)
             .append(spark.read.parquet(str(plain / t))))
    step("skiplake unbucketed a_flat",
         lambda: lake.create_table("a_flat", A_SCHEMA).append(
             spark.read.parquet(str(plain / "a")), options=WriteOptions(max_records_per_file=per_file)))
    for t in ("a", "b"):
        step(f"Spark bucketBy {t}_sb",
             lambda t=t: spark.read.parquet(str(plain / t)).write.bucketBy(buckets, "k").sortBy("k")
             .option("path", str(data / "spark_bucketed" / f"{t}_sb")).saveAsTable(f"{t}_sb"))
    layouts = {
        "plain Parquet a": parquet_files(plain / "a"),
        "plain Parquet b": parquet_files(plain / "b"),
        "skiplake bucketed a_bkt": lake_files(lake.table("a_bkt")),
        "skiplake bucketed b_bkt": lake_files(lake.table("b_bkt")),
        "skiplake unbucketed a_flat": lake_files(lake.table("a_flat")),
        "Spark bucketBy a_sb": parquet_files(data / "spark_bucketed" / "a_sb"),
        "Spark bucketBy b_sb": parquet_files(data / "spark_bucketed" / "b_sb"),
    }
    info = {"rows": rows, "buckets": buckets, "made_utc": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "prepare_s": prep, "layouts": {k: {"files": n, "bytes": b} for k, (n, b) in layouts.items()}}
    marker.write_text(json.dumps(info, indent=2))
    return info


# ----------------------------------------------------------------------------- the plan, after

def _children(node: Any) -> list[Any]:
    name = node.getClass().getSimpleName()
    if name == "AdaptiveSparkPlanExec":
        return [node.executedPlan()]
    if name.endswith("QueryStageExec"):
        return [node.plan()]
    kids = node.children()
    return [kids.apply(i) for i in range(kids.size())]


def _walk(node: Any):
    yield node
    for child in _children(node):
        yield from _walk(child)


def plan_facts(df) -> dict[str, Any]:
    """What the executed plan (AQE's final plan) did: file scan metrics, and for each join its
    operator and the Exchanges beneath it."""
    root = df._jdf.queryExecution().executedPlan()
    out: dict[str, Any] = {"files": 0, "bytes": 0, "rows": 0, "bucketed_scans": 0, "scans": 0, "joins": []}
    for node in _walk(root):
        name = node.getClass().getSimpleName()
        if name == "FileSourceScanExec":
            out["scans"] += 1
            metrics = node.metrics()
            for key, field in (("numFiles", "files"), ("filesSize", "bytes"), ("numOutputRows", "rows")):
                if metrics.contains(key):
                    out[field] += int(metrics.apply(key).value())
            try:
                out["bucketed_scans"] += 1 if node.bucketedScan() else 0
            except Exception:  # noqa: BLE001 - a Spark without the accessor: leave it uncounted
                pass
        elif name.endswith("JoinExec"):
            under = [n.getClass().getSimpleName() for n in _walk(node)]
            out["joins"].append({"operator": name.removesuffix("Exec"),
                                 "exchanges_under": [n for n in under if n.endswith("ExchangeExec")],
                                 "sorts_under": sum(n == "SortExec" for n in under)})
    return out


class JvmReads:
    """Bytes the Spark JVM read through read(2) calls (rchar in /proc/<pid>/io): data files,
    footers and logs alike, whether or not served from the page cache. Spark's own task metric
    (inputMetrics.bytesRead) undercounts here (167 KB for scans that read 13 MB), probably because
    Parquet's vectored reads run on threads the metric does not follow."""

    def __init__(self, spark) -> None:
        self.path = f"/proc/{spark._jvm.java.lang.ProcessHandle.current().pid()}/io"

    def now(self) -> int | None:
        try:
            with open(self.path) as f:
                for line in f:
                    if line.startswith("rchar:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None


def exchange_free_join(result: dict[str, Any]) -> bool:
    """The query has a join and no Exchange under any join: a bucket join."""
    return bool(result["joins"]) and not any(x["exchanges_under"] for x in result["joins"])


# -------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="rows per table (default 20,000,000; --quick 2,000,000)")
    parser.add_argument("--buckets", type=int, default=64, help="buckets per table (default %(default)s)")
    parser.add_argument("--shuffle-partitions", type=int, default=64,
                        help="spark.sql.shuffle.partitions (default %(default)s; AQE coalesces them)")
    parser.add_argument("--driver-memory", default="8g", help="Spark driver memory (default %(default)s)")
    parser.add_argument("--data", default=None, help="where the layouts are kept")
    parser.add_argument("--rebuild", action="store_true", help="lay the data out again")
    args = parser.parse_args(argv)
    rows = args.rows or (2_000_000 if args.quick else 20_000_000)
    buckets = args.buckets
    reps = args.reps or 5
    progress = Progress("bucketing")
    setup_java()
    data = Path(args.data or Path(DEFAULT_BASE) / (f"bucketing-{rows}" + (f"-b{buckets}" if buckets != 64 else "")))
    data = data.resolve()
    if args.rebuild:
        shutil.rmtree(data, ignore_errors=True)

    import skiplake
    spark = skiplake.local_spark("bench_bucketing", driver_memory=args.driver_memory,
                                 shuffle_partitions=args.shuffle_partitions,
                                 conf={"spark.sql.warehouse.dir": str(data / "spark-warehouse"),
                                       "spark.sql.autoBroadcastJoinThreshold": "-1"})
    progress(f"Spark {spark.version}, {spark.sparkContext.master}, catalog "
             f"{spark.conf.get('spark.sql.catalogImplementation', 'in-memory')}; data in {data}")
    layout = lay_out(spark, data, rows, buckets, progress)
    register_spark_tables(spark, data, buckets)

    half = max(1, rows // 2)
    key = 4242 % half
    keys = sorted({4242 % half, 777_777 % half, 31_337 % half})
    extra = ([f"--rows {args.rows}"] if args.rows else []) + ([f"--buckets {buckets}"] if buckets != 64 else [])
    if args.shuffle_partitions != 64:
        extra.append(f"--shuffle-partitions {args.shuffle_partitions}")
    report = Report("bench_bucketing", f"Bucketed tables: point queries and joins, {rows:,} rows per table, "
                    f"{buckets} buckets", command_line("bench_bucketing", args, extra),
                    {"rows": rows, "buckets": buckets, "reps": reps, "shuffle_partitions": args.shuffle_partitions,
                     "driver_memory": args.driver_memory, "autoBroadcastJoinThreshold": -1,
                     "point": POINT.format(a="a", key=key),
                     "point_in": POINT_IN.format(a="a", keys=", ".join(map(str, keys))),
                     "join": JOIN.format(a="a", b="b"), "data": str(data)})
    how = {"plain": "generate with spark.range + rand, write Parquet", "skiplake": "create_table + append",
           "Spark": "read plain, bucketBy.sortBy.saveAsTable"}
    for name, secs in layout["prepare_s"].items():
        files = layout["layouts"][name]
        report.timing("prepare (one-time, laid out " + layout["made_utc"] + ")", name, [secs],
                      f"{how[name.split()[0]]} -> {files['files']:,} files, {files['bytes']:,} bytes")
    report.extra["layouts"] = layout["layouts"]
    report.extra["prepare_s"] = layout["prepare_s"]

    lake_root = str(data / "lake")
    reads = JvmReads(spark)

    def spark_plain(template: str) -> Callable[[], Any]:
        def run():
            for t in ("a", "b") if "{b}" in template else ("a",):
                spark.read.parquet(str(data / "plain" / t)).createOrReplaceTempView(f"{t}_plain")
            return spark.sql(template.format(a="a_plain", b="b_plain"))
        return run

    def spark_bucketed(template: str) -> Callable[[], Any]:
        return lambda: spark.sql(template.format(a="a_sb", b="b_sb"))

    def lake_sql(template: str, a: str, b: str = "b_bkt") -> Callable[[], Any]:
        return lambda: skiplake.Lake(spark, lake_root).sql(template.format(a=a, b=b))

    def lake_buckets(where: str) -> set[int]:
        from skiplake.layout.bucket_spec import bucket_id_from_name
        return {bucket_id_from_name(f.path) for f in skiplake.Lake(spark, lake_root).table("a_bkt").scan(where).files}

    point = POINT.replace("{key}", str(key))
    point_in = POINT_IN.replace("{keys}", ", ".join(map(str, keys)))
    groups: dict[str, dict[str, Callable[[], Any]]] = {
        f"A. point query k = {key}": {
            "skiplake bucketed": lake_sql(point, "a_bkt"),
            "skiplake unbucketed": lake_sql(point, "a_flat"),
            "spark plain Parquet": spark_plain(point),
            "spark bucketBy table": spark_bucketed(point),
        },
        f"A. point query k IN ({len(keys)} keys)": {
            "skiplake bucketed": lake_sql(point_in, "a_bkt"),
            "skiplake unbucketed": lake_sql(point_in, "a_flat"),
            "spark plain Parquet": spark_plain(point_in),
            "spark bucketBy table": spark_bucketed(point_in),
        },
        "B. join a.k = b.k, count + sum": {
            "skiplake bucket join (lake.sql)": lake_sql(JOIN, "a_bkt", "b_bkt"),
            "spark shuffle join, plain Parquet": spark_plain(JOIN),
            "spark bucket join, bucketBy tables": spark_bucketed(JOIN),
            SORTED_REF: with_conf(spark_bucketed(JOIN), {ORDERING_CONF: "true"}),
        },
    }

    # skiplake's own account of its scans, and whether its join is planned as a bucket join.
    explained: dict[tuple[str, str], Any] = {}
    for section, contenders in groups.items():
        for name in contenders:
            if name.startswith("skiplake"):
                table = "a_flat" if "unbucketed" in name else "a_bkt"
                sql = JOIN.format(a="a_bkt", b="b_bkt") if section.startswith("B.") else (
                    point if "IN" not in section else point_in).format(a=table)
                explained[(section, name)] = skiplake.Lake(spark, lake_root).explain(sql)
    join_ex = explained[("B. join a.k = b.k, count + sum", "skiplake bucket join (lake.sql)")]
    progress("lake.explain of the join:\n" + join_ex.text())
    report.check("lake.explain: the join runs as a bucket join", bool(join_ex.joins) and join_ex.joins[0].bucketed,
                 join_ex.joins[0].reason if join_ex.joins else "no join reported")
    report.extra["explain"] = {f"{s} / {n}": e.to_dict() for (s, n), e in explained.items()}

    results: dict[tuple[str, str], dict[str, Any]] = {}
    for section, contenders in groups.items():
        def run_one(fn: Callable[[], Any]) -> tuple[float, Any, dict[str, Any]]:
            holder: dict[str, Any] = {}
            conf: dict[str, str] = getattr(fn, "conf", {})
            saved = {k: spark.conf.get(k, None) for k in conf}
            for k, v in conf.items():
                spark.conf.set(k, v)
            before = reads.now()

            def go():
                df = fn()
                holder["df"] = df
                return tuple(df.collect()[0])
            try:
                secs, answer = timed(go)
                after = reads.now()
                facts = plan_facts(holder["df"])
            finally:
                for k, v in saved.items():
                    spark.conf.unset(k) if v is None else spark.conf.set(k, v)
            facts["read_bytes"] = after - before if before is not None and after is not None else None
            return secs, answer, facts

        progress(f"{section}: warm-up")
        for fn in contenders.values():
            run_one(fn)
        samples: dict[str, list[float]] = {name: [] for name in contenders}
        seen: dict[str, tuple[Any, dict[str, Any]]] = {}
        for rep in range(reps):
            for name in rotated(list(contenders), rep):
                secs, answer, facts = run_one(contenders[name])
                samples[name].append(secs)
                seen[name] = (answer, facts)
            progress(f"{section}: rep {rep + 1}/{reps}: " + ", ".join(
                f"{n} {fmt_s(samples[n][-1])}" for n in contenders))
        answers = {n: a for n, (a, _) in seen.items()}
        report.check(f"{section}: same answer from every contender", len(set(answers.values())) == 1,
                     json.dumps({k: list(v) for k, v in answers.items()}))
        for name, secs in samples.items():
            facts = seen[name][1]
            if facts["scans"] and not facts["files"]:
                note = "files, bytes: not reported (Spark left the scan nodes' metrics at 0)"
            else:
                note = f"files {facts['files']:,}, bytes {facts['bytes']:,}"
            if facts["read_bytes"] is not None:
                note += f"; read {facts['read_bytes']:,}"
            ex = explained.get((section, name))
            if ex is not None and not section.startswith("B."):
                r = ex[0]
                note += f"; ScanReport {r.files_selected}/{r.files_total} files, {r.bytes_selected:,} bytes"
                if r.buckets_total:
                    note += f", {r.buckets_selected}/{r.buckets_total} buckets"
            if name == "spark bucketBy table":
                # Spark's numFiles/filesSize count the files before its bucket pruning; these are
                # the files of the buckets it keeps (the buckets skiplake's scan selects).
                where = section.split("point query ", 1)[1]
                where = f"k IN ({', '.join(map(str, keys))})" if "IN" in where else where
                n, size = files_of_buckets(data / "spark_bucketed" / "a_sb", lake_buckets(where))
                facts["bucket_pruned_files"], facts["bucket_pruned_bytes"] = n, size
                note += f"; after bucket pruning {n} files, {size:,} bytes"
            if facts["joins"]:
                j = facts["joins"][0]
                note += (f"; {j['operator']}, Exchange under join: "
                         + (f"yes ({len(j['exchanges_under'])})" if j["exchanges_under"] else "no")
                         + f", Sort under join: {'yes (' + str(j['sorts_under']) + ')' if j['sorts_under'] else 'no'}")
            if facts["bucketed_scans"]:
                note += f"; bucketed scans {facts['bucketed_scans']}/{facts['scans']}"
            report.timing(section, name, secs, note)
            results[(section, name)] = {"median_s": median(secs), "samples_s": secs, **facts,
                                        "answer": list(seen[name][0])}
        if section.startswith("A."):
            # For reference: how much of skiplake's time is opening the lake and planning the scan.
            sql = (point_in if "IN" in section else point).format(a="a_bkt")
            plan_secs = [timed(lambda: skiplake.Lake(spark, lake_root).explain(sql))[0] for _ in range(reps)]
            report.timing(section, "(ref) skiplake bucketed, planning only (lake.explain)", plan_secs,
                          "open the lake, load the snapshot, plan the scan; no Spark job")
    report.extra["results"] = {f"{s} / {n}": v for (s, n), v in results.items()}

    # ---- ratios, goals and checks
    for section in [s for s in groups if s.startswith("A.")]:
        b, f = results[(section, "skiplake bucketed")], results[(section, "skiplake unbucketed")]
        p, sb = results[(section, "spark plain Parquet")], results[(section, "spark bucketBy table")]
        report.ratio(f"{section}: spark plain Parquet / skiplake bucketed", p["median_s"] / b["median_s"], "time")
        report.ratio(f"{section}: skiplake unbucketed / skiplake bucketed", f["median_s"] / b["median_s"], "time")
        report.ratio(f"{section}: spark bucketBy table / skiplake bucketed", sb["median_s"] / b["median_s"], "time")
        report.ratio(f"{section}: bytes, skiplake bucketed / unbucketed", b["bytes"] / max(1, f["bytes"]),
                     f"scan-node filesSize; 1/{buckets} = {1 / buckets:.4f}")
        if b["read_bytes"] and f["read_bytes"]:
            report.ratio(f"{section}: bytes read, skiplake bucketed / unbucketed",
                         b["read_bytes"] / f["read_bytes"], "the JVM's read(2) bytes (/proc rchar)")
    sec = f"A. point query k = {key}"
    b, f = results[(sec, "skiplake bucketed")], results[(sec, "skiplake unbucketed")]
    report.goal("point query: share of the table's bytes the bucketed table scans", b["bytes"] / max(1, f["bytes"]),
                1.25 / buckets, unit="%", note=f"~1/{buckets} = {100 / buckets:.2f}% expected; "
                f"{b['files']} of {f['files']} files")

    j = "B. join a.k = b.k, count + sum"
    sk = results[(j, "skiplake bucket join (lake.sql)")]
    sh = results[(j, "spark shuffle join, plain Parquet")]
    nb = results[(j, "spark bucket join, bucketBy tables")]
    report.ratio("join: spark shuffle join / skiplake bucket join", sh["median_s"] / sk["median_s"], "time")
    report.ratio("join: spark bucketBy join / skiplake bucket join", nb["median_s"] / sk["median_s"], "time")
    ref = results[(j, SORTED_REF)]

    def paired(x: dict[str, Any], y: dict[str, Any]) -> float:
        """Median over repetitions of x's time / y's time in the same repetition (steadier than a
        ratio of medians when the machine's load drifts during the run)."""
        return median([a / b for a, b in zip(x["samples_s"], y["samples_s"])])
    report.ratio("join: spark shuffle join / skiplake bucket join, paired", paired(sh, sk),
                 "median of per-repetition ratios")
    report.ratio("join: spark bucketBy join / skiplake bucket join, paired", paired(nb, sk),
                 "median of per-repetition ratios")
    report.ratio(f"join: (ref) spark bucketBy join with {ORDERING_CONF}=true / skiplake bucket join",
                 ref["median_s"] / sk["median_s"], "time; Spark claims a bucket's order only when it is one file, "
                 "which bucketBy's several files per bucket never are")
    report.goal("join: speedup vs Spark's shuffle join", sh["median_s"] / sk["median_s"], 2.0, unit="x", at_least=True)
    report.goal("join: speed vs Spark's own bucket join (>= 1: no slower)", nb["median_s"] / sk["median_s"], 1.0,
                unit="x", at_least=True, note="differences under ~10% are noise on this machine")
    pt, plain = results[(sec, "skiplake bucketed")], results[(sec, "spark plain Parquet")]
    report.headline(f"point query k = {key}, bucketed", pt["median_s"],
                    note=f"{pt['bytes'] / max(1, f['bytes']) * 100:.2f}% of the bytes; plain Spark "
                    f"{plain['median_s']:.2f} s")
    report.headline("bucket join", sk["median_s"], note=f"Spark's shuffle join {sh['median_s']:.2f} s, "
                    f"Spark's bucketBy join {nb['median_s']:.2f} s"
                    + ("; no Exchange" if exchange_free_join(sk) else "; with an Exchange")
                    + ("" if any(x["sorts_under"] for x in sk["joins"]) else ", no Sort"))

    report.check("skiplake bucket join: no Exchange under the join", exchange_free_join(sk), json.dumps(sk["joins"]))
    report.check("Spark bucketBy join: no Exchange under the join", exchange_free_join(nb), json.dumps(nb["joins"]))
    report.check("Spark plain join: shuffles (Exchange under the join)", not exchange_free_join(sh),
                 json.dumps(sh["joins"]))

    lay = layout["layouts"]
    report.notes.append("files per layout: " + "; ".join(f"{k} {v['files']:,} files ({v['bytes']:,} bytes)"
                                                         for k, v in lay.items()))
    report.notes.append("Spark's bucketBy writes one file per bucket per write task: the file counts above come "
                        "from a local[2] write; a cluster write with T tasks makes up to T x buckets files")
    report.notes.append("files, bytes = the scan nodes' numFiles and filesSize (for a Spark bucketBy table, counted "
                        "before Spark prunes buckets: the files it keeps are given after it); read = bytes "
                        "the Spark JVM read through read(2) during the query (/proc/<pid>/io rchar, page cache "
                        "included; Parquet reads only footers, the needed column chunks, and skips row groups "
                        "by their stats and dictionaries)")
    spark.stop()
    return finish(report, args)


if __name__ == "__main__":
    sys.exit(main())
