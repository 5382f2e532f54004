"""The `skiplake` Spark data source: batch reads (pruned by pushed filters, deletion vectors and
column mapping honoured, time travel), batch writes (append, overwrite, new tables, refusals,
txnAppId/txnVersion), the streaming source's semantics and the exactly-once sink. Runs again under
Spark Connect: registration and the Python workers differ there (a read in the gate's Connect
pass, every test in the full tier's)."""
from __future__ import annotations

import os

import pytest

import skiplake
from skiplake.errors import WriterFeatureUnsupportedError

pytestmark = [pytest.mark.spark, pytest.mark.connect]


def ids(df, column="id"):
    return sorted(r[0] for r in df.select(column).collect())


def rows_of(spark, start, end, parts=3):
    return spark.range(start, end).selectExpr("id", f"cast(id % {parts} as string) as part")


@pytest.fixture
def parted(lake):
    t = lake.create_table("parted", "id long, part string", partition_by=["part"])
    t.append(rows_of(lake.spark, 0, 30))
    t.append(rows_of(lake.spark, 30, 60))
    return t


def test_register_is_idempotent_and_lake_does_it(lake):
    skiplake.register(lake.spark)
    skiplake.register(lake.spark)
    assert lake.spark.conf.get("spark.sql.python.filterPushdown.enabled") == "true"


@pytest.mark.both_modes
def test_batch_read_prunes_by_pushed_filters(lake, parted):
    spark = lake.spark
    df = spark.read.format("skiplake").load(parted.path)
    assert df.count() == 60
    assert ids(df.filter("part = '1'")) == [i for i in range(60) if i % 3 == 1]
    # Pruning is what lets this read pass: the files of other partitions are gone from the disk.
    for f in parted.scan("part <> '1'").files:
        os.remove(os.path.join(parted.path, f.path.replace("%3D", "=")))
    assert ids(spark.read.format("skiplake").load(parted.path).filter("part = '1' AND id >= 30")) == \
        [i for i in range(30, 60) if i % 3 == 1]


