"""Benchmark 29: tables of millions of files, from the log alone.

Synthetic logs (benchmarks.scale_logs: a checkpoint of every file plus 10 commits of 100 files,
data files absent) of 100,000, 1,000,000 and (without --quick, unless --files says otherwise)
10,000,000 files. Each measurement runs in a fresh process (benchmarks.scale_probe), so a
figure includes a cold start and the memory is the process's own peak:

  skiplake:  load the snapshot; plan `ss_ticket_number = k` (one file); COUNT(*) and MIN/MAX
             from the stats; an append commit of one file; a checkpoint written anew.
  delta-rs:  DeltaTable(path); its add actions, filtered to the one file.
  delta-spark (up to 1M files, the JSON-stats log; --no-delta-spark leaves it out): the
             snapshot (DeltaTable.forPath), the files a filtered read scans (inputFiles), and
             COUNT(*), which it answers from the stats; in its own JVM, started before the clock.

Both kinds of checkpoint are measured (--logs): stats as JSON only, and JSON plus typed columns
(add.stats_parsed). Each contender first runs once unrecorded (a warm-up of the page cache and of
the machine's memory), then --reps times per contender and log (default 2), taking turns going first. The append's commit is removed after
each run, so every run sees the same table. A plot of time and memory against files goes beside
the JSON (or to --plot).

    .venv/bin/python -m benchmarks.bench_scale [--quick] [--files 100000,1000000] [--logs json,typed] [--no-delta-spark] [--reps N] [--json] [--out FILE]
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.common import Progress, Report, base_parser, command_line, finish, median, plot_path, rotated
from benchmarks.scale_logs import ROWS_PER_FILE, file_count_of, write_log
from testing_support.paths import DEFAULT_BASE, REPO

CONTENDERS = ("skiplake", "delta-rs")
# delta-spark (its own JVM per run) is measured up to this many files, on the JSON-stats log: its
# snapshot is a Spark job, minutes at 10M files.
DELTA_SPARK_MAX_FILES = 1_000_000
# The two kinds of checkpoint: stats as JSON text only (as delta-rs and older writers leave them),
# and JSON plus typed columns (add.stats_parsed, which skiplake's own checkpoints carry).
LOGS = {"json": False, "typed": True}
LOG_NAMES = {"json": "JSON stats", "typed": "typed stats"}
PHASES = ("load", "plan", "count", "min_max", "append", "checkpoint")
GIB = 1 << 30
Runs = dict[tuple[str, str], list[dict[str, Any]]]   # (contender, log kind) -> measurements


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--files", default=None, help="comma-separated file counts (default 100000,1000000,10000000; "
                                                       "--quick 10000,100000)")
    parser.add_argument("--data", default=str(DEFAULT_BASE), help="where the synthetic logs are kept")
    parser.add_argument("--plot", default=None, help="the PNG's path")
    parser.add_argument("--logs", default="json,typed", help="checkpoint kinds: json (JSON stats only), typed "
                                                             "(also add.stats_parsed); default both")
    parser.add_argument("--no-delta-spark", action="store_true", help="leave delta-spark out")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in (args.files or ("10000,100000" if args.quick else "100000,1000000,10000000")).split(",")]
    kinds = [k for k in args.logs.split(",") if k]
    unknown = [k for k in kinds if k not in LOGS]
    if unknown:
        parser.error(f"--logs: unknown kinds {unknown}; choose from {sorted(LOGS)}")
    reps = args.reps if args.reps is not None else 2
    progress = Progress("bench_scale")
    report = Report("bench_scale", "Tables of millions of files: loading, planning, answers from stats, commits",
                    command_line("bench_scale", args, (["--files", ",".join(map(str, sizes))] if args.files else [])
                                 + (["--logs", args.logs] if args.logs != "json,typed" else [])
                                 + (["--no-delta-spark"] if args.no_delta_spark else [])),
                    {"files": sizes, "reps": reps, "commits_after_checkpoint": 10, "logs": kinds})
    results: dict[int, Runs] = {}
    for size in sizes:
        paths = {kind: _log_path(Path(args.data), size, kind, progress) for kind in kinds}
        ticket = (size // 2) * ROWS_PER_FILE + 7
        order = [(who, kind) for kind in kinds for who in CONTENDERS]
        if not args.no_delta_spark and size <= DELTA_SPARK_MAX_FILES and "json" in kinds:
            order.append(("delta-spark", "json"))
        runs: Runs = {key: [] for key in order}
        for who, kind in order:   # a warm-up run each, not recorded: the page cache, the allocator
            progress(f"{size:,} files, {LOG_NAMES[kind]}: {who}, warm-up ...")
            _probe(who, paths[kind], ticket)
            _drop_new_commits(paths[kind])
        for rep in range(reps):
            for who, kind in rotated(order, rep):
                progress(f"{size:,} files, {LOG_NAMES[kind]}: {who}, run {rep + 1} of {reps} ...")
                runs[(who, kind)].append(_probe(who, paths[kind], ticket))
                _drop_new_commits(paths[kind])
        results[size] = runs
        for kind in kinds:
            _record(report, size, kind, runs)
    _goals(report, results, kinds)
    _plot(results, kinds, plot_path(args, "bench_scale.png"))
    report.extra["runs"] = {str(size): {f"{who}, {kind}": v for (who, kind), v in runs.items()}
                            for size, runs in results.items()}
    return finish(report, args)


def _log_path(base: Path, size: int, kind: str, progress: Progress) -> Path:
    """The synthetic log of `size` files of this kind, written when missing."""
    path = base / f"scale-{size}{'-typed' if LOGS[kind] else ''}"
    if file_count_of(path) != size:
        progress(f"writing a log of {size:,} files ({LOG_NAMES[kind]}) under {path} ...")
        _remove(path)
        write_log(path, size, typed=LOGS[kind])
    return path


def _probe(who: str, path: Path, ticket: int) -> dict[str, Any]:
    name = {"skiplake": "skiplake", "delta-rs": "deltalake", "delta-spark": "delta-spark"}[who]
    done = subprocess.run([sys.executable, "-m", "benchmarks.scale_probe", name, str(path), str(ticket)],
                          cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {who} probe failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _drop_new_commits(path: Path) -> None:
    """Remove the probe's append (versions past the generated 10), so each run sees one table."""
    for f in (path / "_delta_log").glob("*.json"):
        if f.name[:20].isdigit() and int(f.name[:20]) > 10:
            f.unlink()


