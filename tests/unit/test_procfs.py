"""scripts/procfs.py and scripts/jvm_threads.py: /proc's stat lines parsed, on made-up and live ones."""
from __future__ import annotations

import os
import threading
import time

from tests.unit.script_modules import load_script

procfs = load_script("procfs")
jvm_threads = load_script("jvm_threads")


def test_a_name_with_spaces_and_parentheses_ends_at_the_last_parenthesis():
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    # cutime cstime priority nice threads itrealvalue starttime ...
    line = "4242 (C2 (Compiler) 1) S 17 4242 4242 0 -1 4194560 10 0 0 0 350 25 7 3 20 0 4 0 987654 0 0"
    stat = procfs.parse_stat(line)
    assert stat == procfs.Stat(name="C2 (Compiler) 1", ppid=17, user=350, system=25, children_user=7,
                               children_system=3, start=987654)


def test_this_process_read_live():
    stat = procfs.read_stat(f"/proc/{os.getpid()}/stat")
    assert stat is not None and stat.ppid == os.getppid() and stat.start > 0
    assert "pytest" in procfs.read_cmdline(os.getpid())
    assert procfs.read_stat("/proc/0/stat") is None and procfs.read_cmdline(0) is None


def test_threads_are_sampled_with_their_own_cpu():
    done = threading.Event()

    def burn() -> None:
        while not done.is_set():
            pass

    worker = threading.Thread(target=burn)
    worker.start()
    try:
        time.sleep(0.5)
        threads: dict = {}
        own = jvm_threads.sample(os.getpid(), threads)
    finally:
        done.set()
        worker.join()
    assert own is not None and own.ppid == os.getppid()
    assert str(os.getpid()) in threads and len(threads) >= 2  # the main thread's tid is the pid
    assert sum(ticks for _, ticks, _ in threads.values()) <= own.user + own.system
    assert max(ticks for tid, (_, ticks, _) in threads.items() if tid != str(os.getpid())) > 0
    assert jvm_threads.sample(0, {}) is None
