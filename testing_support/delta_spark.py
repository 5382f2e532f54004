"""delta-spark (the reference Delta Lake implementation) in a subprocess with its own JVM.

The suite's SparkSession has no Delta jars, so tests that compare with delta-spark hand a list of
jobs to testing_support/delta_spark_reader.py. `DeltaSpark(root)` starts the subprocess at once (the JVM
starts and Ivy resolves the package while the test builds its tables); `run(jobs)` then gives it
its last jobs file and returns the results (or `submit(jobs)`, work on, then `results()`), and
`run_batch(jobs)` one batch of several, between which skiplake acts on what delta-spark wrote.
When the package cannot be resolved the test is skipped.

The coordinate can be overridden with $SKIPLAKE_DELTA_SPARK_PACKAGE; Ivy's cache is Spark's
default, or $SKIPLAKE_IVY_DIR. delta-spark 4.4.x publishes one artifact per Spark minor:
`delta-spark_4.1_2.13` is built against Spark 4.1 (plain `delta-spark_2.13:4.4.0` is built against
Spark 4.2), and 4.4.1 is on PyPI only, not on Maven Central.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
READER = HERE / "delta_spark_reader.py"
DELTA_PACKAGE = os.environ.get("SKIPLAKE_DELTA_SPARK_PACKAGE", "io.delta:delta-spark_4.1_2.13:4.4.0")
RESOLUTION_ERRORS = ("unresolved dependency", "could not resolve", "download failed",
                     "resolvemavencoordinates", "unknownhostexception")

_spec = importlib.util.spec_from_file_location("delta_spark_reader", READER)
assert _spec is not None and _spec.loader is not None
reader = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reader)
rows_as_strings = reader.rows_as_strings
quote_path = reader._quote_path


class DeltaSpark:
    """The delta-spark subprocess: started at once (the JVM starts and Ivy resolves the package
    while skiplake builds the tables), then given one jobs file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.result_file = root / "result.json"
        self.out = open(root / "delta_spark.out", "w+")
        env = dict(os.environ)
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        self.started = time.time()
        self._batches = 0
        self.proc = subprocess.Popen(
            [sys.executable, str(READER), "-", str(self.result_file), DELTA_PACKAGE,
             os.environ.get("SKIPLAKE_IVY_DIR", "")],
            stdin=subprocess.PIPE, stdout=self.out, stderr=subprocess.STDOUT, text=True, env=env)

    def check(self) -> None:
        """Skip (package unresolvable) or fail now if the subprocess already died."""
        if self.proc.poll() is not None:
            self._give_up()

    def run(self, jobs: list[dict]) -> dict:
        """Run one last batch of jobs and return its results."""
        self.submit(jobs)
        return self.results()

    def run_batch(self, jobs: list[dict]) -> dict:
        """Run a batch of jobs and return its results, the subprocess kept for more batches:
        skiplake can then act on what delta-spark wrote, and delta-spark on what skiplake did."""
        self._batches += 1
        out = self.root / f"result-{self._batches}.json"
        self._send(jobs, 1, f"\t{out}")
        while not out.exists():
            if self.proc.poll() is not None:
                self._give_up()
            time.sleep(0.2)
        return json.loads(out.read_text())

    def submit(self, jobs: list[dict], threads: int = 1) -> None:
        """Hand the subprocess its last jobs and return at once: it runs them while the caller
        works (`threads` at a time: only for jobs on distinct tables)."""
        self._send(jobs, threads, "", last=True)

    def _send(self, jobs: list[dict], threads: int, suffix: str, last: bool = False) -> None:
        jobs_file = self.root / f"jobs-{self._batches}.json"
        jobs_file.write_text(json.dumps({"package": DELTA_PACKAGE, "jobs": jobs, "threads": threads}))
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(f"{jobs_file}{suffix}\n")
            self.proc.stdin.flush()
            if last:
                self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died: results() reports why

    def results(self) -> dict:
        """Wait for the last submitted jobs' results."""
        self.proc.wait(timeout=1800)
        if self.proc.returncode != 0 or not self.result_file.exists():
            self._give_up()
        return json.loads(self.result_file.read_text())

    def _give_up(self) -> None:
        self.out.flush()
        output = (self.root / "delta_spark.out").read_text()
        if any(marker in output.lower() for marker in RESOLUTION_ERRORS):
            line = next((ln for ln in output.splitlines() if "unresolved dependency" in ln.lower()),
                        output.strip().splitlines()[-1] if output.strip() else "")
            pytest.skip(f"delta-spark package {DELTA_PACKAGE} could not be resolved from Maven Central "
                        f"(offline?): {line.strip()[:300]}")
        pytest.fail(f"the delta-spark subprocess failed (exit {self.proc.returncode}):\n{output[-6000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.out.close()
