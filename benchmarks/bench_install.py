"""What `pip install skiplake` costs: the core install against the full one ([all]), and the
README's quick start as a new user runs it.

    .venv/bin/python -m benchmarks.bench_install [--quick] [--reps N] [--installers uv,pip]

1. Build the wheel from this checkout (its size is reported).
2. Install it into fresh virtualenvs, the core (`skiplake`) and the full (`skiplake[all]`) install
   taking turns (common.alternate), each contender's first install an untimed warm-up that fills
   the package cache. Only the install is timed, not creating the venv. Installed size: the
   venv's bytes after the install minus before it.
   - uv: `uv pip install --offline`, the cache only (asking the index again can make uv download
     and rebuild pyspark's 450 MB sdist, which measures the index, not skiplake);
   - pip: `pip install` in a `python -m venv`, with pip's cache (it asks the index each time).
3. Run the README's quick start in the core venv in a fresh process, Java's start included
   (one warm-up run first).
"""
from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from benchmarks.common import Progress, Report, alternate, base_parser, command_line, finish, median, timed, workdir
from testing_support.install_env import (
    build_wheel,
    clean_env,
    create_venv,
    install,
    installed_bytes,
    quickstart_code,
    uv,
)

# Runs the quick start (argv[1]), then prints the CPU seconds of its JVM and of this Python: on
# a busy machine the wall time says little, the CPU time bounds what a quiet one would take.
_CPU_DRIVER = """
import os, resource, runpy, sys
ns = runpy.run_path(sys.argv[1], run_name="__main__")
stat = open(f"/proc/{ns['spark'].sparkContext._gateway.proc.pid}/stat").read().rsplit(")", 1)[1].split()
jvm = (int(stat[11]) + int(stat[12]) + int(stat[13]) + int(stat[14])) / os.sysconf("SC_CLK_TCK")
me = resource.getrusage(resource.RUSAGE_SELF)
print(f"@@cpu {jvm} {me.ru_utime + me.ru_stime}")
"""
EXTRA_MODULES = ("sqlalchemy", "orjson", "boto3", "uvicorn", "psycopg", "duckdb")
QUICKSTART_GOAL_S = 60.0


def _pip_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, env=clean_env())
    return path


def _pip_install(venv: Path, requirement: str) -> None:
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    requirement], check=True, env=clean_env())


def _has_modules(venv: Path) -> list[str]:
    code = f"import importlib.util; print(','.join(m for m in {EXTRA_MODULES!r} if importlib.util.find_spec(m)))"
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                         env=clean_env(venv), check=True)
    return [m for m in out.stdout.strip().split(",") if m]


@dataclass
class Installed:
    seconds: float      # the install alone, not creating the venv
    size: int           # bytes the install added to the venv
    modules: list[str]  # the extras' modules the venv then has


