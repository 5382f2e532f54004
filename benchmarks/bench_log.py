"""Benchmark 23: the log over time: typed stats in checkpoints, and log cleanup.

A. First planning of a 100,000-file table with stats on 8 columns, from its checkpoint: the
   snapshot load, then the planning of a predicate that touches every stats column (so every
   column's stats are needed), timed apart and together. Two copies of the same table take turns: one whose checkpoint
   has typed stats (`stats_parsed`, the default), one whose checkpoint has JSON stats only
   (`delta.checkpoint.writeStatsAsStruct=false`). delta-rs loads the typed-stats copy for
   reference (DeltaTable() and get_add_actions(), which parses the stats into columns).
B. A table after 10,000 small commits (one file each) spread over 60 days, with log cleanup
   (the default: 30 days) and without (`delta.enableExpiredLogCleanup=false`): the log's files
   and bytes, and the load time of the latest version.

No data files exist: only `_delta_log/` is read.

    .venv/bin/python -m benchmarks.bench_log [--quick] [--parts A,B] [--json]
"""
from __future__ import annotations

import json
import os
import random
import shutil
import sys
import time

from benchmarks.common import Progress, Report, base_parser, command_line, finish, median, rotated, timed, workdir

COLUMNS = [("c_long", "long"), ("c_int", "integer"), ("c_double", "double"), ("c_dec", "decimal(12,2)"),
           ("c_str", "string"), ("c_date", "date"), ("c_ts", "timestamp"), ("c_short", "short")]
WHERE = ("c_long > 990000 OR c_int < -990 OR c_double > 99.9 OR c_dec < -9990 OR c_str > 'zz' "
         "OR c_date < DATE'2000-01-02' OR c_ts > TIMESTAMP'2030-01-01 00:00:00' OR c_short > 32000")
DAY_S = 86_400


def _stats(rng: random.Random) -> str:
    lo = rng.randint(-1000, 900)
    mins = {"c_long": lo * 1000, "c_int": lo, "c_double": lo / 10, "c_dec": lo * 10 + 0.5, "c_str": f"s{lo + 1000:05d}",
            "c_date": f"2001-0{1 + lo % 9}-1{lo % 10}", "c_ts": f"2020-01-0{1 + lo % 9}T10:00:00.000Z", "c_short": lo * 20}
    hi = lo + rng.randint(1, 99)
    maxs = {"c_long": hi * 1000, "c_int": hi, "c_double": hi / 10, "c_dec": hi * 10 + 0.5, "c_str": f"s{hi + 1000:05d}",
            "c_date": f"2002-0{1 + hi % 9}-1{hi % 10}", "c_ts": f"2021-01-0{1 + hi % 9}T10:00:00.000Z", "c_short": hi * 20}
    return json.dumps({"numRecords": 1000, "minValues": mins, "maxValues": maxs,
                       "nullCount": {c: rng.randint(0, 5) for c, _ in COLUMNS}})


def _schema():
    from skiplake.log.schema import Field, Schema
    return Schema((*(Field(n, t) for n, t in COLUMNS), Field("p", "integer")))


def build_wide(path: str, commits: int, per: int, typed: bool) -> None:
    """`commits` commits of `per` adds with stats on 8 columns, then a checkpoint of the last version."""
    from skiplake.log.actions import AddFile, CommitInfo, Metadata, Protocol, encode_commit
    from skiplake.log.checkpoint import write_checkpoint
    from skiplake.log.snapshot import Snapshot, commit_name, log_storage
    rng = random.Random(42)
    storage = log_storage(path)
    config = {"delta.checkpoint.writeStatsAsStruct": str(typed).lower(), "delta.checkpointInterval": "1000000"}
    storage.put_if_absent(commit_name(0), encode_commit([
        CommitInfo(1, "CREATE TABLE"), Protocol(1, 2), Metadata.new(_schema(), ["p"], config)]))
    for v in range(1, commits + 1):
        adds = [AddFile(f"p={i % 50}/part-{v:05d}-{i:05d}.parquet", {"p": str(i % 50)}, 100_000, 1, True,
                        _stats(rng)) for i in range(per)]
        storage.put_if_absent(commit_name(v), encode_commit([CommitInfo(1, "WRITE"), *adds]))
    write_checkpoint(storage, Snapshot.load(path, commits))


