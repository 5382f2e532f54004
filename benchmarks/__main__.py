"""Run the benchmarks one after the other, each in its own process (its own JVM).

    .venv/bin/python -m benchmarks [--quick] [--json] [--out-dir DIR] [--only bench_snapshot,...]

With --json, one JSON document {"benchmarks": [...]} is printed on stdout at the end. With
--out-dir, each benchmark's JSON also goes to DIR/<name>.json. The exit status is non-zero if
any benchmark failed or one of its correctness checks did.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

BENCHMARKS = ["bench_snapshot", "bench_append", "bench_commit", "bench_concurrency", "bench_planning", "bench_skipping",
              "bench_catalog", "bench_catalog_server", "bench_bucketing", "bench_py4j", "bench_overhead", "bench_local_build", "bench_dv", "bench_merge"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="run all skiplake benchmarks")
    p.add_argument("--quick", action="store_true", help="small sizes")
    p.add_argument("--json", action="store_true", help="one JSON document with every result on stdout")
    p.add_argument("--out-dir", default=None, help="write DIR/<benchmark>.json")
    p.add_argument("--only", default=None, help="comma-separated subset, e.g. bench_snapshot,bench_commit")
    args = p.parse_args(argv)
    names = args.only.split(",") if args.only else BENCHMARKS
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmarks {unknown}; choose from {BENCHMARKS}")
    status = 0
    results = []
    for name in names:
        cmd = [sys.executable, "-m", f"benchmarks.{name}"] + (["--quick"] if args.quick else [])
        if args.json:
            cmd.append("--json")
        if args.out_dir:
            os.makedirs(args.out_dir, exist_ok=True)
            cmd += ["--out", os.path.join(args.out_dir, f"{name}.json")]
        print(f"==> {' '.join(cmd)}", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE if args.json else None, text=True)
        if args.json and proc.stdout:
            results.append(json.loads(proc.stdout))
        status = status or proc.returncode
    if args.json:
        print(json.dumps({"benchmarks": results}, indent=2))
    return status


if __name__ == "__main__":
    sys.exit(main())
