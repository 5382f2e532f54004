"""Benchmark 2: appending 10M rows, skiplake's `table.append(df)` against `df.write.parquet(path)` (goal: <= 1.2x).

The DataFrame is `spark.range(rows)` with derived columns of the common types (long, int,
double, string, date, int), never cached: each write recomputes it, for both contenders alike.
Variants:
  unpartitioned   both write the same files (one per Spark task)
  partitioned     partitionBy("ss_store_sk"), 16 values
  date            partitionBy("ss_sold_date"), 1,826 values: thousands of small files; opt-in
                  (--variants unpartitioned,partitioned,date), as Spark alone needs minutes for it

For each variant and repetition both contenders write into a fresh folder, taking turns going
first (use an even --reps); a small untimed warm-up write of each, per variant, comes first.
skiplake's table is created before the clock starts: the time is that of `table.append(df)`.

skiplake's time is split, from outside, by wrapping the functions append goes through:
  snapshot load      Snapshot.load (the transaction's pinned snapshot)
  schema check       Transaction.prepare (compare with the table schema, conform the DataFrame)
  spark write        DataFrameWriter.save (Spark's own Parquet write into the staging folder)
  move               moving the written files from staging into the table folder
  footer stats       reading each file's Parquet footer into the stats JSON
  log commit         skiplake.txn.commit (put-if-absent of the JSON commit)
  other              the rest (staging cleanup, os.stat per file, metrics)

    .venv/bin/python -m benchmarks.bench_append [--quick] [--json] [--rows N] [--variants ...]
"""
from __future__ import annotations

import os
import sys
import time
from collections import defaultdict

from benchmarks.common import (
    Progress,
    Report,
    base_parser,
    command_line,
    finish,
    median,
    rmtree,
    rotated,
    timed,
    workdir,
)
from testing_support.paths import setup_java

PHASES = ["snapshot load", "schema check", "spark write", "move", "footer stats", "log commit"]
VARIANTS = {
    "unpartitioned": [],
    "partitioned": ["ss_store_sk"],
    "date": ["ss_sold_date"],
}


def make_df(spark, rows: int):
    from pyspark.sql import functions as F
    id_ = F.col("id")
    return spark.range(rows).select(
        id_.alias("ss_ticket_number"),                                                     # long
        (id_ % 200_000).cast("int").alias("ss_item_sk"),                                    # int
        ((id_ % 100_000) * 0.01 + 0.5).alias("ss_sales_price"),                             # double
        F.concat(F.lit("promo-"), (id_ % 50_000).cast("string")).alias("ss_promo_name"),   # string
        F.date_add(F.lit("1998-01-01").cast("date"), (id_ % 1826).cast("int")).alias("ss_sold_date"),  # date
        (id_ % 16).cast("int").alias("ss_store_sk"),                                        # int
    )


class PhaseRecorder:
    """Wraps the functions skiplake's append goes through and adds up their time while active."""

    def __init__(self) -> None:
        self.active = False
        self.totals: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self._patched: list[tuple[object, str, object]] = []

    def _wrap(self, owner: object, attr: str, phase: str, static: bool = False) -> None:
        orig = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)
        if orig is None:
            return  # the function moved: that phase is then counted in "other"
        func = orig.__func__ if static else orig
        rec = self

        def wrapper(*a, **k):
            if not rec.active:
                return func(*a, **k)
            t = time.perf_counter()
            try:
                return func(*a, **k)
            finally:
                rec.totals[phase] += time.perf_counter() - t
                rec.counts[phase] += 1

        setattr(owner, attr, staticmethod(wrapper) if static else wrapper)
        self._patched.append((owner, attr, orig))

    def install(self) -> None:
        import pyspark.sql.readwriter as rw

        import skiplake.spark.writes.data_files as write_mod
        import skiplake.spark.writes.transaction as txn_mod
        from skiplake.log.snapshot import Snapshot
        self._wrap(Snapshot, "load", "snapshot load", static=True)
        self._wrap(txn_mod.Transaction, "prepare", "schema check")
        self._wrap(rw.DataFrameWriter, "save", "spark write")
        self._wrap(write_mod, "_move_into_table", "move")
        self._wrap(write_mod, "many_file_stats", "footer stats")
        self._wrap(txn_mod, "commit", "log commit")

    def uninstall(self) -> None:
        for owner, attr, orig in reversed(self._patched):
            setattr(owner, attr, orig)
        self._patched.clear()

    def start(self) -> None:
        self.totals.clear()
        self.counts.clear()
        self.active = True

    def stop(self) -> dict[str, float]:
        self.active = False
        return dict(self.totals)


