"""Render benchmark JSON results (from --out or --json) as Markdown tables: the detailed tables of
a suite's run (each benchmark's section of docs/benchmarks.md, written by benchmarks.summary), or
any one result file.

    .venv/bin/python -m benchmarks.render_md bench-data/bench_snapshot.json [...]
"""
from __future__ import annotations

import json
import sys

from benchmarks.common import fmt_s, fmt_value


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def render(data: dict, title: bool = True) -> str:
    """The report's tables; `title=False` leaves out its heading (the caller writes its own)."""
    m = data["machine"]
    out = ([f"### {data['title']}", ""] if title else []) + [
           f"Command: `{data['command']}`  ", f"Run: {m['date_utc']}, load average at start "
           f"{m['loadavg_start'][0]} / end {m.get('loadavg_end', ['?'])[0]} (on {m['nproc']} cores)  ",
           "Parameters: " + ", ".join(f"{k}={v}" for k, v in data["params"].items()), "",
           "| section | measurement | median | min | max | n | note |",
           "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for r in data["timings"]:
        name = "↳ " + r["name"].strip() if r["name"].startswith("  ") else r["name"]
        out.append(f"| {_cell(r['section'])} | {_cell(name)} | {fmt_s(r['median_s'])} | {fmt_s(r['min_s'])} | "
                   f"{fmt_s(r['max_s'])} | {r['n']} | {_cell(r['note'])} |")
    if data["ratios"]:
        out += ["", "| ratio | value | note |", "| --- | ---: | --- |"]
        for r in data["ratios"]:
            out.append(f"| {_cell(r['name'])} | {r['value']:.2f}x | {_cell(r['note'])} |")
    if data["goals"]:
        out += ["", "| goal | actual | target | met | note |", "| --- | ---: | ---: | --- | --- |"]
        for g in data["goals"]:
            out.append(f"| {_cell(g['name'])} | {fmt_value(g['actual'], g['unit'])} | "
                       f"{fmt_value(g['target'], g['unit'])} | {'**met**' if g['met'] else '**missed**'} | "
                       f"{_cell(g['note'])} |")
    if data["checks"]:
        out += ["", checks_line(data["checks"])]
    queries = data.get("extra", {}).get("queries")
    if queries and "runs" in queries[0]:
        out += ["", *per_query(queries)]
    return "\n".join(out) + "\n"


def checks_line(checks: list[dict]) -> str:
    """The correctness checks in one line: each failed one with its detail; the passed ones named,
    or only counted when there are many (one per TPC-DS query)."""
    failed = [c for c in checks if not c["ok"]]
    passed = [c for c in checks if c["ok"]]
    parts = [f"**FAILED** {c['name']} ({c['detail']})" for c in failed]
    if len(passed) > 12:
        parts.append(f"{len(passed)} more passed" if failed else f"all {len(passed)} passed")
    else:
        parts += [f"{c['name']}: ok" + (f" ({c['detail']})" if c["detail"] else "") for c in passed]
    return "Checks: " + "; ".join(_cell(p) for p in parts)


def per_query(queries: list[dict]) -> list[str]:
    """One row per query of a TPC-DS benchmark (bench_dfp): each contender's median time, the
    speedups, what the scans read, the build sides' time and the planning overhead. Contenders a
    run left out (--contenders) get no column."""
    shown = [c for c in ("spark", "static", "dynamic", "spark_dpp") if all(c in q["runs"] for q in queries)]
    dpp = "spark_dpp" in shown
    names = {"spark": "spark", "static": "static", "dynamic": "dynamic", "spark_dpp": "spark DPP"}
    head = " | ".join(names[c] for c in shown) + " | vs spark" + (" | vs DPP" if dpp else "")
    out = [f"| query | {head} | files read (spark / dynamic) | rows read (spark / dynamic) | builds | overhead |",
           "| --- |" + " ---: |" * (len(shown) + 5 + dpp)]
    for q in queries:
        runs = {c: r for c, r in q["runs"].items()}
        med = {c: sorted(r["seconds"])[len(r["seconds"]) // 2] for c, r in runs.items()}
        over = q.get("planning_overhead_s")
        out.append(f"| {q['name']}{'' if q.get('same', True) else ' (ANSWERS DIFFER)'} | "
                   + " | ".join(fmt_s(med[c]) for c in shown)
                   + f" | {med['spark'] / med['dynamic']:.2f}x"
                   + (f" | {med['spark_dpp'] / med['dynamic']:.2f}x" if dpp else "")
                   + f" | {runs['spark']['files']:,} / {runs['dynamic']['files']:,}"
                   f" | {runs['spark']['rows']:,} / {runs['dynamic']['rows']:,}"
                   f" | {fmt_s(q.get('builds_s') or 0.0)} | {'' if over is None else f'{over * 1000:.0f} ms'} |")
    return out


def main(argv: list[str] | None = None) -> int:
    for path in (argv if argv is not None else sys.argv[1:]):
        with open(path) as f:
            print(render(json.load(f)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
