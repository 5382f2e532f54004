"""Many real OS processes writing one table: nothing lost, nothing twice, contents equal a
serial replay of the log, exceptions only where the conflict matrix allows; and writers killed
with SIGKILL at random points leave a readable table whose leftovers vacuum removes."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import IO

import pytest

from skiplake.log.actions import CommitInfo
from skiplake.log.location import is_remote, join
from skiplake.log.paths import absolute_path
from skiplake.log.s3 import set_bucket_options
from skiplake.log.snapshot import Snapshot, list_log, log_storage, read_commit
from skiplake.log.storage_for import storage_at
from skiplake.log.vacuum import vacuum
from testing_support.concurrency_worker import PARTITIONS, STORE_OPTIONS_ENV, append_rows, create_table, read_file

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent


def start_worker(table: str, worker: int, seed: int, n_ops: int, ack: str, max_delay_ms: int,
                 env: dict[str, str] | None = None, stderr: int | IO[bytes] = subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "testing_support.concurrency_worker", table, str(worker), str(seed), str(n_ops), ack,
         str(max_delay_ms)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr,
        env={**os.environ, **(env or {})})


def new_table_location(store: str, tmp_path: Path, request) -> tuple[str, dict[str, str]]:
    """(a fresh table location, the workers' extra environment): a folder, or a prefix of a new
    bucket on the test's S3 server."""
    if store == "local":
        return str(tmp_path / "t"), {}
    server = request.getfixturevalue("s3_server")
    bucket = server.new_bucket()
    set_bucket_options(bucket, server.options)
    return f"s3://{bucket}/t", {STORE_OPTIONS_ENV: json.dumps(server.options)}


def data_files(table: str) -> set[str]:
    """Every Parquet file under the table outside its log, as full paths."""
    return {join(table, o.name) if is_remote(table) else os.path.normpath(join(table, o.name))
            for o in storage_at(table).walk() if o.name.endswith(".parquet") and not o.name.startswith("_delta_log")}


def _param(params: dict, key: str):
    value = params[key]
    return json.loads(value) if isinstance(value, str) and key != "opid" and key != "op" else value


def replay(table: str) -> tuple[dict[int, tuple[int, int]], dict[str, int], int]:
    """(id -> (p, v) after applying every commit's operation in log order, opid -> version,
    number of DML row changes that the birth rule excluded).

    A DELETE/UPDATE that read version r acts on the matching rows that existed at r: rows a
    concurrent blind append added after r are untouched (WriteSerializable allows that; under
    Serializable the conflict checker makes it impossible, which the caller asserts)."""
    storage = log_storage(table)
    model: dict[int, list[int]] = {}  # id -> [p, v, birth version]
    where: dict[str, int] = {}
    excluded = 0
    for version in sorted(list_log(storage).commits):
        info = next(a for a in read_commit(storage, version) if isinstance(a, CommitInfo))
        params = info.operationParameters
        op = params.get("op")
        if op is None:
            continue  # CREATE TABLE
        if op == "append-init":
            for p in range(PARTITIONS):
                for i, v in zip(*append_rows(f"init-{p}", p, 20).to_pydict().values()):
                    model[i] = [p, v, version]
            continue
        opid = params["opid"]
        assert opid not in where, f"{opid} committed twice"
        where[opid] = version
        p = _param(params, "p")
        if op == "append":
            for i, v in zip(*append_rows(opid, p, _param(params, "n")).to_pydict().values()):
                model[i] = [p, v, version]
        elif op in ("delete", "update"):
            excluded += _apply_dml(model, op, p, _param(params, "lo"), _param(params, "hi"), info.readVersion,
                                   version)
    return {i: (r[0], r[1]) for i, r in model.items()}, where, excluded


def _apply_dml(model: dict[int, list[int]], op: str, p: int, lo: int, hi: int, read_version: int,
               version: int) -> int:
    """Apply a DELETE/UPDATE of rows of partition p with lo <= v <= hi that existed when it read;
    return how many matching rows were born after that (left untouched)."""
    excluded = 0
    for i, row in list(model.items()):
        if row[0] != p or not lo <= row[1] <= hi:
            continue
        if row[2] > read_version:
            excluded += 1
        elif op == "delete":
            del model[i]
        else:
            model[i] = [p, row[1] + 1000, version]
    return excluded


def physical(table: str) -> dict[int, tuple[int, int]]:
    """The live rows read straight from the files (deletion vectors applied)."""
    out: dict[int, tuple[int, int]] = {}
    for f in Snapshot.load(table).add_files:
        data = read_file(table, f).to_pydict()
        for i, v in zip(data["id"], data["v"]):
            assert i not in out, f"row {i} is in two live files"
            out[i] = (int(f.partitionValues["p"]), v)
    return out


def read_acks(files: list[str]) -> list[dict]:
    out = []
    for f in files:
        if os.path.exists(f):
            out += [json.loads(line) for line in Path(f).read_text().splitlines() if line.strip()]
    return out


def committed_only(outcomes: list[dict]) -> list[dict]:
    """The acknowledgements of operations that committed (not those that raised a conflict)."""
    return [a for a in outcomes if a["version"] is not None]


def check_exceptions(acks: list[dict], isolation: str, deletion_vectors: bool = False) -> Counter:
    """Every conflict raised is one the matrix allows for that pair of operations (with deletion
    vectors, OPTIMIZE and DELETE/UPDATE never conflict: each carries the other's rows over)."""
    seen: Counter = Counter()
    for a in acks:
        if a["error"] is None:
            continue
        seen[(a["op"], a["error"], a["winner_op"])] += 1
        assert a["op"] != "append", f"a blind append failed: {a}"
        assert a["error"] in ("ConcurrentAppendException", "ConcurrentDeleteReadException",
                              "ConcurrentDeleteDeleteException"), a
        if a["error"] == "ConcurrentAppendException":
            assert a["op"] in ("delete", "update"), a       # OPTIMIZE is never blocked by appends
            assert a["winner_op"] in ("WRITE", "DELETE", "UPDATE"), a
            if isolation == "WriteSerializable":
                assert a["winner_op"] != "WRITE", f"a blind append blocked a writer under WriteSerializable: {a}"
        if a["error"] == "ConcurrentDeleteReadException":
            assert a["winner_op"] in ("DELETE", "UPDATE", "OPTIMIZE"), a
        if deletion_vectors:
            pair = {a["op"].upper(), a["winner_op"]}
            assert not ("OPTIMIZE" in pair and pair & {"DELETE", "UPDATE"}), f"OPTIMIZE vs DML conflicted: {a}"
    return seen


@pytest.mark.parametrize("isolation,deletion_vectors,store", [
    ("WriteSerializable", False, "local"), ("Serializable", False, "local"), ("WriteSerializable", True, "local"),
    ("Serializable", True, "local"), pytest.param("WriteSerializable", True, "s3", marks=pytest.mark.s3),
    pytest.param("Serializable", False, "s3", marks=pytest.mark.s3)])
def test_eight_writers(tmp_path, isolation, deletion_vectors, store, request):
    table, env = new_table_location(store, tmp_path, request)
    create_table(table, isolation, deletion_vectors)
    acks = [str(tmp_path / f"ack{w}.jsonl") for w in range(8)]
    procs = [start_worker(table, w, 100 + w, 25, acks[w], 40, env) for w in range(8)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    outcomes = read_acks(acks)
    committed = committed_only(outcomes)
    assert len(outcomes) == 8 * 25
    # Every acknowledged commit is in the log exactly once, at the version it was told.
    model, where, excluded = replay(table)
    assert {a["opid"]: a["version"] for a in committed} == {k: v for k, v in where.items()}
    assert len({a["version"] for a in committed}) == len(committed)
    assert physical(table) == model
    if isolation == "Serializable":
        assert excluded == 0  # Serializable: every DML saw every row its condition matched
    seen = check_exceptions(outcomes, isolation, deletion_vectors)
    assert sum(1 for a in committed if a["op"] == "append") == sum(1 for a in outcomes if a["op"] == "append")
    if deletion_vectors:
        assert any(f.deletionVector for f in Snapshot.load(table).add_files) or any(
            a["op"] in ("delete", "update") for a in committed)
    print(f"\n{isolation}{' with deletion vectors' if deletion_vectors else ''}: {len(committed)} commits, "
          f"conflicts {dict(seen)}, rows left alone by WriteSerializable {excluded}")


@pytest.mark.parametrize("store", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_writers_killed_with_sigkill(tmp_path, store, request):
    table, env = new_table_location(store, tmp_path, request)
    create_table(table, "WriteSerializable")
    rnd = random.Random(7)
    acks: list[str] = []
    running: dict[int, subprocess.Popen] = {}
    next_id = 0

    def stderr_file(worker: int) -> Path:
        return tmp_path / f"stderr{worker}.txt"

    def spawn() -> None:
        nonlocal next_id
        ack = str(tmp_path / f"ack{next_id}.jsonl")
        acks.append(ack)
        # A file, not a pipe: nobody drains these writers' stderr while they run.
        with open(stderr_file(next_id), "wb") as err:
            running[next_id] = start_worker(table, next_id, 1000 + next_id, 10_000, ack, 5, env, err)
        next_id += 1

    for _ in range(5):
        spawn()
    kills = 0
    deadline = time.time() + 20
    while time.time() < deadline:
        time.sleep(rnd.uniform(0.2, 1.0))
        victim = rnd.choice(list(running))
        running.pop(victim).send_signal(signal.SIGKILL)
        kills += 1
        spawn()
    # On a slow machine every writer can die before its first commit (each lives about three
    # seconds above); the last ones run on until some commits are acknowledged, then die too.
    settle = time.time() + 120
    while time.time() < settle and len(committed_only(read_acks(acks))) < 3 and any(p.poll() is None for p in running.values()):
        time.sleep(0.2)
    for p in running.values():
        p.send_signal(signal.SIGKILL)
    for p in running.values():
        p.wait()
    assert kills >= 10
    # The last writers had ten thousand operations to do: any that ended before the kill failed.
    stderr = {w: stderr_file(w).read_text() for w in running}
    failed = [stderr[w] for w, p in running.items() if p.returncode != -signal.SIGKILL]
    assert not failed, failed[0]

    # No partial commit is visible: every commit file parses and the table loads.
    storage = log_storage(table)
    listing = list_log(storage)
    versions = sorted(listing.commits)
    assert versions == list(range(len(versions)))
    for v in versions:
        read_commit(storage, v)
    # Acknowledged commits are there once; the contents equal the replay of the log, which also
    # holds commits whose writer died before acknowledging them.
    model, where, _ = replay(table)
    committed = committed_only(read_acks(acks))
    assert len(committed) >= 3, f"{len(committed)} commits acknowledged; the last writer's stderr: {stderr[max(stderr)]}"
    assert all(where[a["opid"]] == a["version"] for a in committed)
    assert physical(table) == model
    # Killed writers left files no commit names; vacuum removes exactly those.
    live = {absolute_path(table, f.path) for f in Snapshot.load(table).add_files}
    on_disk = data_files(table)
    result = vacuum(table, retention_hours=0, force=True)
    assert result.files_deleted >= len(on_disk - live)
    assert data_files(table) == live
    assert physical(table) == model
    print(f"\n{kills} writers killed, {len(committed)} commits acknowledged, {len(versions)} versions, {len(on_disk - live)} orphan files vacuumed")


SPARK_WRITER = """
import sys, skiplake
spark = skiplake.local_spark(shuffle_partitions=2, driver_memory="1g")
t = skiplake.Table.open(spark, sys.argv[1])
i = 0
while True:
    t.append(spark.range(i * 200000, (i + 1) * 200000).selectExpr("id", "CAST(id % 4 AS INT) AS p", "id AS v")
             .repartition(8))
    i += 1
"""


def test_spark_writer_killed_mid_write(spark, tmp_path):
    table = str(tmp_path / "t")
    create_table(table, "WriteSerializable")
    proc = subprocess.Popen([sys.executable, "-c", SPARK_WRITER, table], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        while time.time() < deadline and Snapshot.load(table).version < 3:
            time.sleep(0.2)
        assert Snapshot.load(table).version >= 3, "the Spark writer made no commits"
        staging = Path(table) / "_skiplake_staging"
        deadline = time.time() + 60
        while time.time() < deadline and not any(staging.rglob("*.parquet")):
            time.sleep(0.05)  # wait until Spark is in the middle of writing files
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    snap = Snapshot.load(table)
    rows = table_rows(spark, table)
    assert rows == sum(f.num_records for f in snap.add_files)
    assert rows % 200000 == 80  # whole appends only (80 initial rows)
    vacuum(table, retention_hours=0, force=True)
    assert not any(Path(table, "_skiplake_staging").rglob("*.parquet"))
    assert table_rows(spark, table) == rows


def table_rows(spark, table: str) -> int:
    from skiplake.table import Table
    return Table.open(spark, table).read().count()


def _clustered_op(spark, table, op: str, lo: int, next_id: int, mine: dict[int, int], rnd: random.Random) -> int:
    """One operation of a writer of the clustered table, and its effect on the writer's rows when
    it commits (a conflict raises before `mine` changes); the next free id."""
    hi = lo + 40
    if op == "append":
        table.append(spark.sql(f"SELECT id, CAST(id % 7 AS INT) AS k, 0L AS v FROM range({next_id}, {next_id + 100})"))
        mine.update({i: 0 for i in range(next_id, next_id + 100)})
        return next_id + 100
    if op == "update":
        table.update(f"id >= {lo} AND id < {hi}", {"v": "v + 1"})
        mine.update({i: mine[i] + 1 for i in mine if lo <= i < hi})
    elif op == "delete":
        table.delete(f"id >= {lo} AND id < {hi} AND id % 3 = 0")
        for i in [i for i in mine if lo <= i < hi and i % 3 == 0]:
            del mine[i]
    elif op == "merge":
        src = spark.sql(f"SELECT id, CAST(id % 7 AS INT) AS k, 5L AS v FROM range({lo}, {hi + 20})")
        table.merge(src, "target.id = source.id").when_matched_update(set={"v": "target.v + source.v"}).execute()
        mine.update({i: mine[i] + 5 for i in mine if lo <= i < hi + 20})
    elif op == "optimize":
        table.optimize(target_file_size=4096, min_cube_size=1)
    else:
        table.cluster_by(rnd.choice([["k"], ["k", "id"], ["id"]]))
    return next_id


def test_spark_writers_on_a_clustered_change_feed_table(lake, spark):
    """Three threads of one Spark application append, update, delete, MERGE, OPTIMIZE and change
    the clustering keys of one clustered table with the change data feed, deletion vectors and
    row tracking.
    Each writer owns its ids, so what its committed operations did is known: the table holds
    exactly that (nothing lost, nothing twice), conflicts are typed and write nothing, and the
    change feed replayed from version 0 rebuilds the table."""
    import threading

    from skiplake.errors import ConcurrentModificationError
    t = lake.create_table("s", "id long, k int, v long", cluster_by=["k"],
                          properties={"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true",
                                      "delta.enableRowTracking": "true"})
    model: dict[int, int] = {}       # id -> v, from the operations that committed
    lock = threading.Lock()
    conflicts: list[str] = []
    failures: list[BaseException] = []

    def writer(w: int) -> None:
        rnd = random.Random(w)
        table = lake.table("s")
        base = w * 1_000_000
        mine: dict[int, int] = {}
        next_id = base
        try:
            for step in range(7):
                op = "append" if step < 2 else rnd.choice(["append", "update", "delete", "merge", "optimize",
                                                           "cluster_by"])
                lo = base + rnd.randrange(0, max(1, next_id - base))
                try:
                    next_id = _clustered_op(spark, table.refresh(), op, lo, next_id, mine, rnd)
                except ConcurrentModificationError as e:
                    with lock:
                        conflicts.append(f"{op}: {type(e).__name__}")
            with lock:
                model.update(mine)
        except BaseException as e:  # reported by the test thread
            failures.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures, failures
    t.refresh()
    final = {r.id: r.v for r in t.read().collect()}
    assert final == model
    # The change feed, replayed from the start, rebuilds the table.
    rebuilt: dict[int, int] = {}
    for r in sorted(t.changes(0).collect(), key=lambda r: (r._commit_version, r._change_type != "delete")):
        if r._change_type in ("insert", "update_postimage"):
            rebuilt[r.id] = r.v
        elif r._change_type == "delete":
            rebuilt.pop(r.id, None)
    assert rebuilt == final
    # Every row has its own row id, however many rewrites, OPTIMIZEs and rebases it went through.
    ids = [r._row_id for r in t.read(with_row_ids=True).collect()]
    assert len(set(ids)) == len(ids) == len(final)
    print(f"\n{t.version} versions, {len(final)} rows, conflicts: {Counter(conflicts)}")
