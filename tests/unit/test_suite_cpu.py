"""scripts/suite_cpu.py: which group and pytest run each process's CPU goes to, and a real run."""
from __future__ import annotations

import json
import sys

from tests.unit.script_modules import load_script

suite_cpu = load_script("suite_cpu")
Proc = suite_cpu.Proc

SPARK_SUBMIT = "/usr/bin/java -cp jars/* org.apache.spark.deploy.SparkSubmit"


def test_processes_are_grouped_by_role_and_pytest_run():
    tree = [
        Proc(1, 0, "make", "make test", 5),
        Proc(2, 1, "sh", "/bin/sh -c .venv/bin/python -m pytest -q tests", 1),
        Proc(3, 2, "python", ".venv/bin/python -m pytest -q tests", 300),
        Proc(4, 3, "java", f"{SPARK_SUBMIT} pyspark-shell", 1300),
        Proc(5, 3, "python", ".venv/bin/python -m pytest -q tests", 7),  # a forked worker
        Proc(6, 3, "java", "/usr/bin/java -jar s3proxy-4.0.0-jar-with-dependencies.jar", 70),
        Proc(7, 3, "python", ".venv/bin/python testing_support/delta_spark_reader.py - r.json", 20),
        Proc(8, 7, "java", f"{SPARK_SUBMIT} pyspark-shell", 500),
        Proc(9, 3, "python", "/tmp/pytest-of-root/p0/core0/venv/bin/python quickstart.py", 40),
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
        (1, "other subprocesses (CLI runs, writers)"): 7,
        (1, "s3proxy (S3-compatible server)"): 70,
        (1, "delta-spark (its JVM and Python)"): 520,
        (1, "install checks (clean virtualenvs, uv)"): 40,
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


def test_usage_without_a_command():
    assert suite_cpu.main(["make", "test"]) == 2
