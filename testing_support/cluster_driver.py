"""The driver of the cluster test: a separate process (the suite's own SparkSession is local),
connected to a standalone cluster, working on tables on the S3-compatible server.

    python -m testing_support.cluster_driver SPEC.json RESULT.json

SPEC: {"master": "spark://...", "conf": the driver's settings (Cluster.driver_conf), "options":
storage options, "bucket": "...", "data_dir": "...", "writers": 3, "ops": 4}. RESULT: what the
test asserts on (executors seen, the demo's summary, the stress run's acknowledged operations and
the table's final rows).
"""
from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
import traceback


def _executors(spark) -> list[dict]:
    """Where two tasks that must run at once (a barrier stage) ran: each reports its executor's
    working folder (<work-dir>/<app-id>/<executor-id>) and its Python worker's pid."""
    def where(_):
        import os as _os
        yield {"cwd": _os.getcwd(), "pid": _os.getpid()}
    return spark.sparkContext.parallelize(range(2), 2).barrier().mapPartitions(where).collect()


def _stress(spark, lake, writers: int, ops: int) -> dict:
    """Writer threads sharing the session (so their jobs run on the cluster at once) change one
    table with deletion vectors: each appends its own ids, deletes some of its rows, or updates
    rows of every writer (which conflicts with a concurrent delete of the same rows), retrying an
    operation that loses a conflict. Every acknowledged operation is recorded with the version it
    committed, so replaying them in version order must give the table's final rows."""
    from skiplake.errors import ConcurrentModificationError
    lake.create_table("stress", "id long, writer int, v long",
                          properties={"delta.enableDeletionVectors": "true"})
    records: dict[int, list[dict]] = {w: [] for w in range(writers)}
    conflicts = [0]
    errors: list[str] = []
    lock = threading.Lock()

    def run(w: int) -> None:
        rng = random.Random(w)
        try:
            for i in range(ops):
                lo = (w * 1000 + i) * 100
                kind = "append" if i == 0 else rng.choice(["append", "delete", "update"])
                for _attempt in range(10):
                    table = lake.table("stress")
                    try:
                        if kind == "append":
                            version = table.append(
                                spark.range(lo, lo + 50).selectExpr("id", f"cast({w} as int) writer", "id as v"))
                            op = {"op": "append", "lo": lo, "hi": lo + 50}
                        elif kind == "delete":
                            m = rng.randrange(2, 5)
                            version = table.delete(f"writer = {w} AND id % {m} = 0")
                            op = {"op": "delete", "mod": m}
                        else:
                            # Every writer's rows: meets the others' deletes on the same rows.
                            version = table.update("id % 5 = 2", set={"v": "v + 1"})
                            op = {"op": "update"}
                        records[w].append({**op, "version": version})
                        break
                    except ConcurrentModificationError:
                        with lock:
                            conflicts[0] += 1
                        time.sleep(rng.random() * 0.2)
        except Exception:
            errors.append(traceback.format_exc()[-2000:])

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    table = lake.table("stress")
    rows = sorted([int(r.id), int(r.writer), int(r.v)] for r in table.read().collect())
    return {"records": records, "conflicts": conflicts[0], "errors": errors, "rows": rows,
            "version": table.version, "operations": [h["operation"] for h in table.history()]}


def main(spec_file: str, result_file: str) -> int:
    spec = json.loads(open(spec_file).read())
    import skiplake
    from skiplake import demo
    from skiplake.console import to_json
    result: dict = {}
    spark = skiplake.local_spark(app_name="skiplake-cluster", master=spec["master"], driver_memory="1g",
                                 shuffle_partitions=2, s3=True, conf=spec["conf"])
    try:
        result["app_id"] = spark.sparkContext.applicationId
        result["master"] = spark.sparkContext.master
        result["executors"] = _executors(spark)
        lake = skiplake.Lake(spark, f"s3://{spec['bucket']}/warehouse", storage_options=spec["options"])
        started = time.time()
        summary = demo.run(sf=spec.get("sf", 0.01), warehouse=lake.root, data_dir=spec["data_dir"], as_json=False,
                           spark=spark)
        result["demo_seconds"] = round(time.time() - started, 1)
        result["demo"] = json.loads(to_json(summary))
        result["stress"] = _stress(spark, lake, spec.get("writers", 3), spec.get("ops", 4))
        result["executors_after"] = _executors(spark)
    finally:
        spark.stop()
    tmp = result_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, result_file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
