"""Tables through Spark: writes, reads, DML, time travel, maintenance and bad input."""
from __future__ import annotations

import datetime as dt
import json
import os
import time
from decimal import Decimal

import pytest

from skiplake.errors import (
    ConstraintViolationError,
    FilesVacuumedError,
    InvalidArgumentError,
    MergeConflictError,
    NotATableError,
    PartitionValueError,
    ReplaceWhereViolationError,
    RetentionTooShortError,
    SchemaMismatchError,
    TimestampNotFoundError,
    VersionNotFoundError,
)
from skiplake.log.actions import AddFile, RemoveFile
from skiplake.log.snapshot import Snapshot, log_storage, read_commit

pytestmark = [pytest.mark.spark, pytest.mark.connect, pytest.mark.both_modes]

SCHEMA = ("id long, d date, cat string, qty int, price decimal(7,2), score double, "
          "ts timestamp, flag boolean")


def make_rows(spark, n: int, start: int = 0, days: int = 3):
    return spark.sql(f"""
        SELECT id, date_add(DATE'2001-01-01', CAST(id % {days} AS INT)) AS d,
               CASE WHEN id % 7 = 0 THEN NULL ELSE concat('c', CAST(id % 4 AS STRING)) END AS cat,
               CAST(id % 100 AS INT) AS qty, CAST(id / 8 AS DECIMAL(7,2)) AS price,
               CAST(id AS DOUBLE) * 0.5 AS score, TIMESTAMP'2021-01-01 00:00:00' + make_interval(0,0,0,0,0,0,id) AS ts,
               id % 2 = 0 AS flag
        FROM range({start}, {start + n})""")


def rows(df, order="id"):
    return [tuple(r) for r in df.orderBy(order).collect()]


def log_actions(table, version):
    return read_commit(log_storage(table.path), version)


@pytest.fixture
def sales(lake, spark):
    t = lake.create_table("sales", SCHEMA, partition_by=["d"])
    t.append(make_rows(spark, 300).repartition(2))
    return t


def test_round_trip_with_partition_types(sales, spark):
    expected = rows(make_rows(spark, 300))
    assert rows(sales.read()) == expected
    df = sales.read()
    assert dict(df.dtypes)["d"] == "date" and dict(df.dtypes)["price"] == "decimal(7,2)"
    assert df.columns == ["id", "d", "cat", "qty", "price", "score", "ts", "flag"]
    # Hive-style folders and log paths.
    folders = sorted(e for e in os.listdir(sales.path) if not e.startswith("_"))
    assert folders == ["d=2001-01-01", "d=2001-01-02", "d=2001-01-03"]
    add = next(a for a in log_actions(sales, 1) if isinstance(a, AddFile))
    st = json.loads(add.stats)
    assert add.path.startswith("d=2001-01-0") and st["numRecords"] > 0
    assert set(st["minValues"]) >= {"id", "cat", "qty", "price", "score", "ts"}
    assert st["nullCount"]["cat"] >= 0
    info = log_actions(sales, 1)[0]
    assert info.operation == "WRITE" and info.isBlindAppend and info.isolationLevel == "WriteSerializable"


def test_read_where_and_columns(sales):
    got = sales.read("d = '2001-01-02' AND qty < 10", columns=["id", "qty"])
    assert got.columns == ["id", "qty"]
    assert sorted(r.id for r in got.collect()) == [i for i in range(300) if i % 3 == 1 and i % 100 < 10]
    plan = sales.scan("d = '2001-01-02'")
    assert plan.report.partitions_selected == 1 and plan.report.partitions_total == 3
    assert plan.report.files_selected < plan.report.files_total


def test_delete_rewrites_only_files_with_matches(sales, spark):
    before = {f.path for f in sales.snapshot.add_files}
    v = sales.delete("d = '2001-01-01' AND id < 30")
    removed = {a.path for a in log_actions(sales, v) if isinstance(a, RemoveFile)}
    assert removed and all(p.startswith("d=2001-01-01/") for p in removed)
    assert before - removed == {f.path for f in sales.snapshot.add_files} - {
        a.path for a in log_actions(sales, v) if isinstance(a, AddFile)}
    expected = [r for r in rows(make_rows(spark, 300)) if not (r[1] == dt.date(2001, 1, 1) and r[0] < 30)]
    assert rows(sales.read()) == expected
    info = log_actions(sales, v)[0]
    assert info.operation == "DELETE" and info.operationMetrics["numDeletedRows"] == "10"


def test_delete_whole_partition_reads_nothing(sales):
    v = sales.delete("d = '2001-01-03'")
    acts = log_actions(sales, v)
    assert not any(isinstance(a, AddFile) for a in acts)
    assert sales.read().count() == 200
    assert sales.delete("id > 100000") == v + 1  # nothing matches: an empty commit
    assert sales.read().count() == 200