def _contender(root: Path, installer: str, requirement: str, counter: Iterator[int]) -> Callable[[], Installed]:
    """One install into a new venv, timed; the venv is removed afterwards."""
    new_venv, do_install = (create_venv, install) if installer == "uv" else (_pip_venv, _pip_install)

    def run() -> Installed:
        venv = new_venv(root / f"venv-{next(counter)}")
        empty = installed_bytes(venv)
        secs, _ = timed(lambda: do_install(venv, requirement))
        done = Installed(secs, installed_bytes(venv) - empty, _has_modules(venv))
        shutil.rmtree(venv)
        return done
    return run


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--installers", default=None, help="comma-separated: uv, pip (default both; --quick: uv)")
    args = p.parse_args(argv)
    reps = args.reps or (1 if args.quick else 3)
    installers = (args.installers or ("uv" if args.quick else "uv,pip")).split(",")
    progress = Progress("bench_install")
    extra = [] if args.installers is None else ["--installers", args.installers]
    report = Report("bench_install", "pip install skiplake: the core install against all extras, and the quick start",
                    command_line("bench_install", args, extra), {"reps": reps, "installers": ",".join(installers)})
    with workdir("bench_install", args.workdir, args.keep, progress) as root:
        wheel = build_wheel(root / "dist")
        report.extra["wheel_bytes"] = wheel.stat().st_size
        report.notes.append(f"wheel {wheel.name}: {wheel.stat().st_size:,} bytes")
        progress(f"built {wheel.name} ({wheel.stat().st_size:,} bytes); uv {uv()}")

        counter = itertools.count()
        for installer in installers:
            runs: dict[str, list[Installed]] = {"core": [], "all": []}
            alternate({"core": _contender(root, installer, str(wheel), counter),
                       "all": _contender(root, installer, f"{wheel}[all]", counter)},
                      reps, seen=lambda name, done: runs[name].append(done))
            how = "uv pip install --offline (cache only)" if installer == "uv" else "pip install (cache, index asked)"
            size: dict[str, float] = {}
            # No brackets in labels: the report's tables read them as markup.
            for name, label in (("core", "skiplake (core)"), ("all", "skiplake with all extras")):
                report.timing(f"install ({installer})", label, [r.seconds for r in runs[name]], how)
                size[name] = median([r.size for r in runs[name]])
                report.extra[f"installed_bytes_{installer}_{name}"] = size[name]
                report.notes.append(f"{installer}: {label} installs {size[name] / 2**20:,.0f} MiB")
                progress(f"{installer}: {label} {median([r.seconds for r in runs[name]]):.2f} s, "
                         f"{size[name] / 2**20:,.0f} MiB")
            core_s, all_s = median([r.seconds for r in runs["core"]]), median([r.seconds for r in runs["all"]])
            report.ratio(f"all extras / core install time ({installer})", all_s / core_s)
            if installer == installers[-1]:
                report.headline(f"core install ({installer})", core_s, "s", f"all extras {all_s:.1f} s")
            report.ratio(f"all extras / core installed size ({installer})", size["all"] / size["core"], "bytes, not seconds")
            core_modules = sorted({m for r in runs["core"] for m in r.modules})
            all_modules = [sorted(r.modules) for r in runs["all"]]
            report.check(f"core install ({installer}) has no extra's package", core_modules == [],
                         ",".join(core_modules))
            report.check(f"all-extras install ({installer}) has every extra's package",
                         all(m == sorted(EXTRA_MODULES) for m in all_modules), str(all_modules[-1]))

        progress("quick start: a core venv, then the README's code in a fresh process each run")
        venv = create_venv(root / "quickstart-venv")
        install(venv, str(wheel))
        script, driver = root / "quickstart.py", root / "cpu_driver.py"
        script.write_text(quickstart_code())
        driver.write_text(_CPU_DRIVER)
        outputs: list[subprocess.CompletedProcess] = []
        cpu: list[float] = []

        def quickstart() -> None:
            outputs.append(subprocess.run([str(venv / "bin" / "python"), str(driver), str(script)], cwd=root,
                                          capture_output=True, text=True, env=clean_env(venv, TMPDIR=str(root))))
            line = next((x for x in outputs[-1].stdout.splitlines() if x.startswith("@@cpu ")), "@@cpu 0 0")
            cpu.append(sum(float(x) for x in line.split()[1:]))
            progress(f"quick start: exit {outputs[-1].returncode}, {cpu[-1]:.1f} CPU seconds")

        secs = alternate({"quickstart": quickstart}, reps)["quickstart"]
        report.timing("quick start", "README quick start, fresh process", secs, "Java start, Spark jobs, all of it")
        report.timing("quick start", "its CPU time: JVM and driver Python", cpu[-reps:],
                      "CPU seconds, not wall: steadier than the wall time on a busy machine")
        report.goal("quick start wall time", median(secs), QUICKSTART_GOAL_S, note="under a minute on 2 cores")
        report.headline("README quick start, fresh process", median(secs), "s", "Java start included")
        last = outputs[-1]
        report.check("quick start ran", all(o.returncode == 0 for o in outputs), last.stderr[-300:] if last.returncode else "")
        report.check("quick start pruned files", "SelectedPartitionsCount: 1 out of 10" in last.stdout)
    return finish(report, args)


if __name__ == "__main__":
    sys.exit(main())