def load_then_plan(path: str) -> tuple[float, float, tuple[int, int]]:
    """(seconds to load the snapshot, seconds of its first planning, (files selected, total))."""
    from skiplake.log.snapshot import Snapshot
    from skiplake.skipping.plan import plan_scan
    load, snapshot = timed(lambda: Snapshot.load(path))
    planning, plan = timed(lambda: plan_scan(snapshot, WHERE))
    return load, planning, (plan.report.files_selected, plan.report.files_total)


def delta_rs_load(path: str) -> int:
    import pyarrow as pa
    from deltalake import DeltaTable
    return pa.table(DeltaTable(path).get_add_actions(flatten=True)).num_rows


def measure_typed(report: Report, root: str, commits: int, per: int, reps: int, progress: Progress) -> float:
    paths = {"typed stats": os.path.join(root, "typed"), "JSON stats": os.path.join(root, "json")}
    for name, path in paths.items():
        progress(f"building the {commits * per:,}-file table with {name} in its checkpoint")
        build_wide(path, commits, per, name == "typed stats")
    # Only the checkpoint is loaded: the commits before it go, as log cleanup would remove them.
    for path in paths.values():
        for v in range(commits):
            os.unlink(os.path.join(path, "_delta_log", f"{v:020d}.json"))
    loads: dict[str, list[float]] = {k: [] for k in paths}
    plans: dict[str, list[float]] = {k: [] for k in paths}
    rs: list[float] = []
    selected: dict[str, tuple[int, int]] = {}
    contenders = [*paths, "delta-rs"]
    for name in paths:  # warm-up
        load_then_plan(paths[name])
    delta_rs_load(paths["typed stats"])
    for rep in range(reps):
        for name in rotated(contenders, rep):
            if name == "delta-rs":
                secs, count = timed(lambda: delta_rs_load(paths["typed stats"]))
                rs.append(secs)
                continue
            load, planning, selected[name] = load_then_plan(paths[name])
            loads[name].append(load)
            plans[name].append(planning)
        progress(f"  rep {rep + 1}/{reps}: " + ", ".join(
            f"{k}: load {loads[k][-1] * 1000:.0f} + planning {plans[k][-1] * 1000:.0f} ms" for k in paths)
            + f", delta-rs load with add actions {rs[-1] * 1000:.0f} ms")
    report.check("typed and JSON stats select the same files", selected["typed stats"] == selected["JSON stats"],
                 f"{selected['typed stats']} vs {selected['JSON stats']} (selected, total)")
    report.check("delta-rs sees every file", count == commits * per, f"{count:,}")
    for name in paths:
        report.timing("A snapshot load", f"skiplake Snapshot.load, {name} in the checkpoint", loads[name])
        report.timing("A first planning", f"skiplake plan_scan, {name} in the checkpoint", plans[name],
                      f"8-column predicate: {selected[name][0]} of {selected[name][1]:,} files")
        report.timing("A load + planning", f"skiplake, {name}", [a + b for a, b in zip(loads[name], plans[name])])
    report.timing("A load", "delta-rs DeltaTable() + get_add_actions(), typed stats", rs,
                  "the file list with its stats as columns")
    planning = median(plans["JSON stats"]) / median(plans["typed stats"])
    total = (median(loads["JSON stats"]) + median(plans["JSON stats"])) / (
        median(loads["typed stats"]) + median(plans["typed stats"]))
    report.ratio("first planning: JSON stats / typed stats", planning)
    report.ratio("load + first planning: JSON stats / typed stats", total)
    report.ratio("skiplake load + planning, typed / delta-rs load with add actions",
                 (median(loads["typed stats"]) + median(plans["typed stats"])) / median(rs))
    report.goal("first planning of an 8-column predicate: typed stats vs JSON stats", planning, 3.0, unit="x",
                at_least=True)
    report.goal("snapshot load + first planning: typed stats vs JSON stats", total, 3.0, unit="x", at_least=True)
    return planning


