"""scripts/suite_cpu.py: which group and pytest run each process's CPU goes to, and a real run."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.unit.script_modules import load_script

suite_cpu = load_script("suite_cpu")
Proc = suite_cpu.Proc

SPARK_SUBMIT = "/usr/bin/java -cp jars/* org.apache.spark.deploy.SparkSubmit"


def test_processes_are_grouped_by_role_and_pytest_run():
    tree = [
        # What started the command is not part of it, nor are its arguments a marker.
        Proc(100, 0, "python", "python scripts/suite_cpu.py -- make test PYTEST_ADDOPTS=-ks3proxy", 900),
        Proc(1, 100, "make", "make test", 5),
        Proc(2, 1, "sh", "/bin/sh -c .venv/bin/python -m pytest -q tests", 1),
        Proc(3, 2, "python", ".venv/bin/python -m pytest -q tests", 300),
        Proc(4, 3, "java", f"{SPARK_SUBMIT} pyspark-shell", 1300),
        Proc(5, 3, "python", ".venv/bin/python -m pytest -q tests", 7),  # a forked worker
        Proc(6, 3, "java", "/usr/bin/java -jar s3proxy-4.0.0-jar-with-dependencies.jar", 70),
        Proc(7, 3, "python", ".venv/bin/python testing_support/delta_spark_reader.py - r.json", 20),
        Proc(8, 7, "java", f"{SPARK_SUBMIT} pyspark-shell", 500),
        Proc(9, 3, "python", "/tmp/pytest-of-root/p0/core0/venv/bin/python quickstart.py", 40),
        Proc(13, 3, "python", "python -c import skiplake", 10),  # a clean venv's, found on PATH
        Proc(14, 13, "java", "/usr/bin/java -cp /tmp/p0/core0/venv/lib/python3.11/site-packages/"
                             "pyspark/jars/* org.apache.spark.deploy.SparkSubmit pyspark-shell", 50),
        Proc(15, 3, "postgres", "/usr/lib/postgresql/15/bin/postgres -D /tmp/pg", 3),
        Proc(16, 15, "postgres", "postgres: skiplake catalog_1 127.0.0.1(4242) idle", 2),
        Proc(17, 3, "python", "python -m skiplake.cli tables --catalog postgresql://127.0.0.1/c", 20),
        Proc(18, 14, "python", "/tmp/p0/core0/venv/bin/python -m pyspark.daemon", 8),  # the clean venv's
        Proc(19, 4, "python", ".venv/bin/python -m pyspark.daemon", 30),
        Proc(20, 3, "python", ".venv/bin/python -m testing_support.concurrency_worker /t 0 7 9 a", 12),
        Proc(21, 3, "python", ".venv/bin/python -m skiplake.cli catalog serve --db postgresql://x", 9),
        Proc(22, 3, "python", ".venv/bin/python -c import sys, skiplake /tmp/t", 4),  # starts Spark
        Proc(23, 22, "java", f"{SPARK_SUBMIT} pyspark-shell", 200),
        Proc(10, 1, "sh", "/bin/sh -c SKIPLAKE_TEST_SPARK=connect .venv/bin/python -m pytest -q", 1),
        Proc(11, 10, "python", ".venv/bin/python -m pytest -q tests/test_connect.py", 60),
        Proc(12, 11, "java", f"{SPARK_SUBMIT} --class org.apache.spark.sql.connect.service."
                             "SparkConnectServer", 690),
        Proc(99, 0, "java", f"{SPARK_SUBMIT} pyspark-shell", 1000),  # not the command's
    ]
    seen = {(p.pid, p.pid): p for p in tree}  # started in pid order
    out = suite_cpu.report(seen, root=1)
    got = {(g["run"], g["group"]): round(g["cpu_s"] * suite_cpu.TICKS) for g in out["groups"]}
    assert out["runs"] == 2
    # Per process too, the busiest first; nothing outside the command's tree.
    assert [(p["pid"], p["run"], p["group"]) for p in out["processes"][:2]] == [
        (4, 1, "the suite's JVM (its SparkSession)"), (12, 2, "Spark Connect server JVM")]
    assert {p["pid"] for p in out["processes"]} == {p.pid for p in tree} - {99, 100}
    assert got == {
        (0, "the command's own (make, lint)"): 7,
        (1, "pytest and the tests (Python)"): 300,
        (1, "the suite's JVM (its SparkSession)"): 1300,
        (1, "other subprocesses (CLI runs, scripts)"): 7 + 10 + 20 + 4,
        (1, "s3proxy (S3-compatible server)"): 70,
        (1, "delta-spark (its JVM and Python)"): 520,
        (1, "install checks (clean virtualenvs, uv)"): 40 + 50 + 8,
        (1, "PySpark's Python workers"): 30,
        (1, "concurrent writers (one process each)"): 12,
        (1, "catalog server (skiplake catalog serve)"): 9,
        (1, "Spark sessions of subprocesses (their JVMs)"): 200,
        (1, "PostgreSQL (catalog tests)"): 3 + 2,
        (2, "pytest and the tests (Python)"): 60,
        (2, "Spark Connect server JVM"): 690,
    }


def test_a_real_command_is_run_and_its_cpu_counted(capfd, tmp_path):
    busy = "import time\nwhile time.process_time() < 2.5: print('busy')"
    assert suite_cpu.main(["--json", str(tmp_path / "r.json"), "--", sys.executable, "-c", busy]) == 0
    out = json.loads((tmp_path / "r.json").read_text())
    assert out["exit"] == 0 and out["runs"] == 0
    # The command's output, then the table.
    printed = capfd.readouterr().out.splitlines()
    assert printed[0] == "busy" and printed[-1].split()[2:] == ["-", "the", "command's", "own", "(make,", "lint)"]
    [process] = out["processes"]
    assert process["cmd"].endswith("print('busy')") and process["cpu_s"] == out["groups"][0]["cpu_s"]
    [group] = out["groups"]
    assert group["group"] == "the command's own (make, lint)"
    assert 1.0 <= group["cpu_s"] <= 2.6  # the last second before it ended may go unread
    assert out["machine_busy_cpu_s"] >= group["cpu_s"]


def test_a_process_that_execs_is_read_again():
    """spark-submit's shell becomes java; the process keeps its pid and start time."""
    child = subprocess.Popen(["sh", "-c", f"sleep 1; exec {sys.executable} -c 'import time; time.sleep(3)'"])
    try:
        seen: dict = {}
        suite_cpu.read_procs(seen)
        [before] = [p for key, p in seen.items() if key[0] == child.pid]
        assert before.comm == "sh"
        time.sleep(2)
        suite_cpu.read_procs(seen)
        [after] = [p for key, p in seen.items() if key[0] == child.pid]
        assert after is before and after.comm.startswith("python") and "time.sleep(3)" in after.cmd
    finally:
        child.kill()
        child.wait()