def _parquet_rows_and_files(path: str) -> tuple[int, int]:
    import pyarrow.parquet as pq
    rows = files = 0
    for root, _dirs, names in os.walk(path):
        for n in names:
            if n.endswith(".parquet") and not n.startswith((".", "_")):
                rows += pq.read_metadata(os.path.join(root, n)).num_rows
                files += 1
    return rows, files


def _du(path: str) -> int:
    total = 0
    for root, _dirs, names in os.walk(path):
        for n in names:
            if n.endswith(".parquet"):
                total += os.path.getsize(os.path.join(root, n))
    return total


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=None, help="rows to append (default 10,000,000; quick 200,000)")
    p.add_argument("--variants", default="unpartitioned,partitioned",
                   help=f"comma-separated, of {', '.join(VARIANTS)} (default: %(default)s)")
    args = p.parse_args(argv)
    rows = args.rows or (200_000 if args.quick else 10_000_000)
    reps = args.reps or (2 if args.quick else 6)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        p.error(f"unknown variants {bad}; choose from {list(VARIANTS)}")
    extra = ([f"--rows {rows}"] if args.rows else []) + (
        [f"--variants {args.variants}"] if args.variants != "unpartitioned,partitioned" else [])

    progress = Progress("append")
    setup_java()
    report = Report(
        benchmark="append", title=f"Appending {rows:,} rows: table.append(df) against df.write.parquet(path)",
        command=command_line("bench_append", args, extra),
        params={"rows": rows, "reps": reps, "variants": ",".join(variants),
                "columns": "long, int, double, string, date, int", "compression": "snappy"},
    )
    progress("starting Spark (skiplake.local_spark(): local[2], 4g driver)")
    import skiplake
    spark = skiplake.local_spark(app_name="bench-append")
    report.params["spark"] = f"{spark.sparkContext.master}, defaultParallelism={spark.sparkContext.defaultParallelism}"
    recorder = PhaseRecorder()
    recorder.install()

    with workdir("append", args.workdir, args.keep, progress) as wd:
        counter = iter(range(10**9))

        def run_parquet(df, parts: list[str]) -> tuple[float, str, dict]:
            out = str(wd / f"parquet-{next(counter)}")
            w = df.write.mode("errorifexists").option("compression", "snappy")
            if parts:
                w = w.partitionBy(*parts)
            os.sync()
            secs, _ = timed(lambda: w.parquet(out))
            return secs, out, {}

        def run_skiplake(df, parts: list[str]) -> tuple[float, str, dict]:
            out = str(wd / f"skiplake-{next(counter)}")
            table = skiplake.Table.create(spark, out, df.schema, partition_by=parts)
            os.sync()
            recorder.start()
            try:
                secs, _ = timed(lambda: table.append(df))
            finally:
                phases = recorder.stop()
            phases["other"] = secs - sum(phases.values())
            return secs, out, phases

        contenders = {"df.write.parquet": run_parquet, "skiplake table.append": run_skiplake}


        for variant in variants:
            parts = VARIANTS[variant]
            df = make_df(spark, rows)
            samples: dict[str, list[float]] = {k: [] for k in contenders}
            pair_ratios: list[float] = []
            phases: list[dict[str, float]] = []
            progress(f"{variant}: warm-up, one small write of each contender (not timed)")
            small = make_df(spark, 20_000)
            for fn in contenders.values():
                _, out, _ = fn(small, parts)
                rmtree(out)
            progress(f"{variant}: {rows:,} rows, partitionBy({', '.join(parts)}), {reps} reps")
            for rep in range(reps):
                outs = {}
                for name in rotated(list(contenders), rep):
                    secs, out, ph = contenders[name](df, parts)
                    samples[name].append(secs)
                    outs[name] = out
                    if ph:
                        phases.append(ph)
                pair_ratios.append(samples["skiplake table.append"][-1] / samples["df.write.parquet"][-1])
                progress(f"  rep {rep + 1}/{reps} ({' first, '.join(rotated(['parquet', 'skiplake'], rep))} second): "
                         f"parquet {samples['df.write.parquet'][-1]:.2f} s, skiplake "
                         f"{samples['skiplake table.append'][-1]:.2f} s (ratio {pair_ratios[-1]:.2f}; spark write "
                         f"{phases[-1].get('spark write', 0):.2f} s, stats {phases[-1].get('footer stats', 0):.2f} s, "
                         f"commit {phases[-1].get('log commit', 0) * 1000:.0f} ms)")
                if rep == reps - 1:  # check the last outputs: same rows, same number of files
                    from skiplake.log.snapshot import Snapshot
                    snap = Snapshot.load(outs["skiplake table.append"])
                    import json
                    sk_rows = sum(json.loads(s)["numRecords"] for s in snap.files.column("stats").to_pylist())
                    pq_rows, pq_files = _parquet_rows_and_files(outs["df.write.parquet"])
                    report.check(f"{variant}: rows", sk_rows == pq_rows == rows,
                                 f"skiplake log says {sk_rows:,}, parquet footers {pq_rows:,}, expected {rows:,}")
                    report.check(f"{variant}: files", snap.num_files == pq_files,
                                 f"skiplake {snap.num_files}, parquet {pq_files}")
                    report.extra[f"{variant}_bytes"] = {"skiplake": _du(outs["skiplake table.append"]),
                                                        "parquet": _du(outs["df.write.parquet"]),
                                                        "files": pq_files}
                for out in outs.values():
                    rmtree(out)

            files = report.extra[f"{variant}_bytes"]["files"]
            for name, s in samples.items():
                report.timing(variant, name, s, f"{files} files" if name == "df.write.parquet" else "")
            for ph in PHASES + ["other"]:
                vals = [x.get(ph, 0.0) for x in phases]
                report.timing(variant, f"  skiplake: {ph}", vals)
            overhead = [s - p for s, p in zip(samples["skiplake table.append"], samples["df.write.parquet"])]
            report.timing(variant, "skiplake - parquet (paired)", overhead, "difference within each rep")
            ratio = median(samples["skiplake table.append"]) / median(samples["df.write.parquet"])
            report.ratio(f"{variant}: skiplake / parquet", ratio)
            report.ratio(f"{variant}: skiplake / parquet, median of paired ratios", median(pair_ratios),
                         "ratio within each rep, then the median")
            non_spark = median([sum(v for k, v in x.items() if k != "spark write") for x in phases])
            report.ratio(f"{variant}: skiplake non-Spark time / parquet", non_spark / median(samples["df.write.parquet"]),
                         f"everything but DataFrameWriter.save: median {non_spark:.2f} s")
            report.goal(f"{variant}: table.append / df.write.parquet", ratio, 1.2, unit="x")
            report.headline(f"{variant} ({files:,} files), table.append / df.write.parquet", ratio, "x",
                            f"table.append {median(samples['skiplake table.append']):.2f} s, "
                            f"df.write.parquet {median(samples['df.write.parquet']):.2f} s")

    recorder.uninstall()
    spark.stop()
    report.notes.append("timings are wall clock on a shared machine; ratios use medians of alternating runs")
    return finish(report, args)


if __name__ == "__main__":
    sys.exit(main())