def test_delete_everything(sales):
    sales.delete()
    assert sales.read().count() == 0


def test_update(sales, spark):
    v = sales.update("cat = 'c1' AND qty > 50", {"qty": "qty + 1000", "cat": "upper(cat)"})
    expected_n = make_rows(spark, 300).filter("cat = 'c1' AND qty > 50").count()
    assert log_actions(sales, v)[0].operationMetrics["numUpdatedRows"] == str(expected_n)
    got = {r.id: (r.qty, r.cat) for r in sales.read().collect()}
    for r in make_rows(spark, 300).collect():
        if r.cat == "c1" and r.qty > 50:
            assert got[r.id] == (r.qty + 1000, "C1")
        else:
            assert got[r.id] == (r.qty, r.cat)
    # Updating a partition column moves rows between partitions.
    sales.update("id = 5", {"d": "DATE'2001-02-01'"})
    assert [r.id for r in sales.read("d = '2001-02-01'").collect()] == [5]
    assert sales.read().count() == 300


def test_merge_upsert_and_delete(sales, spark):
    src = spark.sql("""SELECT id, DATE'2001-01-01' AS d, 'new' AS cat, 1 AS qty, CAST(1 AS DECIMAL(7,2)) AS price,
                              0.0 AS score, TIMESTAMP'2020-01-01 00:00:00' AS ts, id % 2 = 1 AS flag
                       FROM range(290, 320)""")
    sales.merge(src, on="target.id = source.id",
                when_matched_delete="source.flag", when_matched_update="*",
                when_not_matched_insert="*")
    got = {r.id: r for r in sales.read().collect()}
    for i in range(290, 300):
        if i % 2 == 1:
            assert i not in got
        else:
            assert got[i].cat == "new" and got[i].d == dt.date(2001, 1, 1)
    for i in range(300, 320):
        assert got[i].cat == "new"
    assert all(got[i].cat != "new" for i in range(290) if i in got)
    assert len(got) == 290 + 5 + 20


def test_merge_insert_only_and_conditions(sales, spark):
    src = spark.sql("SELECT id, concat('s', CAST(id AS STRING)) AS cat FROM range(295, 305)")
    sales.merge(src, on="target.id = source.id",
                when_not_matched_insert={"id": "source.id", "cat": "source.cat", "d": "DATE'2001-01-09'"},
                when_not_matched_insert_condition="source.id < 303")
    new = sales.read("d = '2001-01-09'")
    assert sorted(r.id for r in new.collect()) == [300, 301, 302]
    assert new.filter("qty IS NULL").count() == 3


def test_merge_with_duplicate_source_matches_fails_and_writes_nothing(sales, spark):
    v = sales.version
    src = spark.sql("SELECT 5 AS id, 'x' AS cat UNION ALL SELECT 5, 'y'")
    with pytest.raises(MergeConflictError, match="Deduplicate"):
        sales.merge(src, on="target.id = source.id", when_matched_update={"cat": "source.cat"})
    assert Snapshot.load(sales.path).version == v


def test_overwrite_all_and_replace_where(sales, spark):
    sales.overwrite(make_rows(spark, 10, start=1000, days=1).filter("true"), where="d = '2001-01-01'")
    got = sales.read()
    assert got.filter("d = '2001-01-01'").count() == 10
    assert got.filter("d <> '2001-01-01'").count() == 200
    v = sales.version
    with pytest.raises(ReplaceWhereViolationError, match="do not satisfy"):
        sales.overwrite(make_rows(spark, 10, start=2000, days=3), where="d = '2001-01-01'")
    assert Snapshot.load(sales.path).version == v
    assert not [d for d in os.listdir(os.path.join(sales.path, "_skiplake_staging"))]
    sales.overwrite(make_rows(spark, 7, start=5000))
    assert sales.read().count() == 7
    # replaceWhere on a data column rewrites the partially matching files.
    from pyspark.sql import functions as F
    sales.overwrite(make_rows(spark, 2, start=9000).withColumn("qty", F.lit(99)), where="qty = 99")
    assert sales.read().count() == 9


def test_schema_enforcement_and_merge_schema(lake, spark):
    t = lake.create_table("s", "id long, name string")
    with pytest.raises(SchemaMismatchError, match="'extra'.*not in the table") as e:
        t.append(spark.sql("SELECT 1L AS id, 'a' AS name, 2 AS extra"))
    assert "merge_schema=True" in str(e.value)
    with pytest.raises(SchemaMismatchError, match="'name' is integer in the DataFrame but string"):
        t.append(spark.sql("SELECT 1L AS id, 5 AS name"))
    assert t.version == 0 and Snapshot.load(t.path).num_files == 0
    t.append(spark.sql("SELECT 1 AS id, 'a' AS name"))  # int widens to long
    t.append(spark.sql("SELECT 'b' AS NAME, 2L AS ID"))  # by name, case-insensitive
    t.append(spark.sql("SELECT 3L AS id, 'c' AS name, 1.5 AS extra"), merge_schema=True)
    assert [f.name for f in t.schema.fields] == ["id", "name", "extra"]
    assert sorted((r.id, r.name, r.extra) for r in t.read().collect()) == [
        (1, "a", None), (2, "b", None), (3, "c", Decimal("1.5"))]
    t.append(spark.sql("SELECT 4L AS id"))  # missing nullable columns are NULL
    assert t.read("id = 4").first().name is None


