"""scripts/suite_cpu.py: which group and pytest run each process's CPU goes to, and a real run."""
from __future__ import annotations

import json
import subprocess
import sys
import time

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
    assert got == {
        (0, "the command's own (make, lint)"): 7,
        (1, "pytest and the tests (Python)"): 300,
        (1, "the suite's JVM (its SparkSession)"): 1300,
        (1, "other subprocesses (CLI runs, writers)"): 7 + 10 + 20,
        (1, "s3proxy (S3-compatible server)"): 70,
        (1, "delta-spark (its JVM and Python)"): 520,
        (1, "install checks (clean virtualenvs, uv)"): 40 + 50,
        (1, "PostgreSQL (catalog tests)"): 3 + 2,
        (2, "pytest and the tests (Python)"): 60,
        (2, "Spark Connect server JVM"): 690,
    }


def test_a_real_command_is_run_and_its_cpu_counted(capsys):
    busy = "import time\nwhile time.process_time() < 2.5: pass"
    assert suite_cpu.main(["--json", "--", sys.executable, "-c", busy]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["exit"] == 0 and out["runs"] == 0
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
