"""Benchmark 29: tables of millions of files, from the log alone.

Synthetic logs (benchmarks.scale_logs: a checkpoint of every file plus 10 commits of 100 files,
data files absent) of 100,000, 1,000,000 and (without --quick, unless --files says otherwise)
10,000,000 files. Each measurement runs in a fresh process (benchmarks.scale_probe), so a
figure includes a cold start and the memory is the process's own peak:

  skiplake:  load the snapshot; plan `ss_ticket_number = k` (one file); COUNT(*) and MIN/MAX
             from the stats; an append commit of one file; a checkpoint written anew.
  delta-rs:  DeltaTable(path); its add actions, filtered to the one file.

Each size runs --reps times per contender (default 2), the contenders taking turns going first;
the first run of each is also a warm-up of the page cache. The append's commit is removed after
each run, so every run sees the same table. A plot of time and memory against files goes beside
the JSON (or to --plot).

    .venv/bin/python -m benchmarks.bench_scale [--quick] [--files 100000,1000000] [--typed] [--reps N] [--json] [--out FILE]
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
PHASES = ("load", "plan", "count", "min_max", "append", "checkpoint")
GIB = 1 << 30


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--files", default=None, help="comma-separated file counts (default 100000,1000000,10000000; "
                                                       "--quick 10000,100000)")
    parser.add_argument("--data", default=str(DEFAULT_BASE), help="where the synthetic logs are kept")
    parser.add_argument("--plot", default=None, help="the PNG's path")
    parser.add_argument("--typed", action="store_true", help="checkpoints with typed stats (stats_parsed) besides the JSON")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in (args.files or ("10000,100000" if args.quick else "100000,1000000,10000000")).split(",")]
    reps = args.reps if args.reps is not None else 2
    progress = Progress("bench_scale")
    report = Report("bench_scale", "Tables of millions of files: loading, planning, answers from stats, commits",
                    command_line("bench_scale", args, (["--files", ",".join(map(str, sizes))] if args.files else [])
                                 + (["--typed"] if args.typed else [])),
                    {"files": sizes, "reps": reps, "commits_after_checkpoint": 10, "typed_stats": args.typed})
    results: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for size in sizes:
        path = Path(args.data) / f"scale-{size}{'-typed' if args.typed else ''}"
        if file_count_of(path) != size:
            progress(f"writing a log of {size:,} files under {path} ...")
            _remove(path)
            write_log(path, size, typed=args.typed)
        ticket = (size // 2) * ROWS_PER_FILE + 7
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in CONTENDERS}
        for rep in range(reps):
            for who in rotated(list(CONTENDERS), rep):
                progress(f"{size:,} files: {who}, run {rep + 1} of {reps} ...")
                runs[who].append(_probe(who, path, ticket))
                _drop_new_commits(path)
        results[size] = runs
        _record(report, size, runs)
    _goals(report, results)
    _plot(results, plot_path(args, "bench_scale.png"))
    report.extra["runs"] = {str(k): v for k, v in results.items()}
    return finish(report, args)


def _probe(who: str, path: Path, ticket: int) -> dict[str, Any]:
    name = "skiplake" if who == "skiplake" else "deltalake"
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


def _record(report: Report, size: int, runs: dict[str, list[dict[str, Any]]]) -> None:
    section = f"{size:,} files"
    mine, theirs = runs["skiplake"], runs["delta-rs"]
    report.timing(section, "skiplake load + plan", _seconds(mine, "load", "plan"), f"peak {_peak(mine, 'plan'):.2f} GiB")
    report.timing(section, "delta-rs load + plan", _seconds(theirs, "load", "plan"), f"peak {_peak(theirs, 'plan'):.2f} GiB")
    for phase in ("load", "plan", "count", "min_max", "append", "checkpoint"):
        report.timing(section, f"skiplake {phase}", _seconds(mine, phase))
    report.ratio(f"{size:,} files: load + plan, skiplake / delta-rs",
                 median(_seconds(mine, "load", "plan")) / median(_seconds(theirs, "load", "plan")))
    report.check(f"{size:,} files: one file planned, the right count",
                 all(r["selected"] == 1 for r in mine + theirs) and all(r["rows"] == (size + 1000) * ROWS_PER_FILE for r in mine),
                 f"skiplake selected {[r['selected'] for r in mine]}, delta-rs {[r['selected'] for r in theirs]}")


def _goals(report: Report, results: dict[int, dict[str, list[dict[str, Any]]]]) -> None:
    def load_plan(size: int) -> float:
        return median(_seconds(results[size]["skiplake"], "load", "plan"))
    if 1_000_000 in results:
        runs = results[1_000_000]
        report.goal("1M files: load + plan", load_plan(1_000_000), 1.0)
        report.goal("1M files: peak memory of load + plan", _peak(runs["skiplake"], "plan"), 2.0, unit="n", note="GiB")
        report.goal("1M files: load + plan, skiplake / delta-rs",
                    load_plan(1_000_000) / median(_seconds(runs["delta-rs"], "load", "plan")), 0.5, unit="x")
        report.goal("1M files: COUNT(*) after the load", median(_seconds(runs["skiplake"], "count")), 0.5)
        report.headline("1M files: load + plan", load_plan(1_000_000))
    if 10_000_000 in results:
        runs = results[10_000_000]
        report.goal("10M files: load + plan", load_plan(10_000_000), 10.0)
        report.goal("10M files: peak memory of load + plan", _peak(runs["skiplake"], "plan"), 8.0, unit="n", note="GiB")
        report.goal("10M files: an append commit", median(_seconds(runs["skiplake"], "append")), 2.0)
        if 1_000_000 in results:
            report.goal("load + plan, 10M / 1M files", load_plan(10_000_000) / load_plan(1_000_000), 12.0, unit="x")


def _plot(results: dict[int, dict[str, list[dict[str, Any]]]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for who, phases, style in (("skiplake", ("load", "plan"), "o-"), ("delta-rs", ("load", "plan"), "s--"),
                               ("skiplake", ("count",), "^:"), ("skiplake", ("append",), "v:")):
        label = f"{who}: {' + '.join(phases)}"
        left.plot(sizes, [median(_seconds(results[s][who], *phases)) for s in sizes], style, label=label)
    for who, style in (("skiplake", "o-"), ("delta-rs", "s--")):
        right.plot(sizes, [_peak(results[s][who], "plan") for s in sizes], style, label=f"{who}: load + plan")
    for ax, unit in ((left, "seconds"), (right, "peak memory, GiB")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("files in the table")
        ax.set_ylabel(unit)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Loading and planning a table from its log, against the number of files (fresh process per run)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
