"""Benchmark 1: loading the snapshot of a table with 100,000 files (goal: <= 1 s).

The table is built synthetically through skiplake's log API (no Spark, no data files): 100
commits of 1,000 AddFile actions each, with partition values and stats JSON, so skiplake writes a
checkpoint every 10 commits as it does for any table. Two cases are measured:

  A. at the checkpoint: the latest version (100) has a checkpoint; loading = one Parquet read.
  B. checkpoint + tail: 9 more commits of 1,000 adds each (109,000 files), the worst case with a
     checkpoint interval of 10: the checkpoint plus 9 JSON commits to replay.

Contenders, side by side in one run, taking turns going first:
  skiplake   Snapshot.load(path)                       -> live files as an Arrow table
  deltalake  DeltaTable(path)                          -> delta-rs loads the log and the file list
  deltalake  DeltaTable(path).get_add_actions(flatten=True)   the same plus the file list as Arrow
             (the work closest to skiplake's, which holds its live files as an Arrow table)
and, for reference, on the loaded snapshot: `snapshot.add_files` (the live files as Python
AddFile objects, which skiplake's scan planning builds first) and then `plan_scan` of a
one-partition predicate, the planning every `table.read(where)` does after the load.

    .venv/bin/python -m benchmarks.bench_snapshot [--quick] [--json]
"""
from __future__ import annotations

import sys

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
from benchmarks.synthetic import FileFactory, build

SCAN_WHERE = "ss_sold_date = DATE '1999-03-04'"


def _skiplake_load(path: str):
    from skiplake.log.snapshot import Snapshot
    return Snapshot.load(path)


def _delta_load(path: str):
    from deltalake import DeltaTable
    return DeltaTable(path)


def _delta_load_actions(path: str):
    from deltalake import DeltaTable
    t = DeltaTable(path)
    return t, t.get_add_actions(flatten=True)


def _delta_paths(path: str) -> tuple[int, int, set[str]]:
    import pyarrow as pa
    from deltalake import DeltaTable
    t = DeltaTable(path)
    actions = pa.table(t.get_add_actions(flatten=True))
    return t.version(), actions.num_rows, set(actions.column("path").to_pylist())


