"""Tables on an S3-compatible store (s3proxy on loopback, started by the s3_server fixture):
the log by conditional PUT, data through Spark's S3A with the magic committer, delta-rs on the
same store, and the errors a user meets (bad keys, a missing bucket, a store without
conditional writes, a scheme skiplake does not support)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import skiplake
from skiplake.errors import (
    BucketNotFoundError,
    ConcurrentModificationError,
    ConditionalWritesUnsupportedError,
    StorageAccessError,
    UnsupportedLocationError,
)
from skiplake.log.s3 import S3Storage, set_bucket_options
from skiplake.log.snapshot import list_log, log_storage

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.connect]


def _rows(df):
    return sorted(tuple(r) for r in df.collect())


# This test, the concurrent appends and the bucketed tables run under Spark Connect in the full
# tier only: the gate's Connect pass writes, deletes, plans and reads a catalog table on the store
# in the other both_modes tests of this module.
def test_table_lifecycle_on_s3(spark, s3_lake, s3_server):
    t = s3_lake.create_table("sales", "id long, p int, v string", partition_by=["p"])
    assert t.path.startswith("s3://") and t.path.endswith("/warehouse/sales")
    t.append(spark.range(300).selectExpr("id", "cast(id % 3 as int) p", "cast(id as string) v"))
    t.append(spark.range(300, 400).selectExpr("id", "cast(id % 3 as int) p", "cast(id as string) v"))
    assert t.read().count() == 400
    plan = t.scan("p = 1")
    assert plan.report.partitions_selected == 1 and plan.report.files_selected < plan.report.files_total
    assert t.read(where="p = 1").count() == 133

    t.delete("id < 50")
    t.update("id = 60", set={"v": "'sixty'"})
    src = spark.range(390, 410).selectExpr("id", "cast(id % 3 as int) p", "'m' v")
    t.merge(src, on="target.id = source.id", when_matched_update="*", when_not_matched_insert="*")
    expected = {i: str(i) for i in range(50, 410)}
    expected[60] = "sixty"
    expected.update({i: "m" for i in range(390, 410)})
    assert dict((r.id, r.v) for r in t.read().collect()) == expected
    t.optimize(zorder_by=["id"])
    assert dict((r.id, r.v) for r in t.read().collect()) == expected
    assert [h["operation"] for h in t.history()][:2] == ["OPTIMIZE", "MERGE"]
    assert t.read(version=1).count() == 300  # time travel reads the files of version 1

    bucket = t.path.split("/")[2]
    keys = s3_server.keys(bucket)
    # Data files stay where Spark's magic committer put them: no staging leftovers, no renames.
    data = [k for k in keys if k.endswith(".parquet") and "/_delta_log/" not in k]
    assert data and all("/_skiplake_writes/" in k for k in data)
    assert not [k for k in keys if "__magic" in k or "_temporary" in k or k.endswith("_SUCCESS")]
    assert s3_lake.tables() == ["sales"]

    result = t.vacuum(retention_hours=0, force=True)
    assert result.files_deleted > 0
    live = {f"warehouse/sales/{p}" for p in t.snapshot.files.column("path").to_pylist()}
    remaining = {k for k in s3_server.keys(bucket) if k.endswith(".parquet") and "/_delta_log/" not in k}
    assert remaining == live
    assert dict((r.id, r.v) for r in t.read().collect()) == expected


@pytest.mark.both_modes
def test_deletion_vectors_and_lake_sql_on_s3(spark, s3_lake, s3_server):
    t = s3_lake.create_table("events", "id long, k int", properties={"delta.enableDeletionVectors": "true"})
    t.append(spark.range(2000).selectExpr("id", "cast(id % 7 as int) k"))
    t.delete("k = 3")
    assert any(f.deletionVector for f in t.snapshot.add_files)
    bucket = t.path.split("/")[2]
    assert [k for k in s3_server.keys(bucket) if "deletion_vector_" in k]
    assert t.read().count() == 2000 - len([i for i in range(2000) if i % 7 == 3])
    got = _rows(s3_lake.sql("SELECT k, count(*) FROM events GROUP BY k"))
    assert got == [(k, len([i for i in range(2000) if i % 7 == k])) for k in range(7) if k != 3]


def test_conditional_put_is_atomic_on_the_test_server(s3_server):
    """The server the suite relies on lets exactly one of 16 concurrent creates of a key win."""
    bucket = s3_server.new_bucket()
    set_bucket_options(bucket, s3_server.options)
    storage = S3Storage(f"s3://{bucket}/race/_delta_log")
    rounds = 20
    with ThreadPoolExecutor(16) as pool:
        for r in range(rounds):
            name = f"{r:020d}.json"
            results = list(pool.map(lambda i: storage.put_if_absent(name, str(i).encode()), range(16)))
            assert sum(results) == 1, f"round {r}: {sum(results)} writers took {name}"
    assert len(storage.list()) == rounds
    assert len(storage.list(start_after=f"{rounds - 5:020d}.json")) == 4


def test_concurrent_appends_and_conflicts_on_s3(spark, s3_lake):
    t = s3_lake.create_table("t", "id long, p int", partition_by=["p"])
    t.append(spark.range(10).selectExpr("id", "cast(id % 2 as int) p"))
    errors = []

    def append(i):
        try:
            table = s3_lake.table("t")
            table.append(spark.range(100 * (i + 1), 100 * (i + 1) + 10).selectExpr("id", "cast(id % 2 as int) p"))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    t.refresh()
    assert t.version == 5 and t.read().count() == 50
    assert sorted(list_log(log_storage(t.path)).commits) == list(range(6))

    # A DELETE that read partition 0 before another DELETE of it committed loses, typed.
    txn = s3_lake.table("t").begin()
    files = txn.scan("p = 0").files
    s3_lake.table("t").delete("p = 0 AND id < 5")
    txn.remove([f.path for f in files])
    with pytest.raises(ConcurrentModificationError):
        txn.commit(operation="DELETE")
    assert s3_lake.table("t").version == 6


def test_delta_rs_reads_and_writes_s3_tables(spark, s3_lake, s3_server):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    opts = {**s3_server.options, "AWS_ALLOW_HTTP": "true"}
    t = s3_lake.create_table("shared", "id long, v string")
    t.append(spark.range(100).selectExpr("id", "cast(id as string) v"))
    t.delete("id >= 90")
    dt = DeltaTable(t.path, storage_options=opts)
    assert dt.version() == t.version
    assert sorted(dt.to_pyarrow_table().column("id").to_pylist()) == list(range(90))
    # delta-rs commits by its own conditional PUT; skiplake reads it and writes on top.
    write_deltalake(t.path, pa.table({"id": pa.array([1000, 1001], pa.int64()), "v": ["x", "y"]}),
                    mode="append", storage_options=opts)
    t.refresh()
    assert t.read().count() == 92
    t.update("id = 1000", set={"v": "'updated'"})
    dt = DeltaTable(t.path, storage_options=opts)
    rows = dict(zip(*[dt.to_pyarrow_table().column(c).to_pylist() for c in ("id", "v")]))
    assert rows[1000] == "updated" and len(rows) == 92


@pytest.mark.both_modes
def test_catalog_table_at_an_s3_location(spark, s3_lake, s3_server, tmp_path):
    t = s3_lake.create_table("dim", "id long")
    t.append(spark.range(5).selectExpr("id"))
    catalog_lake = skiplake.Lake(spark, catalog=f"sqlite:///{tmp_path / 'catalog.db'}")
    catalog_lake.catalog.call("CreateDatabase", {"DatabaseInput": {"Name": "default"}})
    catalog_lake.catalog.call("CreateTable", {"DatabaseName": "default", "TableInput": {
        "Name": "dim", "StorageDescriptor": {"Location": t.path, "Columns": [{"Name": "id", "Type": "bigint"}]}}})
    opened = catalog_lake.table("dim")
    assert isinstance(opened, skiplake.Table) and opened.path == t.path
    assert opened.read().count() == 5


def test_bad_credentials_missing_bucket_and_foreign_schemes(spark, s3_server, tmp_path, monkeypatch):
    bucket = s3_server.new_bucket()
    with pytest.raises(StorageAccessError, match="credentials"):
        skiplake.Lake(spark, f"s3://{bucket}/wh", storage_options={**s3_server.options,
                                                                    "AWS_SECRET_ACCESS_KEY": "wrong"}
                      ).create_table("t", "id long")
    assert s3_server.keys(bucket) == []
    with pytest.raises(BucketNotFoundError, match="does not exist"):
        skiplake.Lake(spark, "s3://no-such-bucket-here/wh", storage_options=s3_server.options
                      ).create_table("t", "id long")
    with pytest.raises(BucketNotFoundError):  # a HEAD's bare 404 is told apart from a missing key
        S3Storage("s3://no-such-bucket-here/wh").size("f.parquet")
    set_bucket_options(bucket, s3_server.options)
    with pytest.raises(FileNotFoundError):
        S3Storage(f"s3://{bucket}/wh").size("f.parquet")
    monkeypatch.chdir(tmp_path)
    for location in ("gs://b/wh", "abfss://c@a.dfs.core.windows.net/wh", "hdfs://nn/wh", "s3n://b/wh"):
        with pytest.raises(UnsupportedLocationError):
            skiplake.Lake(spark, location)
        with pytest.raises(UnsupportedLocationError):
            skiplake.Table.create(spark, location + "/t", "id long")
    assert os.listdir(tmp_path) == []  # nothing was created as a local folder


def test_a_store_without_conditional_writes_is_refused(spark, s3_server):
    """A store that ignores If-None-Match (a proxy strips it in front of an unsigned s3proxy):
    the table is not created, and nothing is left in the bucket."""
    from testing_support.s3_proxy import StrippingProxy
    from testing_support.s3_server import start
    plain = start(signed=False)
    try:
        bucket = "nocond" + os.urandom(4).hex()
        plain.client().create_bucket(Bucket=bucket)
        with StrippingProxy(plain.endpoint) as proxy:
            with pytest.raises(ConditionalWritesUnsupportedError, match="If-None-Match"):
                skiplake.Table.create(spark, f"s3://{bucket}/t", "id long",
                                      storage_options={**plain.options, "AWS_ENDPOINT_URL": proxy.endpoint})
        assert plain.keys(bucket) == []
    finally:
        plain.stop()


@pytest.mark.slow   # its own JVM, which resolves S3A's packages, for one way of configuring
def test_environment_alone_configures_log_and_spark(s3_server, tmp_path):
    """`Lake(local_spark(), "s3://bucket/warehouse")` with nothing but AWS_* variables set."""
    bucket = s3_server.new_bucket()
    script = (
        "import skiplake\n"
        "spark = skiplake.local_spark(shuffle_partitions=2, driver_memory='1g')\n"
        f"lake = skiplake.Lake(spark, 's3://{bucket}/warehouse')\n"
        "t = lake.create_table('t', 'id long')\n"
        "t.append(spark.range(42))\n"
        "print('ROWS', skiplake.Lake(spark, 's3://" + bucket + "/warehouse').table('t').read().count())\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(s3_server.env)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert "ROWS 42" in out.stdout, out.stderr[-3000:]
    assert any(k.endswith("_delta_log/00000000000000000001.json") for k in s3_server.keys(bucket))
    snapshot_json = [k for k in s3_server.keys(bucket) if k.endswith("00000000000000000000.json")]
    assert snapshot_json
    body = s3_server.client().get_object(Bucket=bucket, Key=snapshot_json[0])["Body"].read().decode()
    assert any("metaData" in json.loads(line) for line in body.splitlines())


def test_catalog_hive_style_parquet_table_on_s3(spark, s3_server, tmp_path):
    """A Glue table of Hive-style Parquet at s3:// locations: partitions pruned by the catalog,
    files read through S3A."""
    bucket = s3_server.new_bucket()
    skiplake.Lake(spark, f"s3://{bucket}/lake", storage_options=s3_server.options)  # the bucket's S3A options
    root = f"s3://{bucket}/hive/sales"
    spark.range(60).selectExpr("id", "cast(id % 3 as string) region").write.partitionBy("region").parquet(root)
    lake = skiplake.Lake(spark, catalog=f"sqlite:///{tmp_path / 'catalog.db'}")
    lake.catalog.call("CreateDatabase", {"DatabaseInput": {"Name": "default"}})
    lake.catalog.call("CreateTable", {"DatabaseName": "default", "TableInput": {
        "Name": "sales", "PartitionKeys": [{"Name": "region", "Type": "string"}],
        "StorageDescriptor": {"Location": root, "Columns": [{"Name": "id", "Type": "bigint"}]}}})
    lake.catalog.call("BatchCreatePartition", {"DatabaseName": "default", "TableName": "sales", "PartitionInputList": [
        {"Values": [str(k)], "StorageDescriptor": {"Location": f"{root}/region={k}"}} for k in range(3)]})
    table = lake.table("sales")
    assert not isinstance(table, skiplake.Table)
    assert sorted(r.id for r in table.read(where="region = '1'").collect()) == list(range(1, 60, 3))
    assert table.last_partitions == 1


def test_a_conflicting_conditional_write_is_retried(s3_server):
    """409 ConditionalRequestConflict (two conditional writes of one key overlapping) is retried;
    412 after the retry means the other writer took the version."""
    from testing_support.s3_proxy import ConflictingProxy
    bucket = s3_server.new_bucket()
    with ConflictingProxy(s3_server.endpoint, conflicts=2) as proxy:
        set_bucket_options(bucket, {**s3_server.options, "AWS_ENDPOINT_URL": proxy.endpoint})
        storage = S3Storage(f"s3://{bucket}/t/_delta_log")
        storage._check_conditional_writes()  # the probe's own writes go through before the conflicts start
        proxy.armed = True
        assert storage.put_if_absent("00000000000000000000.json", b"first")
        assert proxy.conflicts_sent == 2
        proxy.conflicts = 1
        assert not storage.put_if_absent("00000000000000000000.json", b"second")
        assert proxy.conflicts_sent == 3
    set_bucket_options(bucket, s3_server.options)
    assert S3Storage(f"s3://{bucket}/t/_delta_log").read("00000000000000000000.json") == b"first"


def test_bucketed_tables_on_s3_join_without_a_shuffle(spark, s3_lake, s3_server):
    """On an object store Spark's bucketed writer names each file with its bucket id (no rename),
    so two tables bucketed alike still join bucket by bucket."""
    from tests.test_bucketing import assert_no_shuffle_below_join
    spec = skiplake.BucketSpec(num_buckets=4, columns=["k"])
    left = s3_lake.create_table("l", "k long, a string", bucket_by=spec)
    right = s3_lake.create_table("r", "k long, b string", bucket_by=spec)
    left.append(spark.range(200).selectExpr("id % 50 as k", "cast(id as string) a"))
    left.append(spark.range(200, 260).selectExpr("id % 50 as k", "cast(id as string) a"))
    right.append(spark.range(50).selectExpr("id as k", "concat('b', id) b"))
    for t in (left, right):
        files = t.snapshot.add_files
        assert files and all(f.path.startswith("_skiplake_writes/") for f in files)
        assert all(f.tags and int(f.tags["BUCKET_ID"]) == int(f.path.rsplit("_", 1)[1].split(".")[0])
                   for f in files)
    assert s3_lake.table("l").scan("k = 7").report.buckets_selected == 1
    report = s3_lake.explain_join("l", "r", "k")
    assert report.bucketed, report.reason
    df = s3_lake.bucket_join("l", "r", "k")
    got = sorted((r.k, r.a, r.b) for r in df.collect())
    assert got == sorted((i % 50, str(i), f"b{i % 50}") for i in range(260))
    assert_no_shuffle_below_join(df)


def test_a_commit_whose_answer_was_lost_is_still_ours(s3_server):
    """The store wrote the commit but its answer never arrived; the SDK's retry gets 412 from
    our own object: that is a commit, not a lost race (nor a conflict with ourselves)."""
    from testing_support.s3_proxy import LostAnswerProxy
    bucket = s3_server.new_bucket()
    with LostAnswerProxy(s3_server.endpoint) as proxy:
        set_bucket_options(bucket, {**s3_server.options, "AWS_ENDPOINT_URL": proxy.endpoint})
        storage = S3Storage(f"s3://{bucket}/t/_delta_log")
        storage._check_conditional_writes()
        proxy.armed = True
        assert storage.put_if_absent("00000000000000000000.json", b"ours")
        assert proxy.dropped == 1 and proxy.by_method["PUT"] >= 2  # the SDK did retry
        assert not storage.put_if_absent("00000000000000000000.json", b"someone else")  # a real loss stays one
    set_bucket_options(bucket, s3_server.options)


def test_missing_files_are_found_by_heads_or_one_listing_whichever_is_fewer(s3_server):
    """A pruned or time-travel read of a big table checks its few files one request each; a read
    of many files lists the table once."""
    from skiplake.log.storage_for import LIST_PAGE_KEYS, missing
    from testing_support.s3_proxy import CountingProxy
    bucket = s3_server.new_bucket()
    root = f"s3://{bucket}/t"
    set_bucket_options(bucket, s3_server.options)
    for name in ("a.parquet", "p=1/b.parquet", "_delta_log/00000000000000000000.json"):
        S3Storage(root).put(name, b"x")
    asked = [f"{root}/a.parquet", f"{root}/p=1/b.parquet", f"{root}/p=1/gone.parquet"]
    with CountingProxy(s3_server.endpoint) as proxy:
        set_bucket_options(bucket, {**s3_server.options, "AWS_ENDPOINT_URL": proxy.endpoint})
        try:
            # Three paths of a table of 3,000 files: three HEADs against three pages of a listing.
            assert missing(root, asked, table_files=3 * LIST_PAGE_KEYS) == [f"{root}/p=1/gone.parquet"]
            assert dict(proxy.by_method) == {"HEAD": 3}
            proxy.by_method.clear()
            # The same paths of a table of 2,999 files: one listing (its pages), no HEAD.
            assert missing(root, asked, table_files=3 * LIST_PAGE_KEYS - 1) == [f"{root}/p=1/gone.parquet"]
            assert set(proxy.by_method) == {"GET"}
        finally:
            set_bucket_options(bucket, s3_server.options)


def test_object_store_writes_skip_committer_leftovers():
    from skiplake.spark.writes.data_files import _hidden
    assert _hidden("__magic_job-1/__base/p=1/part-0.parquet") and _hidden(".tmp/part-0.parquet")
    assert _hidden("p=1/_SUCCESS") and not _hidden("p=1/part-0.parquet")
    assert not _hidden("_p=1/part-0.parquet")  # a partition column whose name starts with _


@pytest.mark.parametrize("written, opened", [("s3a", "s3"), ("s3", "s3a")])
def test_vacuum_keeps_files_the_log_names_under_the_other_scheme(s3_server, written, opened):
    """A log may name files by absolute URIs in either scheme (Spark reaches both through S3A):
    VACUUM of the table opened under the other one must not take them for strays."""
    from skiplake.log.storage_for import storage_at
    from skiplake.log.vacuum import vacuum
    bucket = s3_server.new_bucket()
    set_bucket_options(bucket, s3_server.options)
    table = storage_at(f"s3://{bucket}/t")
    for name in ("relative.parquet", "absolute.parquet", "p=1/absolute.parquet", "stray.parquet"):
        table.put(name, b"not read by VACUUM")
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    add = {"partitionValues": {}, "size": 18, "modificationTime": 0, "dataChange": True}
    actions = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
               {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                             "schemaString": json.dumps(schema), "partitionColumns": [], "configuration": {},
                             "createdTime": 0}},
               {"add": {"path": "relative.parquet", **add}},
               {"add": {"path": f"{written}://{bucket}/t/absolute.parquet", **add}},
               {"add": {"path": f"{written}://{bucket}/t/p%3D1/absolute.parquet", **add}}]
    table.put("_delta_log/00000000000000000000.json", "\n".join(json.dumps(a) for a in actions).encode())

    # Time travel's check that a version's files still exist sees them under either spelling.
    from skiplake.log.storage_for import missing
    gone = f"{written}://{bucket}/t/gone.parquet"
    assert missing(f"{opened}://{bucket}/t", [f"{written}://{bucket}/t/absolute.parquet", gone]) == [gone]
    result = vacuum(f"{opened}://{bucket}/t", retention_hours=0, force=True)
    assert result.files == ["stray.parquet"]
    assert sorted(k for k in s3_server.keys(bucket) if k.endswith(".parquet")) == [
        "t/absolute.parquet", "t/p=1/absolute.parquet", "t/relative.parquet"]


def test_log_cleanup_on_s3(s3_server):
    """Expired commits, checkpoints and sidecars go on an object store as on a disk (the store
    dates its objects itself, so the cleanup is asked as of 40 days from now)."""
    from skiplake.errors import VersionNotFoundError
    from skiplake.log.actions import CommitInfo, Metadata, Protocol, now_ms
    from skiplake.log.checkpoint_read import SIDECAR_DIR
    from skiplake.log.cleanup import clean_expired_log
    from skiplake.log.commit_files import put_commit, put_first_commit
    from skiplake.log.features import required_protocol
    from skiplake.log.snapshot import Snapshot
    from skiplake.log.storage_for import storage_at
    from tests.unit.logutil import SCHEMA, add
    bucket = s3_server.new_bucket()
    set_bucket_options(bucket, s3_server.options)
    root = f"s3://{bucket}/t"
    config = {"delta.checkpointPolicy": "v2", "delta.enableExpiredLogCleanup": "false"}
    snapshot = put_first_commit(root, CommitInfo(1, "CREATE TABLE"), required_protocol(Protocol(1, 2), config),
                                Metadata.new(SCHEMA, ["d"], config))
    for i in range(1, 26):
        put_commit(snapshot, CommitInfo(1, "WRITE"), [add(f"d=2001-01-01/f{i}.parquet")])
        snapshot = Snapshot.load(root)
    storage = log_storage(root)
    sidecars = storage_at(f"{root}/_delta_log/{SIDECAR_DIR}")
    assert len(sidecars.list()) == 2 and sorted(list_log(storage).checkpoints) == [10, 20]

    result = clean_expired_log(root, {}, now=now_ms() + 40 * 86_400_000)
    assert result.cutoff_version == 20
    listing = list_log(storage)
    assert sorted(listing.commits) == list(range(20, 26)) and sorted(listing.checkpoints) == [20]
    assert len(sidecars.list()) == 1  # checkpoint 10's sidecar went with it
    assert len(Snapshot.load(root, 20).add_files) == 20 and len(Snapshot.load(root).add_files) == 25
    with pytest.raises(VersionNotFoundError, match="readable versions are 20..25"):
        Snapshot.load(root, 19)


@pytest.mark.slow   # a table of nine commits and a checkpoint on the store, planned three ways
def test_a_table_past_the_replay_bound_on_s3(spark, s3_lake, s3_server, monkeypatch):
    """Past the replay bound on an object store: the Spark job's tasks and the data source's
    read tasks reach the bucket with the Lake's options and keep the files a plan in the driver
    keeps, with the same rows."""
    from skiplake.spark.reads import log_job
    from tests.test_log_job import make_table

    root = s3_lake.path_of("big")
    make_table(spark, root, monkeypatch)
    spark.conf.set(log_job.MIN_FILES_CONF, "4")
    try:
        big = skiplake.Table.open(spark, root)
    finally:
        spark.conf.unset(log_job.MIN_FILES_CONF)
    small = skiplake.Table.open(spark, root)
    assert big.snapshot.files_pending and not small.snapshot.files_pending
    for where in (None, "p = '2' AND v >= 150", "id IN (3, 77, 310)"):
        by_job, in_driver = big.scan(where), small.scan(where)
        assert by_job.report.replay.startswith("a Spark job of 1 task"), where
        assert sorted(f.path for f in by_job.files) == sorted(f.path for f in in_driver.files), where
        expected = _rows(small.read(where))
        assert _rows(big.read(where)) == expected, where
        df = spark.read.format("skiplake").option("replayJobMinFiles", 4).options(**s3_server.options).load(root)
        assert _rows(df if where is None else df.filter(where)) == expected, where
    assert big.count() == small.count() == 360 - 40 + 10
