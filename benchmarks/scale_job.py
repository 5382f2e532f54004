"""Scan planning in the driver against a Spark job, on the synthetic logs of benchmark 29:

    .venv/bin/python -m benchmarks.scale_job [--files 1000000,10000000] [--stats typed] [--reps 2]
        [--what scan|sql-count|sql-explain] [--data DIR]

For each log, one of (--what): `Table.open` plus `t.scan("ss_ticket_number = k")` (one file
kept); `lake.sql("SELECT COUNT(*) FROM delta.`path`")` collected (answered from the stats, no
file read); or `lake.explain` of `SELECT * ... WHERE ss_ticket_number = k` (planned, one file
kept; the synthetic logs have no data files to read), by a Lake over the logs' folder. Each once with the
log replayed in the driver and once planned by a Spark job over the checkpoint
(spark.skiplake.log.replayJobMinFiles set to 0), each in a fresh process with its own local[2]
SparkSession started before the clock; one unrecorded warm-up each, then --reps runs, taking
turns going first. Prints the medians: seconds, and the driver's Python peak memory (the Spark
job's tasks run in Spark's Python workers, whose memory is theirs). Not part of the suite.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from testing_support.paths import DEFAULT_BASE, setup_java

ROWS_PER_FILE = 1000


def probe(path: str, ticket: int, by_job: bool, what: str = "scan") -> dict:
    """One measurement, in this process."""
    setup_java()
    import skiplake
    from skiplake.spark.reads.log_job import MIN_FILES_CONF
    spark = skiplake.local_spark(app_name="scale-job", shuffle_partitions=2, driver_memory="4g",
                                 conf={MIN_FILES_CONF: "0" if by_job else str(10**12)})
    spark.range(1).collect()   # the JVM and a Python worker up before the clock
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    started = time.perf_counter()
    if what == "scan":
        report = skiplake.Table.open(spark, path).scan(f"ss_ticket_number = {ticket}").report
        answer = None
    else:
        root, name = os.path.split(path.rstrip("/"))
        lake = skiplake.Lake(spark, root)
        if what == "sql-count":
            answer = lake.sql(f"SELECT COUNT(*) AS n FROM `{name}`").collect()[0].n
            assert lake.last_explain is not None
            report = lake.last_explain[0]
        else:
            [report] = lake.explain(f"SELECT * FROM `{name}` WHERE ss_ticket_number = {ticket}")
            answer = None
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    spark.stop()
    return {"seconds": seconds, "peak_rss": peak, "rss_before": before, "selected": report.files_selected,
            "total": report.files_total, "replay": report.replay, "answer": answer}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="1000000,10000000")
    parser.add_argument("--stats", default="typed", choices=["typed", "json"])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--what", default="scan", choices=["scan", "sql-count", "sql-explain"])
    parser.add_argument("--data", default=str(DEFAULT_BASE))
    parser.add_argument("--probe", nargs=4, metavar=("PATH", "TICKET", "MODE", "WHAT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        path, ticket, mode, what = args.probe
        print(json.dumps(probe(path, int(ticket), mode == "job", what)))
        return 0
    print(f"scale_job: {' '.join(sys.argv[1:]) or '(defaults)'}")
    results = []
    for files in [int(x) for x in args.files.split(",")]:
        path = f"{args.data}/scale-{files}" + ("-typed" if args.stats == "typed" else "")
        ticket = (files // 2) * ROWS_PER_FILE + 7
        runs: dict[str, list[dict]] = {"driver": [], "job": []}
        for rep in range(args.reps + 1):
            for mode in (("driver", "job") if rep % 2 == 0 else ("job", "driver")):
                done = subprocess.run([sys.executable, "-m", "benchmarks.scale_job", "--probe", path, str(ticket), mode,
                                       args.what], check=False, capture_output=True, text=True)
                if done.returncode != 0:
                    raise SystemExit(f"the {mode} probe failed: {done.stderr[-3000:]}")
                out = json.loads(done.stdout.strip().splitlines()[-1])
                wanted = 0 if args.what == "sql-count" else 1   # a count from the stats reads no file
                if out["selected"] != wanted or out["total"] < files:
                    raise SystemExit(f"{mode} at {files:,} files selected {out['selected']} of {out['total']} files, "
                                     f"not {wanted} of {files:,}")
                if args.what == "sql-count" and out["answer"] != out["total"] * ROWS_PER_FILE:
                    raise SystemExit(f"{mode} at {files:,} files counted {out['answer']} rows")
                if rep:
                    runs[mode].append(out)
        row = {"files": files, "stats": args.stats, "what": args.what}
        for mode, got in runs.items():
            row[mode] = {"seconds": statistics.median(r["seconds"] for r in got),
                         "peak_gib": statistics.median(r["peak_rss"] for r in got) / 2**30,
                         "before_gib": statistics.median(r["rss_before"] for r in got) / 2**30,
                         "replay": got[0]["replay"] or "the driver"}
        results.append(row)
        d, j = row["driver"], row["job"]
        print(f"{files:>12,} files ({args.stats}, {args.what})  driver {d['seconds']:6.2f} s, peak {d['peak_gib']:.2f} GiB  |  "
              f"job {j['seconds']:6.2f} s, peak {j['peak_gib']:.2f} GiB ({j['replay']})  |  "
              f"job / driver {j['seconds'] / d['seconds']:.2f}x")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