def build_many(path: str, commits: int, days: int, cleanup: bool, progress: Progress) -> float:
    """`commits` commits of one file each, their log files dated evenly over the last `days` days.
    Returns the seconds it took."""
    from skiplake.log.actions import AddFile, CommitInfo, Metadata, Protocol
    from skiplake.log.commit_files import put_commit, put_first_commit
    from skiplake.log.schema import Field, Schema
    from skiplake.log.snapshot import LOG_DIR
    log = os.path.join(path, LOG_DIR)
    start = time.time() - days * DAY_S
    config = {} if cleanup else {"delta.enableExpiredLogCleanup": "false"}
    schema = Schema((Field("id", "long"),))

    def backdate(i: int) -> None:
        when = start + i * days * DAY_S / commits
        for name in os.listdir(log):
            if name[:20].isdigit() and int(name[:20]) == i:
                os.utime(os.path.join(log, name), (when, when))
    secs, snapshot = timed(lambda: put_first_commit(path, CommitInfo(1, "CREATE TABLE"), Protocol(1, 2),
                                                    Metadata.new(schema, [], config)))
    total = secs
    backdate(0)
    for i in range(1, commits + 1):
        stats = json.dumps({"numRecords": 1, "minValues": {"id": i}, "maxValues": {"id": i}, "nullCount": {"id": 0}})
        secs, result = timed(lambda: put_commit(snapshot, CommitInfo(1, "WRITE"),
                                                [AddFile(f"part-{i:06d}.parquet", {}, 500, 1, True, stats)]))
        total += secs
        backdate(i)
        snapshot = snapshot.advanced([(result.version, [CommitInfo(1, "WRITE"), *result.actions])])
        if i % 1000 == 0:
            progress(f"  {'with' if cleanup else 'without'} cleanup: {i:,} commits")
    return total


def measure_cleanup(report: Report, root: str, commits: int, days: int, reps: int, progress: Progress) -> None:
    from skiplake.log.snapshot import LOG_DIR, Snapshot, list_log, log_storage
    paths = {"with cleanup": os.path.join(root, "cleaned"), "without cleanup": os.path.join(root, "kept")}
    for name, path in paths.items():
        progress(f"{commits:,} commits over {days} days, {name}")
        secs = build_many(path, commits, days, name == "with cleanup", progress)
        report.timing("B commits", f"{commits:,} commits, {name}", [secs])
    loads: dict[str, list[float]] = {k: [] for k in paths}
    for path in paths.values():
        Snapshot.load(path)  # warm-up
    for rep in range(reps):
        for name in rotated(list(paths), rep):
            secs, snap = timed(lambda p=paths[name]: Snapshot.load(p))
            loads[name].append(secs)
            assert snap.num_files == commits
    for name, path in paths.items():
        log = os.path.join(path, LOG_DIR)
        files = [os.path.join(log, n) for n in os.listdir(log) if os.path.isfile(os.path.join(log, n))]
        size = sum(os.path.getsize(f) for f in files)
        oldest = list_log(log_storage(path)).earliest_readable()
        report.timing("B load", f"Snapshot.load, {name}", loads[name],
                      f"log: {len(files):,} files, {size / 1e6:.1f} MB, oldest version {oldest}")
        report.extra[f"log_{name.replace(' ', '_')}"] = {"files": len(files), "bytes": size, "oldest_version": oldest}
        report.check(f"{name}: the latest version reads all {commits:,} files", Snapshot.load(path).num_files == commits)


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=None, help="files of the table of part A (default 100,000)")
    p.add_argument("--commits", type=int, default=None, help="small commits of part B (default 10,000)")
    p.add_argument("--parts", default="A,B", help="which parts to run: A (typed stats), B (log cleanup); default %(default)s")
    args = p.parse_args(argv)
    files = args.files or (10_000 if args.quick else 100_000)
    commits = args.commits or (1_000 if args.quick else 10_000)
    reps = args.reps or (3 if args.quick else 7)
    per = 1000
    progress = Progress("log")
    report = Report(benchmark="log", title="Typed checkpoint stats and log cleanup",
                    command=command_line("bench_log", args, [] if args.parts == "A,B" else ["--parts", args.parts]),
                    params={"files": files, "stats_columns": len(COLUMNS), "small_commits": commits,
                            "days": 60, "reps": reps})
    with workdir("log", args.workdir, args.keep, progress) as wd:
        parts = {x.strip().upper() for x in args.parts.split(",")}
        speedup = measure_typed(report, str(wd / "wide"), files // per, per, reps, progress) if "A" in parts else None
        if "B" in parts:
            measure_cleanup(report, str(wd / "many"), commits, 60, reps, progress)
        if not args.keep:
            shutil.rmtree(wd, ignore_errors=True)
    if speedup is not None:
        report.headline(f"first planning of {files:,} files, typed vs JSON checkpoint stats", speedup, unit="x")
    report.notes.append("data files do not exist: only _delta_log/ is read (warm OS page cache)")
    return finish(report, args)


if __name__ == "__main__":
    sys.exit(main())