def _remove(path: Path) -> None:
    import shutil
    shutil.rmtree(path, ignore_errors=True)


def _seconds(runs: list[dict[str, Any]], *phases: str) -> list[float]:
    return [sum(r[p]["seconds"] for p in phases) for r in runs]


def _peak(runs: list[dict[str, Any]], phase: str) -> float:
    return max(r[phase]["peak_rss"] for r in runs) / GIB


def _record(report: Report, size: int, kind: str, runs: Runs) -> None:
    section = f"{size:,} files, {LOG_NAMES[kind]}"
    mine, theirs = runs[("skiplake", kind)], runs[("delta-rs", kind)]
    report.timing(section, "skiplake load + plan", _seconds(mine, "load", "plan"), f"peak {_peak(mine, 'plan'):.2f} GiB")
    report.timing(section, "delta-rs load + plan", _seconds(theirs, "load", "plan"), f"peak {_peak(theirs, 'plan'):.2f} GiB")
    for phase in PHASES:
        report.timing(section, f"skiplake {phase}", _seconds(mine, phase))
    report.ratio(f"{section}: load + plan, skiplake / delta-rs",
                 median(_seconds(mine, "load", "plan")) / median(_seconds(theirs, "load", "plan")))
    report.check(f"{section}: one file planned, the right count",
                 all(r["selected"] == 1 for r in mine + theirs) and all(r["rows"] == (size + 1000) * ROWS_PER_FILE for r in mine),
                 f"skiplake selected {[r['selected'] for r in mine]}, delta-rs {[r['selected'] for r in theirs]}")
    spark = runs.get(("delta-spark", kind))
    if spark:
        report.timing(section, "delta-spark load + plan", _seconds(spark, "load", "plan"),
                      f"peak {_peak(spark, 'plan'):.2f} GiB (JVM and Python)")
        report.timing(section, "delta-spark COUNT(*)", _seconds(spark, "count"))
        report.ratio(f"{section}: load + plan, skiplake / delta-spark",
                     median(_seconds(mine, "load", "plan")) / median(_seconds(spark, "load", "plan")))
        report.ratio(f"{section}: COUNT(*) after the load, skiplake / delta-spark",
                     median(_seconds(mine, "count")) / median(_seconds(spark, "count")))
        report.check(f"{section}: delta-spark plans one file and counts the same rows",
                     all(r["selected"] == 1 and r["rows"] == (size + 1000) * ROWS_PER_FILE for r in spark),
                     f"selected {[r['selected'] for r in spark]}, rows {[r['rows'] for r in spark]}")


