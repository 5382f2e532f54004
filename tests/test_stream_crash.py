"""Crash tests of the streaming sink: a streaming query (its own process, Spark and Python workers
in one process group) is SIGKILLed right after the sink committed a micro-batch and before Spark
recorded the batch as done, then again at a random moment, and restarted from its checkpoint each
time. Every source row must reach the sink exactly once, on local disk and on S3."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import skiplake

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[1]
COMMITS = 8
ROWS = 25


def _job(source: str, sink: str, checkpoint: str, options: dict) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    log = open(Path(checkpoint).parent / "job.log", "a")
    return subprocess.Popen([sys.executable, "-m", "testing_support.stream_job", source, sink, checkpoint,
                             json.dumps(options)], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=log, text=True)


def _kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _sink_versions(spark, sink: str) -> int:
    try:
        return skiplake.Table.open(spark, sink).version + 1
    except skiplake.errors.NotATableError:
        return 0


def _done_batches(checkpoint: str) -> int:
    commits = Path(checkpoint) / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


def _run_until(proc: subprocess.Popen, spark, sink: str, checkpoint: str, between_commits: bool,
               timeout: float = 240) -> None:
    """Kill `proc` once the sink holds a batch Spark has not recorded as done (between_commits), or
    at a random moment after its first commit."""
    start = time.monotonic()
    first = _sink_versions(spark, sink)
    delay = random.uniform(0.0, 3.0)
    seen_at = None
    while time.monotonic() - start < timeout and proc.poll() is None:
        versions = _sink_versions(spark, sink)
        if between_commits and versions > _done_batches(checkpoint):
            _kill(proc)
            return
        if not between_commits and versions > first:
            seen_at = seen_at or time.monotonic()
            if time.monotonic() - seen_at >= delay:
                _kill(proc)
                return
        time.sleep(0.005)
    if proc.poll() is None:
        _kill(proc)


def _crash_and_recover(spark, source_table, sink: str, checkpoint: str, options: dict) -> None:
    for i in range(COMMITS):
        source_table.append(spark.range(i * ROWS, (i + 1) * ROWS).coalesce(1))
    for between in (True, False):
        _run_until(_job(source_table.path, sink, checkpoint, options), spark, sink, checkpoint, between)
    final = _job(source_table.path, sink, checkpoint, options)
    out, _ = final.communicate(timeout=300)
    errors = (Path(checkpoint).parent / "job.log").read_text()[-3000:]
    assert final.returncode == 0 and "DONE" in out, errors
    rows = skiplake.Table.open(spark, sink).read().collect()
    got = sorted(r.id for r in rows)
    assert got == list(range(COMMITS * ROWS)), "each source row in the sink exactly once"
    assert all(r.doubled == 2 * r.id for r in rows)


def test_sink_exactly_once_across_kills_on_local_disk(lake, spark, tmp_path):
    source = lake.create_table("crash_source", "id long")
    _crash_and_recover(spark, source, str(tmp_path / "sink"), str(tmp_path / "ckpt"), {})


@pytest.mark.s3
def test_sink_exactly_once_across_kills_on_s3(s3_lake, spark, s3_server, tmp_path):
    source = s3_lake.create_table("crash_source", "id long")
    sink = source.path.rsplit("/", 1)[0] + "/crash_sink"
    _crash_and_recover(spark, source, sink, str(tmp_path / "ckpt"), dict(s3_server.options))
