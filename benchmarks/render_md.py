"""Render benchmark JSON results (from --out or --json) as Markdown tables, for docs/benchmarks.md.

    .venv/bin/python -m benchmarks.render_md benchmarks/results/bench_snapshot.json [...]
"""
from __future__ import annotations

import json
import sys

from benchmarks.common import fmt_s


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def render(data: dict) -> str:
    m = data["machine"]
    out = [f"### {data['title']}", "",
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
            show = fmt_s if g["unit"] == "s" else (
                (lambda x: f"{x * 100:.2f}%") if g["unit"] == "%" else
                (lambda x: f"{x:g}") if g["unit"] == "n" else (lambda x: f"{x:.2f}x"))
            out.append(f"| {_cell(g['name'])} | {show(g['actual'])} | {show(g['target'])} | "
                       f"{'**met**' if g['met'] else '**missed**'} | {_cell(g['note'])} |")
    if data["checks"]:
        out += ["", "Checks: " + "; ".join(f"{c['name']}: {'ok' if c['ok'] else 'FAILED'} ({c['detail']})"
                                         for c in data["checks"])]
    queries = data.get("extra", {}).get("queries")
    if queries and "runs" in queries[0]:
        out += ["", *per_query(queries)]
    return "\n".join(out) + "\n"


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
