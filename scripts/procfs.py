"""What the profiling scripts read from /proc: a process's or thread's stat line, parsed into the
few fields they use, and a process's command line. See proc(5) for the layout; Linux only."""
from __future__ import annotations

import os
from dataclasses import dataclass

TICKS = os.sysconf("SC_CLK_TCK")  # the unit of the CPU times below, per second


@dataclass(frozen=True)
class Stat:
    name: str  # the executable's name (comm), at most 15 characters
    ppid: int
    user: int  # CPU ticks
    system: int
    children_user: int  # of children it waited for
    children_system: int
    start: int  # ticks after boot: with the pid, it tells a reused pid from the old process


def parse_stat(text: str) -> Stat:
    # The name may hold spaces and parentheses: it ends at the last ")".
    close = text.rindex(")")
    fields = text[close + 2:].split()  # fields[0] is the state, field 3 of proc(5)
    return Stat(name=text[text.index("(") + 1:close], ppid=int(fields[1]), user=int(fields[11]),
                system=int(fields[12]), children_user=int(fields[13]), children_system=int(fields[14]),
                start=int(fields[19]))


def read_stat(path: str) -> Stat | None:
    """The stat file at `path` parsed, or None when its process or thread has ended."""
    try:
        with open(path) as f:
            return parse_stat(f.read())
    except OSError:
        return None


def read_cmdline(pid: int | str) -> str | None:
    """The process's arguments joined by spaces ("" for a zombie), or None once it has ended."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None


def read_environ(pid: int | str) -> bytes:
    """The process's environment as NUL-separated NAME=value entries; empty once it has ended or
    when it is not ours to read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:
        return b""
