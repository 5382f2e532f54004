"""The benchmark suite's summary (benchmarks.summary) over a small fake run folder, and the suite's
refusals: a tree with uncommitted changes, a run the docs must not take. No Spark, no benchmark runs."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks import suite
from benchmarks.common import Report
from benchmarks.suite import Entry, Run, Step, checkout_drift, new_run, resume_run, same_checkout, status
from benchmarks.summary import (
    END,
    START,
    TABLES_END,
    TABLES_START,
    Results,
    anchors,
    publish,
    replace_block,
    slug,
    table,
    write_docs,
)
from skiplake.errors import InvalidArgumentError

MACHINE = {"nproc": 2, "cpu_model": "Test CPU 9000", "memory_gib": 23.5, "os": "Linux 6.1", "python": "3.11.7",
           "java": 'openjdk version "17.0.15"', "versions": {"pyspark": "4.1.1", "deltalake": "1.6.6",
                                                              "pyarrow": "26.0.1", "duckdb": "1.5.5"},
           "date_utc": "2026-11-25 10:00:00 UTC", "loadavg_start": [0.1, 0.1, 0.1], "loadavg_end": [0.2, 0.1, 0.1]}
PAGE = f"""# Benchmarks

{START}
(no run yet)
{END}

## 1. Snapshot load of a 100,000-file table

{TABLES_START.format(number=1)}
{TABLES_END.format(number=1)}

## 2. Appending 10M rows

{TABLES_START.format(number=2)}
{TABLES_END.format(number=2)}

## 3. Build sides

{TABLES_START.format(number=3)}
{TABLES_END.format(number=3)}

## 4. The fourth

{TABLES_START.format(number=4)}
{TABLES_END.format(number=4)}
"""


def report(name: str, title: str) -> Report:
    return Report(name, title, f".venv/bin/python -m benchmarks.{name}", {"reps": 3}, machine=dict(MACHINE))


def fake_run(folder: Path, *, quick: bool = False, clean: bool = True,
             suite: tuple[str, ...] = ("bench_one", "bench_two", "bench_three", "bench_four"),
             fifth: str = "pending") -> Path:
    """A run of four benchmarks: one meets its goal (with headlines), one misses one of two goals
    (no headlines), one has no goal and a failed check, and one failed without a result."""
    folder.mkdir(parents=True)
    one = report("bench_one", "Snapshot load of a table with 100,000 files")
    one.timing("A", "load", [0.129, 0.131, 0.127])
    one.goal("Snapshot.load", 0.129, 1.0)
    one.headline("Snapshot.load at the checkpoint", 0.129, "s", note="0.44x delta-rs")
    one.headline("commits per second, 8 processes", 135.9, "/s")
    two = report("bench_two", "Appending 10,000,000 rows")
    two.goal("files skipped", 0.9961, 0.98, unit="%", at_least=True)
    two.goal("speedup vs Spark", 2.82, 3.0, unit="x", at_least=True)
    three = report("bench_three", "Build sides read in the driver")
    three.ratio("spark / driver", 53.79)
    three.check("the same keys", False, "3 keys differ")
    for name, r in (("bench_one", one), ("bench_two", two), ("bench_three", three)):
        (folder / f"{name}.json").write_text(json.dumps(r.to_dict()))
    steps = [Step(1, "bench_one", [], status="ok", exit_status=0, seconds=70.0),
             Step(2, "bench_two", ["--sf", "10"], note="at sf=1, below the goal's sf=10", status="ok", exit_status=0,
                  seconds=3600.0),
             Step(3, "bench_three", [], status="checks failed", exit_status=1, seconds=5.0),
             Step(4, "bench_four", [], status="failed", exit_status=2, seconds=1.0)]
    steps += [Step(5, "bench_five", [], status=fifth)] if "bench_five" in suite else []  # not run to the end
    Run(name=folder.name, revision="a" * 40, revision_short="aaaaaaa", clean=clean,
        changes=[] if clean else [" M skiplake/table.py"], quick=quick, suite=list(suite), machine=dict(MACHINE),
        started_utc="2026-11-25 10:00:00 UTC", finished_utc="2026-11-25 11:01:16 UTC", data="/tmp/data",
        steps=steps).save(folder)
    return folder


def rows(text: str) -> dict[str, str]:
    """Table rows of the summary by benchmark title."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if len(cells) == 5 and cells[0] not in ("#", "---:"):
            out[cells[1].split("<br>")[0]] = line
    return out