def test_usage_without_a_command():
    assert suite_cpu.main(["make", "test"]) == 2


def test_the_table_for_people_and_a_command_that_used_no_cpu():
    out = {"exit": 0, "wall_s": 1.0, "machine_busy_cpu_s": 0.0,
           "groups": [{"run": 0, "group": "the command's own (make, lint)", "cpu_s": 0.0}]}
    lines = suite_cpu.table(out).splitlines()
    assert lines[0] == "exit 0; 1.0 s of wall time; the machine was busy 0.0 CPU-seconds, 0.0 of them in the command's processes"
    assert lines[2].split() == ["0.0", "0.0%", "-", "the", "command's", "own", "(make,", "lint)"]
    out["groups"] = [{"run": 1, "group": "a", "cpu_s": 3.0}, {"run": 0, "group": "b", "cpu_s": 1.0}]
    assert [line.split()[:3] for line in suite_cpu.table(out).splitlines()[2:]] == [["3.0", "75.0%", "1"],
                                                                                 ["1.0", "25.0%", "-"]]


def test_a_daemon_that_lost_its_parent_is_adopted_by_its_token(tmp_path):
    """pg_ctl starts PostgreSQL's server and exits: by the first reading the server's parent is init."""
    token = "SUITE_CPU_RUN=test-42"
    pidfile = tmp_path / "pid"
    for env in ({"SUITE_CPU_RUN": "test-42"}, {"SUITE_CPU_RUN": "another-run"}):
        subprocess.run(["sh", "-c", f"(sleep 5 & echo $! > {pidfile})"], env={**os.environ, **env}, check=True)
        daemon = int(pidfile.read_text())
        seen: dict = {}
        suite_cpu.read_procs(seen, (token, 12345))
        [proc] = [p for key, p in seen.items() if key[0] == daemon]
        os.kill(daemon, signal.SIGKILL)
        if proc.ppid not in (1, 12345):
            pytest.skip(f"orphans go to a subreaper here (pid {proc.ppid}), not to init")
        assert proc.ppid == (12345 if env["SUITE_CPU_RUN"] == "test-42" else 1)


def test_a_reused_pid_is_told_apart_by_start_time():
    """Pids go round within one `make test`: a child belongs to whoever had its parent's pid when it started."""
    seen = {
        (1, 1): Proc(1, 0, "make", "make test", 0),
        (2, 2): Proc(2, 1, "python", ".venv/bin/python -m pytest -q tests", 10),
        (7, 3): Proc(7, 2, "python", ".venv/bin/python -m testing_support.concurrency_worker /t", 5),
        (8, 4): Proc(8, 7, "java", "java -jar s3proxy.jar", 40),  # its parent: pid 7 as it was at 3
        (7, 9): Proc(7, 0, "java", "a later process elsewhere with pid 7", 1000),
        (9, 10): Proc(9, 7, "python", "a child of that later one", 500),
        # The second pytest run, after the first ended; a CLI run of it got the first run's pid.
        (5, 30): Proc(5, 1, "python", ".venv/bin/python -m pytest -q tests/test_connect.py", 20),
        (2, 31): Proc(2, 5, "python", ".venv/bin/python -m skiplake.cli history /t", 3),
    }
    out = suite_cpu.report(seen, root=1)
    assert {(p["pid"], p["run"], p["group"]) for p in out["processes"]} == {
        (1, 0, "the command's own (make, lint)"), (2, 1, "pytest and the tests (Python)"),
        (7, 1, "concurrent writers (one process each)"), (8, 1, "s3proxy (S3-compatible server)"),
        (5, 2, "pytest and the tests (Python)"), (2, 2, "other subprocesses (CLI runs, scripts)")}
