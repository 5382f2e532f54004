"""Run a command and tell where its CPU went, process by process, grouped by role.

    .venv/bin/python scripts/suite_cpu.py [--json FILE] -- make test

The table goes to stdout after the command's own output; `--json FILE` also writes the report,
each process included, to FILE for machines.

Reads /proc once a second and keeps every process's last user and system time, so processes
that end between two readings lose at most a second. Each process of the command's tree is
put in a group by its own command line and its ancestors' (the suite's JVM, delta-spark, the
Spark Connect server, the standalone cluster, ...), per pytest run (`make test` has two: the
classic pass and the Connect pass). The machine's busy time from /proc/stat is printed beside
it, so what ran outside the command shows too. Linux only. docs/testing.md shows what it found.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass

from procfs import TICKS, read_cmdline, read_environ, read_stat

# In the command's environment, inherited by its processes: how a daemon that lost its parent
# is known as the command's.
TOKEN_VARIABLE = "SUITE_CPU_RUN"

# First match wins: (group, any of these in the process's or an ancestor's command line).
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("s3proxy (S3-compatible server)", ("s3proxy",)),
    # Debian's binaries (initdb, pg_ctl, the server), and the titles the server's backends take;
    # not a `postgresql://` URL.
    ("PostgreSQL (catalog tests)", ("/lib/postgresql/", "postgres: ")),
    # The install checks' clean virtualenvs are `<tmp>/venv` (the checkout's is `.venv`): their
    # Python by path, or the jars of their PySpark on a JVM's class path; uv builds them. Before
    # PySpark's workers and the catalog server, which they run too.
    ("install checks (clean virtualenvs, uv)", ("/venv/", "/bin/uv ")),
    ("delta-spark (its JVM and Python)", ("delta_spark_reader",)),
    ("Spark Connect server JVM", ("SparkConnectServer", "connect_server")),
    ("standalone cluster (6 JVMs, driver)", ("cluster_driver", "deploy.master", "deploy.worker",
                                             "CoarseGrainedExecutorBackend")),
    ("PySpark's Python workers", ("pyspark.daemon",)),
    ("concurrent writers (one process each)", ("testing_support.concurrency_worker",)),
    ("catalog server (skiplake catalog serve)", ("catalog serve",)),
)
# After the suite's own JVM is told apart: the JVMs of subprocesses that start Spark themselves
# (a writer killed mid-write, a session with other options).
OTHER_SPARK = ("Spark sessions of subprocesses (their JVMs)", ("org.apache.spark.deploy.SparkSubmit",))


@dataclass(eq=False)  # a process is itself: hashed by identity, as a key of `runs`
class Proc:
    pid: int
    ppid: int
    comm: str
    cmd: str
    ticks: int


def read_procs(seen: dict[tuple[int, int], Proc], adopt: tuple[str, int] | None = None) -> None:
    """Update `seen` (keyed by pid and start time, so a reused pid is a new process). A process
    that exec'd (spark-submit's shell becoming java, a fork becoming postgres) keeps its pid and
    start time, so its name and command line are read again each time; its parent stays the one
    first seen, so an orphan stays in the tree it came from.

    A daemon whose parent ended before it was first seen (PostgreSQL's server, left by pg_ctl)
    has init for parent by then. With `adopt` (a token in the command's environment, the root's
    pid), such a process whose environment holds the token (NAME=value) is taken as the root's
    child."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat, cmd = read_stat(f"/proc/{name}/stat"), read_cmdline(name)
        if stat is None or cmd is None:
            continue  # it ended while being read
        key, ticks = (int(name), stat.start), stat.user + stat.system
        proc = seen.get(key)
        if proc is None:
            ppid = stat.ppid
            if adopt and ppid == 1 and adopt[0].encode() in read_environ(name).split(b"\0"):
                ppid = adopt[1]
            proc = seen[key] = Proc(key[0], ppid, stat.name, cmd, ticks)
        proc.ticks = max(proc.ticks, ticks)
        if cmd:  # a zombie's is empty
            proc.comm, proc.cmd = stat.name, cmd


def busy_ticks() -> int:
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return sum(values) - values[3] - values[4]  # all but idle and iowait


def is_pytest(proc: Proc) -> bool:
    return proc.comm.startswith("python") and proc.cmd.split()[1:3] == ["-m", "pytest"]


def group_of(proc: Proc, ancestors: list[Proc], runs: dict[Proc, int]) -> tuple[int, str]:
    """(pytest run, group) of a process in the command's tree; run 0 is outside any pytest."""
    run = next((runs[a] for a in [proc, *ancestors] if a in runs), 0)
    lines = " ".join(p.cmd for p in [proc, *ancestors])
    for group, markers in GROUPS:
        if any(marker in lines for marker in markers):
            return run, group
    if proc in runs:
        return run, "pytest and the tests (Python)"
    if proc.comm == "java" and ancestors and ancestors[0] in runs:
        return run, "the suite's JVM (its SparkSession)"
    if any(marker in lines for marker in OTHER_SPARK[1]):
        return run, OTHER_SPARK[0]
    return run, "other subprocesses (CLI runs, scripts)" if run else "the command's own (make, lint)"


def report(seen: dict[tuple[int, int], Proc], root: int) -> dict:
    """CPU-seconds per (pytest run, group) over the processes of `root`'s tree, and per process."""
    starts: dict[int, list[int]] = {}  # pid -> start times of the processes that had it
    for pid, started in seen:
        starts.setdefault(pid, []).append(started)

    def parent_key(key: tuple[int, int]) -> tuple[int, int] | None:
        # Pids are reused (32,768 of them go round within one `make test`): the parent is the
        # process that had the pid when this one started.
        ppid = seen[key].ppid
        earlier = [started for started in starts.get(ppid, []) if started <= key[1]]
        return (ppid, max(earlier)) if earlier else None

    root_key = (root, max(starts.get(root, [0])))  # the command runs to the end: the latest
    tree: list[tuple[int, Proc, list[Proc]]] = []  # (start time, process, its ancestors)
    for key, proc in seen.items():
        chain = [key]
        while chain[-1] != root_key and len(chain) < 50 and (up := parent_key(chain[-1])) is not None:
            chain.append(up)  # up to the root: what started the command is not its own
        if chain[-1] == root_key:
            tree.append((key[1], proc, [seen[k] for k in chain[1:]]))
    runs: dict[Proc, int] = {}  # each pytest run (not its forked workers) -> 1, 2, ...
    for _, proc, ancestors in sorted(tree, key=lambda t: t[0]):
        if is_pytest(proc) and not (ancestors and is_pytest(ancestors[0])):
            runs[proc] = len(runs) + 1
    totals: Counter[tuple[int, str]] = Counter()
    processes = []
    for _, proc, ancestors in tree:
        run, group = group_of(proc, ancestors, runs)
        totals[run, group] += proc.ticks
        processes.append({"pid": proc.pid, "ppid": proc.ppid, "run": run, "group": group,
                          "cpu_s": round(proc.ticks / TICKS, 2), "cmd": proc.cmd[:300]})
    return {"runs": len(runs), "groups": [{"run": run, "group": group, "cpu_s": round(ticks / TICKS, 2)}
                                          for (run, group), ticks in totals.most_common()],
            # Each process, the busiest first: what to read when a group looks wrong.
            "processes": sorted(processes, key=lambda p: -p["cpu_s"])}


def table(out: dict) -> str:
    """The report for people: a line of totals, then a row per (pytest run, group)."""
    total = sum(g["cpu_s"] for g in out["groups"])
    lines = [f"exit {out['exit']}; {out['wall_s']} s of wall time; the machine was busy "
             f"{out['machine_busy_cpu_s']} CPU-seconds, {total:.1f} of them in the command's processes",
             f"{'CPU-s':>9} {'share':>6}  pytest run  group"]
    for g in out["groups"]:
        share = 100 * g["cpu_s"] / total if total else 0.0  # a command that slept the whole time
        lines.append(f"{g['cpu_s']:9.1f} {share:5.1f}%  {g['run'] or '-':>10}  {g['group']}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    json_path = argv[1] if argv[:1] == ["--json"] and len(argv) > 1 else None
    argv = argv[2:] if json_path else argv
    if not argv or argv[0] != "--" or len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    seen: dict[tuple[int, int], Proc] = {}
    busy0, started = busy_ticks(), time.time()
    run_id = f"{os.getpid()}-{time.time_ns()}"
    child = subprocess.Popen(argv[1:], env={**os.environ, TOKEN_VARIABLE: run_id})
    while child.poll() is None:
        read_procs(seen, (f"{TOKEN_VARIABLE}={run_id}", child.pid))
        time.sleep(1)
    out = report(seen, child.pid)
    out.update(exit=child.returncode, wall_s=round(time.time() - started, 1),
               machine_busy_cpu_s=round((busy_ticks() - busy0) / TICKS, 1))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(out, f, indent=1)
    print("\n" + table(out))
    return child.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
