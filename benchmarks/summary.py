"""The summary table of docs/benchmarks.md and each benchmark's tables in its own section of that
page, from one run folder of the suite (benchmarks.suite) alone.

    .venv/bin/python -m benchmarks.summary benchmarks/results/runs/<run>            # print the summary
    .venv/bin/python -m benchmarks.summary benchmarks/results/runs/<run> --docs     # and write the docs

One row per benchmark: what it measures (its title), its goals, its headline figures (or, for a
benchmark that names none, its goals' results, else its ratios) and whether the goals were met.
The docs take only a complete run of a clean tree at full size: a quick run, a run with
uncommitted changes or a partial one is rendered into its own folder (summary.md), marked so.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import fmt_value
from benchmarks.render_md import render
from benchmarks.suite import Run, Step, duration
from skiplake.errors import InvalidArgumentError
from testing_support.paths import REPO

PAGE = REPO / "docs" / "benchmarks.md"
START = "<!-- summary: written by `make bench` (benchmarks/summary.py) from one run; do not edit by hand -->"
END = "<!-- end of summary -->"
# Each benchmark's section holds the run's tables between these two lines (N: its number).
TABLES_START = "<!-- run tables {number}: written by `make bench` (benchmarks/summary.py); do not edit by hand -->"
TABLES_END = "<!-- end of run tables {number} -->"
HEADING = re.compile(r"^## (\d+)\. (.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Results:
    """A run and the report of each of its benchmarks that wrote one."""
    run: Run
    folder: Path
    reports: dict[str, dict[str, Any]]

    @staticmethod
    def load(folder: Path) -> "Results":
        folder = Path(folder)
        run = Run.load(folder)
        reports = {}
        for step in run.steps:
            path = folder / f"{step.name}.json"
            if path.is_file():
                try:
                    reports[step.name] = json.loads(path.read_text())
                except ValueError:
                    pass  # cut short: the step's status says it failed
        return Results(run, folder, reports)


# ----------------------------------------------------------------------------------------- cells

def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def goal_text(goal: dict[str, Any]) -> str:
    at_least = goal.get("at_least")
    if at_least is None:  # written before goals recorded their direction: a met goal above its target
        at_least = goal["met"] == (goal["actual"] >= goal["target"])
    return f"{goal['name']} {'>=' if at_least else '<='} {fmt_value(goal['target'], goal['unit'])}"


def result_text(report: dict[str, Any]) -> str:
    """The headline figures; for a report without any, its goals' results, else its first ratios."""
    if report.get("headlines"):
        return "; ".join(f"{h['name']} **{fmt_value(h['value'], h['unit'])}**"
                         + (f" ({h['note']})" if h["note"] else "") for h in report["headlines"])
    if report.get("goals"):
        return "; ".join(f"{g['name']}: **{fmt_value(g['actual'], g['unit'])}**" for g in report["goals"])
    return "; ".join(f"{r['name']}: **{r['value']:.2f}x**" for r in report.get("ratios", [])[:4]) or "-"


def verdict(step: Step, report: dict[str, Any] | None) -> str:
    if report is None or step.status in ("failed", "pending", "running", "interrupted"):
        what = {"pending": "not run", "running": "did not finish", "interrupted": "interrupted"}.get(step.status)
        return f"**{what}**" if what else f"**FAILED** (exit status {step.exit_status}; see {step.name}.log)"
    failed = [c["name"] for c in report.get("checks", []) if not c["ok"]]
    out = [f"**CHECK FAILED**: {', '.join(failed)}"] if failed else []
    goals = report.get("goals", [])
    missed = [g for g in goals if not g["met"]]
    if not goals:
        out.append("(no goal)")
    elif not missed:
        out.append("**met**")
    else:
        out.append(("**missed**" if len(missed) == len(goals) else f"**partly** ({len(goals) - len(missed)} of "
                    f"{len(goals)} met)") + ": " + "; ".join(
            f"{g['name']} {fmt_value(g['actual'], g['unit'])}" for g in missed))
    return "; ".join(out)


# ----------------------------------------------------------------------------------------- page