def test_batch_read_time_travel_and_sql_view(lake, parted):
    spark = lake.spark
    assert spark.read.format("skiplake").option("versionAsOf", 1).load(parted.path).count() == 30
    first = parted.history()[-1]["timestamp"]
    import datetime as dt
    when = dt.datetime.fromtimestamp(first / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    assert spark.read.format("skiplake").option("timestampAsOf", when).load(parted.path).count() == 0
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW parted_view USING skiplake OPTIONS (path '{parted.path}')")
    assert spark.sql("SELECT count(*) FROM parted_view WHERE part = '2'").collect()[0][0] == 20


def test_batch_read_honours_deletion_vectors_and_column_mapping(lake):
    spark = lake.spark
    t = lake.create_table("dv", "id long, name string", properties={
        "delta.enableDeletionVectors": "true", "delta.columnMapping.mode": "name"})
    t.append(spark.range(100).selectExpr("id", "concat('n', cast(id as string)) as name").coalesce(1))
    t.delete("id % 10 = 0")
    assert any(f.deletionVector for f in t.scan().files)
    t.rename_column("name", "label")
    df = spark.read.format("skiplake").load(t.path)
    assert df.columns == ["id", "label"]
    assert sorted(tuple(r) for r in df.collect()) == sorted(tuple(r) for r in t.read().collect())
    assert df.count() == 90


# delta-spark's golden tables: deletion vectors, column mapping by name and id, type widening,
# v2 checkpoints, the change feed, constraints, generated, identity and clustered columns.
GOLDEN = ("dml_spark", "dv_spark", "dv_spark_parted", "cm_name", "cm_id", "tw_spark", "v2ck_spark", "cdf_spark",
          "gen_spark", "id_spark", "cl_spark", "rt_spark", "ck_spark")


# The gate's sample: deletion vectors in a partitioned table, column mapping by id, type
# widening, v2 checkpoints, the change feed's table.
GATE_GOLDEN = ("dv_spark_parted", "cm_id", "tw_spark", "v2ck_spark", "cdf_spark")


def test_batch_read_gives_what_t_read_gives_on_delta_sparks_tables(lake):
    from tests.golden import GOLDEN_DIR
    from tests.tiers import FULL
    for name in GOLDEN if FULL else GATE_GOLDEN:
        t = skiplake.Table.open(lake.spark, str(GOLDEN_DIR / name / "table"))
        df = lake.spark.read.format("skiplake").load(t.path)
        assert df.columns == t.read().columns, name
        assert sorted(map(str, df.collect())) == sorted(map(str, t.read().collect())), name


def test_batch_read_past_the_bound_plans_in_its_read_tasks(lake, tmp_path, monkeypatch):
    """A table whose checkpoint holds at least replayJobMinFiles adds: the planning process reads
    none of the checkpoint's files; each share of the checkpoint is a read task that plans its
    own files and reads those it keeps, the commits' files are planned as usual. The same files
    and rows as a plan of the whole table."""
    from skiplake.expr.parse import bind
    from skiplake.spark.source.batch import BatchReader, FileGroup, ShareGroup
    from tests.test_log_job import WHERES, make_table

    spark = lake.spark
    root = str(tmp_path / "big")
    make_table(spark, root, monkeypatch)
    whole = skiplake.Table.open(spark, root)
    schema = spark.read.format("skiplake").load(root).schema

    def planned(reader, where):
        reader.predicate = None if where is None else bind(where, whole.snapshot.schema)
        parts = reader.partitions()
        files = [f for p in parts for f in (p.files() if isinstance(p, ShareGroup) else p.files)]
        rows = sorted(tuple(r.values()) for p in parts for b in reader.read(p) for r in b.to_pylist())
        return parts, sorted(f.path for f in files), rows

    for where in WHERES:
        parts, files, rows = planned(BatchReader({"path": root, "replayJobMinFiles": "4"}, schema), where)
        assert sum(isinstance(p, ShareGroup) for p in parts) == 1, where   # the checkpoint's 36 adds
        assert all(isinstance(p, (ShareGroup, FileGroup)) for p in parts)
        in_driver, in_driver_files, in_driver_rows = planned(BatchReader({"path": root}, schema), where)
        assert not any(isinstance(p, ShareGroup) for p in in_driver)
        assert files == in_driver_files == sorted(f.path for f in whole.scan(where).files), where
        assert rows == in_driver_rows, where
        df = spark.read.format("skiplake").option("replayJobMinFiles", 4).load(root)
        got = sorted(map(tuple, (df if where is None else df.filter(where)).collect()))
        assert got == sorted(map(tuple, whole.read(where).collect())), where
    with pytest.raises(Exception, match="replayJobMinFiles"):
        spark.read.format("skiplake").option("replayJobMinFiles", "many").load(root).collect()
    # A checkpoint of no adds, and no commit after it: no share, no file, one empty task.
    emptied = lake.create_table("emptied", "id long", properties={"delta.checkpointInterval": "1"})
    emptied.append(spark.range(3))
    emptied.delete("id >= 0")
    assert spark.read.format("skiplake").option("replayJobMinFiles", 0).load(emptied.path).count() == 0


def test_batch_write_append_overwrite_and_new_table(lake, parted, tmp_path):
    spark = lake.spark
    rows_of(spark, 100, 106).write.format("skiplake").mode("append").save(parted.path)
    t = skiplake.Table.open(spark, parted.path)
    assert t.read().count() == 66 and t.history()[0]["operation"] == "WRITE"
    assert {f.partitionValues["part"] for f in t.scan("id >= 100").files} == {"0", "1", "2"}
    rows_of(spark, 0, 4).write.format("skiplake").mode("overwrite").save(parted.path)
    assert ids(skiplake.Table.open(spark, parted.path).read()) == [0, 1, 2, 3]
    new = str(tmp_path / "fresh")
    spark.range(5).write.format("skiplake").mode("append").option("partitionBy", "").save(new)
    fresh = skiplake.Table.open(spark, new)
    assert ids(fresh.read()) == [0, 1, 2, 3, 4] and fresh.schema.fields[0].nullable


def test_batch_write_keeps_row_tracking_and_column_mapping(lake):
    spark = lake.spark
    t = lake.create_table("tracked", "id long, name string", properties={
        "delta.enableRowTracking": "true", "delta.columnMapping.mode": "name"})
    t.append(spark.range(3).selectExpr("id", "'a' AS name"))
    t.rename_column("name", "label")
    spark.range(3, 6).selectExpr("id", "'b' AS label").write.format("skiplake").mode("append").save(t.path)
    t = skiplake.Table.open(spark, t.path)
    rows = t.read(with_row_ids=True).collect()
    assert sorted(r.id for r in rows) == list(range(6)) and {r.label for r in rows} == {"a", "b"}
    row_ids = [r["_row_id"] for r in rows]
    assert len(set(row_ids)) == 6 and None not in row_ids


def test_batch_write_is_idempotent_with_txn_options(lake, parted):
    spark = lake.spark
    for _ in range(2):
        (rows_of(spark, 200, 203).write.format("skiplake").mode("append")
         .option("txnAppId", "nightly").option("txnVersion", 7).save(parted.path))
    t = skiplake.Table.open(spark, parted.path)
    assert t.read().count() == 63 and t.transaction_version("nightly") == 7


def test_batch_write_applies_the_tables_rules(lake):
    spark = lake.spark
    t = lake.create_table("ruled", "id long, qty int, ts timestamp, day date, note string",
                          generated_columns={"day": "CAST(ts AS DATE)"},
                          identity_columns={"id": skiplake.IdentityColumn(start=1, step=1)})
    t.add_constraint("qty_positive", "qty > 0 AND length(note) < 10")

    def rows(start, end, tasks=2):
        return spark.range(start, end, numPartitions=tasks).selectExpr(
            "cast(id AS int) AS qty", "timestamp'2024-03-01 22:00:00' + make_interval(0, 0, 0, 0, id) AS ts", "'n' AS note")

    rows(1, 6).write.format("skiplake").mode("append").save(t.path)
    rows(6, 9, tasks=3).write.format("skiplake").mode("append").save(t.path)
    t = skiplake.Table.open(spark, t.path)
    got = t.read().collect()
    assert sorted(r.qty for r in got) == list(range(1, 9))
    assert all(r.day == r.ts.date() for r in got)           # computed as Spark computes it (UTC)
    id_values = [r.id for r in got]
    assert len(set(id_values)) == 8 and min(id_values) >= 1
    mark = int(t.schema["id"].metadata["delta.identity.highWaterMark"])
    assert mark == max(id_values)
    t.append(spark.createDataFrame([(9, None, "n")], "qty int, ts timestamp, note string"))
    assert max(r.id for r in t.read().collect()) > mark       # t.append goes on past the data source's values
    version = t.version
    with pytest.raises(Exception, match="CHECK constraint qty_positive"):   # each rule: tests/test_arrow_rules.py
        rows(0, 2).write.format("skiplake").mode("append").save(t.path)
    t.add_constraint("small", "qty / 2 < 100")
    with pytest.raises(Exception) as e:
        rows(2, 3).write.format("skiplake").mode("append").save(t.path)
    assert "CHECK constraint small" in str(e.value) and "t.append" in str(e.value)
    assert skiplake.Table.open(spark, t.path).version == version + 1    # only the constraint was added


def test_batch_write_places_rows_in_spark_buckets(lake):
    from skiplake.layout.bucket_spec import bucket_id_of_tags, files_without_bucket_ids
    spark = lake.spark
    spec = skiplake.BucketSpec(4, ["k"], sort_by=["id"])
    t = lake.create_table("bucketed", "id long, k string, part string", partition_by=["part"], bucket_by=spec)
    (spark.range(0, 200, numPartitions=2).selectExpr("id", "cast(id * 7 % 13 AS string) AS k", "cast(id % 2 AS string) AS part")
     .write.format("skiplake").mode("append").save(t.path))
    t = skiplake.Table.open(spark, t.path)
    files = t.scan().files
    assert files and not files_without_bucket_ids(files, spec)
    by_name = {f.path.rsplit("/", 1)[-1]: bucket_id_of_tags(f.tags) for f in files}
    placed = (t.read().selectExpr("input_file_name() AS f", "pmod(hash(k), 4) AS b", "id").collect())
    assert len(placed) == 200
    assert all(by_name[r.f.rsplit("/", 1)[-1]] == r.b for r in placed)
    want = spark.sql("SELECT pmod(hash('3'), 4)").first()[0]
    pruned = t.scan("k = '3'").files
    assert pruned and {bucket_id_of_tags(f.tags) for f in pruned} == {want} and len(pruned) < len(files)


def _drain(query):
    query.processAllAvailable()
    query.stop()


def _batch_rows(table):
    """Rows each micro-batch committed, from the sink's history (one commit per batch with data)."""
    return [int(h["operationMetrics"]["numOutputRows"]) for h in reversed(table.history())
            if h["operation"] == "STREAMING UPDATE"]


def test_stream_source_limits_and_sink_exactly_once(lake, parted, tmp_path):
    spark = lake.spark
    sink, ckpt = str(tmp_path / "sink"), str(tmp_path / "ckpt")

    def start():
        return (spark.readStream.format("skiplake").option("maxFilesPerTrigger", 2).load(parted.path)
                .filter("id % 2 = 0").writeStream.format("skiplake").option("checkpointLocation", ckpt).start(sink))

    q = start()
    q.processAllAvailable()
    files = len(parted.scan().files)
    parted.optimize()            # dataChange=false: the stream reads nothing of it
    parted.append(rows_of(spark, 60, 63))
    _drain(q)
    new_files = len(skiplake.Table.open(spark, parted.path).scan("id >= 60").files)
    batches = _batch_rows(skiplake.Table.open(spark, sink))
    assert len(batches) == -(-files // 2) - (-new_files // 2) and sum(batches) == 32   # the even ids of 0..62
    q = start()                  # restart from the checkpoint: nothing read twice
    parted.append(rows_of(spark, 63, 66))
    _drain(q)
    out = skiplake.Table.open(spark, sink)
    assert ids(out.read()) == [i for i in range(66) if i % 2 == 0]
    assert out.transaction_version(_query_id(ckpt)) is not None


@pytest.mark.slow
def test_stream_source_under_a_concurrent_writer_and_optimize(lake, parted, tmp_path):
    import threading
    spark = lake.spark
    sink = str(tmp_path / "sink")
    q = (spark.readStream.format("skiplake").option("maxFilesPerTrigger", 2).load(parted.path)
         .writeStream.format("skiplake").option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(processingTime="0 seconds").start(sink))
    errors = []

    def writer():
        try:
            for i in range(6):
                parted.append(rows_of(spark, 100 + i * 10, 110 + i * 10))
                if i % 2:
                    parted.optimize()
        except Exception as e:  # noqa: BLE001  (reported by the assertion below)
            errors.append(e)

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join()
    _drain(q)
    assert not errors
    assert ids(skiplake.Table.open(spark, sink).read()) == list(range(60)) + list(range(100, 160))


def test_stream_source_keeps_its_start_while_commits_land(lake, parted):
    # Spark asks initialOffset() again for the first batch's start, after latestOffset() gave
    # its end: a commit between the two must not move the start (the first batch would be
    # empty, and its files never read).
    from skiplake.spark.session.spark_types import to_spark
    from skiplake.spark.source.streaming import StreamReader
    reader = StreamReader({"path": parted.path, "maxFilesPerTrigger": "2"}, to_spark(parted.snapshot.schema))
    start = reader.initialOffset()
    end = reader.latestOffset()
    parted.append(rows_of(lake.spark, 100, 110))
    assert reader.initialOffset() == start
    assert sum(len(group.units) for group in reader.partitions(reader.initialOffset(), end)) == 2


@pytest.mark.slow
def test_sink_complete_mode_replaces_rows(lake, parted, tmp_path):
    spark = lake.spark
    sink = str(tmp_path / "counts")
    q = (spark.readStream.format("skiplake").load(parted.path).groupBy("part").count()
         .writeStream.format("skiplake").outputMode("complete")
         .option("checkpointLocation", str(tmp_path / "ckpt")).start(sink))
    q.processAllAvailable()
    parted.append(rows_of(spark, 60, 66))
    _drain(q)
    counts = {r.part: r["count"] for r in skiplake.Table.open(spark, sink).read().collect()}
    assert counts == {"0": 22, "1": 22, "2": 22}


@pytest.mark.slow
def test_sink_to_table_with_a_path(lake, parted, tmp_path):
    spark = lake.spark
    sink = str(tmp_path / "named_sink")
    q = (spark.readStream.format("skiplake").load(parted.path).writeStream.format("skiplake")
         .option("checkpointLocation", str(tmp_path / "ckpt")).option("path", sink).toTable("named_sink"))
    _drain(q)
    assert ids(skiplake.Table.open(spark, sink).read()) == list(range(60))
    spark.sql("DROP TABLE IF EXISTS named_sink")


@pytest.mark.slow
def test_sink_applies_the_tables_rules(lake, parted, tmp_path):
    spark = lake.spark
    sink = lake.create_table("ruled_sink", "seq long, id long, part string, label string",
                             generated_columns={"label": "concat('p-', part)"},
                             identity_columns={"seq": skiplake.IdentityColumn()})
    sink.add_constraint("known", "id >= 0 AND part IN ('0', '1', '2')")
    q = (spark.readStream.format("skiplake").option("maxFilesPerTrigger", 2).load(parted.path)
         .writeStream.format("skiplake").option("checkpointLocation", str(tmp_path / "ckpt")).start(sink.path))
    _drain(q)
    rows = skiplake.Table.open(spark, sink.path).read().collect()
    assert sorted(r.id for r in rows) == list(range(60)) and len({r.seq for r in rows}) == 60
    assert all(r.label == f"p-{r.part}" for r in rows)
    assert len(_batch_rows(skiplake.Table.open(spark, sink.path))) > 1    # marks moved batch after batch


def _query_id(ckpt):
    import json
    with open(os.path.join(ckpt, "metadata")) as f:
        return json.load(f)["id"]


def test_stream_source_starting_version_deletes_and_change_feed(lake, tmp_path):
    spark = lake.spark
    t = lake.create_table("cdf", "id long", properties={"delta.enableChangeDataFeed": "true"})
    t.append(spark.range(0, 5))
    t.append(spark.range(5, 8))
    t.delete("id < 2")
    t.append(spark.range(8, 10))

    def collect(**options):
        reader = spark.readStream.format("skiplake")
        for k, v in options.items():
            reader = reader.option(k, v)
        name = f"out_{len(os.listdir(tmp_path))}"
        q = reader.load(t.path).writeStream.format("memory").queryName(name).start()
        try:
            q.processAllAvailable()
        finally:
            q.stop()
        return spark.table(name)

    assert ids(collect(startingVersion=2, skipChangeCommits="true")) == [5, 6, 7, 8, 9]
    assert ids(collect(startingVersion=2, ignoreDeletes="true")) == [5, 6, 7, 8, 9]
    with pytest.raises(Exception, match="version 3 removes data"):
        collect(startingVersion=2)
    changes = collect(startingVersion=2, readChangeFeed="true")
    got = sorted((r["id"], r["_change_type"], r["_commit_version"]) for r in changes.collect())
    assert got == sorted([(5, "insert", 2), (6, "insert", 2), (7, "insert", 2), (0, "delete", 3),
                          (1, "delete", 3), (8, "insert", 4), (9, "insert", 4)])
    latest = collect(startingVersion="latest")
    assert latest.count() == 0


def test_writer_feature_error_names_feature():
    e = WriterFeatureUnsupportedError("/t", "generated columns", "t.append(df)")
    assert "generated columns" in str(e) and "t.append(df)" in str(e)


def test_read_tasks_are_balanced_as_spark_splits_a_scan():
    from skiplake.spark.source.batch import OPEN_COST, TASK_BYTES, file_groups
    mb = 1 << 20
    sizes = [90 * mb, 60 * mb, 30 * mb, 20 * mb, 10 * mb, 1 * mb]
    groups = file_groups(sizes, size_of=lambda s: s, slots=2)
    assert len(groups) == 2 and sorted(s for g in groups for s in g) == sorted(sizes)
    loads = sorted(sum(max(s, OPEN_COST) for s in g) for g in groups)
    assert loads[1] - loads[0] <= 10 * mb                     # balanced, not 128 MB then the rest
    assert all(g == [s for s in sizes if s in g] for g in groups)   # each keeps the files' order
    many = file_groups([100 * mb] * 10, size_of=lambda s: s, slots=2)
    assert len(many) == 10 and all(len(g) == 1 for g in many)   # no group above TASK_BYTES
    assert max(sum(g) for g in many) <= TASK_BYTES
    assert file_groups([], slots=4) == [[]] and len(file_groups([mb] * 3, size_of=lambda s: s, slots=8)) == 3
