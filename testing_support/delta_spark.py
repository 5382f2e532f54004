"""delta-spark (the reference Delta Lake implementation) in a subprocess with its own JVM.

The suite's SparkSession has no Delta jars, so tests that compare with delta-spark hand lists of
jobs to testing_support/delta_spark_reader.py. One such process serves the whole test session
(the `delta_spark` fixture of tests/conftest.py): its JVM starts, Ivy resolves the packages and
the JIT warms up once, not once per test module. `submit_batch(jobs)` hands it a batch and
returns at once (delta-spark works while skiplake does); `.result()` waits for it, and
`run_batch(jobs)` does both. Between batches skiplake can act on what delta-spark wrote.
When the package cannot be resolved the test is skipped.

The coordinate can be overridden with $SKIPLAKE_DELTA_SPARK_PACKAGE; Ivy's cache is Spark's
default, or $SKIPLAKE_IVY_DIR. delta-spark 4.4.x publishes one artifact per Spark minor:
`delta-spark_4.1_2.13` is built against Spark 4.1 (plain `delta-spark_2.13:4.4.0` is built against
Spark 4.2), and 4.4.1 is on PyPI only, not on Maven Central. The session also has hadoop-aws, so
that a batch can read tables on an object store through S3A (its settings go with the batch).
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from skiplake.spark.session.object_stores import HADOOP_AWS

HERE = Path(__file__).resolve().parent
READER = HERE / "delta_spark_reader.py"
DELTA_PACKAGE = os.environ.get("SKIPLAKE_DELTA_SPARK_PACKAGE", "io.delta:delta-spark_4.1_2.13:4.4.0")
PACKAGES = f"{DELTA_PACKAGE},{HADOOP_AWS}"
RESOLUTION_ERRORS = ("unresolved dependency", "could not resolve", "download failed",
                     "resolvemavencoordinates", "unknownhostexception")
BATCH_TIMEOUT_S = 1800

_spec = importlib.util.spec_from_file_location("delta_spark_reader", READER)
assert _spec is not None and _spec.loader is not None
reader = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reader)
rows_as_strings = reader.rows_as_strings
quote_path = reader._quote_path


class DeltaSpark:
    """The delta-spark subprocess: started at once (the JVM starts and Ivy resolves the packages
    while the caller builds its tables), then given batches of jobs, one at a time, until closed."""

    def __init__(self, root: Path, packages: str = PACKAGES) -> None:
        self.root = root
        self.out = open(root / "delta_spark.out", "w+")
        env = dict(os.environ)
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        self._batches = 0
        self.proc = subprocess.Popen(
            [sys.executable, str(READER), "-", str(root / "result.json"), packages,
             os.environ.get("SKIPLAKE_IVY_DIR", "")],
            stdin=subprocess.PIPE, stdout=self.out, stderr=subprocess.STDOUT, text=True, env=env)

    def check(self) -> None:
        """Skip (package unresolvable) or fail now if the subprocess already died."""
        if self.proc.poll() is not None:
            self._give_up()

    def run_batch(self, jobs: list[dict], threads: int = 1, hadoop: dict[str, str] | None = None) -> dict:
        """Run a batch of jobs and return its results."""
        return self.submit_batch(jobs, threads, hadoop).result()

    def submit_batch(self, jobs: list[dict], threads: int = 1,
                     hadoop: dict[str, str] | None = None) -> Batch:
        """Hand the subprocess a batch and return at once: it runs the jobs while the caller
        works (`threads` at a time: only for jobs on distinct tables). `hadoop` settings (S3A's
        endpoint and keys) apply to the file systems the batch opens first."""
        self._batches += 1
        jobs_file = self.root / f"jobs-{self._batches}.json"
        out = self.root / f"result-{self._batches}.json"
        jobs_file.write_text(json.dumps({"jobs": jobs, "threads": threads, "hadoop": hadoop or {}}))
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(f"{jobs_file}\t{out}\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: the batch's result() reports why
        return Batch(self, out)

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
        """End the session (a blank line), or kill the process if it does not end soon."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.out.close()


@dataclass
class Batch:
    """A batch handed to the subprocess; its results are in `out` once written."""
    owner: DeltaSpark
    out: Path

    def result(self) -> dict:
        deadline = time.time() + BATCH_TIMEOUT_S
        while not self.out.exists():
            if self.owner.proc.poll() is not None or time.time() > deadline:
                self.owner._give_up()
            time.sleep(0.1)
        return json.loads(self.out.read_text())