def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: str) -> dict[int, str]:
    """Section number -> anchor of the page's "## N. title" headings."""
    return {int(m.group(1)): slug(f"{m.group(1)}. {m.group(2)}") for m in HEADING.finditer(page)}


def machine_text(run: Run) -> str:
    m = run.machine
    versions = m.get("versions", {})
    return (f"{m.get('nproc')} cores ({m.get('cpu_model')}), {m.get('memory_gib')} GiB, {m.get('os')}; "
            f"Python {m.get('python')}, {m.get('java') or 'Java ?'}, pyspark {versions.get('pyspark')}, "
            f"deltalake {versions.get('deltalake')}, pyarrow {versions.get('pyarrow')}, "
            f"duckdb {versions.get('duckdb')}")


def warnings(run: Run) -> list[str]:
    out = []
    if run.quick:
        out.append("**QUICK RUN: small sizes, below the goals' scale. Not for the docs.**")
    if not run.clean:
        out.append("**UNCOMMITTED CHANGES: this run did not measure one revision** ("
                   + ", ".join(c.strip() for c in run.changes[:5]) + (", ..." if len(run.changes) > 5 else "") + ").")
    if not run.complete:
        out.append(f"**Partial run: {len(run.ran())} of the suite's {len(run.suite)} benchmarks ran.**")
    bad = [s.name for s in run.ran() if s.status != "ok"]
    if bad:
        out.append(f"**Did not pass: {', '.join(bad)}.**")
    return out


def header(results: Results, in_sections: bool) -> str:
    run = results.run
    took = sum(s.seconds or 0 for s in run.steps)
    span = f"{run.started_utc} to {run.finished_utc or '(unfinished)'}"
    where = os.path.relpath(results.folder, REPO) if results.folder.resolve().is_relative_to(REPO) else results.folder
    lines = warnings(run) + [
        f"Every figure in this table comes from one run of the benchmark suite, `make bench"
        f"{' QUICK=1' if run.quick else ''}`, at revision `{run.revision_short}`"
        f"{'' if run.clean else ' with uncommitted changes'}, on {machine_text(run)}; {span} "
        f"(the benchmarks took {duration(took)}). Results of the run: `{where}/`"
        + ("; each benchmark's section below holds all its tables." if in_sections else ".")]
    return "\n\n".join(lines)


def table(results: Results, links: dict[int, str], page: str = "") -> str:
    out = ["| # | benchmark | goal | result (medians) | met? |", "| ---: | --- | --- | --- | --- |"]
    for step in results.run.steps:
        report = results.reports.get(step.name)
        number = f"[{step.number}]({page}#{links[step.number]})" if step.number in links else str(step.number)
        title = report["title"] if report else step.name
        if step.note:
            title += f"<br>*{step.note}*"
        goals = "; ".join(goal_text(g) for g in report.get("goals", [])) if report else ""
        result = result_text(report) if report and step.done else "-"
        out.append(f"| {number} | {_cell(title)} | {_cell(goals or '-')} | {_cell(result)} | "
                   f"{_cell(verdict(step, report))} |")
    return "\n".join(out)


def summary_block(results: Results, page_text: str, in_sections: bool, page_link: str = "") -> str:
    """The statement of what was run where, and the table; its links lead to `page_link` (the page
    itself when empty), whose sections hold the run's tables when `in_sections`."""
    return f"{header(results, in_sections)}\n\n{table(results, anchors(page_text), page_link)}\n"


def _between(page_text: str, start: str, end: str, block: str, missing: str) -> str:
    first, last = page_text.find(start), page_text.find(end)
    if first < 0 or last < first:
        raise InvalidArgumentError(f"{missing}: put the lines\n{start}\n{end}\nwhere it goes.")
    return page_text[:first + len(start)] + "\n" + block + page_text[last:]


def replace_block(page_text: str, block: str) -> str:
    """`page_text` with the text between the summary markers replaced by `block`."""
    return _between(page_text, START, END, block, "the page has no summary markers")


