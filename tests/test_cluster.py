"""skiplake on a real Spark standalone cluster: a master and two workers (each its own JVM, with
its own executor JVM and Python workers) started from the PySpark installation on loopback, a
driver in its own process, tables on the S3-compatible server. The driver runs the demo's
workload and a concurrency stress run of writer threads whose jobs share the cluster."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.s3, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent


def _replay(records: dict[str, list[dict]]) -> list[list[int]]:
    """The rows the acknowledged operations leave, applied in the order of their versions."""
    rows: dict[int, tuple[int, int]] = {}  # id -> (writer, v)
    ops = sorted(((op["version"], int(w), op) for w, mine in records.items() for op in mine), key=lambda x: x[0])
    for _version, w, op in ops:
        if op["op"] == "append":
            rows.update({i: (w, i) for i in range(op["lo"], op["hi"])})
        elif op["op"] == "delete":
            rows = {i: r for i, r in rows.items() if not (r[0] == w and i % op["mod"] == 0)}
        else:
            rows = {i: (r[0], r[1] + 1) if i % 5 == 2 else r for i, r in rows.items()}
    return sorted([i, w, v] for i, (w, v) in rows.items())


def test_demo_and_concurrent_writers_on_a_standalone_cluster_over_s3(s3_server, tmp_path):
    from testing_support.spark_cluster import start
    cluster = start(workers=2)
    try:
        bucket = s3_server.new_bucket()
        spec = tmp_path / "spec.json"
        result = tmp_path / "result.json"
        spec.write_text(json.dumps({"master": cluster.url, "conf": cluster.driver_conf(), "options": s3_server.options,
                                    "bucket": bucket, "data_dir": str(tmp_path / "data"), "sf": 0.01, "writers": 3,
                                    "ops": 6}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        out = subprocess.run([sys.executable, "-m", "testing_support.cluster_driver", str(spec), str(result)], cwd=REPO,
                             env=env, capture_output=True, text=True, timeout=1800)
        assert out.returncode == 0, f"{out.stderr[-4000:]}\n{cluster.logs()[-4000:]}"
        r = json.loads(result.read_text())
        state = cluster.state()
    finally:
        cluster.stop()

    assert r["master"] == cluster.url
    # Two executors, one per worker: the barrier stage ran its two tasks at once, in two executor
    # folders (<worker work dir>/<app id>/<executor id>) of two different workers.
    for seen in (r["executors"], r["executors_after"]):
        folders = [Path(e["cwd"]) for e in seen]
        assert len({f.name for f in folders}) == 2 and all(f.parent.name == r["app_id"] for f in folders)
        assert len({f.parent.parent.name for f in folders}) == 2  # worker-0 and worker-1
    assert r["app_id"] in [a["id"] for a in state["completedapps"] + state["activeapps"]]

    demo = r["demo"]
    d = demo["dynamic_pruning"]
    assert d["same_answer"] and d["files_selected"] < d["files_total"]
    assert demo["warehouse"] == f"s3://{bucket}/warehouse"
    keys = s3_server.keys(bucket)
    assert any(k.startswith("warehouse/store_sales/_skiplake_writes/") for k in keys)

    s = r["stress"]
    assert not s["errors"], s["errors"]
    assert all(len(ops) == 6 for ops in s["records"].values())
    versions = [op["version"] for ops in s["records"].values() for op in ops]
    assert len(versions) == len(set(versions))  # each acknowledged operation committed its own version
    assert s["rows"] == _replay(s["records"])
    # Every version after the create was committed by an acknowledged operation: none lost, none extra.
    returned = {op["version"] for ops in s["records"].values() for op in ops}
    assert set(range(1, s["version"] + 1)) <= returned