def _goals(report: Report, results: dict[int, Runs], kinds: list[str]) -> None:
    for kind in kinds:
        _kind_goals(report, results, kind)


def _kind_goals(report: Report, results: dict[int, Runs], kind: str) -> None:
    name = LOG_NAMES[kind]

    def load_plan(size: int) -> float:
        return median(_seconds(results[size][("skiplake", kind)], "load", "plan"))
    if 1_000_000 in results:
        mine, theirs = results[1_000_000][("skiplake", kind)], results[1_000_000][("delta-rs", kind)]
        report.goal(f"1M files, {name}: load + plan", load_plan(1_000_000), 1.0)
        report.goal(f"1M files, {name}: peak memory of load + plan", _peak(mine, "plan"), 2.0, unit="n", note="GiB")
        report.goal(f"1M files, {name}: load + plan, skiplake / delta-rs",
                    load_plan(1_000_000) / median(_seconds(theirs, "load", "plan")), 0.5, unit="x")
        report.goal(f"1M files, {name}: COUNT(*) after the load", median(_seconds(mine, "count")), 0.5)
        report.headline(f"1M files, {name}: load + plan", load_plan(1_000_000))
    if 10_000_000 in results:
        mine = results[10_000_000][("skiplake", kind)]
        report.goal(f"10M files, {name}: load + plan", load_plan(10_000_000), 10.0)
        report.goal(f"10M files, {name}: peak memory of load + plan", _peak(mine, "plan"), 8.0, unit="n", note="GiB")
        report.goal(f"10M files, {name}: an append commit", median(_seconds(mine, "append")), 2.0)
        if 1_000_000 in results:
            report.goal(f"{name}: load + plan, 10M / 1M files", load_plan(10_000_000) / load_plan(1_000_000), 12.0,
                        unit="x")


def _plot(results: dict[int, Runs], kinds: list[str], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    styles = {("skiplake", "json"): "o-", ("skiplake", "typed"): "D-", ("delta-rs", "json"): "s--",
              ("delta-rs", "typed"): "x--"}
    for kind in kinds:
        for who in CONTENDERS:
            label = f"{who}, {LOG_NAMES[kind]}: load + plan"
            left.plot(sizes, [median(_seconds(results[s][(who, kind)], "load", "plan")) for s in sizes],
                      styles[(who, kind)], label=label)
            right.plot(sizes, [_peak(results[s][(who, kind)], "plan") for s in sizes], styles[(who, kind)], label=label)
    spark_sizes = [s for s in sizes if ("delta-spark", "json") in results[s]]
    if spark_sizes:
        points = [median(_seconds(results[s][("delta-spark", "json")], "load", "plan")) for s in spark_sizes]
        left.plot(spark_sizes, points, "P-.", label="delta-spark, JSON stats: load + plan")
        right.plot(spark_sizes, [_peak(results[s][("delta-spark", "json")], "plan") for s in spark_sizes], "P-.",
                   label="delta-spark, JSON stats: load + plan (JVM)")
    left.plot(sizes, [median(_seconds(results[s][("skiplake", kinds[0])], "count")) for s in sizes], "^:",
              label=f"skiplake, {LOG_NAMES[kinds[0]]}: COUNT(*)")
    left.plot(sizes, [median(_seconds(results[s][("skiplake", kinds[0])], "append")) for s in sizes], "v:",
              label=f"skiplake, {LOG_NAMES[kinds[0]]}: append commit")
    for ax, unit in ((left, "seconds"), (right, "peak memory, GiB")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("files in the table")
        ax.set_ylabel(unit)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Loading and planning a table from its log, against the number of files (fresh process per run)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
