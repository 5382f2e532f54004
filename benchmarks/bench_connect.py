"""lake.sql on Spark Connect against classic PySpark, over the same TPC-DS lake.

Each mode runs in a process of its own (PySpark picks classic or Connect per process): the
classic one on a local session, the Connect one as a client of a Connect server this benchmark
starts (its own JVM, the same settings). Both plan and run every query with dynamic file pruning
on, after a warm-up run of each query; the modes take turns when --rounds is over 1. Per query:
the planning time (`lake.explain`, which evaluates the build sides too), the run time
(`lake.sql(...).collect()`), the files its tables read, whether any file was pruned, and whether
both modes gave the same rows.

    python -m benchmarks.bench_connect --sf 1 --files 64 --reps 3 [--rounds 2] [--queries 3,42] [--json]

Goals: every answer the same; at least 90% of the queries that prune in classic mode prune on
Connect; Connect's median planning at most 1.5x classic's; the star join of TPC-DS's item plans
the same store_sales rows in both modes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Report, base_parser, command_line, finish
from testing_support.tpcds_lake import add_lake_arguments, build_lake, lake_scale

MODES = ("classic", "connect")


def _worker(args: argparse.Namespace) -> int:
    """One mode's run: every query planned and run `reps` times after a warm-up; JSON to --out."""
    import skiplake
    from benchmarks.bench_dfp import ITEM_JOIN_NAME, query_texts
    from skiplake.spark.session import connect_server
    from skiplake.spark.session.session_setup import spark_conf
    from testing_support.tpcds_answers import canonical

    server = None
    conf = {"shuffle_partitions": 4, "driver_memory": "6g"}
    if args.mode == "connect":
        server = connect_server.start(spark_conf(app_name="bench-connect", **conf))
        spark = skiplake.local_spark(remote=server.url)
    else:
        spark = skiplake.local_spark(app_name="bench-connect", **conf)
    out: dict[str, Any] = {}
    try:
        lake = skiplake.Lake(spark, args.lake)
        wanted = args.queries.split(",") if args.queries else [ITEM_JOIN_NAME, *map(str, range(1, 100))]
        for name, text in query_texts(wanted).items():
            try:
                lake.sql(text).collect()  # warm-up: the JVM compiles the plan's code on its first run
                plans, runs = [], []
                for _ in range(args.reps):
                    t0 = time.perf_counter()
                    explained = lake.explain(text)
                    plans.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    rows = lake.sql(text).collect()
                    runs.append(time.perf_counter() - t0)
                reports = list(explained)
                out[name] = {
                    "plan_s": statistics.median(plans), "run_s": statistics.median(runs),
                    "files_read": sum(r.files_selected for r in reports),
                    "files_total": sum(r.files_total for r in reports),
                    "rows_selected": {r.table.rstrip("/").rsplit("/", 1)[-1]: r.rows_selected for r in reports},
                    "dynamic_applied": sum(1 for d in explained.dynamic if d.applied),
                    "answer": repr(canonical([tuple(r) for r in rows])),
                }
            except Exception as e:  # reported per query; the run goes on
                out[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
            print(f"{args.mode} {name}: {out[name].get('error') or round(out[name]['run_s'], 2)}", file=sys.stderr)
    finally:
        spark.stop()
        if server is not None:
            server.stop()
        Path(args.out).write_text(json.dumps(out))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n\n")[0])
    add_lake_arguments(parser, sf=(1.0, 0.1), files=(64, 16), data_help="where the TPC-DS lake is kept")
    parser.add_argument("--rounds", type=int, default=1, help="runs of both modes, taking turns")
    parser.add_argument("--queries", default="", help="comma-separated query numbers (default: all 99 and the item star join)")
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--lake", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reps is None:
        args.reps = 1 if args.quick else 3
    if args.mode:
        return _worker(args)
    sf, files = lake_scale(args)
    lake = _lake(Path(args.data), sf, files)
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for round_ in range(args.rounds):
        for mode in (MODES if round_ % 2 == 0 else MODES[::-1]):
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
                out = f.name
            command = [sys.executable, "-m", "benchmarks.bench_connect", "--mode", mode, "--lake", str(lake),
                       "--out", out, "--reps", str(args.reps), "--queries", args.queries]
            print(f"round {round_ + 1}: {mode}", file=sys.stderr)
            subprocess.run(command, check=True)
            results[mode].append(json.loads(Path(out).read_text()))
            os.unlink(out)
    table = compare(results)
    print(render(table), file=sys.stderr if args.json else sys.stdout)
    extra = [f"--sf {sf:g}", f"--files {files}", f"--rounds {args.rounds}"] + (
        [f"--queries {args.queries}"] if args.queries else [])
    report = Report("bench_connect", f"lake.sql on Spark Connect against classic PySpark, TPC-DS sf={sf:g}",
                    command_line("bench_connect", args, extra),
                    {"sf": sf, "store_sales_files": files, "reps": args.reps, "rounds": args.rounds})
    add_goals(report, table)
    return finish(report, args)


def add_goals(report: Report, t: dict[str, Any]) -> None:
    """The table's figures as the report's timings, ratios, goals, checks and headlines."""
    for mode in MODES:
        rows = [r[mode] for r in t["queries"] if "plan_s" in r[mode]]
        report.timing("planning (per query)", mode, [r["plan_s"] for r in rows])
        report.timing("run (per query)", mode, [r["run_s"] for r in rows])
    report.ratio("median planning, Connect / classic", t["plan_ratio"] or 0.0)
    totals = t["run_total_s"]
    report.ratio("run total, Connect / classic", totals["connect"] / totals["classic"] if totals["classic"] else 0.0)
    share = t["classic_pruning_also_on_connect"] / max(1, t["pruning_queries"]["classic"])
    report.goal("queries with the same rows in both modes", t["same_answers"], t["count"], unit="n", at_least=True)
    report.goal("of the queries pruning in classic mode, share pruning on Connect", share, 0.9, unit="%",
                at_least=True, note=f"{t['classic_pruning_also_on_connect']} of {t['pruning_queries']['classic']}")
    report.goal("median planning, Connect / classic", t["plan_ratio"] or 0.0, 1.5, unit="x")
    report.check("every answer the same in both modes", t["same_answers"] == t["count"],
                 ", ".join(r["query"] for r in t["queries"] if not r["same_answer"]))
    from benchmarks.bench_dfp import ITEM_JOIN_NAME
    star = next((r for r in t["queries"] if r["query"] == ITEM_JOIN_NAME), None)
    if star is not None and "rows_selected" in star["classic"] and "rows_selected" in star["connect"]:
        same = star["classic"]["rows_selected"].get("store_sales") == star["connect"]["rows_selected"].get("store_sales")
        report.check("the item star join plans the same store_sales rows", same,
                     f"classic {star['classic']['rows_selected'].get('store_sales')}, "
                     f"Connect {star['connect']['rows_selected'].get('store_sales')}")
    report.headline("classic pruning queries that prune on Connect", share, unit="%")
    report.headline("median planning, Connect / classic", t["plan_ratio"] or 0.0, unit="x")
    report.extra["comparison"] = t


def _lake(base: Path, sf: float, files: int) -> Path:
    import skiplake
    spark = skiplake.local_spark(app_name="bench-connect-lake", driver_memory="6g")
    try:
        return build_lake(spark, base, sf, files, progress=lambda m: print(m, file=sys.stderr))
    finally:
        spark.stop()


def compare(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per query and in total: each mode's median over rounds, and the goals' figures."""
    names = list(results["classic"][0])
    rows, pruned = [], {m: 0 for m in MODES}
    both_pruned = 0
    for name in names:
        row: dict[str, Any] = {"query": name}
        for mode in MODES:
            runs = [r[name] for r in results[mode] if name in r and "error" not in r[name]]
            if not runs:
                row[mode] = {"error": next(r[name]["error"] for r in results[mode] if name in r)}
                continue
            row[mode] = {"plan_s": statistics.median(r["plan_s"] for r in runs),
                         "run_s": statistics.median(r["run_s"] for r in runs),
                         "files_read": runs[0]["files_read"], "files_total": runs[0]["files_total"],
                         "rows_selected": runs[0]["rows_selected"], "answer": runs[0]["answer"]}
            row[mode]["prunes"] = row[mode]["files_read"] < row[mode]["files_total"]
            pruned[mode] += row[mode]["prunes"]
        ok = all("error" not in row[m] for m in MODES)
        row["same_answer"] = ok and row["classic"]["answer"] == row["connect"]["answer"]
        if ok and row["classic"]["prunes"] and row["connect"]["prunes"]:
            both_pruned += 1
        for m in MODES:
            row[m].pop("answer", None)
        rows.append(row)
    plans = {m: statistics.median(r[m]["plan_s"] for r in rows if "plan_s" in r[m]) for m in MODES}
    return {
        "queries": rows,
        "same_answers": sum(r["same_answer"] for r in rows), "count": len(rows),
        "pruning_queries": pruned,
        "classic_pruning_also_on_connect": both_pruned,
        "median_plan_s": plans,
        "plan_ratio": plans["connect"] / plans["classic"] if plans["classic"] else None,
        "run_total_s": {m: sum(r[m].get("run_s", 0.0) for r in rows) for m in MODES},
    }


def render(t: dict[str, Any]) -> str:
    lines = [f"{'query':<12} {'classic s':>10} {'connect s':>10} {'files classic':>14} {'files connect':>14} "
             f"{'plan ms cl/co':>14}  same"]
    for r in t["queries"]:
        c, k = r["classic"], r["connect"]
        if "error" in c or "error" in k:
            lines.append(f"{r['query']:<12} error: {c.get('error') or k.get('error')}")
            continue
        lines.append(f"{r['query']:<12} {c['run_s']:>10.2f} {k['run_s']:>10.2f} "
                     f"{c['files_read']:>6}/{c['files_total']:<7} {k['files_read']:>6}/{k['files_total']:<7} "
                     f"{c['plan_s'] * 1000:>6.0f}/{k['plan_s'] * 1000:<6.0f}  {'yes' if r['same_answer'] else 'NO'}")
    p = t["pruning_queries"]
    lines += [
        "",
        f"same answers: {t['same_answers']} of {t['count']}",
        f"queries pruning: classic {p['classic']}, Connect {p['connect']}; of classic's, also on Connect: "
        f"{t['classic_pruning_also_on_connect']} ({t['classic_pruning_also_on_connect'] / max(1, p['classic']):.0%})",
        f"median planning: classic {t['median_plan_s']['classic'] * 1000:.0f} ms, Connect "
        f"{t['median_plan_s']['connect'] * 1000:.0f} ms ({t['plan_ratio']:.2f}x)",
        f"run totals: classic {t['run_total_s']['classic']:.1f} s, Connect {t['run_total_s']['connect']:.1f} s",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