def test_not_null_columns(lake, spark):
    from pyspark.sql.types import LongType, StringType, StructField, StructType
    t = lake.create_table("nn", StructType([StructField("id", LongType(), False), StructField("s", StringType())]))
    with pytest.raises(ConstraintViolationError, match="NOT NULL constraint on column id: id = NULL"):
        t.append(spark.sql("SELECT CAST(NULL AS BIGINT) AS id, 'x' AS s"))
    assert Snapshot.load(t.path).num_files == 0


def test_time_travel(sales, spark):
    v1 = sales.version
    time.sleep(0.05)
    mid = dt.datetime.now(dt.timezone.utc)
    time.sleep(0.05)
    sales.delete("id < 100")
    assert sales.read(version=v1).count() == 300
    assert sales.read(timestamp=mid).count() == 300
    assert sales.read().count() == 200
    old = type(sales).open(spark, sales.path, version=v1)
    assert old.read().count() == 300
    with pytest.raises(InvalidArgumentError, match="read-only"):
        old.append(make_rows(spark, 1))
    # VACUUM deletes files the latest version dropped, which the pinned version reads.
    assert old.vacuum(0, dry_run=True, force=True).files   # listing them is harmless
    with pytest.raises(InvalidArgumentError, match="read-only"):
        old.vacuum(0, force=True)
    assert old.read().count() == 300
    with pytest.raises(VersionNotFoundError, match="version 99"):
        sales.read(version=99)
    with pytest.raises(TimestampNotFoundError):
        sales.read(timestamp="2000-01-01 00:00:00")
    hist = sales.history()
    assert [h["operation"] for h in hist] == ["DELETE", "WRITE", "CREATE TABLE"]
    assert hist[0]["readVersion"] == v1


def test_vacuum_and_time_travel_to_vacuumed_version(sales, spark):
    v1 = sales.version
    sales.overwrite(make_rows(spark, 5))
    with pytest.raises(RetentionTooShortError, match="force=True"):
        sales.vacuum(retention_hours=0)
    dry = sales.vacuum(retention_hours=0, force=True, dry_run=True)
    assert dry.files_deleted == len(Snapshot.load(sales.path, v1).add_files)
    res = sales.vacuum(retention_hours=0, force=True)
    assert res.files_deleted == dry.files_deleted
    assert sales.read().count() == 5
    with pytest.raises(FilesVacuumedError, match=f"version {v1}"):
        sales.read(version=v1)


def test_optimize_bin_packs_without_changing_rows(lake, spark):
    t = lake.create_table("small", SCHEMA, partition_by=["d"])
    for i in range(4):
        t.append(make_rows(spark, 50, start=i * 50).repartition(3))
    before = rows(t.read())
    n_before = t.snapshot.num_files
    res = t.optimize()
    assert res.files_removed == n_before and t.snapshot.num_files == 3
    assert rows(t.read()) == before
    acts = log_actions(t, res.version)
    assert all(not a.dataChange for a in acts if isinstance(a, (AddFile, RemoveFile)))
    assert acts[0].operation == "OPTIMIZE"
    assert t.optimize().version is None  # nothing left to compact
    assert t.optimize(where="d = '2001-01-01'").files_removed == 0


def test_idempotent_append(lake, spark):
    t = lake.create_table("idem", "id long")
    df = spark.range(10)
    v = t.append(df, app_id="job-1", app_version=7)
    assert t.append(df, app_id="job-1", app_version=7) == v  # a retried job writes nothing
    assert t.read().count() == 10
    t.append(df, app_id="job-1", app_version=8)
    assert t.read().count() == 20
    assert Snapshot.load(t.path).txns["job-1"].version == 8


def test_checkpoint_through_spark_writes(lake, spark):
    t = lake.create_table("cp", "id long, p int", partition_by=["p"])
    for i in range(11):
        t.append(spark.range(i * 10, i * 10 + 10).selectExpr("id", "CAST(id % 2 AS INT) AS p"))
    assert os.path.exists(os.path.join(t.path, "_delta_log", "00000000000000000010.checkpoint.parquet"))
    assert t.read().count() == 110
    assert sorted(r.id for r in t.read().collect()) == list(range(110))