def test_one_row_per_benchmark_with_the_runs_figures_and_verdicts(tmp_path):
    results = Results.load(fake_run(tmp_path / "run"))
    text = table(results, anchors(PAGE))
    by = rows(text)
    assert len(by) == 4
    one = by["Snapshot load of a table with 100,000 files"]
    assert "[1](#1-snapshot-load-of-a-100000-file-table)" in one
    assert "Snapshot.load <= 1.00 s" in one and "**129.0 ms** (0.44x delta-rs)" in one and "**135.9/s**" in one
    assert one.endswith("| **met** |")
    two = by["Appending 10,000,000 rows"]
    # No headlines: the goals' results stand in; one goal of two missed.
    assert "files skipped >= 98.00%" in two and "files skipped: **99.61%**" in two
    assert "speedup vs Spark: **2.82x**" in two
    assert "**partly** (1 of 2 met): speedup vs Spark 2.82x" in two
    assert "*at sf=1, below the goal's sf=10*" in two
    three = by["Build sides read in the driver"]
    assert "**CHECK FAILED**: the same keys" in three and "(no goal)" in three and "spark / driver: **53.79x**" in three
    four = by["bench_four"]
    assert "**FAILED** (exit status 2; see bench_four.log)" in four


def test_the_docs_take_the_summary_and_each_benchmarks_tables_between_their_markers(tmp_path):
    folder = fake_run(tmp_path / "run")
    (folder / "bench_one.png").write_bytes(b"\x89PNG")
    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE)
    write_docs(folder, page)
    text = page.read_text()
    assert "(no run yet)" not in text and text.count(START) == 1 and text.count(END) == 1
    assert text.index(START) < text.index("| # | benchmark |") < text.index(END) < text.index("## 1. Snapshot")
    assert "revision `aaaaaaa`" in text and "Test CPU 9000" in text and "each benchmark's section below" in text
    assert "QUICK" not in text and "UNCOMMITTED" not in text
    one = text[text.index("## 1. Snapshot"):text.index("## 2. Appending")]
    assert "<code>bench_one</code>, ok" in one and "| A | load | 129.0 ms |" in one
    assert "![bench_one](img/run/bench_one.png)" in one and one.count("<details") == one.count("</details>") == 1
    three = text[text.index("## 3. Build"):text.index("## 4. The")]
    assert "**FAILED** the same keys (3 keys differ)" in three
    assert "exit status 2" in text[text.index("## 4. The"):]
    assert (tmp_path / "img" / "run" / "bench_one.png").read_bytes() == b"\x89PNG"   # the site serves docs/ only
    # Writing again replaces the blocks instead of adding some.
    write_docs(folder, page)
    assert page.read_text() == text


def test_a_benchmark_without_a_section_is_refused_and_nothing_written(tmp_path):
    folder = fake_run(tmp_path / "run")
    page = tmp_path / "benchmarks.md"
    without_four = PAGE[:PAGE.index("## 4. The")]
    page.write_text(without_four)
    with pytest.raises(InvalidArgumentError, match="no markers for the tables of benchmark 4"):
        write_docs(folder, page)
    assert page.read_text() == without_four


PARTIAL = "ran 4 of the suite's 5 benchmarks"


@pytest.mark.parametrize("kind, why", [("quick", "quick run"), ("dirty", "uncommitted changes"), ("partial", PARTIAL),
                                       ("killed", PARTIAL), ("interrupted", PARTIAL)])
