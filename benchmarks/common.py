"""Shared plumbing of the benchmarks: arguments, timing, working folders, machine facts, output.

Every benchmark builds a `Report` (timings with their samples, ratios between contenders, goals
with met/missed, correctness checks), prints a progress line per stage on stderr, and ends by
printing the report as a readable table (stdout) or, with --json, as JSON (stdout; the table then
goes to stderr).
"""
from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from skiplake.spark.session.session_setup import java_version
from testing_support.paths import DEFAULT_BASE, REPO

# Where the suite's run folders go: git_state leaves them out, since a run writes them.
RUNS_DIR = REPO / "benchmarks" / "results" / "runs"


# ---------------------------------------------------------------------------------------- setup

def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes: finishes in well under a minute")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout (the table goes to stderr)")
    p.add_argument("--reps", type=int, default=None, help="repetitions of each measurement (default depends on --quick)")
    p.add_argument("--workdir", default=str(DEFAULT_BASE),
                   help="where the working data goes (a fresh sub-folder, removed at the end); default: %(default)s")
    p.add_argument("--keep", action="store_true", help="keep the working data (prints where it is)")
    p.add_argument("--out", default=None, help="also write the JSON results to this file")
    return p


class Progress:
    """One line per stage on stderr, with the time since the benchmark started."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.t0 = time.perf_counter()

    def __call__(self, msg: str) -> None:
        print(f"[{self.name} {time.perf_counter() - self.t0:7.1f}s] {msg}", file=sys.stderr, flush=True)


@contextmanager
def workdir(name: str, base: str, keep: bool, progress: Progress) -> Iterator[Path]:
    os.makedirs(base, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=base))
    progress(f"working data under {path}")
    try:
        yield path
    finally:
        if keep:
            progress(f"kept working data under {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)
            try:
                os.rmdir(base)  # only if nothing else is there
            except OSError:
                pass


def rmtree(path: str | Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# --------------------------------------------------------------------------------------- timing

def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds `fn()` took (wall clock), and its result. Garbage is collected first, not during."""
    gc.collect()
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def executor_cpu_seconds(spark: Any) -> float:
    """CPU seconds Spark's tasks have used so far, over every stage the session's status store
    keeps (Spark's own task metrics, through py4j). On a machine shared with other work a query's
    CPU time varies far less than its wall clock, which waits for the cores."""
    jvm = spark._jvm
    store = spark.sparkContext._jsc.sc().statusStore()
    stages = store.stageList(jvm.java.util.ArrayList(), False, False,
                             spark.sparkContext._gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList())
    total, it = 0, stages.iterator()
    while it.hasNext():
        total += it.next().executorCpuTime()
    return total / 1e9


def rotated(items: Sequence[Any], rep: int) -> list[Any]:
    """`items` rotated by `rep`: contenders take turns going first across repetitions."""
    k = rep % len(items) if items else 0
    return list(items[k:]) + list(items[:k])


def alternate(contenders: dict[str, Callable[[], Any]], reps: int,
              seen: Callable[[str, Any], None] | None = None) -> dict[str, list[float]]:
    """Time each contender `reps` times after one untimed warm-up run each, taking turns going
    first; `seen(name, result)` gets every timed run's result."""
    for fn in contenders.values():
        fn()
    samples: dict[str, list[float]] = {k: [] for k in contenders}
    for rep in range(reps):
        for name in rotated(list(contenders), rep):
            secs, out = timed(contenders[name])
            samples[name].append(secs)
            if seen is not None:
                seen(name, out)
    return samples


def copies_for(contenders: Sequence[str], base: Path, work: Path, count: int, tag: str = "") -> dict[str, list[Path]]:
    """`count` copies of the table (or folder of tables) `base` per contender, made before any
    timing: a run that writes starts from its own."""
    out: dict[str, list[Path]] = {}
    for name in contenders:
        out[name] = []
        for i in range(count):
            path = work / f"{name}{'-' + tag if tag else ''}-{i}"
            shutil.copytree(base, path)
            out[name].append(path)
    return out


