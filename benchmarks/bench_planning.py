"""Benchmark 6: scan planning over 100,000 files (goals: 3-value IN <= 100 ms, 10,000-value IN < 1 s).

The table is the synthetic 100,000-file log of bench_snapshot (100 commits of 1,000 adds, with
stats JSON per file; no data files, planning never opens them). Measured on one loaded snapshot:

  stats parse        building the typed stats columns of ss_item_sk for all files (once per
                     snapshot; what the first predicate on a column pays)
  3-value IN         plan_scan("ss_item_sk IN (40, 41, 42)") after the parse
  3-value IN, cold   the same on a fresh snapshot object: parse + plan
  10,000-value IN    plan_scan of an IN list of 10,000 random item keys (what dynamic file pruning
                     sends), including parsing the SQL text of the list
  one date           plan_scan("ss_sold_date = DATE '1999-03-04'"): partition pruning only
  mixed OR           a partition range OR an item range: both kinds in one evaluation

    .venv/bin/python -m benchmarks.bench_planning [--quick] [--json]
"""
from __future__ import annotations

import random
import sys

from benchmarks.common import Progress, Report, base_parser, command_line, finish, median, timed, workdir
from benchmarks.synthetic import FileFactory, build


def main(argv: list[str] | None = None) -> int:
    args = base_parser(__doc__.splitlines()[0]).parse_args(argv)
    files = 10_000 if args.quick else 100_000
    reps = args.reps or (5 if args.quick else 9)
    progress = Progress("planning")
    from skiplake.log.snapshot import Snapshot
    from skiplake.skipping.plan import plan_scan
    from skiplake.skipping.stats_table import StatsTable

    report = Report("bench_planning", f"Scan planning over {files:,} files", command_line("bench_planning", args),
                    {"files": files, "reps": reps})
    values = random.Random(7).sample(range(1, 250_000), 10_000)
    big_in = f"ss_item_sk IN ({', '.join(map(str, values))})"
    queries = {
        "3-value IN": "ss_item_sk IN (40, 41, 42)",
        "10,000-value IN": big_in,
        "one date": "ss_sold_date = DATE '1999-03-04'",
        "mixed OR": "ss_sold_date < DATE '1998-02-01' OR ss_item_sk BETWEEN 1000 AND 1200",
    }
    with workdir("planning", args.workdir, args.keep, progress) as root:
        path = str(root / "t")
        build(path, files // 1000, 1000, FileFactory(), progress=progress, every=25)
        snap = Snapshot.load(path)
        progress(f"loaded snapshot: {snap.num_files:,} files")
        samples: dict[str, list[float]] = {"stats parse (ss_item_sk)": [], "3-value IN, cold": []}
        samples.update({name: [] for name in queries})
        selected: dict[str, int] = {}
        for rep in range(reps):
            fresh = Snapshot.load(path)
            secs, _ = timed(lambda: StatsTable(fresh.files, fresh.schema, fresh.partition_columns).prepare(["ss_item_sk"]))
            samples["stats parse (ss_item_sk)"].append(secs)
            fresh = Snapshot.load(path)
            secs, _ = timed(lambda: plan_scan(fresh, queries["3-value IN"]))
            samples["3-value IN, cold"].append(secs)
            for name, where in queries.items():
                secs, plan = timed(lambda: plan_scan(snap, where))
                samples[name].append(secs)
                selected[name] = plan.report.files_selected
            progress(f"rep {rep + 1}/{reps}: " + ", ".join(f"{k} {v[-1] * 1000:.1f} ms" for k, v in samples.items()))
        for name, secs in samples.items():
            note = f"{selected[name]:,} of {files:,} files selected" if name in selected else ""
            report.timing("planning", name, secs, note)
        report.goal("3-value IN over the snapshot's stats", median(samples["3-value IN"]), 0.100)
        report.goal("3-value IN on a fresh snapshot, stats parse included", median(samples["3-value IN, cold"]), 0.100,
                    note="reported; the goal is stated for planning over stats held in columnar form")
        report.goal("10,000-value IN", median(samples["10,000-value IN"]), 1.0)
        report.check("10,000-value IN selects files", selected["10,000-value IN"] > 0)
    return finish(report, args)


if __name__ == "__main__":
    sys.exit(main())
