"""The CPU time of a running process's threads, grouped by kind, printed when it exits.

    .venv/bin/python scripts/jvm_threads.py PID

Reads /proc/PID/task/*/stat twice a second and keeps each thread's last user and system time, so
threads that ended before the process are counted too. Thread names are grouped with their
numbers dropped ("Executor task launch worker for task 3.0" and "... 7.0" are one kind); the JIT
compilers are "C1" and "C2". Linux only. docs/testing.md shows what it found in the suite's JVM.
"""
from __future__ import annotations

import os
import re
import sys
import time
from collections import Counter

from procfs import TICKS, Stat, read_stat


def kind(name: str) -> str:
    if name.startswith(("C1 ", "C2 ")):
        return name[:2]
    return re.sub(r"[-#]?\d+$", "", re.sub(r"\d+", "N", name)).strip()


def sample(pid: int, threads: dict[str, tuple[str, int, int]]) -> Stat | None:
    """Update `threads` (tid -> name, user+system, system ticks); the process's own stat, or None
    once it is gone."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        if (thread := read_stat(f"/proc/{pid}/task/{tid}/stat")) is not None:
            threads[tid] = (thread.name, thread.user + thread.system, thread.system)
    return read_stat(f"/proc/{pid}/stat")


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    pid = int(argv[0])
    threads: dict[str, tuple[str, int, int]] = {}
    totals = None
    while (latest := sample(pid, threads)) is not None:
        totals = latest
        time.sleep(0.5)
    if totals is None:
        print(f"no process {pid}", file=sys.stderr)
        return 1
    user, system, child_user, child_system = (t / TICKS for t in (totals.user, totals.system, totals.children_user,
                                                                  totals.children_system))
    print(f"process: user {user:.1f}s, system {system:.1f}s; its children: user {child_user:.1f}s, "
          f"system {child_system:.1f}s")
    by_kind: Counter[str] = Counter()
    by_kind_system: Counter[str] = Counter()
    for name, ticks, system_ticks in threads.values():
        by_kind[kind(name)] += ticks
        by_kind_system[kind(name)] += system_ticks
    print(f"{'CPU':>8}  {'system':>7}  threads")
    for name, ticks in by_kind.most_common(20):
        print(f"{ticks / TICKS:7.1f}s  {by_kind_system[name] / TICKS:6.1f}s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
