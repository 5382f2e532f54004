"""delta-spark as a benchmark contender: its own JVM (benchmarks.delta_merge_runner), one SQL
statement at a time, each timed inside it, so the pipe costs nothing.

delta-spark 4.4.x publishes one artifact per Spark minor: `delta-spark_4.1_2.13` is built
against Spark 4.1. $SKIPLAKE_DELTA_SPARK_PACKAGE overrides the coordinate, $SKIPLAKE_IVY_DIR
Ivy's cache.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

DELTA_PACKAGE = os.environ.get("SKIPLAKE_DELTA_SPARK_PACKAGE", "io.delta:delta-spark_4.1_2.13:4.4.0")


class DeltaRunner:
    """The delta-spark subprocess: one SQL statement at a time, each timed inside it."""

    def __init__(self, partitions: int, progress: Callable[[str], None], driver_memory: str = "4g") -> None:
        env = dict(os.environ)
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.delta_merge_runner", DELTA_PACKAGE, str(partitions), driver_memory,
             os.environ.get("SKIPLAKE_IVY_DIR", "")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
            cwd=str(Path(__file__).resolve().parent.parent))
        self.info = self._reply()
        progress(f"delta-spark {self.info.get('delta')} on Spark {self.info.get('spark')} ready")

    def _reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the delta-spark subprocess exited ({self.proc.wait()}): see its stderr above")
        return json.loads(line)

    def sql(self, statement: str) -> dict[str, Any]:
        """Run one SQL statement; its time inside the JVM and its rows."""
        return self.request({"sql": statement})

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one request ({"sql": ...} or {"stream": ...}, see delta_merge_runner) and wait for its reply."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        reply = self._reply()
        if "error" in reply:
            raise RuntimeError(f"delta-spark failed: {reply['error']}")
        return reply

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def report_against_delta(report: Any, section: str, ours: str, theirs: str, our_samples: list[float],
                         their_inner: list[float], their_wall: list[float]) -> float:
    """Record skiplake's and delta-spark's timings of one section (delta-spark's as timed in its
    JVM, its wall clock from here in a note) and their ratio; returns delta-spark / skiplake."""
    from benchmarks.common import median
    report.timing(section, ours, our_samples)
    report.timing(section, theirs, their_inner,
                  note=f"wall clock from this process, pipe included: {median(their_wall):.2f} s")
    ratio = median(their_inner) / median(our_samples)
    report.ratio(f"{section}: delta-spark / skiplake", ratio)
    return ratio