def test_bad_input_errors(lake, spark, tmp_path):
    with pytest.raises(NotATableError, match="not a skiplake/Delta table"):
        lake.table("missing")
    with pytest.raises(PartitionValueError, match="'b'"):
        lake.create_table("bin", "id long, b binary", partition_by=["b"])
    t = lake.create_table("longpart", "id long, s string", partition_by=["s"])
    with pytest.raises(PartitionValueError, match="exceed the filesystem"):
        t.append(spark.sql("SELECT 1L AS id, repeat('x', 300) AS s"))
    assert Snapshot.load(t.path).num_files == 0
    with pytest.raises(SchemaMismatchError, match="partition column 'zz'"):
        lake.create_table("badpart", "id long", partition_by=["zz"])
    with pytest.raises(InvalidArgumentError, match="isolationLevel"):
        lake.create_table("iso", "id long", properties={"delta.isolationLevel": "Snapshot"})
    from skiplake.errors import InvalidPredicateError
    sales = lake.create_table("p", "id long")
    with pytest.raises(InvalidPredicateError, match="unknown column 'nope'"):
        sales.delete("nope = 1")


def test_lake_sql(sales, lake):
    got = lake.sql("SELECT d, count(*) AS n FROM sales WHERE qty < 50 GROUP BY d ORDER BY d").collect()
    assert [r.n for r in got] == [50, 50, 50]
    assert lake.tables() == ["sales"]
    with pytest.raises(NotATableError):
        lake.sql("SELECT * FROM nowhere")


def test_merge_prunes_the_target_by_target_only_conditions(sales, spark):
    from skiplake.spark import merge
    src = spark.sql("SELECT id, 'm' AS cat FROM range(0, 33, 3)")  # all in d = 2001-01-01
    txn = merge.merge(sales.begin(), src, merge.MergeClauses("target.id = source.id AND target.d = '2001-01-01'",
                                                         when_matched_update={"cat": "source.cat"}))
    scanned = sorted(txn.read_set.files)  # every file the MERGE read, as its conflict checks see it
    v = txn.commit()
    acts = log_actions(sales, v)
    removed = [a.path for a in acts if isinstance(a, RemoveFile)]
    assert removed and all(p.startswith("d=2001-01-01/") for p in removed)
    assert scanned and all(p.startswith("d=2001-01-01/") for p in scanned)  # other partitions unread
    assert sorted(r.id for r in sales.read("cat = 'm'").collect()) == list(range(0, 33, 3))
    assert sales.read().count() == 300
    # As Delta writes it: a JSON list of the ON condition.
    assert json.loads(acts[0].operationParameters["predicate"]) == ["target.id = source.id AND target.d = '2001-01-01'"]


def test_merge_whose_source_keys_prune_every_target_file_only_inserts(sales, spark):
    # The source's keys lie outside every file's id range: no candidate file at all.
    src = spark.sql("SELECT 10000L + id AS id FROM range(3)")
    sales.merge(src, "target.id = source.id", when_matched_delete=True,
                when_not_matched_insert={"id": "source.id", "d": "DATE'2001-01-01'", "qty": "1"})
    assert sorted(r.id for r in sales.read("id >= 10000").collect()) == [10000, 10001, 10002]
    assert sales.read().count() == 303


def test_optimize_keeps_small_partitions_in_one_file_when_a_big_one_splits(lake, spark):
    t = lake.create_table("mixed", "id long, p int", partition_by=["p"])
    t.append(spark.range(0, 6000).selectExpr("id", "1 AS p").repartition(6))
    for p in (2, 3, 4):
        t.append(spark.range(p * 10000, p * 10000 + 10).selectExpr("id", f"{p} AS p").repartition(2))
    big = sum(f.size for f in t.snapshot.add_files if f.partitionValues["p"] == "1")
    before = sorted(r.id for r in t.read().collect())
    t.optimize(target_file_size=big // 2 + 1)
    per_partition = {}
    for f in t.snapshot.add_files:
        per_partition[f.partitionValues["p"]] = per_partition.get(f.partitionValues["p"], 0) + 1
    assert per_partition["2"] == per_partition["3"] == per_partition["4"] == 1
    assert per_partition["1"] <= 3
    assert sorted(r.id for r in t.read().collect()) == before


def test_vacuum_keeps_recently_removed_files_and_absolute_paths(lake, spark):
    t = lake.create_table("vac", "id long")
    t.append(spark.range(10).coalesce(1))
    old_version = t.version
    old = t.snapshot.add_files[0]
    full = os.path.join(t.path, old.path)
    os.utime(full, (time.time() - 300 * 3600, time.time() - 300 * 3600))  # written long ago
    t.delete("id < 5")                                                       # removed just now
    assert t.vacuum().files_deleted == 0                                     # still within retention
    assert t.read(version=old_version).count() == 10
