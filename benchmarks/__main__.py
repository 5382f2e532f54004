"""The whole benchmark suite at one revision, into one run folder, then the summary table of
docs/benchmarks.md from that run alone (`make bench` runs this).

    .venv/bin/python -m benchmarks                     # every benchmark, a new run folder
    .venv/bin/python -m benchmarks --quick             # every benchmark at small sizes (a run not for the docs)
    .venv/bin/python -m benchmarks --list              # the plan: each benchmark's arguments and estimate
    .venv/bin/python -m benchmarks --resume RUN_DIR    # run what did not finish, at the run's revision
    .venv/bin/python -m benchmarks --resume RUN_DIR --only bench_dfp   # run one again into that run

A run refuses a tree with uncommitted changes (--allow-dirty runs anyway, marked so, and the docs
refuse it). The exit status is non-zero if a benchmark failed or one of its checks did.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.suite import Entry, duration, new_run, resume_run, run_steps
from skiplake.errors import InvalidArgumentError

# The suite, in the order of docs/benchmarks.md: benchmark N is the Nth. A new benchmark goes at
# the end (and its section, "## N. ...", at the end of the page).
BENCHMARKS = ["bench_snapshot", "bench_append", "bench_commit", "bench_concurrency", "bench_skipping", "bench_planning",
              "bench_catalog", "bench_bucketing", "bench_dfp", "bench_py4j", "bench_overhead", "bench_local_build",
              "bench_dv", "bench_dfp_layout", "bench_s3", "bench_catalog_server", "bench_row_filter",
              "bench_install", "bench_convert", "bench_merge", "bench_dfp_cost", "bench_connect",
              "bench_log", "bench_changes", "bench_clustering", "bench_sql", "bench_data_source", "bench_streaming",
              "bench_scale"]

# A full run's parameters and estimated durations (minutes on this project's 2-core machine with
# nothing else running, the working data built from scratch: TPC-DS generated once per scale).
# Every benchmark runs at the scale its goal names; a benchmark not listed runs with its defaults.
SUITE: dict[str, Entry] = {
    "bench_snapshot": Entry(minutes=1),
    "bench_append": Entry(minutes=2),
    "bench_commit": Entry(minutes=1),
    "bench_concurrency": Entry(minutes=4),
    "bench_skipping": Entry(minutes=12),
    "bench_planning": Entry(minutes=1),
    "bench_catalog": Entry(minutes=6),
    "bench_bucketing": Entry(minutes=6),
    # The lake of TPC-DS sf=10 that benchmarks 9, 12, 14 and 17 share is built here (~10 min).
    "bench_dfp": Entry(("--contenders", "spark,dynamic"), minutes=70,
                       note="plain Spark and dynamic pruning only, to fit the suite's time: the contender without "
                            "dynamic pruning and Spark's DPP on a date-partitioned copy (the goal against DPP) would "
                            "add about 1 h 45 min; benchmark 14 compares with DPP"),
    "bench_py4j": Entry(minutes=1),
    "bench_overhead": Entry(minutes=5),
    "bench_local_build": Entry(minutes=1),
    "bench_dv": Entry(minutes=9),
    "bench_dfp_layout": Entry(minutes=12),
    "bench_s3": Entry(minutes=6),
    "bench_catalog_server": Entry(minutes=15),
    "bench_row_filter": Entry(minutes=11),
    "bench_install": Entry(minutes=6),
    "bench_convert": Entry(minutes=14),
    "bench_merge": Entry(minutes=4),
    "bench_dfp_cost": Entry(minutes=6),
    # Both modes over the TPC-DS sf=1 lake: one warm-up and one measured run per query and mode.
    "bench_connect": Entry(("--reps", "1"), minutes=10),
    # Two 100,000-file checkpoints, then 10,000 small commits twice (with and without cleanup).
    "bench_log": Entry(minutes=15),
    # Two 5M-row tables with 10 versions of changes each, read by both sides 6 times.
    "bench_changes": Entry(minutes=5),
    # TPC-DS sf=10 store_sales clustered and Z-ordered (built once, ~12 min), two rounds of four
    # OPTIMIZEs on copies, then 11 queries on both layouts.
    "bench_clustering": Entry(minutes=45),
    # TPC-DS sf=1's store_sales and store_returns written once, then the ETL script on four copies
    # per side, and 2 x 15 statements against API calls.
    "bench_sql": Entry(minutes=12),
    # TPC-DS sf=1's store_sales written and Z-ordered once, then a full scan and a filter, 5 + 1 runs each.
    "bench_data_source": Entry(minutes=3),
    # 100 source commits of 100,000 rows and 20 commits of upserts into 1M rows, streamed once per side.
    "bench_streaming": Entry(minutes=15),
    # Synthetic logs of 100,000, 1M and 10M files written once (~3 min), then two fresh-process runs
    # per size and contender (a 10M-file load takes 1-2 min and up to 10 GB per side).
    "bench_scale": Entry(minutes=20),
}


def plan_text() -> str:
    lines, total = [], 0.0
    for number, name in enumerate(BENCHMARKS, 1):
        entry = SUITE.get(name, Entry())
        total += entry.minutes or 0
        est = f"~{duration(entry.minutes * 60)}" if entry.minutes else "no estimate"
        lines.append(f"{number:>3}. {name:<22s} {est:>14s}  {' '.join(entry.args)}")
    unknown = [n for n in BENCHMARKS if SUITE.get(n, Entry()).minutes is None]
    lines.append(f"     total {'at least ' if unknown else ''}~{duration(total * 60)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="run the whole skiplake benchmark suite into one run folder")
    p.add_argument("--quick", action="store_true", help="every benchmark at small sizes (a run the docs refuse)")
    p.add_argument("--only", default=None, help="comma-separated benchmarks, e.g. bench_snapshot,bench_commit")
    p.add_argument("--resume", default=None, metavar="RUN_DIR",
                   help="continue this run: its unfinished benchmarks, or those of --only")
    p.add_argument("--allow-dirty", action="store_true",
                   help="run on a tree with uncommitted changes (the run is marked so; the docs refuse it)")
    p.add_argument("--no-docs", action="store_true", help="leave docs/ alone; the summary goes to the run folder")
    p.add_argument("--list", action="store_true", help="print the plan and the estimates, run nothing")
    args = p.parse_args(argv)
    if args.list:
        print(plan_text())
        return 0
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    unknown = [n for n in only or [] if n not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmarks {unknown}; choose from {', '.join(BENCHMARKS)}")
    from benchmarks import summary
    folder: Path | None = None
    try:
        if args.resume:
            if args.quick:
                p.error("--quick comes from the run being resumed; leave it out")
            folder = Path(args.resume)
            run, todo = resume_run(folder, BENCHMARKS, SUITE, only)
        else:
            run, folder = new_run(BENCHMARKS, SUITE, only, args.quick, args.allow_dirty)
            todo = list(run.steps)
        failed = run_steps(run, folder, todo)
        written = summary.publish(folder, docs=not args.no_docs)
    except InvalidArgumentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted" + (f": resume with --resume {folder}" if folder else ""), file=sys.stderr)
        return 130
    for line in written:
        print(line, file=sys.stderr)
    if failed:
        print(f"{failed} benchmark(s) did not pass: rerun them with --resume {folder} (--only NAME)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
