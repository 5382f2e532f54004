"""Benchmark 10: py4j replies with and without Nagle's algorithm on the JVM's end (skiplake.spark.session.gateway).

PySpark's calls into the JVM go over a local socket. With Nagle's algorithm on at the JVM's end
(py4j's default), a reply longer than the JVM's 8 KiB write buffer waits for a delayed
acknowledgement (40 ms on Linux). Measured in one session, the two settings taking turns:

  reply of N bytes       a JVM call returning a string of N characters (N = 1 KB ... 400 KB)
  plan as text           the optimized plan of a 3-way join of a wide table printed as text (~10 KB;
                         lake.sql reads each query's plan so)
  collect of 10 rows     a tiny Spark action from Python (a control: its data comes over another socket)

    .venv/bin/python -m benchmarks.bench_py4j [--quick] [--reps N] [--json]
"""
from __future__ import annotations

import sys

from benchmarks.common import Progress, Report, base_parser, command_line, finish, median, rotated, timed

SIZES = (1_000, 8_000, 16_000, 100_000, 400_000)
SETTINGS = ("nagle", "nodelay")


def main(argv: list[str] | None = None) -> int:
    args = base_parser(__doc__.splitlines()[0]).parse_args(argv)
    reps = args.reps or (5 if args.quick else 15)
    progress = Progress("py4j")
    from testing_support.paths import setup_java
    setup_java()
    import skiplake
    from skiplake.spark.query.catalyst import optimized_plan, tree_text
    from skiplake.spark.session.gateway import set_nodelay
    spark = skiplake.local_spark(app_name="bench-py4j")
    strings = spark._jvm.org.apache.commons.lang3.StringUtils
    frame = spark.range(100_000).selectExpr("id", "id % 7 AS k", *[f"id + {i} AS column_{i}" for i in range(150)])
    frame.createOrReplaceTempView("t")
    # A plan of a few joins over a wide table prints to ~10 KB, as TPC-DS plans over the lake do.
    query = spark.sql("SELECT a.*, b.column_1 AS b1, c.column_2 AS c2 FROM t a JOIN t b ON a.id = b.id "
                      "JOIN t c ON b.k = c.k WHERE a.k IN (1, 2, 3)")
    tiny = frame.limit(10)
    tiny.collect()
    measures = {f"reply of {n:,} bytes": (lambda n=n: strings.repeat("x", n)) for n in SIZES}
    plan = optimized_plan(query)
    measures["plan as text"] = lambda: tree_text(plan)
    measures["collect of 10 rows"] = tiny.collect
    progress(f"plan text: {len(tree_text(plan)):,} characters")
    samples = {(s, m): [] for s in SETTINGS for m in measures}
    for rep in range(reps + 1):  # the first round warms up
        for setting in rotated(SETTINGS, rep):
            set_nodelay(spark, setting == "nodelay")
            for name, call in measures.items():
                secs, _ = timed(call)
                if rep:
                    samples[(setting, name)].append(secs)
        progress(f"round {rep + 1} of {reps + 1}")
    set_nodelay(spark, True)
    report = Report("bench_py4j", "py4j replies: Nagle's algorithm on (py4j's default) and off (skiplake)",
                    command_line("bench_py4j", args), {"reps": reps})
    for name in measures:
        for setting in SETTINGS:
            report.timing(name, setting, samples[(setting, name)])
        report.ratio(f"{name}: nagle / nodelay", median(samples[("nagle", name)]) / median(samples[("nodelay", name)]))
    report.goal("reply of 100,000 bytes with nodelay", median(samples[("nodelay", "reply of 100,000 bytes")]), 0.01)
    for name in ("reply of 16,000 bytes", "plan as text"):
        off, on = median(samples[("nodelay", name)]), median(samples[("nagle", name)])
        report.headline(f"{name}, TCP_NODELAY on (skiplake)", off, note=f"{on * 1000:.1f} ms with py4j's default")
    return finish(report, args)


if __name__ == "__main__":
    sys.exit(main())
