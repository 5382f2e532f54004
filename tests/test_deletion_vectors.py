"""Reading tables whose files carry deletion vectors: Spark drops the marked rows.

The DVs here are written by skiplake.log.deletion_vectors and committed by hand, the way
delta-spark logs a DELETE with deletion vectors (the protocol upgraded to 3/7 with the
deletionVectors feature, then per touched file an add of (path, new DV) and a remove of
(path, old DV)); tests/test_golden_tables.py reads DVs delta-spark itself wrote.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pyarrow.parquet as pq
import pytest

from skiplake.log.actions import AddFile, CommitInfo, Protocol, RemoveFile, encode_commit
from skiplake.log.deletion_vectors import DeletionVector, read_deleted_rows, write_dv_file
from skiplake.log.paths import absolute_path
from skiplake.log.snapshot import LOG_DIR, Snapshot, commit_name, log_storage, read_commit

pytestmark = [pytest.mark.spark, pytest.mark.connect]

SCHEMA = "id long, d date, cat string, qty int"
DV_PROTOCOL = Protocol(3, 7, ("deletionVectors",), ("appendOnly", "invariants", "deletionVectors"))


def _rows(spark, n: int, start: int = 0):
    return spark.sql(f"""SELECT id, date_add(DATE'2001-01-01', CAST(id % 3 AS INT)) AS d,
                                concat('c', CAST(id % 4 AS STRING)) AS cat, CAST(id % 100 AS INT) AS qty
                         FROM range({start}, {start + n})""")


def mark_deleted(t, doomed, only: set[str] | None = None) -> dict[str, np.ndarray]:
    """Commit deletion vectors that mark the rows of each live file of table `t` (of those
    `only` names, if given) for which doomed(row) holds, as a union with the file's current DV.
    Returns the deleted row indexes per file path."""
    table_path = t.path
    snap = Snapshot.load(table_path)
    marked: dict[str, np.ndarray] = {}
    touched: list[AddFile] = []
    for f in snap.add_files:
        if only is not None and f.path not in only:
            continue
        table = pq.read_table(absolute_path(table_path, f.path))
        hits = np.array([i for i, row in enumerate(table.to_pylist()) if doomed(row)], dtype=np.uint64)
        old = (read_deleted_rows(table_path, DeletionVector.from_json(f.deletionVector))
               if f.deletionVector else np.zeros(0, np.uint64))
        rows = np.union1d(old, hits).astype(np.uint64)
        if len(rows) > len(old):
            marked[f.path] = rows
            touched.append(f)
    descriptors = write_dv_file(table_path, [marked[f.path] for f in touched]) if touched else []
    actions: list = [] if snap.protocol == DV_PROTOCOL else [DV_PROTOCOL]
    for f, dv in zip(touched, descriptors):
        actions.append(AddFile(f.path, f.partitionValues, f.size, f.modificationTime, True, f.stats, f.tags,
                               dv.to_json()))
        actions.append(f.remove(1_700_000_000_000))
    with open(os.path.join(table_path, LOG_DIR, commit_name(snap.version + 1)), "xb") as out:
        out.write(encode_commit([CommitInfo(1_700_000_000_000, "DELETE"), *actions]))
    t.refresh()
    return marked


def log_actions(t, version: int) -> list:
    return read_commit(log_storage(t.path), version)


def ids(df) -> list[int]:
    return sorted(r.id for r in df.collect())


@pytest.fixture
def table(lake, spark):
    t = lake.create_table("events", SCHEMA, partition_by=["d"])
    t.append(_rows(spark, 600).repartition(2))
    t.append(_rows(spark, 300, start=600).repartition(1))
    return t


def test_marked_rows_are_gone_from_every_read(table, lake, spark):
    before = table.version
    mark_deleted(table, lambda r: r["id"] % 5 == 0)
    expected = [i for i in range(900) if i % 5]
    assert ids(table.read()) == expected
    assert ids(table.read("qty < 10")) == [i for i in expected if i % 100 < 10]
    assert ids(table.read("d = '2001-01-02'")) == [i for i in expected if i % 3 == 1]
    assert table.read(columns=["cat"]).count() == len(expected)
    # Reports count logical rows: numRecords less what the DVs mark.
    assert table.scan().report.rows_total == len(expected)
    # Through lake.sql: a filter, a join of the table with itself, an aggregate.
    assert [r[0] for r in lake.sql("SELECT count(*) FROM events WHERE cat = 'c1'").collect()] == \
        [sum(1 for i in expected if i % 4 == 1)]
    joined = lake.sql("SELECT a.id FROM events a JOIN events b ON a.id = b.id + 1 WHERE b.qty = 3")
    assert ids(joined) == [i + 1 for i in expected if i % 100 == 3 and (i + 1) % 5]
    # Time travel to before the DVs sees every row.
    assert ids(table.read(version=before)) == list(range(900))


def test_a_second_dv_on_a_file_is_the_union_of_both(table):
    first = mark_deleted(table, lambda r: r["id"] % 5 == 0)
    second = mark_deleted(table, lambda r: r["id"] % 7 == 0)
    assert set(first) & set(second), "the second DELETE touches files the first touched"
    assert ids(table.read()) == [i for i in range(900) if i % 5 and i % 7]
    snap = Snapshot.load(table.path)
    assert snap.num_files == len({f.path for f in snap.add_files})


def test_a_file_with_every_row_marked_reads_as_empty_and_others_stay(table):
    mark_deleted(table, lambda r: r["id"] < 600)  # the first append's files, wholly
    assert ids(table.read()) == list(range(600, 900))


def test_writes_without_the_property_rewrite_and_keep_dvs_applied(table, spark):
    # Another writer's DVs, delta.enableDeletionVectors unset: skiplake's DML rewrites files,
    # reading them without their deleted rows, and logs the old (path, DV) as removed.
    marked = mark_deleted(table, lambda r: r["id"] % 2 == 0)
    version = table.delete("id % 3 = 0")
    removes = [a for a in log_actions(table, version) if isinstance(a, RemoveFile)]
    assert removes and all(r.deletionVector is not None for r in removes if r.path in marked)
    assert not any(isinstance(a, AddFile) and a.deletionVector for a in log_actions(table, version))
    table.update("id < 30", {"cat": "'new'"})
    table.append(_rows(spark, 5, start=10_000))
    expected = [i for i in range(900) if i % 2 and i % 3] + list(range(10_000, 10_005))
    assert ids(table.read()) == expected
    assert sorted(r.id for r in table.read("cat = 'new'").collect()) == [i for i in expected if i < 30]


def test_a_corrupt_dv_file_fails_the_read_with_its_name(table):
    marked = mark_deleted(table, lambda r: r["id"] % 5 == 0)
    snap = Snapshot.load(table.path)
    dv = DeletionVector.from_json(next(f.deletionVector for f in snap.add_files if f.path in marked))
    path = dv.file_path(table.path)
    data = bytearray(open(path, "rb").read())
    data[-1] ^= 0xFF
    open(path, "wb").write(bytes(data))
    from skiplake.errors import CorruptDeletionVectorError
    with pytest.raises(CorruptDeletionVectorError, match="deletion_vector_"):
        table.read().collect()
    assert json.dumps(dv.to_json())


@pytest.mark.classic_only
def test_dynamic_pruning_over_a_table_with_deletion_vectors(lake, spark):
    from pyspark.sql import functions as F

    from skiplake.spark.pruning.pruning_settings import COST_MODEL
    from tests.pruning_conf import SMALL_TABLES
    fact = lake.create_table("fact", "id long, k long, m int")
    # Eight files, each a range of keys: a dimension filter selects few of them.
    fact.append(spark.range(0, 4000).select("id", (F.col("id") / 10).cast("long").alias("k"),
                                            (F.col("id") % 13).cast("int").alias("m")).repartitionByRange(8, "id"))
    dim = lake.create_table("dim", "k long, a int")
    dim.append(spark.range(0, 400).select(F.col("id").alias("k"), (F.col("id") % 50).cast("int").alias("a")))
    # Deletions in the files of ids below 2,000 only: a read is then two relations (with and without DVs).
    mark_deleted(fact, lambda r: r["id"] % 3 == 0 and r["id"] < 2000)
    expected = sorted((i, i % 13) for i in range(4000) if i % 3 and i // 10 in (7, 57))
    query = "SELECT f.id, f.m FROM fact f JOIN dim d ON f.k = d.k WHERE d.a = 7 AND d.k < 100"
    # Without the cost model: the keys are applied even where they keep every file static pruning
    # left (where Spark's range partitioning cuts the files decides which).
    conf = {**SMALL_TABLES, COST_MODEL: "false"}
    previous = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        assert sorted(tuple(r) for r in lake.sql(query).collect()) == expected
        [report] = [r for r in lake.last_explain if r.label.startswith("fact")]
        assert report.dynamic_filters and report.files_selected < report.files_total, lake.last_explain.text()
        df = fact.read().join(dim.read().where("a = 7 AND k < 100"), "k").select("id", "m")
        pruned = lake.prune(df)
        assert sorted(tuple(r) for r in pruned.collect()) == expected
        # The read is two relations, each reported over its own kind of files, together the table.
        plain = [r for r in lake.last_explain if r.label == "fact"]
        marked = [r for r in lake.last_explain if r.label == "fact (files with deletion vectors)"]
        assert len(plain) == len(marked) == 1, lake.last_explain.text()
        with_dv = sum(1 for f in fact.snapshot.add_files if f.deletionVector)
        assert marked[0].files_total == with_dv and plain[0].files_total == fact.snapshot.num_files - with_dv
        assert plain[0].rows_total + marked[0].rows_total == fact.read().count()
        assert marked[0].files_selected + plain[0].files_selected < fact.snapshot.num_files
    finally:
        for k, v in previous.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)



# ---------------------------------------------------------------- writing deletion vectors


def _dv_table(lake, spark, name="dvt", partition_by=None):
    t = lake.create_table(name, SCHEMA, partition_by=partition_by,
                          properties={"delta.enableDeletionVectors": "true"})
    t.append(_rows(spark, 3000).repartition(4))
    return t


def _data_files(t) -> set[str]:
    return {f.path for f in t.snapshot.add_files}


def test_create_with_deletion_vectors_sets_the_protocol(lake, spark):
    t = _dv_table(lake, spark)
    p = t.snapshot.protocol
    assert (p.minReaderVersion, p.minWriterVersion) == (3, 7)
    assert set(p.readerFeatures) == {"deletionVectors"}
    assert set(p.writerFeatures) == {"appendOnly", "invariants", "deletionVectors"}


@pytest.mark.both_modes
def test_delete_marks_rows_and_leaves_data_files_alone(lake, spark):
    t = _dv_table(lake, spark, partition_by=["d"])
    files = _data_files(t)
    version = t.delete("id % 100 = 7")
    assert _data_files(t) == files, "a DELETE with deletion vectors rewrote data files"
    log = log_actions(t, version)
    adds = [a for a in log if isinstance(a, AddFile)]
    removes = [a for a in log if isinstance(a, RemoveFile)]
    assert adds and all(a.deletionVector and a.deletionVector["storageType"] == "u" for a in adds)
    assert {a.path for a in adds} == {r.path for r in removes} and all(r.deletionVector is None for r in removes)
    assert all(json.loads(a.stats)["tightBounds"] is False for a in adds)
    info = log[0]
    assert info.operationMetrics["numDeletedRows"] == "30"
    assert ids(t.read()) == [i for i in range(3000) if i % 100 != 7]
    # A second DELETE on the same files: the new DVs are the union of old and new rows.
    t.delete("id % 100 = 8")
    assert ids(t.read()) == [i for i in range(3000) if i % 100 not in (7, 8)]
    assert _data_files(t) == files
    assert sum(a.deletionVector["cardinality"] for a in t.snapshot.add_files) == 60
    assert t.scan().report.rows_total == 2940


def test_mostly_deleted_files_are_rewritten_and_wholly_deleted_ones_removed(lake, spark):
    t = lake.create_table("dvt", SCHEMA, properties={"delta.enableDeletionVectors": "true"})
    t.append(_rows(spark, 100, start=0).coalesce(1))
    t.append(_rows(spark, 100, start=100).coalesce(1))
    t.append(_rows(spark, 100, start=200).coalesce(1))
    t.delete("id < 100 OR (id >= 100 AND id < 180) OR id = 250")
    live = t.snapshot.add_files
    assert len(live) == 2  # the first file removed, the second rewritten, the third marked
    assert sorted(a.deletionVector is not None for a in live) == [False, True]
    assert ids(t.read()) == [i for i in range(180, 300) if i != 250]


def test_update_writes_new_rows_and_marks_the_old(lake, spark):
    t = _dv_table(lake, spark)
    files = _data_files(t)
    t.update("qty = 42", {"cat": "'answer'", "qty": "qty + 1000"})
    assert files <= _data_files(t) and len(_data_files(t)) > len(files)
    got = {r.id: (r.cat, r.qty) for r in t.read().collect()}
    assert len(got) == 3000
    assert all(got[i] == (("answer", 1042) if i % 100 == 42 else (f"c{i % 4}", i % 100)) for i in range(3000))


def test_set_properties_upgrades_an_existing_table(table, spark):
    assert table.snapshot.protocol.minReaderVersion == 1
    table.set_properties({"delta.enableDeletionVectors": "true"})
    p = table.snapshot.protocol
    assert (p.minReaderVersion, p.minWriterVersion, set(p.writerFeatures)) == (
        3, 7, {"appendOnly", "invariants", "deletionVectors"})
    table.delete("id = 5")
    assert any(f.deletionVector for f in table.snapshot.add_files)
    assert ids(table.read()) == [i for i in range(900) if i != 5]


def test_optimize_purges_and_vacuum_keeps_only_referenced_dv_files(lake, spark):
    t = _dv_table(lake, spark)
    t.delete("id % 10 = 0")
    dv_paths = {DeletionVector.from_json(f.deletionVector).file_path(t.path) for f in t.snapshot.add_files}
    assert dv_paths and all(os.path.exists(p) for p in dv_paths)
    # VACUUM with the DV files referenced: nothing of them goes.
    t.vacuum(retention_hours=0, force=True)
    assert all(os.path.exists(p) for p in dv_paths)
    assert ids(t.read()) == [i for i in range(3000) if i % 10]
    t.optimize()
    assert not any(f.deletionVector for f in t.snapshot.add_files)
    assert ids(t.read()) == [i for i in range(3000) if i % 10]
    t.vacuum(retention_hours=0, force=True)
    assert not any(os.path.exists(p) for p in dv_paths)
    assert ids(t.read()) == [i for i in range(3000) if i % 10]


@pytest.mark.both_modes
def test_merge_marks_updated_and_deleted_rows(lake, spark):
    t = _dv_table(lake, spark)
    files = _data_files(t)
    source = spark.sql("SELECT id, CAST(id % 3 AS INT) AS op FROM range(2900, 3100) WHERE id % 10 IN (0, 5)")
    t.merge(source, "target.id = source.id",
            when_matched_update={"cat": "'merged'"}, when_matched_update_condition="source.op = 0",
            when_matched_delete="source.op = 1",
            when_not_matched_insert={"id": "source.id", "d": "DATE'2001-01-01'", "cat": "'new'", "qty": "0"})
    assert files <= _data_files(t) and any(f.deletionVector for f in t.snapshot.add_files)
    got = {r.id: r.cat for r in t.read().collect()}
    src = [i for i in range(2900, 3100) if i % 10 in (0, 5)]
    expected = {i: f"c{i % 4}" for i in range(3000)}
    for i in src:
        if i >= 3000:
            expected[i] = "new"
        elif i % 3 == 0:
            expected[i] = "merged"
        elif i % 3 == 1:
            del expected[i]
    assert got == expected
    # A MERGE that matches nothing only inserts.
    t.merge(spark.sql("SELECT 5000L AS id"), "target.id = source.id", when_matched_delete=True,
            when_not_matched_insert={"id": "source.id", "d": "DATE'2001-01-01'", "cat": "'x'", "qty": "1"})
    assert t.read("id = 5000").count() == 1


@pytest.mark.classic_only
def test_the_exact_path_join_when_path_hashes_collide(table, monkeypatch):
    # With no hash bits kept every file's key collides: the (path, block) join must take over.
    from skiplake.spark.reads import deleted_rows as deletions
    mark_deleted(table, lambda r: r["id"] % 5 == 0)
    monkeypatch.setattr(deletions, "MAX_FILES", 0)  # the join, not the files' sizes
    monkeypatch.setattr(deletions, "_HIGH", 0)
    assert _joins(table.read())
    assert ids(table.read()) == [i for i in range(900) if i % 5]


def _joins(df) -> bool:
    """Whether the read drops deleted rows through a join (else by its files' sizes, with none)."""
    return "Join" in df._jdf.queryExecution().optimizedPlan().toString()


@pytest.mark.classic_only
def test_random_deletion_vectors_read_the_same_by_file_size_and_by_join(lake, spark, monkeypatch):
    from skiplake.spark.reads import deleted_rows as deletions
    t = lake.create_table("many", "id long, k long", properties={"delta.enableDeletionVectors": "true"})
    # 40 small files, many of them of one size with another (found by their path then).
    t.append(spark.range(0, 6_000).selectExpr("id", "id * 7 AS k").repartition(40))
    rng = np.random.default_rng(29)
    first, second = set(rng.choice(6_000, 900).tolist()), set(rng.choice(6_000, 300).tolist())
    mark_deleted(t, lambda r: r["id"] in first)
    mark_deleted(t, lambda r: r["id"] in second)  # a second DV on some files: the union
    assert sum(1 for f in t.snapshot.add_files if f.deletionVector) == 40
    assert len({f.size for f in t.snapshot.add_files}) < 40
    expected = [i for i in range(6_000) if i not in first | second]
    monkeypatch.setattr(deletions, "MAX_SHARED", 40)
    by_size = t.read()
    assert not _joins(by_size) and ids(by_size) == expected
    # Past each bound of the join-free path, the join: sizes, slots, files sharing a size, words.
    for bound, value in (("MAX_FILES", 5), ("MAX_SLOTS", 5), ("MAX_SHARED", 1), ("MAX_WORDS", 10)):
        with monkeypatch.context() as m:
            m.setattr(deletions, bound, value)
            joined = t.read()
            assert _joins(joined), bound
            assert ids(joined) == expected
    # Rows a MERGE is about to mark go the same way as the DVs' rows.
    from skiplake.spark.reads.planned_reads import read_files
    snap = t.snapshot
    f = snap.add_files[0]
    extra = {r.id for r in read_files(spark, t.path, snap.schema, [], [f], with_file_info=True).collect()
             if r["__skiplake_row"] in (0, 1, 2)}
    more = read_files(spark, t.path, snap.schema, [], snap.add_files, deleted={f.path: np.array([0, 1, 2], np.uint64)})
    assert extra and not _joins(more) and ids(more) == [i for i in expected if i not in extra]


@pytest.mark.classic_only
def test_files_of_equal_size_are_told_apart_by_their_paths(lake, spark, monkeypatch):
    from skiplake.spark.reads import deleted_rows as deletions
    t = lake.create_table("twins", "id long", properties={"delta.enableDeletionVectors": "true"})
    for _ in range(2):  # the very same rows twice: two files of one size
        t.append(spark.range(0, 500).coalesce(1))
    t.append(spark.range(0, 700).coalesce(1))
    assert len({f.size for f in t.snapshot.add_files}) == 2
    mark_deleted(t, lambda r: r["id"] % 3 == 0)
    # More rows of one twin only: each file must find its own bitmap, not its twin's.
    twin = min((f for f in t.snapshot.add_files), key=lambda f: (f.size, f.path)).path
    mark_deleted(t, lambda r: r["id"] in (1, 2, 4), only={twin})
    expected = sorted(2 * [i for i in range(500) if i % 3] + [i for i in range(700) if i % 3])
    df = t.read()
    assert not _joins(df)
    got = ids(df)
    assert len(got) == len(expected) - 3 and sorted(got + [1, 2, 4]) == expected
    monkeypatch.setattr(deletions, "MAX_SHARED", 1)
    df = t.read()
    assert _joins(df) and ids(df) == got


def test_a_data_file_whose_size_is_not_the_logged_one_fails_the_read(lake, spark):
    t = lake.create_table("liar", "id long")
    t.append(spark.range(0, 100).coalesce(1))
    mark_deleted(t, lambda r: r["id"] < 10)
    [f] = t.snapshot.add_files
    # The same logical file (path and DV) added again replaces it in the log: now with a wrong size.
    wrong = AddFile(f.path, f.partitionValues, f.size + 1, f.modificationTime, True, f.stats, f.tags, f.deletionVector)
    with open(os.path.join(t.path, LOG_DIR, commit_name(t.version + 1)), "xb") as out:
        out.write(encode_commit([CommitInfo(1_700_000_000_000, "WRITE"), wrong]))
    t.refresh()
    assert [g.size for g in t.snapshot.add_files] == [f.size + 1]
    with pytest.raises(Exception, match="is not what the log says"):
        t.read().collect()


def test_marks_across_bitmap_blocks_of_a_big_file(lake, spark):
    t = lake.create_table("big", "id long", properties={"delta.enableDeletionVectors": "true"})
    t.append(spark.range(0, 20_000).coalesce(1))
    doomed = {0, 63, 64, 4095, 4096, 4097, 8191, 12_345, 19_999}
    t.delete(f"id IN ({', '.join(map(str, sorted(doomed)))}) OR id % 997 = 1")
    assert any(f.deletionVector for f in t.snapshot.add_files)
    assert ids(t.read()) == [i for i in range(20_000) if i not in doomed and i % 997 != 1]