def test_the_docs_refuse_a_quick_a_dirty_or_a_partial_run(tmp_path, kind, why):
    """Partial: a benchmark not run, or one whose process was killed ("running" in run.json) or
    interrupted, as when a run stops and is resumed with --only naming others."""
    partial = kind in ("partial", "killed", "interrupted")
    suite = ("bench_one", "bench_two", "bench_three", "bench_four") + (("bench_five",) if partial else ())
    fifth = {"killed": "running", "interrupted": "interrupted"}.get(kind, "pending")
    folder = fake_run(tmp_path / "run", quick=kind == "quick", clean=kind != "dirty", suite=suite, fifth=fifth)
    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE)
    with pytest.raises(InvalidArgumentError, match=why):
        write_docs(folder, page)
    assert page.read_text() == PAGE
    # The run's own summary is still rendered, marked.
    publish(folder, docs=True, page=page)
    assert page.read_text() == PAGE
    marked = (folder / "summary.md").read_text()
    assert ("QUICK RUN" if kind == "quick" else "UNCOMMITTED CHANGES" if kind == "dirty" else "Partial run: 4 of") \
        in marked
    shown = {"partial": "not run", "killed": "did not finish", "interrupted": "interrupted"}.get(kind)
    assert ("| 5 | bench_five | - | - | **" in marked) == partial
    assert shown is None or f"| 5 | bench_five | - | - | **{shown}** |" in marked


def test_a_page_without_markers_is_refused():
    with pytest.raises(InvalidArgumentError, match="no summary markers"):
        replace_block("# Benchmarks\n", "table")


def test_anchors_are_githubs():
    assert slug("9. Dynamic file pruning on TPC-DS") == "9-dynamic-file-pruning-on-tpc-ds"
    assert slug("11. lake.sql's planning overhead") == "11-lakesqls-planning-overhead"
    assert slug("16. bench_catalog_server") == "16-bench_catalog_server"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


def test_a_run_refuses_a_tree_with_uncommitted_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(suite, "machine_info", lambda: dict(MACHINE))  # not the point here, and it starts a JVM
    repo, runs, data = tmp_path / "repo", tmp_path / "repo" / "runs", tmp_path / "data"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    git(repo, "add", "a.py")
    git(repo, "commit", "-q", "-m", "one")
    (repo / "a.py").write_text("x = 2\n")
    with pytest.raises(InvalidArgumentError, match="(?s)uncommitted changes.*a.py"):
        new_run(["bench_one"], {}, None, False, False, repo=repo, runs_dir=runs, data_root=data)
    assert not runs.exists()
    run, folder = new_run(["bench_one", "bench_two"], {"bench_two": Entry(("--sf", "10"), 5, "note")}, None, False,
                          True, repo=repo, runs_dir=runs, data_root=data)
    assert not run.clean and run.changes == [" M a.py"] and Run.load(folder).steps[1].args == ["--sf", "10"]
    # A run's own folder is not a change: the clean tree resumes; a run is resumed at its revision only.
    git(repo, "commit", "-q", "-am", "two")
    run, folder = new_run(["bench_one"], {}, None, True, False, repo=repo, runs_dir=runs, data_root=data)
    assert run.clean and folder.name.endswith("-quick")
    assert [s.name for s in resume_run(folder, ["bench_one"], {}, None, repo=repo)[1]] == ["bench_one"]
    # A checkout that changes under a running suite is seen before the next benchmark starts.
    assert checkout_drift(run, folder, repo) is None
    (repo / "b.py").write_text("")
    assert "uncommitted changes differ: ?? b.py" in checkout_drift(run, folder, repo)
    step = run.steps[0]
    step.status = "ok"
    with pytest.raises(InvalidArgumentError, match="changed during the run.*bench_one runs again"):
        same_checkout(run, folder, step, repo)
    assert Run.load(folder).steps[0].status == "interrupted"  # measured perhaps other code: run again on resume
    git(repo, "add", "b.py")
    git(repo, "commit", "-q", "-m", "three")
    assert "HEAD is now" in checkout_drift(run, folder, repo)
    with pytest.raises(InvalidArgumentError, match="Check out"):
        resume_run(folder, ["bench_one"], {}, None, repo=repo)


def test_a_step_passes_only_with_its_result_and_every_check(tmp_path):
    result = tmp_path / "r.json"
    assert status(result, 0) == "failed"
    result.write_text(json.dumps({"checks": [{"name": "a", "ok": True, "detail": ""}]}))
    assert status(result, 0) == "ok"
    result.write_text(json.dumps({"checks": [{"name": "a", "ok": False, "detail": ""}]}))
    assert status(result, 1) == "checks failed" and status(result, 2) == "failed"