def replace_tables(page_text: str, number: int, block: str) -> str:
    """`page_text` with the text between benchmark `number`'s markers replaced by `block`."""
    return _between(page_text, TABLES_START.format(number=number), TABLES_END.format(number=number), block,
                    f"the page has no markers for the tables of benchmark {number}")


def run_tables(results: Results, step: Step, docs_dir: Path) -> str:
    """One benchmark's tables of the run, and its plot, folded: a reader opens them from its section."""
    run, folder = results.run, results.folder
    report = results.reports.get(step.name)
    status = (f"{step.status}" + (f" in {duration(step.seconds)}" if step.seconds else "")
              + (f" (exit status {step.exit_status}; the log is `{step.name}.log` in the run's folder)"
                 if step.status != "ok" else ""))
    # md_in_html renders the Markdown inside <details> on the site; GitHub does it by the blank lines.
    out = ['<details markdown="1">', f"<summary>The run's tables: <code>{step.name}</code>, {status} "
           f"(revision <code>{run.revision_short}</code>)</summary>", ""]
    if step.note:
        out += [f"*{step.note}*", ""]
    if report:
        out += [render(report, title=False), ""]
    plot = folder / f"{step.name}.png"  # common.plot_path puts a benchmark's plot beside its result
    if plot.is_file():
        # The docs site serves only files under docs/: the run's plots are copied to docs/img/<run>/.
        images = docs_dir / "img" / folder.name
        images.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(plot, images / plot.name)
        out += [f"![{step.name}](img/{folder.name}/{plot.name})", ""]
    return "\n".join(out + ["</details>", ""])


# ----------------------------------------------------------------------------------------- writing

def refusal(run: Run) -> str | None:
    """Why the docs must not take this run, or None."""
    if run.quick:
        return "it is a quick run (small sizes, below the goals' scale)"
    if not run.clean:
        return "it ran on a tree with uncommitted changes"
    if not run.complete:
        return f"it ran {len(run.ran())} of the suite's {len(run.suite)} benchmarks"
    return None


def write_docs(folder: Path, page: Path = PAGE) -> None:
    """Write the run's summary into `page` (between the markers) and each benchmark's tables into
    its section; nothing is written when a marker is missing."""
    _write_docs(Results.load(folder), page)


def _write_docs(results: Results, page: Path) -> None:
    why = refusal(results.run)
    if why:
        raise InvalidArgumentError(f"the docs take only a complete run of a clean tree at full size; the run in "
                                   f"{results.folder} cannot be published: {why}.")
    text = page.read_text()
    text = replace_block(text, summary_block(results, text, True))
    for step in results.run.steps:
        text = replace_tables(text, step.number, run_tables(results, step, page.parent))
    page.write_text(text)


def publish(folder: Path, docs: bool = True, page: Path = PAGE) -> list[str]:
    """The run's summary.md always; the docs too when `docs` and the run qualifies. What was written."""
    results = Results.load(folder)
    page_text = page.read_text() if page.exists() else ""
    (Path(folder) / "summary.md").write_text(
        summary_block(results, page_text, False, os.path.relpath(page, Path(folder).resolve())))
    said = [f"summary: {Path(folder) / 'summary.md'}"]
    why = refusal(results.run)
    if docs and why is None:
        _write_docs(results, page)
        said.append(f"docs: {page} (the summary and each benchmark's tables), from this run alone; commit them "
                    f"with the run: git add {os.path.relpath(folder, REPO)} {os.path.relpath(page, REPO)} "
                    f"{os.path.relpath(page.parent / 'img', REPO)}")
    elif docs:
        said.append(f"docs left alone: {why}")
    return said


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="the summary table of a run of the benchmark suite")
    p.add_argument("run", help="a run folder, benchmarks/results/runs/<run>")
    p.add_argument("--docs", action="store_true", help=f"write it and each benchmark's tables into {PAGE.name}")
    args = p.parse_args(argv)
    try:
        if args.docs:
            write_docs(Path(args.run))
        print(summary_block(Results.load(Path(args.run)), PAGE.read_text() if PAGE.exists() else "", False))
    except InvalidArgumentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