def summary(samples: Sequence[float]) -> dict[str, Any]:
    s = sorted(samples)
    return {
        "median_s": statistics.median(s) if s else None,
        "min_s": s[0] if s else None,
        "max_s": s[-1] if s else None,
        "p90_s": s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))] if s else None,
        "n": len(s),
        "samples_s": [round(x, 6) for x in samples],
    }


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.2f} s"


# The units of goals and headlines: seconds, a share, a count, a ratio, a rate.
UNITS = ("s", "%", "n", "x", "/s")


def fmt_value(value: float | None, unit: str) -> str:
    """A goal's or headline's value as the tables print it."""
    if value is None:
        return "-"
    if unit == "s":
        return fmt_s(value)
    if unit == "%":
        return f"{value * 100:.2f}%"
    if unit == "n":
        return f"{value:,g}"
    if unit == "/s":
        return f"{value:,.1f}/s"
    return f"{value:.2f}x"


# ---------------------------------------------------------------------------------------- machine

def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class GitState:
    revision: str                # the full commit id of HEAD
    short: str
    changes: tuple[str, ...]     # `git status --porcelain` lines, run folders left out

    @property
    def clean(self) -> bool:
        return not self.changes


def git_state(repo: Path = REPO, exclude: Path | None = RUNS_DIR) -> GitState | None:
    """HEAD and the tree's uncommitted changes (untracked files included, `exclude` left out: the
    suite's runs write there), or None outside a git checkout."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout

    try:
        revision = git("rev-parse", "HEAD").strip()
        skip = os.path.relpath(exclude, repo) if exclude is not None and exclude.is_relative_to(repo) else None
        spec = ["--", "."] + ([f":(exclude){skip}"] if skip else [])
        status = git("status", "--porcelain", "--untracked-files=all", *spec)
    except (OSError, subprocess.CalledProcessError):
        return None
    return GitState(revision, revision[:7], tuple(line for line in status.splitlines() if line.strip()))


def git_revision() -> str | None:
    state = git_state()
    if state is None:
        return None
    return state.short + ("" if state.clean else "+uncommitted changes")


def machine_info() -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                if line.startswith("model name")), platform.processor() or None)
    mem_kb = next((int(line.split()[1]) for line in _read("/proc/meminfo").splitlines()
                   if line.startswith("MemTotal:")), None)
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "nproc": usable,
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu,
        "memory_gib": round(mem_kb / 1024 / 1024, 1) if mem_kb else None,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "java": java_version(),
        "versions": {d: _version(d) for d in ("pyspark", "deltalake", "pyarrow", "duckdb", "skiplake")},
        "skiplake_git": git_revision(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }


# ---------------------------------------------------------------------------------------- report

@dataclass
class Report:
    benchmark: str
    title: str
    command: str
    params: dict[str, Any]
    machine: dict[str, Any] = field(default_factory=machine_info)
    timings: list[dict[str, Any]] = field(default_factory=list)
    ratios: list[dict[str, Any]] = field(default_factory=list)
    goals: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    headlines: list[dict[str, Any]] = field(default_factory=list)

    def timing(self, section: str, name: str, samples: Sequence[float], note: str = "") -> dict[str, Any]:
        row = {"section": section, "name": name, **summary(samples), "note": note}
        self.timings.append(row)
        return row

    def ratio(self, name: str, value: float, note: str = "") -> None:
        self.ratios.append({"name": name, "value": round(value, 4), "note": note})

    def goal(self, name: str, actual: float, target: float, unit: str = "s", note: str = "",
             at_least: bool = False) -> bool:
        met = actual >= target if at_least else actual <= target
        self.goals.append({"name": name, "actual": round(actual, 6), "target": target, "unit": unit,
                           "met": met, "note": note, "at_least": at_least})
        return met

    def headline(self, name: str, value: float, unit: str = "s", note: str = "") -> None:
        """A figure for the one-line summary of the suite's run (benchmarks.summary): what a reader
        of the summary table should see of this benchmark. `unit` is one of UNITS."""
        if unit not in UNITS:
            raise ValueError(f"headline {name!r}: unit {unit!r} is not one of {', '.join(UNITS)}")
        self.headlines.append({"name": name, "value": round(value, 6), "unit": unit, "note": note})

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.checks.append({"name": name, "ok": bool(ok), "detail": detail})

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        return d

    # ---- rendering

    def render(self, file=None) -> None:
        from rich.console import Console
        from rich.table import Table

        console = Console(file=file or sys.stdout, width=160)
        m = self.machine
        console.print(f"[bold]{self.title}[/bold]")
        console.print(f"command: {self.command}")
        console.print(f"machine: {m['nproc']} cores ({m['cpu_model']}), {m['memory_gib']} GiB, "
                      f"Python {m['python']}, {m['java']}, "
                      + ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
                      + f"; {m['date_utc']}; load {m['loadavg_start']}")
        console.print("params: " + ", ".join(f"{k}={v}" for k, v in self.params.items()))

        t = Table(title="timings (wall clock, seconds or ms)", show_lines=False)
        for col in ("section", "measurement", "median", "min", "max", "n", "note"):
            t.add_column(col, justify="right" if col in ("median", "min", "max", "n") else "left")
        for r in self.timings:
            t.add_row(r["section"], r["name"], fmt_s(r["median_s"]), fmt_s(r["min_s"]), fmt_s(r["max_s"]),
                      str(r["n"]), r["note"])
        console.print(t)

        if self.ratios:
            t = Table(title="ratios (of medians unless noted)")
            t.add_column("ratio")
            t.add_column("value", justify="right")
            t.add_column("note")
            for r in self.ratios:
                t.add_row(r["name"], f"{r['value']:.3f}x", r["note"])
            console.print(t)
        if self.goals:
            t = Table(title="goals")
            for col in ("goal", "actual", "target", "met", "note"):
                t.add_column(col)
            for g in self.goals:
                t.add_row(g["name"], fmt_value(g["actual"], g["unit"]), fmt_value(g["target"], g["unit"]),
                          "[green]MET[/green]" if g["met"] else "[red]MISSED[/red]", g["note"])
            console.print(t)
        if self.headlines:
            t = Table(title="headline figures (the suite's summary shows these)")
            for col in ("figure", "value", "note"):
                t.add_column(col)
            for h in self.headlines:
                t.add_row(h["name"], fmt_value(h["value"], h["unit"]), h["note"])
            console.print(t)
        if self.checks:
            t = Table(title="checks")
            for col in ("check", "ok", "detail"):
                t.add_column(col)
            for c in self.checks:
                t.add_row(c["name"], "[green]ok[/green]" if c["ok"] else "[red]FAILED[/red]", c["detail"])
            console.print(t)
        for n in self.notes:
            console.print(f"note: {n}")


def finish(report: Report, args: argparse.Namespace) -> int:
    """Print the report (table, or JSON with --json), write --out; exit status 1 if a check failed."""
    data = report.to_dict()
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(data, indent=2) + "\n")
    if args.json:
        report.render(file=sys.stderr)
        print(json.dumps(data, indent=2))
    else:
        report.render()
    return 0 if all(c["ok"] for c in report.checks) else 1


def plot_path(args: argparse.Namespace, name: str) -> Path:
    """Where a benchmark's plot goes: --plot if it has one, else beside the --out JSON (a suite
    run's folder), else `name` under the working-data folder (gitignored)."""
    chosen = getattr(args, "plot", None)
    if chosen:
        return Path(chosen)
    if args.out:
        return Path(args.out).with_suffix(".png")
    return DEFAULT_BASE / name


def command_line(module: str, args: argparse.Namespace, extra: Sequence[str] = ()) -> str:
    parts = [".venv/bin/python", "-m", f"benchmarks.{module}"]
    if args.quick:
        parts.append("--quick")
    if args.reps is not None:
        parts += ["--reps", str(args.reps)]
    parts += list(extra)
    return " ".join(parts)