def measure_case(report: Report, case: str, path: str, reps: int, progress: Progress) -> dict:
    from urllib.parse import unquote
    contenders = {
        "skiplake Snapshot.load": lambda: _skiplake_load(path),
        "deltalake DeltaTable()": lambda: _delta_load(path),
        "deltalake DeltaTable() + get_add_actions()": lambda: _delta_load_actions(path),
    }
    samples: dict[str, list[float]] = {k: [] for k in contenders}
    from skiplake.skipping.plan import plan_scan
    add_files: list[float] = []
    scans: list[float] = []
    for fn in contenders.values():  # warm-up round, not timed: imports, first-touch allocations
        fn()
    for rep in range(reps):
        for name in rotated(list(contenders), rep):
            secs, result = timed(contenders[name])
            samples[name].append(secs)
            if name == "skiplake Snapshot.load":
                snap = result
        secs, _ = timed(lambda: snap.add_files)  # cached_property: first access builds the objects
        add_files.append(secs)
        secs, plan = timed(lambda: plan_scan(snap, SCAN_WHERE))  # add_files already built
        scans.append(secs)
        progress(f"  {case}: rep {rep + 1}/{reps}: " + ", ".join(
            f"{k.split()[0]}{'+actions' if 'get_add' in k else ''} {v[-1] * 1000:.0f} ms" for k, v in samples.items()))

    # Both readers must agree on the table: same version, same live files.
    snap = _skiplake_load(path)
    d_version, d_count, d_paths = _delta_paths(path)
    s_paths = set(snap.files.column("path").to_pylist())
    report.check(f"{case}: same version", snap.version == d_version, f"skiplake {snap.version}, deltalake {d_version}")
    report.check(f"{case}: same number of live files", snap.num_files == d_count,
                 f"skiplake {snap.num_files:,}, deltalake {d_count:,}")
    same = s_paths == d_paths or {unquote(p) for p in s_paths} == {unquote(p) for p in d_paths}
    report.check(f"{case}: same set of live file paths", same,
                 "identical" if same else f"{len(s_paths ^ d_paths)} paths differ")

    for name, s in samples.items():
        report.timing(case, name, s)
    report.timing(case, "(ref) skiplake snapshot.add_files", add_files,
                  f"{snap.num_files:,} AddFile objects from the Arrow table, after the load")
    report.timing(case, "(ref) skiplake plan_scan(one date), after add_files", scans,
                  f"{SCAN_WHERE}: {plan.report.files_selected} of {plan.report.files_total:,} files")
    sk = median(samples["skiplake Snapshot.load"])
    report.ratio(f"{case}: skiplake / deltalake DeltaTable()", sk / median(samples["deltalake DeltaTable()"]))
    report.ratio(f"{case}: skiplake / deltalake DeltaTable() + get_add_actions()",
                 sk / median(samples["deltalake DeltaTable() + get_add_actions()"]))
    return {"files": snap.num_files, "version": snap.version, "skiplake_median_s": sk,
            "deltalake_median_s": median(samples["deltalake DeltaTable()"])}


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.split("\n")[0])
    p.add_argument("--commits", type=int, default=None, help="commits before case A (default 100, quick 20)")
    p.add_argument("--adds-per-commit", type=int, default=1000)
    p.add_argument("--tail", type=int, default=None, help="JSON commits after the checkpoint in case B (default 9, quick 5)")
    args = p.parse_args(argv)
    commits = args.commits or (20 if args.quick else 100)
    tail = args.tail if args.tail is not None else (5 if args.quick else 9)
    reps = args.reps or (3 if args.quick else 9)
    per = args.adds_per_commit
    extra = [f"--commits {commits}"] if args.commits else []

    progress = Progress("snapshot")
    report = Report(
        benchmark="snapshot", title=f"Snapshot load of a table with {commits * per:,} files",
        command=command_line("bench_snapshot", args, extra),
        params={"commits": commits, "adds_per_commit": per, "files_case_a": commits * per, "tail_commits": tail,
                "files_case_b": (commits + tail) * per, "reps": reps, "checkpoint_interval": 10},
    )
    with workdir("snapshot", args.workdir, args.keep, progress) as wd:
        path = str(wd / "store_sales")
        factory = FileFactory(seed=42)
        progress(f"building a {commits * per:,}-file table: {commits} commits of {per:,} adds through skiplake.txn.commit")
        secs, (writer, timings) = timed(lambda: build(path, commits, per, factory, progress=progress))
        plain = [t.seconds for t in timings if not t.checkpointed]
        cps = [t.seconds for t in timings if t.checkpointed]
        report.timing("build", f"whole build ({commits} commits)", [secs])
        report.timing("build", f"commit of {per:,} adds (no checkpoint)", plain)
        if cps:
            report.timing("build", "commit of 1,000 adds + checkpoint", cps,
                          f"last one at {timings[-1].version} with {commits * per:,} files: "
                          f"{cps[-1] * 1000:.0f} ms")
        progress(f"built version {writer.version} in {secs:.1f} s")

        progress(f"case A: {commits * per:,} files, loading at the checkpoint of version {writer.version}; {reps} reps")
        a = measure_case(report, "A checkpoint", path, reps, progress)

        progress(f"adding {tail} commits of {per:,} adds after the checkpoint (case B)")
        build(path, tail, per, factory, writer=writer)
        progress(f"case B: {(commits + tail) * per:,} files, checkpoint + {tail} JSON commits; {reps} reps")
        b = measure_case(report, f"B checkpoint+{tail}", path, reps, progress)
        if not args.keep:
            rmtree(path)

    report.goal(f"A: Snapshot.load of {a['files']:,} files", a["skiplake_median_s"], 1.0)
    report.goal(f"B: Snapshot.load of {b['files']:,} files (checkpoint + {tail} commits)", b["skiplake_median_s"], 1.0)
    for label, case in ((f"at the checkpoint ({a['files']:,} files)", a),
                        (f"checkpoint + {tail} JSON commits ({b['files']:,} files)", b)):
        report.headline(label, case["skiplake_median_s"],
                        note=f"{case['skiplake_median_s'] / case['deltalake_median_s']:.2f}x delta-rs's DeltaTable()")
    report.notes.append("data files do not exist: a snapshot load reads only _delta_log/ (warm OS page cache)")
    return finish(report, args)


if __name__ == "__main__":
    sys.exit(main())
